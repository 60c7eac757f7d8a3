// The pass driver of the CPU executor: one loop nest over the outputs of one pass.
//
//   1. bind: the trees become evaluators over the outputs' coordinates (fuse/bind), with a
//      context that supplies the leaves the binder cannot make itself (nodes with kernels of
//      their own, contraction blocks): the pass driver knows no kernel.
//   2. aliasing: an output that shares memory with a leaf read through the very same
//      addresses is updated in place (x = f(x)); any other overlap (x = transpose(x)) sends the
//      results through a temporary first, so the answer is always right.
//   3. loop shape: when every leaf folded into strides, axes of extent 1 are dropped, the axes
//      are ordered by the output's strides and merged wherever every operand allows (a
//      contiguous tree becomes one flat loop; a row plus a broadcast bias stays two).
//   4. the loop: rows over the outer axes, the inner axis in SIMD vectors (partial vector at
//      the tail, never a scalar loop), streaming stores for outputs too big for the cache.
//
// Layering of fuse/cpu: this file depends on bind/, simd/ and core/ only; the kernels
// (gemm*.hpp, contract.hpp, reduce.hpp) and the blocked epilogue (epilogue.hpp) sit above it,
// and eval.hpp, the public entry, on top of all of them. Nothing includes upward: where a lower
// layer must evaluate a whole subtree (an expression operand of a GEMM, a reduction's gamma),
// it asks the executor context it was handed (eval.hpp's cpu::context).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fuse/bind/aliasing.hpp"
#include "fuse/bind/bind.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/small_vector.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/cpu/options.hpp"
#include "fuse/cpu/vector_access.hpp"
#include "fuse/expr/node.hpp"

namespace fuse::cpu {

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

template <std::size_t Q>
using out_state = bind::written_range<Q>;

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
  plan.through_temp = bind::outputs_read_elsewhere(outs, leaves, ext, "eval");
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
    const auto vs = std::make_tuple(std::get<I>(evs).template load<simd_lanes<A>, Fast>(j, m)...);
    (store_vec<A>(std::get<I>(rows) + j * ostr[I], ostr[I], std::get<I>(vs), m, stream), ...);
  };
  // The general step has one call site (the head that aligns streaming stores, then the tail):
  // the tree's code is inlined once per kind of load, not once per loop (compile time).
  index_t head = 0;
  if constexpr (simd::stream_alignment<T0, A> != 0) {
    if (stream && ostr[0] == 1) {
      const auto mis = reinterpret_cast<std::uintptr_t>(std::get<0>(rows)) % simd::stream_alignment<T0, A>;
      if (mis % sizeof(T0) != 0) {
        stream = false;  // an element straddles the alignment: plain stores
      } else if (mis) {
        head = std::min<index_t>(n, static_cast<index_t>((simd::stream_alignment<T0, A> - mis) / sizeof(T0)));
      }
    }
  } else {
    stream = false;
  }
  const bool fast = (std::get<I>(evs).contiguous_row() && ...);
  index_t j = 0;
  for (index_t end = head;; end = n) {
    while (j < end) {
      const int m = static_cast<int>(std::min<index_t>(W, end - j));
      step(std::false_type{}, j, m);
      j += m;
    }
    if (end == n) break;
    if (fast)
      for (; j + W <= n; j += W) step(std::true_type{}, j, W);
  }
}

/// m moved by `origin` in the iteration space: node coordinates of iteration point x + origin.
template <std::size_t Q, std::size_t R>
bind::affine_map<Q, R> translated(bind::affine_map<Q, R> m, const index_array<Q>& origin) {
  for (std::size_t d = 0; d < R; ++d)
    if (m.src[d] >= 0) m.offset[d] += m.scale[d] * origin[static_cast<std::size_t>(m.src[d])];
  return m;
}

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
    (os.push_back(out_state<Q>::of(std::get<I>(outs).data(), ext, std::get<I>(outs).strides())), ...);
  }(std::index_sequence_for<T...>{});
  const auto leaves = std::apply([&](const auto&... ev) { return bind::leaves_of(ext, ev...); }, evs);
  // Concatenations and takes keep the iteration space as it is, even over folded leaves.
  const bool tree_folded = std::apply([](const auto&... ev) { return (ev.all_folded() && ...); }, evs);
  return plan_pass(ext, os, leaves, tree_folded);
}

/// The leaves of a pass whose rows are short runs far apart in memory (attention's heads read
/// through their transpose: 64 floats every 3 KB), which the hardware prefetchers do not
/// follow: each row's loads would wait on memory in turn. The row loop asks for the rows of
/// these leaves `ahead` rows before it reads them. (V^T quantized from [8, 384, 12, 64], one
/// head at a time: 7.4 -> 2.5 ms on a Zen 3 core.)
template <std::size_t Q>
struct row_prefetch {
  struct leaf {
    const char* base;
    index_array<Q> step;  ///< bytes per step of each outer axis
  };
  small_vector<leaf, 8> leaves;
  index_t lines = 0;   ///< cache lines per row, the most of any leaf
  index_t ahead = 0;   ///< rows
  index_array<Q> x{};  ///< the outer coordinates of the row `ahead` rows on

