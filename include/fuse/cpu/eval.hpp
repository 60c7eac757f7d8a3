// The CPU executor's entry: fuse::eval(out, expr) evaluates the whole tree in one loop nest.
//
// This is the top of fuse/cpu, and the only file that knows every way a tree is run:
//   - an elementwise tree: one pass of the pass driver (fuse/cpu/pass.hpp);
//   - one with contractions among its leaves: the blocked epilogue (fuse/cpu/epilogue.hpp);
//   - a node with a kernel of its own at the root: that kernel (fuse/cpu/contract.hpp,
//     fuse/cpu/reduce.hpp), chosen by the node's type.
// Every layer below is handed a cpu::context, the executor context defined here: the math
// mode, the options of this eval, the statistics it gathers, and the way back to eval for a
// subtree a kernel must evaluate whole (materialize, eval_into). That is how a reduction inside
// a tree, or an expression operand of a GEMM, is evaluated without any lower file including this
// one.
//
// Several outputs of one shape are written in the same pass:
//   fuse::eval(fuse::outputs(h, c), h_expr, c_expr);
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fuse/core/error.hpp"
#include "fuse/bind/outputs.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/cpu/contract.hpp"
#include "fuse/cpu/epilogue.hpp"
#include "fuse/cpu/options.hpp"
#include "fuse/cpu/pass.hpp"
#include "fuse/cpu/reduce.hpp"
#include "fuse/cpu/scratch.hpp"
#include "fuse/expr/broadcast.hpp"
#include "fuse/expr/contract.hpp"
#include "fuse/expr/node.hpp"
#include "fuse/expr/reduce.hpp"
#include "fuse/expr/view_pushdown.hpp"

namespace fuse {

namespace cpu {

template <class Ctx, class Out, class Expr>
void eval_with(Ctx& ctx, Out&& out, Expr&& expr, streaming_stores streaming);

/// The executor context of one fuse::eval, handed to every layer below (see the top of this
/// file): bind() asks it for the nodes it cannot bind (materialize), kernels ask it to evaluate
/// operands (eval_into), the blocked epilogue reads its options and counts into its statistics.
template <class Mode>
struct context {
  using math_mode = Mode;
  index_t epilogue_block_elements = epilogue_block{}.elements;
  eval_statistics stats;

  scratch_pool scratch;  ///< storage of the results materialised, reused within this eval

