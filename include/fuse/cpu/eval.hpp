// The CPU executor: fuse::eval(out, expr) evaluates the whole tree in one loop nest.
//
//   1. bind: the tree becomes evaluators over the output's coordinates (fuse/bind).
//   2. aliasing: an output that shares memory with a leaf read through the very same
//      addresses is updated in place (x = f(x)); any other overlap (x = transpose(x)) sends the
//      results through a temporary first, so the answer is always right.
//   3. loop shape: when every leaf folded into strides, axes of extent 1 are dropped, the axes
//      are ordered by the output's strides and merged wherever every operand allows (a
//      contiguous tree becomes one flat loop; a row plus a broadcast bias stays two).
//   4. the loop: rows over the outer axes, the inner axis in SIMD vectors (partial vector at
//      the tail, never a scalar loop), streaming stores for outputs too big for the cache.
//
// Several outputs of one shape are written in the same pass:
//   fuse::eval(fuse::outputs(h, c), h_expr, c_expr);
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "fuse/bind/bind.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/small_vector.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/cpu/options.hpp"
#include "fuse/cpu/vector_access.hpp"
#include "fuse/expr/broadcast.hpp"
#include "fuse/expr/contract.hpp"
#include "fuse/expr/node.hpp"

namespace fuse {

// ---- outputs ----------------------------------------------------------------------------------------------

template <class Out, class T>
inline constexpr bool output_is_writable = !std::is_const_v<T>;

/// The writable view an output argument becomes: a tensor, a non-const tensor_view, a view
/// made by split/transpose/... of those, a reshape of one whose layout allows it, or a foreign
/// container (Eigen) with a view_traits specialisation.
template <class X>
auto as_output(X&& x) {
  using D = std::remove_cvref_t<X>;
  if constexpr (is_tensor<D>::value) {
    static_assert(!std::is_const_v<std::remove_reference_t<X>>, "fuse::eval: the output tensor is const");
    return x.view();
  } else if constexpr (is_tensor_view<D>::value) {
    static_assert(output_is_writable<D, typename D::element_type>,
                  "fuse::eval: the output is a view of const elements; it cannot be written");
    return tensor_view<typename D::element_type, shape_param_v<typename D::shape_type>>(x);
  } else if constexpr (is_reshape_view<D>::value) {
    auto inner = as_output(x.child);
    using V = decltype(inner);
    constexpr std::size_t R = D::rank;
    index_array<R> s{};
    if (!bind::detail::reshape_strides(inner.shape().array(), inner.strides(), x.shape().array(), s))
      throw_shape_error("eval: the output reshape to ", x.shape().array(), " of a view of shape ",
                        inner.shape().array(), " cannot be expressed with strides (the view is not contiguous enough)");
    return tensor_view<typename V::element_type, static_cast<int>(R)>(inner.data(), x.shape(), s);
  } else if constexpr (foreign_viewable<X>) {
    return as_output(view_traits<D>::view(x));
  } else {
    static_assert(sizeof(D) == 0, "fuse::eval: this output is not a tensor, a writable view or a viewable container");
  }
}

template <class... O>
struct outputs_t {
  std::tuple<O...> views;
};
template <class T>
inline constexpr bool is_outputs = false;
template <class... O>
inline constexpr bool is_outputs<outputs_t<O...>> = true;
/// Several outputs for one pass: fuse::eval(fuse::outputs(a, b), expr_a, expr_b).
template <class... X>
auto outputs(X&&... x) {
  return outputs_t<decltype(as_output(static_cast<X&&>(x)))...>{{as_output(static_cast<X&&>(x))...}};
}

template <class Out, class Expr>
inline constexpr bool output_dtype_matches_expression = std::is_same_v<Out, Expr>;

template <class OutShape, class ExprShape>
inline constexpr bool static_expression_shape_fits_output = [] {
  if constexpr (OutShape::is_static && ExprShape::is_static) {
    if (ExprShape::rank > OutShape::rank) return false;
    constexpr auto r = fuse::detail::static_broadcast<ExprShape, OutShape>();
    return r.ok && r.extents == OutShape::extents;
  } else {
    return true;
  }
}();

namespace cpu {

template <class Mode>
struct context;

/// A node evaluated by a kernel of its own when it is the root of eval (reductions, softmax,
/// layer_norm: see fuse/cpu/reduce.hpp); inside a larger tree it is materialised first.
template <class N>
concept root_kernel_node = requires { typename N::materialize_tag; };

template <class Mode, class T, std::size_t Q, class N>
  requires root_kernel_node<N>
void run_root(tensor_view<T, static_cast<int>(Q)> out, const N& node);

namespace detail {

/// Loop shape after dropping extent-1 axes, ordering by the first output's strides and merging.
template <std::size_t Q>
struct loop_plan {
  index_array<Q> extent{};  ///< right-aligned; leading unused axes have extent 1
  index_array<Q> pick{};    ///< old axis walked by each new axis (-1: none)
};

template <std::size_t Q>
using stride_list = small_vector<index_array<Q>, 16>;

template <std::size_t Q>
loop_plan<Q> plan_loops(const index_array<Q>& ext, const stride_list<Q>& strides) {
  std::size_t dims[Q > 0 ? Q : 1];
  std::size_t nd = 0;
  for (std::size_t k = 0; k < Q; ++k)
    if (ext[k] != 1) dims[nd++] = k;
  // Outermost first: larger |stride| of the first output; ties keep their order (an insertion
  // sort: a handful of axes, and no allocation, unlike std::stable_sort).
  auto mag = [&](std::size_t k) { return strides[0][k] < 0 ? -strides[0][k] : strides[0][k]; };
  for (std::size_t i = 1; i < nd; ++i)
    for (std::size_t j = i; j > 0 && mag(dims[j - 1]) < mag(dims[j]); --j) std::swap(dims[j - 1], dims[j]);
  // Merge from the inside out: outer axis a folds into the group g below it when every operand
  // steps a by exactly g's extent times g's stride.
  index_t g_ext[Q > 0 ? Q : 1];
  std::size_t g_dim[Q > 0 ? Q : 1];
  std::size_t ng = 0;
  for (std::size_t i = nd; i-- > 0;) {
    const std::size_t a = dims[i];
    if (ng > 0) {
      const std::size_t b = g_dim[ng - 1];
      bool merge = true;
      for (std::size_t i = 0; i < strides.size(); ++i)
        if (strides[i][a] != strides[i][b] * g_ext[ng - 1]) merge = false;
      if (merge) {
        g_ext[ng - 1] *= ext[a];
        continue;
      }
    }
    g_ext[ng] = ext[a];
    g_dim[ng] = a;
    ++ng;
  }
  loop_plan<Q> p;
  for (std::size_t k = 0; k < Q; ++k) p.extent[k] = 1, p.pick[k] = -1;
  for (std::size_t g = 0; g < ng; ++g) {  // group 0 is innermost
    p.extent[Q - 1 - g] = g_ext[g];
    p.pick[Q - 1 - g] = static_cast<index_t>(g_dim[g]);
  }
  return p;
}

template <std::size_t Q>
index_array<Q> retarget_strides(const index_array<Q>& s, const index_array<Q>& pick) {
  index_array<Q> r{};
  for (std::size_t k = 0; k < Q; ++k) r[k] = pick[k] >= 0 ? s[static_cast<std::size_t>(pick[k])] : 0;
  return r;
}

/// Do two byte ranges overlap? (An empty range overlaps nothing.)
inline bool overlaps(const void* alo, const void* ahi, const void* blo, const void* bhi) {
  return alo != ahi && blo != bhi && alo < bhi && blo < ahi;
}

template <std::size_t Q>
struct out_state {
  void* base;
  index_array<Q> stride;
  std::size_t elem_size;
  const void* lo;
  const void* hi;
};

/// What a pass needs to know before its loop, decided from the outputs' and leaves' layouts
/// alone: which outputs go through a temporary, the loop shape, streaming. Not a template of
/// the expression (only of the rank), so every tree of a rank shares one instantiation.
template <std::size_t Q>
struct pass_plan {
  small_vector<char, 8> through_temp;
  bool transform = false;
  loop_plan<Q> loops;
};

template <std::size_t Q>
pass_plan<Q> plan_pass(const index_array<Q>& ext, small_vector<out_state<Q>, 8>& outs,
                       const small_vector<bind::leaf_info, 16>& leaves, bool tree_folded) {
  pass_plan<Q> plan;
  const std::size_t n = outs.size();
  plan.through_temp = small_vector<char, 8>(n, 0);
  for (std::size_t o = 0; o < n; ++o)
    bind::detail::byte_range(outs[o].base, ext, outs[o].stride.data(), outs[o].elem_size, outs[o].lo, outs[o].hi);
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = a + 1; b < n; ++b)
      if (overlaps(outs[a].lo, outs[a].hi, outs[b].lo, outs[b].hi))
        throw memory_error("eval: two outputs of one pass overlap in memory");
  bool folded = tree_folded;
  stride_list<Q> strides;
  for (std::size_t o = 0; o < n; ++o) strides.push_back(outs[o].stride);
  for (std::size_t l = 0; l < leaves.size(); ++l) {
    const auto& leaf = leaves[l];
    folded = folded && leaf.folded;
    if (leaf.folded) {
      index_array<Q> st{};
      for (std::size_t k = 0; k < Q; ++k) st[k] = leaf.stride[k];
      strides.push_back(st);
    }
    // An output may share memory with a leaf only when both walk exactly the same addresses.
    for (std::size_t o = 0; o < n; ++o) {
      if (!overlaps(outs[o].lo, outs[o].hi, leaf.lo, leaf.hi)) continue;
      bool same = leaf.folded && leaf.base == outs[o].base && leaf.elem_size == outs[o].elem_size;
      for (std::size_t k = 0; same && k < Q; ++k)
        if (ext[k] != 1 && leaf.stride[k] != outs[o].stride[k]) same = false;
      if (!same) plan.through_temp[o] = 1;
    }
  }
  plan.transform = folded && Q > 0;
  if (plan.transform) {
    // Outputs through a temporary are written contiguously: their strides change.
    for (std::size_t o = 0; o < n; ++o)
      if (plan.through_temp[o]) strides[o] = row_major_strides(ext);
    plan.loops = plan_loops(ext, strides);
  }
  return plan;
}

/// Stores the first n lanes of v at p (stride in elements), streaming full vectors when asked
/// and p is aligned for it (the row loop aligns the first output; others may not be).
template <class A, class T, class V>
FUSE_FORCE_INLINE void store_vec(T* p, index_t stride, const V& v, int n, bool stream) {
  if (FUSE_LIKELY(stride == 1 && n == simd::width<A>)) {
    if constexpr (simd::stream_alignment<T, A> != 0) {
      if (stream && reinterpret_cast<std::uintptr_t>(p) % simd::stream_alignment<T, A> == 0) {
        simd::stream<T, A>(p, v);
        return;
      }
    }
    simd::store<T, A>(p, v);
  } else if (stride == 1) {
    simd::store_partial<T, A>(p, v, n);
  } else {
    simd::store_strided<T, A>(p, stride, v, n);
  }
}

/// The inner loop over one row. Every output's vector j is computed before any is stored, so
/// outputs that alias inputs at identical addresses stay correct. Rows whose leaves are all
/// contiguous run whole vectors through the fast loads; everything else (strided, broadcast
/// or gathered leaves, the tail) goes through the general loads, one vector of up to width
/// lanes per step. With streaming stores a partial first step aligns the first output.
template <class A, class Outs, class Evs, std::size_t... I>
FUSE_FORCE_INLINE void run_row(Outs& rows, const index_t* ostr, Evs& evs, index_t n, bool stream,
                               std::index_sequence<I...>) {
  constexpr int W = simd::width<A>;
  using T0 = std::remove_pointer_t<std::tuple_element_t<0, Outs>>;
  auto step = [&]<bool Fast>(std::bool_constant<Fast>, index_t j, int m) FUSE_LAMBDA_INLINE {
    const auto vs = std::make_tuple(
        vaccess<std::remove_cvref_t<decltype(std::get<I>(evs))>>::template load<A, Fast>(std::get<I>(evs), j, m)...);
    (store_vec<A>(std::get<I>(rows) + j * ostr[I], ostr[I], std::get<I>(vs), m, stream), ...);
  };
  index_t j = 0;
  if constexpr (simd::stream_alignment<T0, A> != 0) {
    if (stream && ostr[0] == 1) {
      const auto mis = reinterpret_cast<std::uintptr_t>(std::get<0>(rows)) % simd::stream_alignment<T0, A>;
      if (mis % sizeof(T0) != 0) {
        stream = false;  // an element straddles the alignment: plain stores
      } else if (mis) {
        j = std::min<index_t>(n, static_cast<index_t>((simd::stream_alignment<T0, A> - mis) / sizeof(T0)));
        step(std::false_type{}, 0, static_cast<int>(j));
      }
    }
  } else {
    stream = false;
  }
  if ((std::get<I>(evs).contiguous_row() && ...))
    for (; j + W <= n; j += W) step(std::true_type{}, j, W);
  for (; j < n; j += W) step(std::false_type{}, j, static_cast<int>(std::min<index_t>(W, n - j)));
}

}  // namespace detail

template <class Mode, std::size_t Q, class... T, class... E>
void run_elementwise(std::tuple<tensor_view<T, static_cast<int>(Q)>...> outs, const std::tuple<E...>& exprs,
                     streaming_stores streaming);

namespace detail {
/// m moved by `origin` in the iteration space: node coordinates of iteration point x + origin.
template <std::size_t Q, std::size_t R>
bind::affine_map<Q, R> translated(bind::affine_map<Q, R> m, const index_array<Q>& origin) {
  for (std::size_t d = 0; d < R; ++d)
    if (m.src[d] >= 0) m.offset[d] += m.scale[d] * origin[static_cast<std::size_t>(m.src[d])];
  return m;
}
}  // namespace detail

template <class Mode, std::size_t Q, class... T, class... E>
void run_epilogue_blocks(std::tuple<tensor_view<T, static_cast<int>(Q)>...> outs, const std::tuple<E...>& exprs,
                         streaming_stores streaming);

namespace detail {

/// The evaluators of exprs over the block of the full iteration space `full` at `origin`.
template <class Mode, std::size_t Q, class Ctx, class... E>
auto bind_pass(Ctx& ctx, const std::tuple<E...>& exprs, const index_array<Q>& full, const index_array<Q>& origin) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::make_tuple(bind::bind<Mode>(
        std::get<I>(exprs),
        translated(bind::affine_map<Q, std::remove_cvref_t<std::tuple_element_t<I, std::tuple<E...>>>::rank>::broadcast(
                       std::get<I>(exprs).shape().array(), full),
                   origin),
        ctx)...);
  }(std::index_sequence_for<E...>{});
}