  /// The leaves (extents ext, after the loop's retargeting) that need it, rows of n elements.
  template <class... Ev>
  row_prefetch(const index_array<Q>& ext, index_t n, index_t rows, const Ev&... ev) {
    if constexpr (Q >= 2) {
      if (rows < 16) return;
      index_t row_bytes = 0;
      const auto infos = bind::leaves_of(ext, ev...);
      for (std::size_t l = 0; l < infos.size(); ++l) {
        const bind::leaf_info& f = infos[l];
        const auto e = static_cast<index_t>(f.elem_size);
        // contiguous rows that do not continue one another (else the hardware streams them), of
        // under a page, from a leaf larger than the core's cache
        if (!f.folded || f.stride[Q - 1] != 1 || n * e > 4096) continue;
        const index_t next = f.stride[Q - 2] * e;
        if (next == n * e || next == 0 ||
            static_cast<std::size_t>(static_cast<const char*>(f.hi) - static_cast<const char*>(f.lo)) < (1u << 20))
          continue;
        leaf p{static_cast<const char*>(f.base), {}};
        for (std::size_t k = 0; k < Q; ++k) p.step[k] = f.stride[k] * e;
        leaves.push_back(p);
        row_bytes = std::max(row_bytes, n * e);
      }
      if (leaves.size() == 0) return;
      lines = (row_bytes + 63) / 64 + 1;  // (a row need not start on a line)
      ahead = std::clamp<index_t>(2048 / row_bytes, 4, 16);
      for (index_t r = 0; r < ahead; ++r) next_row(ext);
    }
  }
  explicit operator bool() const { return leaves.size() != 0; }
  /// Prefetches the rows `ahead` rows on and moves on by one row.
  void step(const index_array<Q>& ext) {
    if (x[0] < ext[0]) {
      for (std::size_t l = 0; l < leaves.size(); ++l) {
        const char* p = leaves[l].base;
        for (std::size_t k = 0; k + 1 < Q; ++k) p += x[k] * leaves[l].step[k];
        for (index_t i = 0; i < lines; ++i) __builtin_prefetch(p + i * 64);
      }
    }
    next_row(ext);
  }

 private:
  void next_row(const index_array<Q>& ext) {
    for (std::size_t k = Q - 1; k-- > 0;) {
      if (++x[k] < ext[k]) return;
      if (k == 0) return;  // past the last row: x[0] == ext[0] stops the prefetches
      x[k] = 0;
    }
  }
};

/// A bind context for trees whose leaves are all tensors and views (copies): there is nothing
/// to materialise.
struct leaves_only_context {
  template <class N>
  auto materialize(const N&) {
    static_assert(sizeof(N) == 0, "fuse: leaves_only_context is for trees without nodes that need a kernel");
    return 0;
  }
};

}  // namespace detail

template <class Mode, std::size_t Q, class Ctx, class... T, class... E>
void run_pass(Ctx& ctx, std::tuple<tensor_view<T, static_cast<int>(Q)>...> outs, const std::tuple<E...>& exprs,
              streaming_stores streaming, const index_array<Q>& full, const index_array<Q>& origin);

/// dst = src, element for element (one shape, no overlap): how results that went through a
/// temporary reach their real outputs.
template <std::size_t Q, class T, class S>
void copy_view(tensor_view<T, static_cast<int>(Q)> dst, tensor_view<S, static_cast<int>(Q)> src,
               streaming_stores streaming = streaming_stores::off) {
  const index_array<Q> ext = dst.shape().array();
  if (product(ext) == 0) return;
  detail::leaves_only_context ctx;
  run_pass<accurate_math_t, Q>(ctx, std::make_tuple(dst), std::make_tuple(src), streaming, ext, index_array<Q>{});
}

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
      std::get<I>(temps).emplace(dynamic_shape<Q>(ext), uninitialized);
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
    detail::row_prefetch<Q> prefetch =
        std::apply([&](const auto&... ev) { return detail::row_prefetch<Q>(oext, n, rows, ev...); }, evs);
    for (index_t r = 0; r < rows; ++r) {
      if (prefetch) prefetch.step(oext);
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
    ((plan.through_temp[I] ? copy_view<Q>(std::get<I>(outs), std::as_const(*std::get<I>(temps)).view()) : (void)0),
     ...);
  }(std::index_sequence_for<T...>{});
}

}  // namespace fuse::cpu
