// The CPU's lane family: how the evaluators of fuse/bind/evaluators.hpp load whole SIMD vectors
// on the CPU. `ev.load<cpu::simd_lanes<A>>(j, n)` gives elements j .. j+n-1 of the current row
// as one xsimd vector of architecture A (n <= width; lanes past n unspecified); each node kind
// decides its own access in its evaluator, and this file only supplies the vocabulary: vectors
// per compute type, loads of every storage dtype (contiguous, partial, strided), splats, lanes
// gathered one by one, an op applied to vectors (its vector form for these lanes, else its scalar
// form lane by lane) and casts. The executor instantiates two forms of a tree, load<L, true>
// (rows whose leaves are all contiguous: plain vector loads, no test at all) and load<L>, so a
// tree's code appears twice per evaluation, not once per case.
#pragma once

#include <type_traits>

#include "fuse/bind/evaluators.hpp"
#include "fuse/simd/convert_simd.hpp"
#include "fuse/simd/math_batch.hpp"
#include "fuse/simd/memory.hpp"
#include "fuse/simd/vec.hpp"

namespace fuse::cpu {

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

/// The lane family of the CPU executor on xsimd architecture A (see fuse/bind/evaluators.hpp
/// for what a lane family provides).
template <class A>
struct simd_lanes {
  template <class C>
  using vec = simd::vec<C, A>;
  static constexpr int width = simd::width<A>;

  template <class S>
  static FUSE_FORCE_INLINE vec<compute_t<S>> load(const S* p) {
    return simd::load<S, A>(p);
  }
  template <class S>
  static FUSE_FORCE_INLINE vec<compute_t<S>> load_partial(const S* p, int n) {
    return simd::load_partial<S, A>(p, n);
  }
  template <class S>
  static FUSE_FORCE_INLINE vec<compute_t<S>> load_strided(const S* p, index_t stride, int n) {
    return simd::load_strided<S, A>(p, stride, n);
  }
  template <class C>
  static FUSE_FORCE_INLINE vec<C> splat(C x) {
    return lanes<vec<C>>::splat(x);
  }
  template <class C>
  static FUSE_FORCE_INLINE vec<C> from_array(const C* lanes_) {
    return simd::lane_io<C, A>::load(lanes_);
  }
  /// op over vectors, brought to the values of dtype T (canonical).
  template <class Mode, class T, class Op, class... V>
  static FUSE_FORCE_INLINE vec<compute_t<T>> map(const Op& op, const V&... v) {
    return simd::canonical<T, A>(invoke<Mode, A>(op, v...));
  }
  template <class To, class From, class V>
  static FUSE_FORCE_INLINE vec<compute_t<To>> cast(const V& v) {
    return simd::convert<To, From, A>(v);
  }
};

}  // namespace fuse::cpu
