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
// and kept above anything else (a leaf, a contraction: the executors read views of those by
// blocks). Only subtrees that hold row nodes are rewritten; where the slice cannot pass a row
// node (it cuts the row node's axis, or a row node sits under a broadcast, a reduction or
// another view), `slice_pushes` says false and the caller evaluates the tree as it is.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "fuse/core/shape.hpp"
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

/// Whether slice m (the view's shape `out`) passes node n down to every row node in it.
template <std::size_t R, class N>
bool slice_passes(const N& n, const axis_map<R>& m, const index_array<R>& out) {
  constexpr node_kind K = kind_of<N>;
  if constexpr (!holds_row_op<N>()) {
    return true;
  } else if constexpr (K == node_kind::elementwise) {
    bool ok = true;
    for_each_child(n, [&](const auto& c) {
      using C = std::remove_cvref_t<decltype(c)>;
      if constexpr (holds_row_op<C>()) {
        if constexpr (C::rank != R) ok = false;
        else ok = ok && c.shape().array() == n.shape().array() && slice_passes(c, m, out);
      }
    });
    return ok;
  } else if constexpr ((K == node_kind::softmax || K == node_kind::layer_norm) && N::rank == R) {
    const auto a = static_cast<std::size_t>(n.axis < 0 ? n.axis + static_cast<index_t>(R) : n.axis);
    const bool whole = m.offset[a] == 0 && m.scale[a] == 1 && out[a] == n.shape()[a];
    if constexpr (K == node_kind::softmax) return whole && slice_passes(n.child, m, out);
    else return whole && slice_passes(n.x, m, out);
  } else {
    return false;
  }
}

template <std::size_t R, class C>
auto push_slice_operand(const C& c, const dynamic_shape<R>& whole, const axis_map<R>& m, const dynamic_shape<R>& out);

/// Node n viewed by slice m (shape out), the slice pushed down (see the top). n has rank R and
/// the shape the slice views; its operands are broadcast to it first.
template <std::size_t R, class N>
auto push_slice(const N& n, const axis_map<R>& m, const dynamic_shape<R>& out) {
  constexpr node_kind K = kind_of<N>;
  if constexpr (!holds_row_op<N>() || N::rank != R) {
    return apply_axis_map(n, out, m);
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
  } else if constexpr (holds_row_op<C>() && C::rank == R) {
    return push_slice(c, m, out);  // (slice_passes checked that its shape is the node's)
  } else {
    return apply_axis_map(broadcast_to(c, whole.array().v), out, m);
  }
}

}  // namespace detail

/// Whether v, an affine view, is a slice that pushes down to every softmax and layer norm below
/// it through elementwise ops (then push_slice(v) evaluates only the rows it keeps).
template <class V>
bool slice_pushes(const V& v) {
  if constexpr (!detail::is_view_of_row_ops<V>()) {
    return false;
  } else if constexpr (V::rank != V::child_type::rank) {
    return false;
  } else {
    return detail::is_slice_map(v.map) && detail::slice_passes(v.child, v.map, v.shape().array());
  }
}

/// v with its slice pushed down (where slice_pushes(v)).
template <class V>
auto push_slice(const V& v) {
  return detail::push_slice(v.child, v.map, v.shape());
}

}  // namespace fuse