/// Aliasing and loop shape of a pass over outs (extents ext) with evaluators evs: plan_pass's
/// decision, which is shared by every tree of rank Q.
template <std::size_t Q, class... T, class Evs>
pass_plan<Q> plan_for(const std::tuple<tensor_view<T, static_cast<int>(Q)>...>& outs, const Evs& evs,
                      const index_array<Q>& ext) {
  small_vector<out_state<Q>, 8> os;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (os.push_back(out_state<Q>{std::get<I>(outs).data(), std::get<I>(outs).strides(), sizeof(T), nullptr, nullptr}),
     ...);
  }(std::index_sequence_for<T...>{});
  small_vector<bind::leaf_info, 16> leaves;
  std::apply(
      [&](const auto&... ev) { (ev.for_each_leaf([&](const bind::leaf_info& l) { leaves.push_back(l); }, ext), ...); },
      evs);
  // Concatenations and takes keep the iteration space as it is, even over folded leaves.
  const bool tree_folded = std::apply([](const auto&... ev) { return (ev.all_folded() && ...); }, evs);
  return plan_pass(ext, os, leaves, tree_folded);
}

}  // namespace detail

/// One pass of the loop nest over outs, which are the block of the full iteration space `full`
/// that starts at `origin` (the whole of it, at 0, except in a blocked epilogue).
template <class Mode, std::size_t Q, class Ctx, class... T, class... E>
void run_pass(Ctx& ctx, std::tuple<tensor_view<T, static_cast<int>(Q)>...> outs, const std::tuple<E...>& exprs,
              streaming_stores streaming, const index_array<Q>& full, const index_array<Q>& origin) {
  using A = simd::default_arch;
  constexpr std::size_t N = sizeof...(T);
  const index_array<Q> ext = std::get<0>(outs).shape().array();
  auto evs = detail::bind_pass<Mode, Q>(ctx, exprs, full, origin);
  const auto plan = detail::plan_for<Q>(outs, evs, ext);

  // Outputs that must not be written while their inputs are read go through a temporary.
  std::tuple<std::optional<tensor<std::remove_cv_t<T>, static_cast<int>(Q)>>...> temps;
  auto targets = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::make_tuple([&]() -> tensor_view<T, static_cast<int>(Q)> {
      if (!plan.through_temp[I]) return std::get<I>(outs);
      std::get<I>(temps).emplace(ext);
      return std::get<I>(temps)->view();
    }()...);
  }(std::index_sequence_for<T...>{});

  index_array<Q> oext = ext;
  index_array<Q> ostr[N > 0 ? N : 1];
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((ostr[I] = std::get<I>(targets).strides()), ...);
  }(std::index_sequence_for<T...>{});
  if (plan.transform) {
    oext = plan.loops.extent;
    for (auto& st : ostr) st = detail::retarget_strides(st, plan.loops.pick);
    std::apply([&](auto&... ev) { (ev.retarget(plan.loops.pick), ...); }, evs);
  }

  // --- the loop -----------------------------------------------------------------------------------------
  std::size_t out_bytes = 0;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((out_bytes += sizeof(T) * static_cast<std::size_t>(product(ext))), ...);
  }(std::index_sequence_for<T...>{});
  const bool stream = streaming == streaming_stores::on ||
                      (streaming == streaming_stores::automatic && out_bytes >= streaming_threshold_bytes);
  if constexpr (Q == 0) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((*std::get<I>(targets).data() = to_storage<std::remove_cv_t<T>>(std::get<I>(evs).at(nullptr))), ...);
    }(std::index_sequence_for<T...>{});
  } else {
    const index_t n = oext[Q - 1];
    index_t rows = 1;
    for (std::size_t k = 0; k + 1 < Q; ++k) rows *= oext[k];
    index_array<Q> x{};
    index_t inner_stride[N > 0 ? N : 1];
    for (std::size_t o = 0; o < N; ++o) inner_stride[o] = ostr[o][Q - 1];
    for (index_t r = 0; r < rows; ++r) {
      std::apply([&](auto&... ev) { (ev.row(x.data()), ...); }, evs);
      auto row_ptrs = [&]<std::size_t... I>(std::index_sequence<I...>) {
        return std::make_tuple([&] {
          index_t off = 0;
          for (std::size_t k = 0; k + 1 < Q; ++k) off += x[k] * ostr[I][k];
          return std::get<I>(targets).data() + off;
        }()...);
      }(std::index_sequence_for<T...>{});
      detail::run_row<A>(row_ptrs, inner_stride, evs, n, stream, std::index_sequence_for<T...>{});
      for (std::size_t k = Q - 1; k-- > 0;) {  // odometer over the outer axes
        if (++x[k] < oext[k]) break;
        x[k] = 0;
      }
    }
    if (stream) simd::stream_fence();
  }

  // --- temporaries back into the real outputs ---------------------------------------------------------------
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((plan.through_temp[I] ? run_elementwise<accurate_math_t, Q>(
                                 std::make_tuple(std::get<I>(outs)),
                                 std::make_tuple(std::as_const(*std::get<I>(temps)).view()), streaming_stores::off)
                           : (void)0),
     ...);
  }(std::index_sequence_for<T...>{});
}

