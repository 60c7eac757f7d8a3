// Pushing a slice below the elementwise ops and the row nodes (softmax, layer_norm) of the tree
// it views, so that a slice of softmax(E(batch_matmul(q, k))) is the softmax of the slice: the
// rows asked for, not every row. An executor evaluates a row node inside a larger tree before
// the tree's loop, whole; a slice above it kept a few rows of that whole (one head of BERT's
// attention probabilities, [1, 384, 384] of [12, 384, 384]: 13.4 ms, the whole 11.7; 2026-11-27).
// The CPU executor asks for such slices when a contraction reads an operand by row blocks.
//
// A slice here is an affine view of a node of its own rank whose output axis d reads the node's
// axis d (offset + scale * x, scale >= 1): strided_slice's views. Pushed through
//   - an elementwise op: each operand broadcast to the op's shape, then viewed alike;
//   - a softmax or layer norm whose axis the slice keeps whole: rebuilt over the viewed input;
//   - an affine view that is itself a slice (a broadcast_to to the same shape): the two composed;
//   - a reshape that keeps the last two axes and regroups only the leading ones, where the slice
//     keeps one index of each leading axis (a block of rows of one batch): the same block of the
//     reshaped node, its unit axes remapped by an affine view. Relay's imports wrap attention's
//     scores so: reshape([B, S, S] -> [1, B, S, S]), the 4-d softmax, reshape back.
// and kept above anything else (a leaf, a contraction: the executors read affine views of those
// by blocks, not a reshape of a contraction, which is why the slice goes below reshapes too).
// Only subtrees that hold row nodes or contractions are rewritten; where the slice cannot pass
// a row node (it cuts the row node's axis, or a row node sits under a broadcast, a reduction or
// another view) or a reshape above a contraction, `slice_pushes` says false and the caller
// evaluates the tree as it is.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "fuse/core/shape.hpp"
#include "fuse/expr/contract.hpp"
#include "fuse/expr/elementwise.hpp"
#include "fuse/expr/node.hpp"
#include "fuse/expr/reduce.hpp"
#include "fuse/expr/views.hpp"

