// bind(): turns an expression tree into its evaluator tree over an iteration space, composing
// index maps on the way down (see index_map.hpp) and folding them into strides at the leaves.
//
// Nodes that cannot be evaluated element by element inside the loop (reductions) are handed to
// the executor's context, which evaluates them ahead of the loop into storage the evaluator
// owns; every other node stays fused.
#pragma once

#include <utility>

#include "fuse/bind/evaluators.hpp"
#include "fuse/bind/index_map.hpp"
#include "fuse/expr/elementwise.hpp"
#include "fuse/expr/views.hpp"

namespace fuse::bind {

/// A node the executor must evaluate ahead of the loop (a kernel of its own: fuse/expr/node.hpp).
template <class N>
concept materialized_node = needs_own_kernel<N>;

template <class Mode, class Node, class Map, class Ctx>
auto bind(const Node& n, const Map& m, Ctx& ctx);

namespace detail {

/// The map of an operand with extents `from` under a node with extents `to` read through m: m
/// itself when the operand has the node's shape (most operands: nothing to broadcast, and
/// composing with the identity would cost a map built and walked per operand per bind).
template <class Map, std::size_t Rc, std::size_t R>
FUSE_FORCE_INLINE auto operand_map(const Map& m, const index_array<Rc>& from, const index_array<R>& to) {
  using Composed = decltype(compose(m, broadcast_axes(from, to)));
  if constexpr (Rc == R && std::is_same_v<Composed, Map>) {
    if (from == to) return m;
  }
  return compose(m, broadcast_axes(from, to));
}

template <class Mode, class Op, class... A, class Map, class Ctx, std::size_t... I>
auto bind_map(const map_expr<Op, A...>& n, const Map& m, Ctx& ctx, std::index_sequence<I...>) {
  const auto ext = n.shape().array();
  using T = typename map_expr<Op, A...>::value_type;
  using E = map_eval<Mode, Op, T,
                     decltype(bind<Mode>(fuse::get<I>(n.args),
                                         operand_map(m, fuse::get<I>(n.args).shape().array(), ext), ctx))...>;
  return E{n.op, {bind<Mode>(fuse::get<I>(n.args), operand_map(m, fuse::get<I>(n.args).shape().array(), ext), ctx)...}};
}

template <std::size_t R>
axis_map<R> shift_axis(index_t axis, index_t by) {
  axis_map<R> a;
  for (std::size_t d = 0; d < R; ++d) a.src[d] = static_cast<index_t>(d), a.scale[d] = 1;
  a.offset[static_cast<std::size_t>(axis)] = -by;
  return a;
}

template <class Mode, class... C, class Map, class Ctx, std::size_t... I>
auto bind_concat(const concat_expr<C...>& n, const Map& m, Ctx& ctx, std::index_sequence<I...>) {
  constexpr std::size_t R = concat_expr<C...>::rank;
  using T = typename concat_expr<C...>::value_type;
  using E = concat_eval<T, Map::in_rank, Map,
                        decltype(bind<Mode>(fuse::get<I>(n.parts), compose(m, shift_axis<R>(0, 0)), ctx))...>;
  E e{{bind<Mode>(fuse::get<I>(n.parts), compose(m, shift_axis<R>(n.axis, n.offsets[I])), ctx)...},
      m,
      n.axis,
      n.offsets};
  if constexpr (is_affine_map<Map>::value) {
    const auto a = static_cast<std::size_t>(n.axis);
    e.axis_base = m.offset[a];
    if (m.src[a] >= 0) e.axis_coef[static_cast<std::size_t>(m.src[a])] = m.scale[a];
  }
  return e;
}

}  // namespace detail

/// The evaluator of node `n`, whose coordinates are m(x) for iteration coordinates x: one
/// branch per node kind (fuse/expr/node.hpp).
template <class Mode, class Node, class Map, class Ctx>
auto bind(const Node& n, const Map& m, Ctx& ctx) {
  constexpr std::size_t Q = Map::in_rank;
  constexpr node_kind K = kind_of<Node>;
  if constexpr (K == node_kind::leaf) {
    return make_leaf<typename Node::element_type, Q>(n.data(), n.shape().array(), n.strides(), m);
  } else if constexpr (K == node_kind::constant) {
    return scalar_eval<typename Node::value_type, Q>{to_compute<typename Node::value_type>(n.value)};
  } else if constexpr (K == node_kind::elementwise) {
    return detail::bind_map<Mode>(n, m, ctx, std::make_index_sequence<decltype(n.args)::size>{});
  } else if constexpr (K == node_kind::affine_view) {
    return bind<Mode>(n.child, compose(m, n.map), ctx);
  } else if constexpr (K == node_kind::reshape_view) {
    return bind<Mode>(n.child, then_reshape(m, n.shape().array(), n.child.shape().array()), ctx);
  } else if constexpr (K == node_kind::concatenate) {
    return detail::bind_concat<Mode>(n, m, ctx, std::make_index_sequence<Node::count>{});
  } else if constexpr (K == node_kind::take) {
    using DN = decltype(n.data);
    using IN = decltype(n.indices);
    constexpr std::size_t Rt = Node::rank;
    // The indices' coordinates are the take's axes [axis, axis + rank(indices)).
    axis_map<IN::rank> proj;
    for (std::size_t d = 0; d < IN::rank; ++d)
      proj.src[d] = n.axis + static_cast<index_t>(d), proj.scale[d] = 1, proj.offset[d] = 0;
    auto data_ev = bind<Mode>(n.data, affine_map<DN::rank, DN::rank>::identity(), ctx);
    auto idx_ev = bind<Mode>(n.indices, compose(m, proj), ctx);
    take_eval<typename Node::value_type, Q, Map, decltype(data_ev), decltype(idx_ev)> e{data_ev, idx_ev, m, n.axis};
    e.extent = n.data.shape()[static_cast<std::size_t>(n.axis)];
    e.data_extent = n.data.shape().array();
    e.mode = n.mode;
    (void)Rt;
    return e;
  } else if constexpr (K == node_kind::packed_weights) {
    static_assert(sizeof(Node) == 0,
                  "fuse: packed weights (fuse::pack) are only the weight operand of fuse::dense or "
                  "fuse::matmul(x, w, false, true); an elementwise expression must read the unpacked tensor");
    return n;
  } else if constexpr (materialized_node<Node> && requires { ctx.template leaf_for<Mode, Q>(n, m); }) {
    // The context builds the leaf itself: the CPU's blocked epilogue computes only the block
    // of a contraction that the current pass reads.
    return ctx.template leaf_for<Mode, Q>(n, m);
  } else if constexpr (materialized_node<Node>) {
    using T = typename Node::value_type;
    using S = decltype(ctx.materialize(n));
    auto storage = std::make_shared<const S>(ctx.materialize(n));
    const auto v = storage->view();
    owned_leaf_eval<const T, Q, Map> e;
    static_cast<leaf_eval<const T, Q, Map>&>(e) = make_leaf<const T, Q>(v.data(), v.shape().array(), v.strides(), m);
    e.storage = std::move(storage);
    return e;
  } else {
    static_assert(sizeof(Node) == 0, "fuse: bind() does not know this node type");
  }
}

}  // namespace fuse::bind
