// The primitive operations fuse's math is written in, for V = float (host and CUDA device).
//
// Every function in fuse/math is one generic template over V that only touches V through
// operators (+ - * / < <= > >= ==; not !=, which xsimd makes false for NaN on AVX-512) and
// `prims<V>`. fuse/simd/math_batch.hpp specializes
// prims for xsimd batches. Each batch primitive returns, lane by lane, exactly the bits the
// scalar one returns, so a SIMD lane and a scalar tail lane of the same input agree bit for bit.
// That contract is why some definitions below look pedantic:
//
//  * fma is fused exactly when the translation unit may use FMA instructions (FUSE_MATH_FUSED_FMA).
//    A build without FMA (plain SSE) uses a*b+c in both the batch and the scalar version.
//  * min/max follow the x86 instruction (the second operand wins when either is NaN); callers
//    put the value that must propagate NaN second.
//  * scale() is one correctly rounded multiplication by 2^n, as AVX-512's vscalefps computes it.
//
// Generic code must not write a product that feeds an addition (`a*b + c`): the compiler may
// contract it in one path and not the other. Use fma, or keep the product's only use a product
// (or make it exact, a multiplication by a power of two, which no contraction can change).
#pragma once

#include <fuse/core/config.hpp>
#include <fuse/math/mode.hpp>

#include <cstdint>
#include <type_traits>

#if defined(__CUDA_ARCH__) || defined(__FMA__)
#define FUSE_MATH_FUSED_FMA 1
#else
#define FUSE_MATH_FUSED_FMA 0
#endif

// Whether a 32-entry table row costs what a 16-entry one does (AVX-512's vpermt2ps; a load on
// the GPU). Sigmoid then reads its 32-interval signed table, which needs no |x| and no 1 - g.
#if defined(__CUDA_ARCH__) || (defined(__AVX512F__) && defined(__FMA__))
#define FUSE_MATH_WIDE_TABLES 1
#else
#define FUSE_MATH_WIDE_TABLES 0
#endif

namespace fuse::math {

/// Customization point: the primitive operations on V. Specialized for float here and for
/// xsimd::batch<float, A> in fuse/simd/math_batch.hpp.
template <class V>
struct prims;

namespace detail {

template <class Mode>
inline constexpr bool is_fast = std::is_same_v<Mode, fuse::fast_math_t>;

FUSE_HD FUSE_FORCE_INLINE float float_from_bits(std::uint32_t u) noexcept { return __builtin_bit_cast(float, u); }
FUSE_HD FUSE_FORCE_INLINE std::uint32_t bits_of(float f) noexcept { return __builtin_bit_cast(std::uint32_t, f); }

/// Adding this to a float y with |y| < 2^22 rounds y to the nearest integer n (ties to even) and
/// leaves n, in two's complement, in the low mantissa bits: bits(y + shifter) = 0x4B400000 + n.
inline constexpr float round_shifter = 0x1.8p23f;

}  // namespace detail

template <>
struct prims<float> {
  using mask = bool;

  FUSE_HD static FUSE_FORCE_INLINE float fma(float a, float b, float c) noexcept {
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#elif FUSE_MATH_FUSED_FMA
    return __builtin_fmaf(a, b, c);
#else
    return a * b + c;  // no FMA instructions in this build, so nothing can contract this either
#endif
  }

  FUSE_HD static FUSE_FORCE_INLINE float select(bool m, float a, float b) noexcept { return m ? a : b; }

  /// x86 minps/maxps: the second operand when the comparison is false, NaN included.
  FUSE_HD static FUSE_FORCE_INLINE float min(float a, float b) noexcept { return a < b ? a : b; }
  FUSE_HD static FUSE_FORCE_INLINE float max(float a, float b) noexcept { return a > b ? a : b; }

  FUSE_HD static FUSE_FORCE_INLINE float abs(float a) noexcept {
    return detail::float_from_bits(detail::bits_of(a) & 0x7fffffffu);
  }
  /// mag with the sign bit of `sign` added; mag must have a clear sign bit.
  FUSE_HD static FUSE_FORCE_INLINE float or_sign(float mag, float sign) noexcept {
    return detail::float_from_bits(detail::bits_of(mag) | (detail::bits_of(sign) & 0x80000000u));
  }
  FUSE_HD static FUSE_FORCE_INLINE bool is_nan(float a) noexcept { return !(a == a); }
  FUSE_HD static FUSE_FORCE_INLINE bool any(bool m) noexcept { return m; }

  /// min(|x|, c) for a constant c > 0 and non-NaN x. What a NaN x gives is unspecified (AVX-512
  /// does this in one vrangeps, which returns c for a quiet NaN): callers put NaN back at the
  /// end with or_sign_nan, or route it through a path that propagates it.
  FUSE_HD static FUSE_FORCE_INLINE float abs_clamp(float x, float c) noexcept { return min(c, abs(x)); }