namespace fuse {
namespace detail {

template <class N>
struct is_row_op : std::bool_constant<kind_of<N> == node_kind::softmax || kind_of<N> == node_kind::layer_norm> {};
/// Whether tree N holds a softmax or a layer norm (the row nodes a slice is pushed to).
template <class N>
constexpr bool holds_row_op() {
  return tree_holds<is_row_op, N>();
}

template <class N>
struct is_slice_target : std::bool_constant<is_row_op<N>::value || kind_of<N> == node_kind::contraction> {};
/// Whether tree N holds a row node or a contraction: the nodes a slice is pushed down to (the
/// latter so that no reshape stays between a slice and the contraction it cuts).
template <class N>
constexpr bool holds_slice_target() {
  return tree_holds<is_slice_target, N>();
}

/// Whether N is an affine view of a tree holding a softmax or a layer norm.
template <class N>
constexpr bool is_view_of_row_ops() {
  if constexpr (kind_of<N> == node_kind::affine_view) return holds_row_op<typename N::child_type>();
  else return false;
}

/// Whether map m (of an affine view of rank R over a node of rank R) is a slice: output axis d
/// reads axis d.
template <std::size_t R>
bool is_slice_map(const axis_map<R>& m) {
  for (std::size_t d = 0; d < R; ++d)
    if (m.src[d] != static_cast<index_t>(d) || m.scale[d] < 1) return false;
  return true;
}

template <class N>
constexpr bool is_batch_matmul() {
  if constexpr (kind_of<N> == node_kind::contraction) return N::kind == contract_kind::batch_matmul;
  else return false;
}

/// Whether N is an affine view of rank R over a node of rank R holding a row node (one that
/// may be a slice of it, pushed through when it is).
template <class N, std::size_t R>
constexpr bool is_same_rank_view_of_row_ops() {
  if constexpr (kind_of<N> == node_kind::affine_view && N::rank == R)
    return N::child_type::rank == R && holds_row_op<N>();
  else return false;
}

/// Slice m (shape out) of the affine view n whose own map is a slice, as one slice of its child.
template <std::size_t R, class N>
axis_map<R> compose_slices(const N& n, const axis_map<R>& m) {
  axis_map<R> c{};
  for (std::size_t d = 0; d < R; ++d) {
    c.src[d] = static_cast<index_t>(d);
    c.offset[d] = n.map.offset[d] + n.map.scale[d] * m.offset[d];
    c.scale[d] = n.map.scale[d] * m.scale[d];
  }
  return c;
}

/// Reshape n (rank R over a child of rank Rc) viewed by slice m (shape out), as a slice of the
/// child (mc, shape oc): when the reshape keeps the last two axes and the slice keeps one index
/// of each leading axis (the leading axes' row-major index is the same one in the child's).
template <std::size_t R, class N, std::size_t Rc = N::child_type::rank>
bool reshape_slice(const N& n, const axis_map<R>& m, const index_array<R>& out, axis_map<Rc>& mc, index_array<Rc>& oc) {
  if constexpr (R < 2 || Rc < 2) {
    return false;
  } else {
    const auto s = n.shape().array();
    const auto sc = n.child.shape().array();
    if (s[R - 1] != sc[Rc - 1] || s[R - 2] != sc[Rc - 2]) return false;
    index_t lead = 0;  // the slice's leading index, row-major
    for (std::size_t d = 0; d + 2 < R; ++d) {
      if (out[d] != 1) return false;
      lead = lead * s[d] + m.offset[d];
    }
    for (std::size_t d = Rc - 2; d-- > 0;) {  // the same index over the child's leading axes
      mc.src[d] = static_cast<index_t>(d), mc.scale[d] = 1, mc.offset[d] = lead % sc[d], oc[d] = 1;
      lead /= sc[d];
    }
    for (std::size_t k = 0; k < 2; ++k) {
      const std::size_t d = Rc - 2 + k, e = R - 2 + k;
      mc.src[d] = static_cast<index_t>(d), mc.scale[d] = m.scale[e], mc.offset[d] = m.offset[e], oc[d] = out[e];
    }
    return true;
  }
}

/// Whether slice m (the view's shape `out`) passes node n down to every row node in it, and
/// below every reshape above a contraction.
template <std::size_t R, class N>
bool slice_passes(const N& n, const axis_map<R>& m, const index_array<R>& out) {
  constexpr node_kind K = kind_of<N>;
  if constexpr (!holds_slice_target<N>()) {
    return true;
  } else if constexpr (K == node_kind::elementwise) {
    bool ok = true;
    for_each_child(n, [&](const auto& c) {
      using C = std::remove_cvref_t<decltype(c)>;
      if constexpr (holds_slice_target<C>()) {
        if constexpr (C::rank != R) ok = ok && !holds_row_op<C>();  // (a contraction: sliced above, as before)
        else ok = ok && c.shape().array() == n.shape().array() && slice_passes(c, m, out);
      }
    });
    return ok;
  } else if constexpr (is_batch_matmul<N>()) {
    return m.scale[0] == 1 && m.scale[1] == 1 && m.scale[2] == 1;  // (pushed into its operands)
  } else if constexpr (K == node_kind::contraction) {
    return true;  // the slice stays above it: the executors read affine views of contractions by blocks
  } else if constexpr (is_same_rank_view_of_row_ops<N, R>()) {
    return is_slice_map(n.map) && slice_passes(n.child, compose_slices(n, m), out);
  } else if constexpr (K == node_kind::reshape_view && N::rank == R) {
    constexpr std::size_t Rc = N::child_type::rank;
    axis_map<Rc> mc{};
    index_array<Rc> oc{};
    return reshape_slice(n, m, out, mc, oc) && slice_passes(n.child, mc, oc);
  } else if constexpr ((K == node_kind::softmax || K == node_kind::layer_norm) && N::rank == R) {
    const auto a = static_cast<std::size_t>(n.axis < 0 ? n.axis + static_cast<index_t>(R) : n.axis);
    const bool whole = m.offset[a] == 0 && m.scale[a] == 1 && out[a] == n.shape()[a];
    if constexpr (K == node_kind::softmax) return whole && slice_passes(n.child, m, out);
    else return whole && slice_passes(n.x, m, out);
  } else {
    return !holds_row_op<N>();  // (a view of a contraction: sliced above, as before)
  }
}

template <std::size_t R, class C>
auto push_slice_operand(const C& c, const dynamic_shape<R>& whole, const axis_map<R>& m, const dynamic_shape<R>& out);

/// batch_matmul n cut by unit-step slice m (shape out) as the product of its operands' slices:
/// the batches and rows of A, the batches and columns of B that the block reads (a batch of one
/// still broadcasts). A block of attention's scores is then its own small product, not a view of
/// the whole one (which an executor evaluates whole when B is an expression).
template <class N>
auto slice_batch_matmul(const N& n, const axis_map<3>& m, const dynamic_shape<3>& out) {
  const index_t b0 = m.offset[0], nb = out[0], i0 = m.offset[1], j0 = m.offset[2];
  const auto operand = [&](const auto& x, index_t batches, bool rows_first, index_t at, index_t len, index_t k) {
    axis_map<3> mx{};
    for (std::size_t d = 0; d < 3; ++d) mx.src[d] = static_cast<index_t>(d), mx.scale[d] = 1;
    mx.offset[0] = batches == 1 ? 0 : b0;
    const index_t along = rows_first ? 1 : 2;  // the axis of the rows (A) or columns (B) cut
    mx.offset[static_cast<std::size_t>(along)] = at;
    dynamic_shape<3> sx{};
    sx[0] = batches == 1 ? 1 : nb;
    sx[static_cast<std::size_t>(along)] = len;
    sx[static_cast<std::size_t>(3 - along)] = k;
    return apply_axis_map(x, sx, mx);
  };
  // A: [batch, M, K], or [batch, K, M] transposed; B: [batch, K, N], or [batch, N, K] transposed.
  auto e = n.with_children(operand(n.a, n.batch_a, !n.trans_a, i0, out[1], n.k),
                           operand(n.b, n.batch_b, n.trans_b, j0, out[2], n.k));
  e.batch = nb, e.batch_a = n.batch_a == 1 ? 1 : nb, e.batch_b = n.batch_b == 1 ? 1 : nb;
  e.m = out[1], e.n = out[2];
  e.shape_ = out;
  return e;
}

/// Node n viewed by slice m (shape out), the slice pushed down (see the top). n has rank R and
/// the shape the slice views; its operands are broadcast to it first.
template <std::size_t R, class N>
auto push_slice(const N& n, const axis_map<R>& m, const dynamic_shape<R>& out) {
  constexpr node_kind K = kind_of<N>;
  if constexpr (is_batch_matmul<N>() && N::rank == R) {
    return slice_batch_matmul(n, m, out);
  } else if constexpr (!holds_slice_target<N>() || N::rank != R || K == node_kind::contraction) {
    return apply_axis_map(n, out, m);
  } else if constexpr (is_same_rank_view_of_row_ops<N, R>()) {
    return push_slice(n.child, compose_slices(n, m), out);
  } else if constexpr (K == node_kind::reshape_view) {
    // The child's block (its leading axes of extent 1), its unit axes mapped to the reshape's.
    constexpr std::size_t Rc = N::child_type::rank;
    axis_map<Rc> mc{}, unit{};
    index_array<Rc> oc{};
    reshape_slice(n, m, out.array(), mc, oc);  // (true: slice_passes checked it)
    for (std::size_t d = 0; d + 2 < Rc; ++d) unit.src[d] = -1;
    for (std::size_t k = 0; k < 2; ++k)
      unit.src[Rc - 2 + k] = static_cast<index_t>(R - 2 + k), unit.scale[Rc - 2 + k] = 1;
    return apply_axis_map(push_slice(n.child, mc, dynamic_shape<Rc>(oc)), out, unit);
  } else if constexpr (K == node_kind::elementwise) {
    const auto c = children(n);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return make_map(n.op, push_slice_operand(fuse::get<I>(c), n.shape(), m, out)...);
    }(std::make_index_sequence<child_count<N>>{});
  } else if constexpr (K == node_kind::softmax) {
    auto e = n.with_children(push_slice(n.child, m, out));
    e.shape_ = out;
    return e;
  } else if constexpr (K == node_kind::layer_norm) {
    auto e = n.with_children(push_slice(n.x, m, out), n.gamma, n.beta);
    e.shape_ = out;
    return e;
  } else {
    return apply_axis_map(n, out, m);
  }
}

/// An operand of an elementwise node of shape `whole`, viewed by slice m: a scalar as it is,
/// one of the node's shape pushed down, any other broadcast to it first.
template <std::size_t R, class C>
auto push_slice_operand(const C& c, const dynamic_shape<R>& whole, const axis_map<R>& m, const dynamic_shape<R>& out) {
  if constexpr (C::rank == 0) {
    return c;
  } else if constexpr (holds_slice_target<C>() && C::rank == R) {
    return push_slice(c, m, out);  // (slice_passes checked that its shape is the node's)
  } else {
    return apply_axis_map(broadcast_to(c, whole.array().v), out, m);
  }
}

/// An affine view's map m (child rank Rc, output shape out of rank R) as a slice of the child
/// (mc, shape oc) followed by `unit`, which only inserts or drops axes of extent 1: each child
/// axis read at a fixed index or along one output axis (in order, scale >= 1), every output
/// axis no child axis reads of extent 1. (A reshape of a slice that regroups unit axes only:
/// the 3-d rows of a 4-d softmax.)
template <std::size_t Rc, std::size_t R>
bool as_child_slice(const axis_map<Rc>& m, const index_array<R>& out, axis_map<Rc>& mc, index_array<Rc>& oc,
                    axis_map<Rc>& unit) {
  bool read[R == 0 ? 1 : R] = {};
  index_t last = -1;
  for (std::size_t d = 0; d < Rc; ++d) {
    mc.src[d] = static_cast<index_t>(d), mc.offset[d] = m.offset[d];
    if (m.src[d] < 0) {
      mc.scale[d] = 1, oc[d] = 1, unit.src[d] = -1;
    } else {
      if (m.src[d] <= last || m.scale[d] < 1) return false;
      last = m.src[d];
      read[last] = true;
      mc.scale[d] = m.scale[d], oc[d] = out[static_cast<std::size_t>(last)];
      unit.src[d] = last, unit.scale[d] = 1;
    }
  }
  for (std::size_t k = 0; k < R; ++k)
    if (!read[k] && out[k] != 1) return false;
  return true;
}

}  // namespace detail

