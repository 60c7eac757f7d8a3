// Moving elements between memory (any storage dtype) and vectors (their compute type):
// contiguous, partial (the first n lanes: loop tails), strided (gather/scatter) and streaming
// (non-temporal) loads and stores. Narrow types widen on load and narrow on store: int8/uint8
// through int32, float16/bfloat16 through float, bool through the float mask.
//
// CPU only. Partial and strided accesses never touch memory beyond the n elements asked for.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fuse/core/dtype.hpp"
#include "fuse/simd/half_convert.hpp"
#include "fuse/simd/vec.hpp"

namespace fuse::simd {

// ---- lane arrays <-> vectors (the generic path, and the lane-by-lane fallback) ----------------------

/// vec<C, A> from / to an array of width<A> values of C.
template <class C, class A>
struct lane_io {
  using V = vec<C, A>;
  static V load(const C* p) {
    if constexpr (std::is_same_v<C, bool>) {
      return V::load_unaligned(p);
    } else if constexpr (std::is_same_v<C, double> || std::is_same_v<C, std::int64_t>) {
      using B = xsimd::batch<C, A>;
      return V{B::load_unaligned(p), B::load_unaligned(p + B::size)};
    } else {
      return V::load_unaligned(p);
    }
  }
  static void store(C* p, const V& v) {
    if constexpr (std::is_same_v<C, double> || std::is_same_v<C, std::int64_t>) {
      v.lo.store_unaligned(p);
      v.hi.store_unaligned(p + xsimd::batch<C, A>::size);
    } else {
      v.store_unaligned(p);
    }
  }
};

/// Applies scalar `f` lane by lane: the fallback for ops with no vector form on these lanes.
template <class A, class R, class F, class... V>
vec<R, A> lanewise(F&& f, const V&... v) {
  constexpr int W = width<A>;
  R out[W];
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    std::tuple<std::array<lane_t<V>, W>...> in;
    (lane_io<lane_t<V>, A>::store(std::get<I>(in).data(), v), ...);
    for (int i = 0; i < W; ++i) out[i] = f(std::get<I>(in)[static_cast<std::size_t>(i)]...);
  }(std::index_sequence_for<V...>{});
  return lane_io<R, A>::load(out);
}

// ---- contiguous loads and stores, per storage dtype -------------------------------------------------

namespace detail {
template <class A>
inline constexpr bool is_avx512 = std::is_base_of_v<xsimd::avx512f, A>;
template <class A>
inline constexpr bool is_avx2 = std::is_base_of_v<xsimd::avx2, A> && !is_avx512<A>;
}  // namespace detail

/// width<A> elements of T at p, as compute values.
template <class T, class A>
vec<compute_t<T>, A> load(const T* p) {
  using S = std::remove_cv_t<T>;
  using C = compute_t<S>;
  if constexpr (std::is_same_v<S, C>) {
    return lane_io<C, A>::load(p);
  } else if constexpr (std::is_same_v<S, half>) {
    return load_half<A>(p);
  } else if constexpr (std::is_same_v<S, bfloat16>) {
    return load_bf16<A>(p);
  } else {
    static_assert(std::is_same_v<S, std::int8_t> || std::is_same_v<S, std::uint8_t>);
#if defined(__AVX512F__)
    if constexpr (detail::is_avx512<A>) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      if constexpr (std::is_same_v<S, std::int8_t>) return _mm512_cvtepi8_epi32(b);
      else return _mm512_cvtepu8_epi32(b);
    } else
#endif
#if defined(__AVX2__)
        if constexpr (detail::is_avx2<A>) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
      if constexpr (std::is_same_v<S, std::int8_t>) return _mm256_cvtepi8_epi32(b);
      else return _mm256_cvtepu8_epi32(b);
    } else
#endif
    {
      std::int32_t w[width<A>];
      for (int i = 0; i < width<A>; ++i) w[i] = p[i];
      return lane_io<std::int32_t, A>::load(w);
    }
  }
}

