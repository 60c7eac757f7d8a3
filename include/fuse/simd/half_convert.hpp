// SIMD conversions between float batches and fuse::half / fuse::bfloat16 memory (CPU only).
//
//   auto v = fuse::simd::load_half<A>(p);      // batch<float, A>::size values from p, unaligned
//   fuse::simd::store_half(p, v);              // rounds to nearest even
//   v = fuse::simd::round_to_half(v);          // the value of (float)(half)v, lane by lane
//   ... and load_bf16 / store_bf16 / round_to_bf16 for fuse::bfloat16.
//
// Every result is bit-identical to the scalar conversions of <fuse/core/half.hpp>, NaNs
// included, for every float input.
//
// How each is done:
//  - half: the hardware conversions (vcvtph2ps / vcvtps2ph with round-to-nearest-even in the
//    immediate) wherever the arch has them: AVX-512F at 512 bits, F16C at 256 and 128 bits.
//    Without F16C, integer bit manipulation in 32-bit lanes (see half_bits_from_float).
//  - bfloat16: always integer arithmetic. AVX512_BF16's vcvtneps2bf16 was checked against the
//    scalar conversion over the float patterns on a Zen 5: it treats every subnormal input as
//    zero (16.7 million inputs come out wrong), so it is not used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include <fuse/core/half.hpp>
#include <fuse/simd/select.hpp>

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace fuse::simd {

namespace half_detail {

template <class A>
using f32 = xsimd::batch<float, A>;
template <class A>
using i32 = xsimd::batch<std::int32_t, A>;

// ---- lane arithmetic: 16-bit patterns held in the low half of 32-bit lanes -----------------
// Written with xsimd operations only, so they serve any arch; values compared are kept
// non-negative so that signed 32-bit comparisons (all SSE2 has) are exact.

/// binary16 patterns -> float values, exactly as fuse::half's operator float.
template <class A>
f32<A> float_from_half_bits(i32<A> h) noexcept {
  const i32<A> sign = (h & i32<A>(0x8000)) << 16;
  const i32<A> magnitude = h & i32<A>(0x7FFF);
  // Normal numbers: move exponent and mantissa up to float's fields and re-bias (127 - 15).
  i32<A> normal = (magnitude << 13) + i32<A>(112 << 23);
  // Inf and NaN: exponent 31 must become 255, which is another 112 on the exponent; NaNs are
  // made quiet as vcvtph2ps makes them.
  normal = fuse::simd::select(magnitude >= i32<A>(0x7C00), normal + i32<A>(112 << 23), normal);
  normal = fuse::simd::select(magnitude > i32<A>(0x7C00), normal | i32<A>(0x00400000), normal);
  // Subnormals and zero: mantissa * 2^-24, a product of exact normal floats, so exact even
  // under DAZ/FTZ.
  const f32<A> subnormal = xsimd::to_float(magnitude) * f32<A>(0x1p-24f);
  const i32<A> value = fuse::simd::select(magnitude < i32<A>(0x0400), xsimd::bitwise_cast<i32<A>>(subnormal), normal);
  return xsimd::bitwise_cast<f32<A>>(value | sign);
}

/// float values -> binary16 patterns (round to nearest even), exactly as fuse::half(float).
template <class A>
i32<A> half_bits_from_float(f32<A> v) noexcept {
  const i32<A> bits = xsimd::bitwise_cast<i32<A>>(v);
  const i32<A> sign = (bits >> 16) & i32<A>(0x8000);
  const i32<A> magnitude = bits & i32<A>(0x7FFFFFFF);

  // [2^-14, 65520): re-bias the exponent (127 - 15), then round away 13 mantissa bits to
  // nearest even by adding 0xFFF plus the lowest kept bit; a carry runs into the exponent.
  const i32<A> normal = (magnitude - i32<A>(112 << 23) + i32<A>(0x0FFF) + ((magnitude >> 13) & i32<A>(1))) >> 13;
  // Below 2^-14: 0.5 + |v| is computed by the FPU, which rounds it to a multiple of 2^-24 (the
  // float spacing in [0.5, 1), and half's subnormal spacing) to nearest even; the bits above
  // 0.5's are the half pattern. This assumes the default rounding mode (the F16C path and the
  // scalar one do not); under DAZ a float subnormal reads as 0, which is its correct result.
  const i32<A> subnormal =
      xsimd::bitwise_cast<i32<A>>(xsimd::bitwise_cast<f32<A>>(magnitude) + f32<A>(0.5f)) - i32<A>(0x3F000000);
  i32<A> h = fuse::simd::select(magnitude < i32<A>(0x38800000), subnormal, normal);
  // 65520 is the halfway point between 65504 and 2^16: from there up it rounds to infinity.
  h = fuse::simd::select(magnitude >= i32<A>(0x477FF000), i32<A>(0x7C00), h);
  // NaN: quiet, top 9 bits of the payload kept (the scalar rule and vcvtps2ph's).
  h = fuse::simd::select(magnitude > i32<A>(0x7F800000), ((magnitude >> 13) & i32<A>(0x03FF)) | i32<A>(0x7E00), h);
  return h | sign;
}

/// bfloat16 patterns -> float values: the pattern is the float's top half.
template <class A>
f32<A> float_from_bf16_bits(i32<A> b) noexcept {
  return xsimd::bitwise_cast<f32<A>>(b << 16);
}

/// float values -> bfloat16 patterns (round to nearest even), exactly as fuse::bfloat16(float).
template <class A>
i32<A> bf16_bits_from_float(f32<A> v) noexcept {
  const i32<A> bits = xsimd::bitwise_cast<i32<A>>(v);
  // Add 0x7FFF plus the lowest kept bit, keep the top half: ties go to even, carries run into
  // the exponent and from the largest finite value to infinity. It never reaches the sign bit.
  const i32<A> rounded = ((bits + i32<A>(0x7FFF) + ((bits >> 16) & i32<A>(1))) >> 16) & i32<A>(0xFFFF);
  // NaN: truncate and set the quiet bit, so a payload living only in the low half survives as NaN.
  const i32<A> nan = ((bits >> 16) & i32<A>(0xFFFF)) | i32<A>(0x0040);
  return fuse::simd::select((bits & i32<A>(0x7FFFFFFF)) > i32<A>(0x7F800000), nan, rounded);
}

// ---- memory: batch<float, A>::size 16-bit patterns <-> 32-bit lanes ----------------------
// Overloads on the arch tag; a call with A{} picks the most derived one that was compiled in.

template <class A>
i32<A> load_widen(const std::uint16_t* p, xsimd::generic) noexcept {
  alignas(64) std::int32_t lanes[i32<A>::size];
  for (std::size_t i = 0; i < i32<A>::size; ++i) lanes[i] = p[i];
  return i32<A>::load_aligned(lanes);
}
template <class A>
void store_narrow(std::uint16_t* p, i32<A> v, xsimd::generic) noexcept {
  alignas(64) std::int32_t lanes[i32<A>::size];
  v.store_aligned(lanes);
  for (std::size_t i = 0; i < i32<A>::size; ++i) p[i] = static_cast<std::uint16_t>(lanes[i]);
}

#if defined(__SSE2__) || defined(_M_X64)
template <class A>
i32<A> load_widen(const std::uint16_t* p, xsimd::sse2) noexcept {
  return _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), _mm_setzero_si128());
}
template <class A>
void store_narrow(std::uint16_t* p, i32<A> v, xsimd::sse2) noexcept {
  // SSE2 packs with signed saturation only: sign-extend each 16-bit value first so it survives.
  const __m128i extended = _mm_srai_epi32(_mm_slli_epi32(v, 16), 16);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi32(extended, extended));
}
#endif