  /// x clamped to [-c, c] (c > 0), keeping its sign; a quiet NaN x gives c with the sign of x
  /// (AVX-512: one vrangeps).
  FUSE_HD static FUSE_FORCE_INLINE float clamp_sym(float x, float c) noexcept { return or_sign(min(abs(x), c), x); }

  /// x itself when x is NaN, else mag (sign bit clear) with the sign of x.
  FUSE_HD static FUSE_FORCE_INLINE float or_sign_nan(float mag, float x) noexcept {
    return is_nan(x) ? x : or_sign(mag, x);
  }

  /// row[j] with j the low 4 bits of k's bit pattern (k = j + detail::round_shifter): one
  /// permute per vector of 16 lanes on AVX-512.
  FUSE_HD static FUSE_FORCE_INLINE float lookup16(const float* row, float k) noexcept {
    return row[detail::bits_of(k) & 15u];
  }

  /// row[j] with j the low 3 bits of k's bit pattern: one permute per 8 lanes on AVX2 (the
  /// tables of builds without a wide permute).
  FUSE_HD static FUSE_FORCE_INLINE float lookup8(const float* row, float k) noexcept {
    return row[detail::bits_of(k) & 7u];
  }

  FUSE_HD static FUSE_FORCE_INLINE float lookup32(const float* row, float k) noexcept {
    return row[detail::bits_of(k) & 31u];
  }

  /// The bit pattern of x shifted right by n places, as a float (for lookup16: an index taken
  /// from x's exponent and leading mantissa bits).
  FUSE_HD static FUSE_FORCE_INLINE float shift_bits_right(float x, int n) noexcept {
    return detail::float_from_bits(detail::bits_of(x) >> n);
  }

  /// m ? a - b : b, in one masked instruction where the target has one.
  FUSE_HD static FUSE_FORCE_INLINE float sub_where(bool m, float a, float b) noexcept { return m ? a - b : b; }

  /// 2^n, exactly, for k = n + detail::round_shifter with integral n in [-126, 127] (and +inf
  /// for n = 128).
  FUSE_HD static FUSE_FORCE_INLINE float pow2_from_shifted(float k) noexcept {
    return detail::float_from_bits((detail::bits_of(k) << 23) + 0x3f800000u);
  }

  /// p * 2^floor(n) with a single rounding (subnormal and overflowing results rounded
  /// correctly), for n of any magnitude and |p| in [2^-24, 2^24] or p in {0, inf, NaN}. NaN n
  /// gives NaN. (vscalefps floors n too.)
  FUSE_HD static FUSE_FORCE_INLINE float scale(float p, float n) noexcept {
    if (is_nan(n)) return p + n;
    // Beyond +-200 every allowed p over- or underflows anyway. The first factor then keeps
    // p * 2^(n/2) normal and exact (|n/2| <= 100), so the second multiplication is the only
    // rounding.
    const float nc = min(200.0f, max(-200.0f, n));
    const int nt = static_cast<int>(nc);
    const int ni = nt - (static_cast<float>(nt) > nc ? 1 : 0);  // floor
    const int lo = ni >> 1;
    const int hi = ni - lo;
    const float p_half = p * detail::float_from_bits(static_cast<std::uint32_t>(lo + 127) << 23);
    return p_half * detail::float_from_bits(static_cast<std::uint32_t>(hi + 127) << 23);
  }

  /// Splits a finite x > 0 (subnormals included) into m in [0.75, 1.5) and integral e with
  /// x = m * 2^e exactly. What it returns for other x is unspecified (callers patch those).
  FUSE_HD static FUSE_FORCE_INLINE void split_exponent(float x, float& m, float& e) noexcept {
    // Subnormals are first scaled into the normal range (exactly) and their exponent fixed.
    const bool tiny = x < 0x1p-126f;
    const float xs = tiny ? x * 0x1p23f : x;
    const std::uint32_t u = detail::bits_of(xs);
    // Offsetting by bits(0.75) makes the exponent field step at mantissa 1.5 instead of 2.
    const std::int32_t k = static_cast<std::int32_t>(u - 0x3f400000u) >> 23;
    m = detail::float_from_bits(u - (static_cast<std::uint32_t>(k) << 23));
    e = static_cast<float>(tiny ? k - 23 : k);
  }
};

/// c[0] + x*(c[1] + x*(c[2] + ...)) by Horner's rule with fused multiply-adds.
template <class V>
FUSE_HD FUSE_FORCE_INLINE V horner(V, float c0) noexcept {
  return V(c0);
}
template <class V, class... Cs>
FUSE_HD FUSE_FORCE_INLINE V horner(V x, float c0, float c1, Cs... cs) noexcept {
  return prims<V>::fma(horner(x, c1, cs...), x, V(c0));
}

}  // namespace fuse::math
