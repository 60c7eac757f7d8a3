// Vector forms of the dtype rules in fuse/expr/convert.hpp (cast) and core/dtype.hpp
// (canonical): bit-identical to the scalar forms, which are the fallback for every pair of
// dtypes without a fast path here.
//
// CPU only.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "fuse/core/dtype.hpp"
#include "fuse/expr/convert.hpp"
#include "fuse/simd/memory.hpp"
#include "fuse/simd/vec.hpp"

namespace fuse::simd {

/// The vector counterpart of fuse::canonical<T>: brings compute lanes to values of dtype T.
template <class T, class A>
vec<compute_t<T>, A> canonical(const vec<compute_t<T>, A>& v) {
  using S = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<S, half>) {
    return round_to_half(v);
  } else if constexpr (std::is_same_v<S, bfloat16>) {
    return round_to_bf16(v);
  } else if constexpr (std::is_same_v<S, std::int8_t>) {
    // ((v + 128) mod 256) - 128 is the two's-complement wrap to 8 bits (and avoids xsimd's
    // variable shifts, which do not compile for every AVX-512 flavour).
    using I = xsimd::batch<std::int32_t, A>;
    return ((v + I(128)) & I(0xFF)) - I(128);
  } else if constexpr (std::is_same_v<S, std::uint8_t>) {
    return v & xsimd::batch<std::int32_t, A>(0xFF);
  } else {
    return v;
  }
}

/// float lanes -> double lanes (exact), for accumulating float data in double.
template <class A>
vec<double, A> widen(const xsimd::batch<float, A>& v) {
  using D = xsimd::batch<double, A>;
#if defined(__AVX512F__)
  if constexpr (detail::is_avx512<A>) {
    return {D(_mm512_cvtps_pd(_mm512_castps512_ps256(v))),
            D(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))))};
  } else
#endif
#if defined(__AVX__)
      if constexpr (std::is_base_of_v<xsimd::avx, A>) {
    return {D(_mm256_cvtps_pd(_mm256_castps256_ps128(v))), D(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)))};
  } else
#endif
  {
    if constexpr (std::is_base_of_v<xsimd::sse2, A> && xsimd::batch<float, A>::size == 4)
      return {D(_mm_cvtps_pd(v)), D(_mm_cvtps_pd(_mm_movehl_ps(v, v)))};
    else return lanewise<A, double>([](float x) { return static_cast<double>(x); }, v);
  }
}
/// int32 lanes -> int64 lanes (exact).
template <class A>
vec<std::int64_t, A> widen(const xsimd::batch<std::int32_t, A>& v) {
  using L = xsimd::batch<std::int64_t, A>;
#if defined(__AVX512F__)
  if constexpr (detail::is_avx512<A>) {
    return {L(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(v))),
            L(_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(v, 1)))};
  } else
#endif
#if defined(__AVX2__)
      if constexpr (detail::is_avx2<A>) {
    return {L(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(v))),
            L(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1)))};
  } else
#endif
  {
    return lanewise<A, std::int64_t>([](std::int32_t x) { return static_cast<std::int64_t>(x); }, v);
  }
}

/// cast<To> of compute lanes of dtype From.
template <class To, class From, class A>
vec<compute_t<To>, A> convert(const vec<compute_t<From>, A>& v) {
  using T = std::remove_cv_t<To>;
  using F = std::remove_cv_t<From>;
  using CT = compute_t<T>;
  using CF = compute_t<F>;
  using M = mask<A>;
  if constexpr (std::is_same_v<T, F>) {
    return v;
  } else if constexpr (std::is_same_v<CT, CF> && !std::is_same_v<CT, bool> &&
                       !(std::is_same_v<CT, std::int32_t> && is_floating_dtype<F>)) {
    // Same compute type: int8 <-> uint8 <-> int32 wrap, float <-> half <-> bfloat16 round.
    // (Integer compute values are always exact in their own dtype; half values exact in float.)
    return canonical<T, A>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return lanes<vec<CF, A>>::ne(v, lanes<vec<CF, A>>::splat(CF(0)));
  } else if constexpr (std::is_same_v<F, bool> && !std::is_same_v<CT, bool>) {
    using L = lanes<vec<CT, A>>;
    return L::select(v, L::splat(CT(1)), L::splat(CT(0)));
  } else if constexpr (std::is_same_v<CF, float> && std::is_same_v<CT, std::int32_t>) {
    // float -> int8/uint8/int32: truncate toward zero, saturate, NaN -> 0. Clamping in float
    // first keeps cvtt in range; the upper bound is the largest float below 2^31 for int32.
    using FV = xsimd::batch<float, A>;
    using IV = xsimd::batch<std::int32_t, A>;
    const float lo = static_cast<float>(std::numeric_limits<T>::lowest());
    const float hi =
        std::is_same_v<T, std::int32_t> ? 2147483520.0f : static_cast<float>(std::numeric_limits<T>::max());
    const M nan = ~(v == v);
    const FV c = xsimd::min(xsimd::max(v, FV(lo)), FV(hi));
    IV i = xsimd::batch_cast<std::int32_t>(c);
    if constexpr (std::is_same_v<T, std::int32_t>)
      i = simd::select(xsimd::bool_cast(v >= FV(2147483648.0f)), IV(INT32_MAX), i);
    return simd::select(xsimd::bool_cast(nan), IV(0), i);
  } else if constexpr (std::is_same_v<CF, float> && std::is_same_v<T, double>) {
    return widen<A>(v);
  } else if constexpr (std::is_same_v<CF, std::int32_t> && std::is_same_v<T, std::int64_t>) {
    return widen<A>(v);
  } else if constexpr (std::is_same_v<CF, std::int32_t> && (std::is_same_v<T, float> || std::is_same_v<T, half>)) {
    // int32 -> float rounds once; to half the float step is exact below 2^24, and above it half
    // overflows to inf either way.
    return canonical<T, A>(xsimd::batch_cast<float>(v));
  } else {
    return lanewise<A, CT>([](CF x) { return convert_value<T, F>(x); }, v);
  }
}

}  // namespace fuse::simd