/// Evaluates exprs into outs (all of rank Q and one shape) in one loop nest. A tree with
/// contractions among its leaves runs as a blocked epilogue (fuse/cpu/epilogue.hpp).
template <class Mode, std::size_t Q, class... T, class... E>
void run_elementwise(std::tuple<tensor_view<T, static_cast<int>(Q)>...> outs, const std::tuple<E...>& exprs,
                     streaming_stores streaming) {
  const index_array<Q> ext = std::get<0>(outs).shape().array();
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((std::get<I>(outs).shape().array() == ext ? (void)0
                                               : throw_shape_error("eval: outputs of one pass must share a shape; got ",
                                                                   ext, " and ", std::get<I>(outs).shape().array())),
     ...);
    ((broadcastable_to(std::get<I>(exprs).shape().array(), ext)
          ? (void)0
          : throw_shape_error("eval: the expression of shape ", std::get<I>(exprs).shape().array(),
                              " does not fit the output of shape ", ext)),
     ...);
  }(std::index_sequence_for<T...>{});
  if (product(ext) == 0) return;
  if constexpr ((has_contraction_leaf<E>() || ...)) {
    run_epilogue_blocks<Mode, Q>(outs, exprs, streaming);
  } else {
    context<Mode> ctx;
    run_pass<Mode, Q>(ctx, outs, exprs, streaming, ext, index_array<Q>{});
  }
}

}  // namespace cpu

