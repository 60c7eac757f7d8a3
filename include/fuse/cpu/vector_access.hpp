// Whole-vector evaluation of an evaluator tree on the CPU: `vaccess<Ev>::load<A>(ev, j, n)`
// gives elements j .. j+n-1 of the current row as one vector (n <= width; lanes past n are
// unspecified); each leaf picks its access (contiguous, splat, gather, partial, per lane).
// `load<A, true>(ev, j, width)` is the fast form for rows where every leaf is contiguous
// (ev.contiguous_row()): plain vector loads, no test at all. The executor instantiates these
// two forms only, so a tree's code appears twice per evaluation, not once per case.
//
// Leaves load contiguous memory when their inner stride is 1, splat when it is 0 and gather
// otherwise; elementwise nodes apply their op to their children's vectors (lane by lane, with
// the op's scalar form, when the op has no vector form for those lanes); nodes without a vector
// form of their own fall back to `get` per lane.
#pragma once

#include <type_traits>

#include "fuse/bind/evaluators.hpp"
#include "fuse/simd/convert_simd.hpp"
#include "fuse/simd/math_batch.hpp"
#include "fuse/simd/memory.hpp"
#include "fuse/simd/vec.hpp"

namespace fuse::cpu {

template <class Ev>
struct vaccess;

template <class Ev, class A>
using vec_of = simd::vec<typename Ev::compute_type, A>;

/// Applies op to vectors: its vector form when it has one for these lanes, else its scalar form
/// lane by lane.
template <class Mode, class A, class Op, class... V>
FUSE_FORCE_INLINE auto invoke(const Op& op, const V&... v) {
  if constexpr (requires { op.template apply<Mode>(v...); }) {
    return op.template apply<Mode>(v...);
  } else {
    using R = decltype(bind::apply_scalar<Mode>(op, lane_t<V>{}...));
    return simd::lanewise<A, R>([&](lane_t<V>... s) { return op.template apply<Mode>(s...); }, v...);
  }
}

/// Evaluates lanes one by one through `get`: for nodes with no vector form (take, unfoldable
/// leaves, concatenations whose children change inside the vector).
template <class A, class Ev>
vec_of<Ev, A> load_by_lanes(const Ev& ev, index_t j, int n) {
  using C = typename Ev::compute_type;
  C lanes_[simd::width<A>] = {};
  for (int i = 0; i < n; ++i) lanes_[i] = ev.get(j + i);
  return simd::lane_io<C, A>::load(lanes_);
}

template <class Ev>
struct vaccess {
  template <class A, bool Fast = false>
  static vec_of<Ev, A> load(const Ev& ev, index_t j, int n) {
    return load_by_lanes<A>(ev, j, n);
  }
};

template <class T, std::size_t Q, class Map>
struct vaccess<bind::leaf_eval<T, Q, Map>> {
  using Ev = bind::leaf_eval<T, Q, Map>;
  using S = std::remove_cv_t<T>;
  template <class A, bool Fast = false>
  FUSE_FORCE_INLINE static vec_of<Ev, A> load(const Ev& ev, index_t j, int n) {
    if constexpr (Fast) return simd::load<S, A>(ev.row_ptr + j);
    if (FUSE_LIKELY(ev.all_folded() && ev.inner == 1 && n == simd::width<A>)) return simd::load<S, A>(ev.row_ptr + j);
    return other<A>(ev, j, n);
  }

 private:
  template <class A>
  FUSE_FORCE_INLINE static vec_of<Ev, A> other(const Ev& ev, index_t j, int n) {
    if (!ev.all_folded()) return general<A>(ev, j, n);
    return strided<A>(ev.row_ptr + j * ev.inner, ev.inner, n);
  }
  template <class A>
  static vec_of<Ev, A> strided(const T* p, index_t stride, int n) {
    using L = lanes<vec_of<Ev, A>>;
    if (stride == 1) return n == simd::width<A> ? simd::load<S, A>(p) : simd::load_partial<S, A>(p, n);
    if (stride == 0) return L::splat(to_compute<S>(*p));
    return simd::load_strided<S, A>(p, stride, n);
  }
  /// A leaf whose map did not fold: whole vectors while they fit in the current run.
  template <class A>
  static vec_of<Ev, A> general(const Ev& ev, index_t j, int n) {
    ev.ensure_run(j);
    if (j + n <= ev.run_end) return strided<A>(ev.run_ptr + (j - ev.run_begin) * ev.run_stride, ev.run_stride, n);
    return load_by_lanes<A>(ev, j, n);
  }
};

template <class T, std::size_t Q, class Map, auto E>
struct vaccess<bind::owned_leaf_eval<T, Q, Map, E>> : vaccess<bind::leaf_eval<T, Q, Map>> {};

template <class T, std::size_t Q>
struct vaccess<bind::scalar_eval<T, Q>> {
  using Ev = bind::scalar_eval<T, Q>;
  template <class A, bool Fast = false>
  FUSE_FORCE_INLINE static vec_of<Ev, A> load(const Ev& ev, index_t, int) {
    return lanes<vec_of<Ev, A>>::splat(ev.value);
  }
};

template <class Mode, class Op, class T, class... Ch>
struct vaccess<bind::map_eval<Mode, Op, T, Ch...>> {
  using Ev = bind::map_eval<Mode, Op, T, Ch...>;
  template <class A, bool Fast = false>
  FUSE_FORCE_INLINE static vec_of<Ev, A> load(const Ev& ev, index_t j, int n) {
    return apply<A>(ev, [&](const auto& c) FUSE_LAMBDA_INLINE {
      return vaccess<std::remove_cvref_t<decltype(c)>>::template load<A, Fast>(c, j, n);
    });
  }

 private:
  template <class A, class F>
  FUSE_FORCE_INLINE static vec_of<Ev, A> apply(const Ev& ev, F&& child_vec) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) FUSE_LAMBDA_INLINE -> vec_of<Ev, A> {
      if constexpr (ops::is_cast<Op>) {
        using From = typename std::tuple_element_t<0, std::tuple<Ch...>>::value_type;
        return simd::convert<typename Op::to, From, A>(child_vec(fuse::get<0>(ev.ch)));
      } else {
        return simd::canonical<T, A>(invoke<Mode, A>(ev.op, child_vec(fuse::get<I>(ev.ch))...));
      }
    }(std::index_sequence_for<Ch...>{});
  }
};

template <class T, std::size_t Q, class Map, class... Ch>
struct vaccess<bind::concat_eval<T, Q, Map, Ch...>> {
  using Ev = bind::concat_eval<T, Q, Map, Ch...>;
  template <class A, bool Fast = false>
  static vec_of<Ev, A> load(const Ev& ev, index_t j, int n) {
    const int first = ev.child_at(j);
    // Along the row the concatenated axis moves monotonically under an affine map, so equal
    // children at both ends mean one child throughout; under a reshape it may not.
    if (ev.row_child < 0 && (!bind::is_affine_map<Map>::value || ev.child_at(j + n - 1) != first))
      return load_by_lanes<A>(ev, j, n);
    vec_of<Ev, A> r{};
    [&]<std::size_t... I>(std::index_sequence<I...>) FUSE_LAMBDA_INLINE {
      ((static_cast<int>(I) == first
            ? (void)(r = vaccess<std::remove_cvref_t<decltype(fuse::get<I>(ev.ch))>>::template load<A>(
                         fuse::get<I>(ev.ch), j, n))
            : (void)0),
       ...);
    }(std::index_sequence_for<Ch...>{});
    return r;
  }
};

}  // namespace fuse::cpu
