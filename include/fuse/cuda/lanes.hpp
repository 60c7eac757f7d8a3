// The CUDA executor's lane family (the protocol of fuse/bind/evaluators.hpp: vec, width, loads,
// splat, from_array, map, cast): four consecutive elements of a row held by one thread, so that a
// contiguous row of float or int32 is read and written with 16-byte accesses (8 bytes for the
// 16-bit types). Every lane is computed by the op's scalar form, exactly as get(j) computes it,
// so the vector path gives the scalar path's bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "fuse/bind/evaluators.hpp"
#include "fuse/core/dtype.hpp"
#include "fuse/expr/convert.hpp"
#include "fuse/expr/ops.hpp"

namespace fuse::cuda {

/// Four lanes of compute type C.
template <class C>
struct vec4 {
  C v[4];
};

namespace detail {

/// Four elements of S in one aligned access: the compiler makes one vector load or store of it.
template <class S>
struct alignas(4 * sizeof(S)) packed4 {
  S s[4];
};

template <class S>
FUSE_HD FUSE_FORCE_INLINE bool aligned4(const S* p) {
  return reinterpret_cast<std::uintptr_t>(p) % (4 * sizeof(S)) == 0;
}

}  // namespace detail

struct device_lanes {
  template <class C>
  using vec = vec4<C>;
  static constexpr int width = 4;

  /// Elements p[0..3]: one vector access when p is aligned for it, else four.
  template <class S>
  static FUSE_HD FUSE_FORCE_INLINE vec<compute_t<S>> load(const S* p) {
    vec<compute_t<S>> r;
    if (detail::aligned4(p)) {
      const auto q = *reinterpret_cast<const detail::packed4<S>*>(p);
      for (int k = 0; k < 4; ++k) r.v[k] = to_compute<S>(q.s[k]);
    } else {
      for (int k = 0; k < 4; ++k) r.v[k] = to_compute<S>(p[k]);
    }
    return r;
  }
  template <class S>
  static FUSE_HD FUSE_FORCE_INLINE vec<compute_t<S>> load_partial(const S* p, int n) {
    vec<compute_t<S>> r{};
    for (int k = 0; k < n; ++k) r.v[k] = to_compute<S>(p[k]);
    return r;
  }
  template <class S>
  static FUSE_HD FUSE_FORCE_INLINE vec<compute_t<S>> load_strided(const S* p, index_t stride, int n) {
    vec<compute_t<S>> r{};
    for (int k = 0; k < n; ++k) r.v[k] = to_compute<S>(p[k * stride]);
    return r;
  }
  template <class C>
  static FUSE_HD FUSE_FORCE_INLINE vec<C> splat(C x) {
    return vec<C>{{x, x, x, x}};
  }
  template <class C>
  static FUSE_HD FUSE_FORCE_INLINE vec<C> from_array(const C* lanes_) {
    return vec<C>{{lanes_[0], lanes_[1], lanes_[2], lanes_[3]}};
  }
  /// op lane by lane, each lane as map_eval::get computes it (brought to T's values).
  template <class Mode, class T, class Op, class... V>
  static FUSE_HD FUSE_FORCE_INLINE vec<compute_t<T>> map(const Op& op, const V&... v) {
    vec<compute_t<T>> r;
    for (int k = 0; k < 4; ++k)
      r.v[k] = canonical<T>(static_cast<compute_t<T>>(bind::apply_scalar<Mode>(op, v.v[k]...)));
    return r;
  }
  template <class To, class From, class V>
  static FUSE_HD FUSE_FORCE_INLINE vec<compute_t<To>> cast(const V& v) {
    vec<compute_t<To>> r;
    for (int k = 0; k < 4; ++k) r.v[k] = convert_value<To, From>(v.v[k]);
    return r;
  }

  /// Stores the four lanes at p (values of T): one vector access when p is aligned for it.
  template <class T, class C>
  static FUSE_HD FUSE_FORCE_INLINE void store(T* p, const vec<C>& x) {
    if (detail::aligned4(p)) {
      detail::packed4<T> q;
      for (int k = 0; k < 4; ++k) q.s[k] = to_storage<T>(x.v[k]);
      *reinterpret_cast<detail::packed4<T>*>(p) = q;
    } else {
      for (int k = 0; k < 4; ++k) p[k] = to_storage<T>(x.v[k]);
    }
  }
};

}  // namespace fuse::cuda