namespace detail {

template <class Out, class Expr, class... Opt>
void eval_one(Out&& out_, Expr&& expr_, const Opt&... opt) {
  auto out = as_output(static_cast<Out&&>(out_));
  auto&& expr = as_node(static_cast<Expr&&>(expr_));  // the tree lives until eval returns
  using O = decltype(out);
  using E = std::remove_cvref_t<decltype(expr)>;
  static_assert(output_dtype_matches_expression<typename O::value_type, typename E::value_type>,
                "fuse::eval: the output's dtype differs from the expression's (the note names both); "
                "convert with fuse::cast<T>(...)");
  static_assert(static_expression_shape_fits_output<typename O::shape_type, typename E::shape_type>,
                "fuse::eval: the expression's static shape does not broadcast to the output's");
  static_assert(E::rank <= O::rank, "fuse::eval: the expression has a higher rank than the output");
  constexpr std::size_t Q = O::rank;
  using Mode = math_mode_t<Opt...>;
  if constexpr (cpu::root_kernel_node<E>) {
    cpu::run_root<Mode, typename O::element_type, Q>(tensor_view<typename O::element_type, static_cast<int>(Q)>(out),
                                                     expr);
  } else {
    cpu::run_elementwise<Mode, Q>(std::make_tuple(tensor_view<typename O::element_type, static_cast<int>(Q)>(out)),
                                  std::tuple<const E&>(expr), fuse::detail::streaming_of(opt...));
  }
}

}  // namespace detail