/// Stores width<A> compute values (already canonical for T) as T at p.
template <class T, class A>
void store(T* p, const vec<compute_t<T>, A>& v) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, C>) {
    lane_io<C, A>::store(p, v);
  } else if constexpr (std::is_same_v<T, half>) {
    store_half(p, v);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    store_bf16(p, v);
  } else {
    static_assert(std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>);
#if defined(__AVX512F__)
    if constexpr (detail::is_avx512<A>) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v));
      return;
    }
#endif
#if defined(__AVX2__)
    if constexpr (detail::is_avx2<A>) {
      // The low byte of each 32-bit lane (the values are canonical: in T's range), gathered
      // within each 128-bit half, then the halves' four bytes side by side (through memory
      // one byte at a time, this was 7% of seed 002's quantizing passes).
      const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8,
                                                 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
      const __m256i s = _mm256_shuffle_epi8(v, low_bytes);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p),
                       _mm_unpacklo_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)));
      return;
    }
#endif
    std::int32_t w[width<A>];
    lane_io<std::int32_t, A>::store(w, v);
    for (int i = 0; i < width<A>; ++i) p[i] = to_storage<T>(w[i]);
  }
}

// ---- partial, strided, streaming ----------------------------------------------------------------------

/// The first n (< width) elements at p; the other lanes hold zero.
template <class T, class A>
vec<compute_t<T>, A> load_partial(const T* p, int n) {
  using S = std::remove_cv_t<T>;
#if defined(__AVX512F__)
  if constexpr (detail::is_avx512<A> && std::is_same_v<S, float>) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
  }
#endif
  S buf[width<A>] = {};
  std::memcpy(static_cast<void*>(buf), p, sizeof(S) * static_cast<std::size_t>(n));
  return load<S, A>(buf);
}

/// Stores the first n (< width) lanes of v at p.
template <class T, class A>
void store_partial(T* p, const vec<compute_t<T>, A>& v, int n) {
#if defined(__AVX512F__)
  if constexpr (detail::is_avx512<A> && std::is_same_v<T, float>) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), v);
    return;
  }
#endif
  T buf[width<A>];
  store<T, A>(buf, v);
  std::memcpy(static_cast<void*>(p), buf, sizeof(T) * static_cast<std::size_t>(n));
}

/// n elements p[0], p[stride], p[2*stride], ... (lanes past n hold zero).
template <class T, class A>
vec<compute_t<T>, A> load_strided(const T* p, index_t stride, int n = width<A>) {
  using S = std::remove_cv_t<T>;
  S buf[width<A>] = {};
  for (int i = 0; i < n; ++i) buf[i] = p[i * stride];
  return load<S, A>(buf);
}

template <class T, class A>
void store_strided(T* p, index_t stride, const vec<compute_t<T>, A>& v, int n = width<A>) {
  T buf[width<A>];
  store<T, A>(buf, v);
  for (int i = 0; i < n; ++i) p[i * stride] = buf[i];
}

/// Bytes a streaming store must be aligned to (0: this dtype/arch has none, use `store`).
template <class T, class A>
inline constexpr std::size_t stream_alignment = std::is_same_v<T, float> ? (detail::is_avx512<A>               ? 64
                                                                            : std::is_base_of_v<xsimd::avx, A> ? 32
                                                                                                               : 16)
                                                                         : 0;

/// Non-temporal store of a full vector to p (aligned to stream_alignment): the line goes to
/// memory without being read first, which saves a third of the traffic of a streaming loop.
template <class T, class A>
void stream(T* p, const vec<compute_t<T>, A>& v) {
  if constexpr (stream_alignment<T, A> == 0) {
    store<T, A>(p, v);
  } else {
#if defined(__AVX512F__)
    if constexpr (detail::is_avx512<A>) {
      _mm512_stream_ps(p, v);
      return;
    } else
#endif
#if defined(__AVX__)
        if constexpr (std::is_base_of_v<xsimd::avx, A>) {
      _mm256_stream_ps(p, v);
      return;
    } else
#endif
    {
      _mm_stream_ps(p, v);
    }
  }
}

/// Orders streaming stores before whatever follows (call once after a streaming loop).
inline void stream_fence() { _mm_sfence(); }

}  // namespace fuse::simd