#if defined(__SSE4_1__)
template <class A>
i32<A> load_widen(const std::uint16_t* p, xsimd::sse4_1) noexcept {
  return _mm_cvtepu16_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
template <class A>
void store_narrow(std::uint16_t* p, i32<A> v, xsimd::sse4_1) noexcept {
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi32(v, v));
}
#endif

#if defined(__AVX__)
// AVX without AVX2 has no 256-bit integer instructions: work on the two 128-bit halves.
template <class A>
i32<A> load_widen(const std::uint16_t* p, xsimd::avx) noexcept {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i low = _mm_cvtepu16_epi32(packed);
  const __m128i high = _mm_cvtepu16_epi32(_mm_srli_si128(packed, 8));
  return _mm256_insertf128_si256(_mm256_castsi128_si256(low), high, 1);
}
template <class A>
void store_narrow(std::uint16_t* p, i32<A> v, xsimd::avx) noexcept {
  const __m256i lanes = v;
  const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(lanes), _mm256_extractf128_si256(lanes, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}
#endif

#if defined(__AVX2__)
template <class A>
i32<A> load_widen(const std::uint16_t* p, xsimd::avx2) noexcept {
  return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
template <class A>
void store_narrow(std::uint16_t* p, i32<A> v, xsimd::avx2) noexcept {
  // packus works within each 128-bit half; gather the two useful quadwords into the low half.
  const __m256i packed = _mm256_packus_epi32(v, v);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
}
#endif

#if defined(__AVX512F__)
template <class A>
i32<A> load_widen(const std::uint16_t* p, xsimd::avx512f) noexcept {
  return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
template <class A>
void store_narrow(std::uint16_t* p, i32<A> v, xsimd::avx512f) noexcept {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v));
}
#endif

// ---- half: the software path (any arch) and the hardware one where it exists ----------------

template <class A>
f32<A> load_half_software(const half* p) noexcept {
  return float_from_half_bits<A>(load_widen<A>(reinterpret_cast<const std::uint16_t*>(p), A{}));
}
template <class A>
void store_half_software(half* p, f32<A> v) noexcept {
  store_narrow<A>(reinterpret_cast<std::uint16_t*>(p), half_bits_from_float<A>(v), A{});
}
template <class A>
f32<A> round_to_half_software(f32<A> v) noexcept {
  return float_from_half_bits<A>(half_bits_from_float<A>(v));
}

template <class A>
f32<A> load_half(const half* p, xsimd::generic) noexcept {
  return load_half_software<A>(p);
}
template <class A>
void store_half(half* p, f32<A> v, xsimd::generic) noexcept {
  store_half_software<A>(p, v);
}
template <class A>
f32<A> round_to_half(f32<A> v, xsimd::generic) noexcept {
  return round_to_half_software<A>(v);
}

// The immediate 0 (_MM_FROUND_TO_NEAREST_INT) asks for round-to-nearest-even regardless of MXCSR.
#if defined(__F16C__)
template <class A>
f32<A> load_half(const half* p, xsimd::sse2) noexcept {
  return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
template <class A>
void store_half(half* p, f32<A> v, xsimd::sse2) noexcept {
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
template <class A>
f32<A> round_to_half(f32<A> v, xsimd::sse2) noexcept {
  return _mm_cvtph_ps(_mm_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

template <class A>
f32<A> load_half(const half* p, xsimd::avx) noexcept {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
template <class A>
void store_half(half* p, f32<A> v, xsimd::avx) noexcept {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
template <class A>
f32<A> round_to_half(f32<A> v, xsimd::avx) noexcept {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
#endif

#if defined(__AVX512F__)
template <class A>
f32<A> load_half(const half* p, xsimd::avx512f) noexcept {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
template <class A>
void store_half(half* p, f32<A> v, xsimd::avx512f) noexcept {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
template <class A>
f32<A> round_to_half(f32<A> v, xsimd::avx512f) noexcept {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
#endif

/// Whether arch A converts half in hardware in this build (for tests and documentation).
template <class A>
inline constexpr bool hardware_half =
#if defined(__AVX512F__)
    std::is_base_of_v<xsimd::avx512f, A> ||
#endif
#if defined(__F16C__)
    std::is_base_of_v<xsimd::sse2, A> || std::is_base_of_v<xsimd::avx, A> ||
#endif
    false;

}  // namespace half_detail

// ---- the public calls ----------------------------------------------------------------------

/// Loads batch<float, A>::size halves from p (unaligned) as floats; exact.
template <class A = xsimd::default_arch>
xsimd::batch<float, A> load_half(const half* p) noexcept {
  return half_detail::load_half<A>(p, A{});
}
/// Stores the lanes of v as halves at p (unaligned), rounded to nearest even.
template <class A>
void store_half(half* p, xsimd::batch<float, A> v) noexcept {
  half_detail::store_half<A>(p, v, A{});
}
/// The value of (float)(half)v in every lane.
template <class A>
xsimd::batch<float, A> round_to_half(xsimd::batch<float, A> v) noexcept {
  return half_detail::round_to_half<A>(v, A{});
}

/// Loads batch<float, A>::size bfloat16 values from p (unaligned) as floats; exact.
template <class A = xsimd::default_arch>
xsimd::batch<float, A> load_bf16(const bfloat16* p) noexcept {
  return half_detail::float_from_bf16_bits<A>(
      half_detail::load_widen<A>(reinterpret_cast<const std::uint16_t*>(p), A{}));
}
/// Stores the lanes of v as bfloat16 at p (unaligned), rounded to nearest even.
template <class A>
void store_bf16(bfloat16* p, xsimd::batch<float, A> v) noexcept {
  half_detail::store_narrow<A>(reinterpret_cast<std::uint16_t*>(p), half_detail::bf16_bits_from_float<A>(v), A{});
}
/// The value of (float)(bfloat16)v in every lane.
template <class A>
xsimd::batch<float, A> round_to_bf16(xsimd::batch<float, A> v) noexcept {
  return half_detail::float_from_bf16_bits<A>(half_detail::bf16_bits_from_float<A>(v));
}

}  // namespace fuse::simd