  /// The node evaluated into a new tensor of its shape (a node that needs a kernel of its own,
  /// inside a larger tree), in storage this eval reuses.
  template <class N>
  auto materialize(const N& n) {
    scratch_tensor<typename N::value_type, N::rank> t(scratch, dynamic_shape<N::rank>(n.shape()));
    eval_with(*this, t.view(), n, streaming_stores::automatic);
    return t;
  }
  /// out = e, by the whole executor (an operand evaluated into a buffer of a kernel's).
  template <class T, int R, class E>
  void eval_into(tensor_view<T, R> out, const E& e) {
    eval_with(*this, out, e, streaming_stores::automatic);
  }
};

// ---- row nodes over contractions: by row blocks ---------------------------------------------------

namespace detail {

template <class N>
struct is_own_kernel_node : std::bool_constant<needs_own_kernel<N> || kind_of<N> == node_kind::take> {};
/// Whether tree N holds a node with a kernel of its own (or a gather).
template <class N>
constexpr bool holds_own_kernel_node() {
  return tree_holds<is_own_kernel_node, N>();
}

/// Whether the nodes of tree N with kernels of their own are contractions whose blocks a pass
/// computes without evaluating anything whole: B a view or packed weights, A a view or an
/// expression read by rows (a dense of rank 2, a batch_matmul) that holds no such node itself.
template <class N>
constexpr bool contractions_by_blocks_only() {
  using D = std::remove_cvref_t<N>;
  if constexpr (kind_of<D> == node_kind::contraction) {
    using A = typename D::a_type;
    using B = typename D::b_type;
    constexpr bool a_ok = kind_of<A> == node_kind::leaf ||
                          (!holds_own_kernel_node<A>() && (D::kind == contract_kind::batch_matmul || A::rank == 2));
    return a_ok && (kind_of<B> == node_kind::leaf || kind_of<B> == node_kind::packed_weights);
  } else if constexpr (needs_own_kernel<D> || kind_of<D> == node_kind::take) {
    return false;
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (contractions_by_blocks_only<child_t<I, D>>() && ...);
    }(std::make_index_sequence<child_count<D>>{});
  }
}

/// The memory tree e reads (its tensor leaves and its contractions' operands; packed weights are
/// private memory), and whether no contraction in it reads A transposed (which a block would
/// evaluate whole).
template <class E>
bool row_block_reads(const E& e, byte_ranges& out) {
  constexpr node_kind K = kind_of<E>;
  if constexpr (K == node_kind::contraction) {
    bool ok = !e.trans_a;
    ok = row_block_reads(e.a, out) && ok;
    if constexpr (kind_of<typename E::b_type> != node_kind::packed_weights) ok = row_block_reads(e.b, out) && ok;
    return ok;
  } else if constexpr (K == node_kind::reshape_view && has_contraction_leaf<E>()) {
    // A contraction under a reshape is not computed by blocks (the blocked epilogue follows
    // affine maps only): each row block would compute it whole (10x for a layer norm over
    // reshape(dense(x, W)) at [384, 768]). Evaluated whole once instead.
    return false;
  } else if constexpr (K == node_kind::leaf || K == node_kind::constant || K == node_kind::elementwise ||
                       K == node_kind::affine_view || K == node_kind::reshape_view || K == node_kind::concatenate) {
    if constexpr (K == node_kind::leaf) {
      const void *l = nullptr, *h = nullptr;
      bind::detail::byte_range(e.data(), e.shape().array(), e.strides().data(), sizeof(typename E::value_type), l, h);
      out.push_back({l, h});
      return true;
    } else {
      bool all = true;
      for_each_child(e, [&](const auto& c) { all = row_block_reads(c, out) && all; });
      return all;
    }
  } else {
    return false;
  }
}

}  // namespace detail

/// A row node (softmax, layer norm) along the last axis of `out` whose input `child` holds
/// contractions: row block by row block, the block of the input computed by the blocked
/// epilogue (its contractions' blocks in cache) into a buffer of whole rows, then the row node
/// over the buffer (`remake(buffer view)`: the node over it) into the block of out. The
/// product never exists whole (BERT's dense + bias + residual + layer norm; attention's
/// softmax of scaled, masked scores). Returns false, doing nothing, where that does not apply
/// (another axis, an output that the input reads, a transposed A): the caller evaluates the
/// input whole.
template <std::size_t Q, class Ctx, class T, class Child, class Remake>
bool run_rows_over_contractions(Ctx& ctx, tensor_view<T, static_cast<int>(Q)> out, const Child& child, index_t axis,
                                Remake&& remake) {
  static_assert(Q >= 1);
  if (axis != static_cast<index_t>(Q) - 1) return false;
  detail::byte_ranges reads;
  if (!detail::row_block_reads(child, reads)) return false;
  const auto ext = out.shape().array();
  {
    const void *lo = nullptr, *hi = nullptr;
    bind::detail::byte_range(out.data(), ext, out.strides().data(), sizeof(T), lo, hi);
    if (detail::overlaps_any(lo, hi, reads)) return false;
  }
  using V = typename Child::value_type;
  constexpr std::size_t RA = Q >= 2 ? Q - 2 : 0;  // the axis cut into row blocks
  const index_t n = ext[Q - 1];
  const index_t rows = Q >= 2 ? ext[RA] : 1;
  const index_t rb =
      std::clamp<index_t>(ctx.epilogue_block_elements / std::max<index_t>(n, 1), 1, std::min<index_t>(256, rows));
  index_array<Q> bshape{};
  for (std::size_t d = 0; d < Q; ++d) bshape[d] = 1;
  bshape[Q - 1] = n;
  if constexpr (Q >= 2) bshape[RA] = rb;
  auto buf = tensor<V, static_cast<int>(Q)>(dynamic_shape<Q>(bshape));
  detail::for_each_row_block<Q>(ext, rb, [&](const index_array<Q>& origin, const index_array<Q>& len) {
    index_t begin[Q], end[Q];
    for (std::size_t d = 0; d < Q; ++d) begin[d] = origin[d], end[d] = origin[d] + len[d];
    const tensor_view<V, static_cast<int>(Q)> block(buf.data(), dynamic_shape<Q>(len));  // contiguous
    eval_with(ctx, block, strided_slice(child, begin, end), streaming_stores::automatic);
    eval_with(ctx, detail::block_of<Q>(out, origin, len), remake(tensor_view<const V, static_cast<int>(Q)>(block)),
              streaming_stores::automatic);
  });
  return true;
}

// The kernel of each node that needs one (needs_own_kernel: contractions, reductions, softmax,
// layer_norm) when it is the root of an eval, by the node's type; inside a larger tree such a
// node is materialised first.
template <class Ctx, class T, std::size_t Q, contract_kind K, class A, class B, class O, std::size_t R>
void run_root(Ctx& ctx, tensor_view<T, static_cast<int>(Q)> out, const contract_expr<K, A, B, O, R>& n) {
  run_contract<Q>(ctx, out, n);
}
template <class Ctx, class T, std::size_t Q, reduce_kind K, class C, std::size_t R>
void run_root(Ctx& ctx, tensor_view<T, static_cast<int>(Q)> out, const reduce_expr<K, C, R>& n) {
  run_reduce<Q>(ctx, out, n);
}
template <class Ctx, class T, std::size_t Q, row_op_kind K, class C>
void run_root(Ctx& ctx, tensor_view<T, static_cast<int>(Q)> out, const softmax_expr<K, C>& n) {
  if constexpr (has_contraction_leaf<C>() && detail::contractions_by_blocks_only<C>())
    if (run_rows_over_contractions<Q>(ctx, out, n.child, n.axis, [&](const auto& rows) {
          auto e = n.with_children(rows);
          e.shape_ = rows.shape();  // (the block's rows, not the whole input's)
          return e;
        }))
      return;
  run_softmax<Q>(ctx, out, n);
}
template <class Ctx, class T, std::size_t Q, class X, class G, class B>
void run_root(Ctx& ctx, tensor_view<T, static_cast<int>(Q)> out, const layer_norm_expr<X, G, B>& n) {
  if constexpr (has_contraction_leaf<X>() && detail::contractions_by_blocks_only<X>())
    if (run_rows_over_contractions<Q>(ctx, out, n.x, n.axis, [&](const auto& rows) {
          auto e = n.with_children(rows, n.gamma, n.beta);
          e.shape_ = rows.shape();
          return e;
        }))
      return;
  run_layer_norm<Q>(ctx, out, n);
}

/// Evaluates exprs into outs (all of rank Q and one shape) in one loop nest. A tree with
/// contractions among its leaves runs as a blocked epilogue (fuse/cpu/epilogue.hpp).
template <std::size_t Q, class Ctx, class... T, class... E>
void run_elementwise(Ctx& ctx, std::tuple<tensor_view<T, static_cast<int>(Q)>...> outs, const std::tuple<E...>& exprs,
                     streaming_stores streaming) {
  const index_array<Q> ext = pass_extents<Q>(outs, exprs, "eval");
  if (product(ext) == 0) return;
  if constexpr ((has_contraction_leaf<E>() || ...)) {
    run_epilogue_blocks<Q>(ctx, outs, exprs, streaming);
  } else {
    run_pass<typename Ctx::math_mode, Q>(ctx, outs, exprs, streaming, ext, index_array<Q>{});
  }
}

/// Whether output O and tree E are host memory only, as the CPU needs (a device view made by
/// fuse::cuda::view or fuse::cuda::tensor names memory the CPU cannot read).
template <class O, class E>
constexpr bool reads_host_only() {
  constexpr bool output_on_host = std::is_same_v<typename O::memory_space_type, host_memory>;
  constexpr bool inputs_on_host = (memory_read_by<E>() & device_read) == 0;
  static_assert(output_on_host,
                "fuse::eval: the output is a device view (device memory, which the CPU cannot write): evaluate it "
                "with fuse::cuda::eval, or evaluate into host memory and copy it (fuse::cuda::copy)");
  static_assert(inputs_on_host,
                "fuse::eval: the expression reads a device view (device memory, which the CPU cannot read): "
                "evaluate it with fuse::cuda::eval, or copy the data to host memory first (fuse::cuda::copy)");
  return output_on_host && inputs_on_host;
}

/// out = expr with the executor context ctx: the body of fuse::eval and of every evaluation a
/// kernel asks for.
template <class Ctx, class Out, class Expr>
void eval_with(Ctx& ctx, Out&& out_, Expr&& expr_, streaming_stores streaming) {
  auto out = as_output(static_cast<Out&&>(out_));
  auto&& expr = as_node(static_cast<Expr&&>(expr_));  // the tree lives until eval returns
  using O = decltype(out);
  using E = std::remove_cvref_t<decltype(expr)>;
  check_output<O, E>();
  constexpr std::size_t Q = O::rank;
  using T = typename O::element_type;
  // The tree as it is, in one pass over out (or by the blocked epilogue): what every root that
  // is not rewritten below comes to. (A template: instantiated only where a branch below calls
  // it, so an eval of device memory stops at the assertions above.)
  const auto as_is = [&]<class = void>() {
    run_elementwise<Q>(ctx, std::make_tuple(tensor_view<T, static_cast<int>(Q)>(out)), std::tuple<const E&>(expr),
                       streaming);
  };
  if constexpr (!reads_host_only<O, E>()) {
    return;  // the assertions above said why: no second screen of errors
  } else if constexpr (needs_own_kernel<E>) {
    run_root<Ctx, T, Q>(ctx, tensor_view<T, static_cast<int>(Q)>(out), expr);
  } else if constexpr (kind_of<E> == node_kind::reshape_view) {
    // A reshape at the root is the output's: out seen in the child's shape, where its strides
    // allow it (always for a contiguous output), evaluates the child in its own coordinates,
    // where its leaves fold (seed 002's output, reshape(transpose(reshape(PV))) into [3072,
    // 768]: rows of 64 through the general loads before) and its contractions are met without
    // a reshape between (the blocked epilogue follows no reshape of a product).
    constexpr std::size_t Rc = E::child_type::rank;
    index_array<Rc> strides{};
    if (bind::detail::reshape_strides(out.shape().array(), out.strides(), expr.child.shape().array(), strides))
      eval_with(ctx, tensor_view<T, static_cast<int>(Rc)>(out.data(), expr.child.shape(), strides), expr.child,
                streaming);
    else as_is();
  } else if constexpr (fuse::detail::is_view_of_row_ops<E>()) {
    // A slice of a tree holding softmaxes or layer norms (the rows of an operand a contraction
    // reads by blocks): the row nodes of the slice only, where the slice passes down to them.
    if (slice_pushes(expr)) {
      constexpr std::size_t Rc = E::child_type::rank;
      index_array<Rc> along{};
      auto pushed = push_slice(expr, along);
      // out seen in the pushed node's rank (the axes the slice drops or adds have extent 1)
      index_array<Rc> strides{};
      for (std::size_t d = 0; d < Rc; ++d)
        strides[d] = along[d] < 0 ? 0 : out.strides()[static_cast<std::size_t>(along[d])];
      eval_with(ctx, tensor_view<T, static_cast<int>(Rc)>(out.data(), pushed.shape(), strides), pushed, streaming);
    } else as_is();
  } else {
    as_is();
  }
}

/// The executor context for the options of one eval.
template <class... Opt>
context<math_mode_t<Opt...>> context_for(const Opt&... opt) {
  context<math_mode_t<Opt...>> ctx;
  ctx.epilogue_block_elements = fuse::detail::option_of(epilogue_block{}, opt...).elements;
  return ctx;
}

}  // namespace cpu