/// Evaluates `expr` into `out` in one pass. Options: fuse::fast_math, fuse::streaming_stores::on/off.
template <class Out, class Expr, class... Opt>
  requires(!is_outputs<std::remove_cvref_t<Out>> && (is_eval_option<std::remove_cvref_t<Opt>> && ...) &&
           !is_eval_option<std::remove_cvref_t<Expr>>)
void eval(Out&& out, Expr&& expr, const Opt&... opt) {
  detail::eval_one(static_cast<Out&&>(out), static_cast<Expr&&>(expr), opt...);
}

/// Evaluates one expression per output, all in the same pass (trailing options allowed).
template <class... O, class... Args>
void eval(outputs_t<O...> outs, Args&&... args) {
  constexpr std::size_t N = sizeof...(O);
  static_assert(sizeof...(Args) >= N, "fuse::eval: give one expression per output");
  auto all = std::forward_as_tuple(static_cast<Args&&>(args)...);
  [&]<std::size_t... I, std::size_t... J>(std::index_sequence<I...>, std::index_sequence<J...>) {
    static_assert((is_eval_option<std::remove_cvref_t<std::tuple_element_t<N + J, std::tuple<Args...>>>> && ...),
                  "fuse::eval: after the expressions only options may follow");
    using Mode = math_mode_t<std::tuple_element_t<N + J, std::tuple<Args...>>...>;
    auto exprs = std::make_tuple(as_expr(std::get<I>(all))...);
    constexpr std::size_t Q = std::tuple_element_t<0, std::tuple<O...>>::rank;
    static_assert(((O::rank == Q) && ...), "fuse::eval: outputs of one pass must have the same rank");
    static_assert((output_dtype_matches_expression<typename O::value_type,
                                                   typename std::tuple_element_t<I, decltype(exprs)>::value_type> &&
                   ...),
                  "fuse::eval: an output's dtype differs from its expression's; convert with fuse::cast<T>(...)");
    cpu::run_elementwise<Mode, Q>(
        std::make_tuple(tensor_view<typename O::element_type, static_cast<int>(Q)>(std::get<I>(outs.views))...), exprs,
        fuse::detail::streaming_of(std::get<N + J>(all)...));
  }(std::make_index_sequence<N>{}, std::make_index_sequence<sizeof...(Args) - N>{});
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

namespace cpu {
/// bind()'s context on the CPU: nodes that need their own kernel are evaluated into storage.
template <class Mode>
struct context {
  template <class N>
  auto materialize(const N& n) {
    tensor<typename N::value_type, static_cast<int>(N::rank)> t(dynamic_shape<N::rank>(n.shape()));
    fuse::detail::eval_one(t, n, Mode{});
    return t;
  }
};
}  // namespace cpu

}  // namespace fuse

#include "fuse/cpu/contract.hpp"
#include "fuse/cpu/epilogue.hpp"
#include "fuse/cpu/reduce.hpp"

namespace fuse::cpu {
/// The kernel of a node evaluated on its own: a contraction, a reduction or a row op.
template <class Mode, class T, std::size_t Q, class N>
  requires root_kernel_node<N>
void run_root(tensor_view<T, static_cast<int>(Q)> out, const N& node) {
  if constexpr (is_contract_expr<N>::value) run_contract<Mode, T, Q>(out, node);
  else if constexpr (requires {
                       N::kind;
                       node.reduced;
                     })
    run_reduce<Mode, T, Q>(out, node);
  else if constexpr (requires { node.gamma; }) run_layer_norm<Mode, T, Q>(out, node);
  else run_softmax<Mode, T, Q>(out, node);
}

}  // namespace fuse::cpu