/// Whether v, an affine view, is a slice (up to axes of extent 1 inserted or dropped) that
/// pushes down to every softmax and layer norm below it through elementwise ops and views (then
/// push_slice(v) evaluates only the rows it keeps).
template <class V>
bool slice_pushes(const V& v) {
  if constexpr (!detail::is_view_of_row_ops<V>()) {
    return false;
  } else if constexpr (V::rank != V::child_type::rank) {
    constexpr std::size_t Rc = V::child_type::rank;
    axis_map<Rc> mc{}, unit{};
    index_array<Rc> oc{};
    if (!detail::as_child_slice(v.map, v.shape().array(), mc, oc, unit)) return false;
    // The whole child (what push_slice itself returns over a row node: nothing left to push)
    bool whole = oc == v.child.shape().array();
    for (std::size_t d = 0; d < Rc; ++d) whole = whole && mc.offset[d] == 0 && mc.scale[d] == 1;
    return !whole && detail::slice_passes(v.child, mc, oc);
  } else {
    return detail::is_slice_map(v.map) && detail::slice_passes(v.child, v.map, v.shape().array());
  }
}

/// v with its slice pushed down (where slice_pushes(v)), as a node of the rank of v's child
/// (the rank of the row nodes it holds, so that an executor runs them at its root): the
/// elements of v, where each axis d of the result runs along axis along[d] of v (-1: an axis
/// of extent 1 that v drops). `along` is the identity when v keeps its child's rank.
template <class V>
auto push_slice(const V& v, index_array<V::child_type::rank>& along) {
  constexpr std::size_t Rc = V::child_type::rank;
  if constexpr (V::rank != Rc) {
    axis_map<Rc> mc{}, unit{};
    index_array<Rc> oc{};
    detail::as_child_slice(v.map, v.shape().array(), mc, oc, unit);  // (true: slice_pushes checked it)
    for (std::size_t d = 0; d < Rc; ++d) along[d] = unit.src[d];
    return detail::push_slice(v.child, mc, dynamic_shape<Rc>(oc));
  } else {
    for (std::size_t d = 0; d < Rc; ++d) along[d] = static_cast<index_t>(d);
    return detail::push_slice(v.child, v.map, v.shape());
  }
}

}  // namespace fuse