/// Evaluates `expr` into `out` in one pass. Options: fuse::fast_math, fuse::streaming_stores::on/off,
/// fuse::epilogue_block{elements}. Returns what the pass did (fuse::eval_statistics).
template <class Out, class Expr, class... Opt>
  requires(!is_outputs<std::remove_cvref_t<Out>> && (is_eval_option<std::remove_cvref_t<Opt>> && ...) &&
           !is_eval_option<std::remove_cvref_t<Expr>>)
eval_statistics eval(Out&& out, Expr&& expr, const Opt&... opt) {
#if !FUSE_DEVICE_PASS  // host code only: see fuse::eval(outputs...) below
  auto ctx = cpu::context_for(opt...);
  cpu::eval_with(ctx, static_cast<Out&&>(out), static_cast<Expr&&>(expr), fuse::detail::streaming_of(opt...));
  return ctx.stats;
#else
  return {};
#endif
}

/// Evaluates one expression per output, all in the same pass (trailing options allowed).
template <class... O, class... Args>
eval_statistics eval(outputs_t<O...> outs, Args&&... args) {
  // In nvcc's device pass of a .cu file the body (xsimd vectors) must not be instantiated: it is
  // host code, and the device pass rejects vector types in the functions it would reach.
#if !FUSE_DEVICE_PASS
  constexpr std::size_t N = sizeof...(O);
  static_assert(sizeof...(Args) >= N, "fuse::eval: give one expression per output");
  auto all = std::forward_as_tuple(static_cast<Args&&>(args)...);
  return [&]<std::size_t... I, std::size_t... J>(std::index_sequence<I...>, std::index_sequence<J...>) {
    static_assert((is_eval_option<std::remove_cvref_t<std::tuple_element_t<N + J, std::tuple<Args...>>>> && ...),
                  "fuse::eval: after the expressions only options may follow");
    auto ctx = cpu::context_for(std::get<N + J>(all)...);
    auto exprs = std::make_tuple(as_expr(std::get<I>(all))...);
    check_outputs<std::tuple<O...>, decltype(exprs)>();
    constexpr std::size_t Q = std::tuple_element_t<0, std::tuple<O...>>::rank;
    // (the memory-space assertions of reads_host_only say what is wrong, once)
    if constexpr ((cpu::reads_host_only<O, std::tuple_element_t<I, decltype(exprs)>>() && ...))
      cpu::run_elementwise<Q>(
          ctx, std::make_tuple(tensor_view<typename O::element_type, static_cast<int>(Q)>(std::get<I>(outs.views))...),
          exprs, fuse::detail::streaming_of(std::get<N + J>(all)...));
    return ctx.stats;
  }(std::make_index_sequence<N>{}, std::make_index_sequence<sizeof...(Args) - N>{});
#else
  return {};
#endif
}

/// Evaluates `expr` into a new tensor of its shape and dtype.
template <class Expr, class... Opt>
  requires(expression<expr_t<Expr>> && (is_eval_option<std::remove_cvref_t<Opt>> && ...))
auto materialize(Expr&& expr_, const Opt&... opt) {
  auto expr = as_expr(static_cast<Expr&&>(expr_));
  using E = decltype(expr);
  tensor<typename E::value_type, static_cast<int>(E::rank)> t(dynamic_shape<E::rank>(expr.shape()));
  eval(t, expr, opt...);
  return t;
}

}  // namespace fuse
