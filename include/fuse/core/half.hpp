// fuse::half (IEEE 754 binary16) and fuse::bfloat16 (the "brain float" bfloat16): 2-byte
// storage types that hold a float's bits and compute in float.
//
// Both formats share one layout (sign, exponent, mantissa) and differ only in field widths, so
// one class template, basic_float16<Format>, implements both. Everything here is constexpr and
// FUSE_HD: the same code runs in host code, in constant expressions and in CUDA kernels. It
// uses neither xsimd nor cuda_fp16.h; the SIMD conversions live in <fuse/simd/half_convert.hpp>
// and printing in <fuse/core/half_io.hpp>.
//
// Conversions into a 16-bit format round to nearest, ties to even, once, straight from the
// source value (double -> half never rounds through float first, an int64 never rounds through
// double first). NaN stays NaN (made quiet, sign and the top of the payload kept), overflow
// gives +-inf, subnormals are produced, -0 stays -0. Conversions out of them are exact.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include <fuse/core/config.hpp>

namespace fuse {

/// IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits; max 65504, epsilon 2^-10.
struct binary16_format {
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 10;
  static constexpr bool is_iec559 = true;
  // Decimal exponent range (numeric_limits' min_exponent10 / max_exponent10): 10^-4 is the
  // smallest power of ten that is normal, 10^4 the largest that is finite.
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent10 = 4;
};

/// bfloat16: the top half of a float32 (1 sign, 8 exponent, 7 mantissa bits); float's range,
/// epsilon 2^-7. Not an IEC 559 format, but it follows the same rounding and special values.
struct bfloat16_format {
  static constexpr int exponent_bits = 8;
  static constexpr int mantissa_bits = 7;
  static constexpr bool is_iec559 = false;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent10 = 38;
};

template <class Format>
class basic_float16;

using half = basic_float16<binary16_format>;
using bfloat16 = basic_float16<bfloat16_format>;

namespace detail::f16 {

template <class To, class From>
FUSE_HD constexpr To bit_cast(const From& from) noexcept {
  static_assert(sizeof(To) == sizeof(From));
  // The builtin (not std::bit_cast) because it is constexpr in host and device code alike.
  return __builtin_bit_cast(To, from);
}

/// Where the fields of a binary floating-point format sit in its bit pattern.
template <class Bits, int ExponentBits, int MantissaBits>
struct float_layout {
  using bits_type = Bits;
  static constexpr int exponent_bits = ExponentBits;
  static constexpr int mantissa_bits = MantissaBits;
  static constexpr int total_bits = 1 + ExponentBits + MantissaBits;
  static constexpr int bias = (1 << (ExponentBits - 1)) - 1;
  static constexpr int max_biased_exponent = (1 << ExponentBits) - 1;  // inf and NaN
  static constexpr Bits sign_mask = Bits(Bits(1) << (total_bits - 1));
  static constexpr Bits mantissa_mask = Bits((Bits(1) << MantissaBits) - 1);
  static constexpr Bits exponent_mask = Bits(Bits(max_biased_exponent) << MantissaBits);  // = +inf
  static constexpr Bits quiet_bit = Bits(Bits(1) << (MantissaBits - 1));
};

using float32_layout = float_layout<std::uint32_t, 8, 23>;
using float64_layout = float_layout<std::uint64_t, 11, 52>;
template <class Format>
using float16_layout = float_layout<std::uint16_t, Format::exponent_bits, Format::mantissa_bits>;

/// Rounds a value of the wider format Src (given by its bits) to the narrower format Dst,
/// to nearest with ties to even, in one step.
template <class Dst, class Src>
FUSE_HD constexpr typename Dst::bits_type round_to_narrower(typename Src::bits_type x) noexcept {
  using S = typename Src::bits_type;
  using D = typename Dst::bits_type;
  static_assert(Src::mantissa_bits > Dst::mantissa_bits && Src::exponent_bits >= Dst::exponent_bits);

  const D sign = D(x >> (Src::total_bits - Dst::total_bits)) & Dst::sign_mask;
  const S magnitude = x & S(~Src::sign_mask);
  if (magnitude >= Src::exponent_mask) {
    if (magnitude == Src::exponent_mask) return D(sign | Dst::exponent_mask);  // +-inf
    // NaN: the top of the payload survives; the quiet bit keeps it a NaN even when every
    // surviving payload bit is zero.
    const D payload = D(magnitude >> (Src::mantissa_bits - Dst::mantissa_bits)) & Dst::mantissa_mask;
    return D(sign | Dst::exponent_mask | Dst::quiet_bit | payload);
  }

  // The source value is significand * 2^(exponent - bias - mantissa_bits), with the implicit
  // leading one made explicit; a subnormal scales like exponent field 1 without it.
  const int source_exponent = int(magnitude >> Src::mantissa_bits);
  const S significand =
      (magnitude & Src::mantissa_mask) | (source_exponent != 0 ? S(S(1) << Src::mantissa_bits) : S(0));
  int exponent = (source_exponent != 0 ? source_exponent : 1) - Src::bias + Dst::bias;  // Dst's biased exponent
  if (exponent >= Dst::max_biased_exponent) return D(sign | Dst::exponent_mask);        // overflow

  int shift = Src::mantissa_bits - Dst::mantissa_bits;  // mantissa bits to drop
  if (exponent < 1) {  // Dst subnormal: its exponent stays at 1 and it keeps fewer bits
    shift += 1 - exponent;
    exponent = 1;
  }
  // significand < 2^(mantissa_bits + 1), so past this shift it is below half the smallest
  // subnormal and rounds to zero (this also keeps every shift below the type's width).
  if (shift > Src::mantissa_bits + 1) return sign;

  S kept = significand >> shift;
  const S rest = significand & S((S(1) << shift) - 1);
  const S halfway = S(1) << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1) != 0)) ++kept;

  // `kept` still holds the implicit bit, which adds the last 1 to the exponent field; a carry
  // out of the mantissa moves up into the exponent (and from the largest finite value into
  // infinity), all by the same addition. A subnormal result has no implicit bit, and exponent
  // field 0 here, unless it rounded up to the smallest normal.
  return D(sign | D((D(exponent - 1) << Dst::mantissa_bits) + D(kept)));
}

/// The float with the same value as a 16-bit pattern; exact.
///  - bfloat16 is the top half of a float, so its bits are extended with zeros, NaNs included
///    (a signalling NaN stays signalling: the bits are kept, as every bf16 widening does).
///  - binary16 is re-biased; a NaN keeps its sign and payload and is made quiet, which is what
///    x86's vcvtph2ps does, so the SIMD path and this one agree bit for bit.
template <class Layout>
FUSE_HD constexpr float widen_to_float(std::uint16_t h) noexcept {
  using F = float32_layout;
  if constexpr (Layout::exponent_bits == F::exponent_bits) {
    return bit_cast<float>(std::uint32_t(h) << (F::total_bits - Layout::total_bits));
  } else {
    const std::uint32_t sign = std::uint32_t(h & Layout::sign_mask) << (F::total_bits - Layout::total_bits);
    const std::uint32_t mantissa = std::uint32_t(h & Layout::mantissa_mask)
                                   << (F::mantissa_bits - Layout::mantissa_bits);
    const int exponent = int((h & Layout::exponent_mask) >> Layout::mantissa_bits);
    if (exponent == Layout::max_biased_exponent) {
      const std::uint32_t quiet = mantissa != 0 ? F::quiet_bit : 0u;
      return bit_cast<float>(sign | F::exponent_mask | quiet | mantissa);
    }
    if (exponent == 0) {
      // Subnormal (or zero): mantissa * 2^(1 - bias - mantissa_bits). Both factors and the
      // product are exact normal floats, so this is exact whatever the FTZ/DAZ settings.
      constexpr int scale_exponent = 1 - Layout::bias - Layout::mantissa_bits;
      constexpr float scale = bit_cast<float>(std::uint32_t(scale_exponent + F::bias) << F::mantissa_bits);
      const float magnitude = float(h & Layout::mantissa_mask) * scale;
      return bit_cast<float>(sign | bit_cast<std::uint32_t>(magnitude));
    }
    const std::uint32_t rebiased = std::uint32_t(exponent - Layout::bias + F::bias) << F::mantissa_bits;
    return bit_cast<float>(sign | rebiased | mantissa);
  }
}

/// Number of significant bits of an unsigned integer (0 for 0), without compiler builtins so
/// that it stays constexpr in device code.
template <class U>
FUSE_HD constexpr int bit_width(U v) noexcept {
  int width = 0;
  for (int step = int(sizeof(U) * 4); step > 0; step /= 2) {
    if ((v >> step) != 0) {
      v = U(v >> step);
      width += step;
    }
  }
  return width + int(v != 0);
}

/// Rounds the integer (negative ? -magnitude : magnitude) to the format Dst in one step.
template <class Dst, class U>
FUSE_HD constexpr typename Dst::bits_type round_integer(bool negative, U magnitude) noexcept {
  using D = typename Dst::bits_type;
  const D sign = negative ? Dst::sign_mask : D(0);
  if (magnitude == 0) return 0;  // integer zero is +0
  constexpr int precision = Dst::mantissa_bits + 1;
  int width = bit_width(magnitude);
  U kept = magnitude;
  if (width <= precision) {
    kept = U(kept << (precision - width));  // exact: just normalise
  } else {
    const int shift = width - precision;
    kept = U(magnitude >> shift);
    const U rest = U(magnitude & U((U(1) << shift) - 1));
    const U halfway = U(U(1) << (shift - 1));
    if (rest > halfway || (rest == halfway && (kept & 1) != 0)) ++kept;
    if (kept >> precision) {  // rounded up to the next power of two
      kept = U(kept >> 1);
      ++width;
    }
  }
  const int exponent = width - 1 + Dst::bias;  // every nonzero integer is a normal number here
  if (exponent >= Dst::max_biased_exponent) return D(sign | Dst::exponent_mask);
  return D(sign | D(D(exponent) << Dst::mantissa_bits) | D(D(kept) & Dst::mantissa_mask));
}

}  // namespace detail::f16

/// A 16-bit floating-point storage type: holds the bits, converts exactly to float, rounds
/// (to nearest even) on the way in, and does arithmetic in float with one rounding.
template <class Format>
class basic_float16 {
  using layout = detail::f16::float16_layout<Format>;

 public:
  using format = Format;

  /// Uninitialised, like float: keeps the type trivial, so large buffers and CUDA __shared__
  /// arrays of it need no constructor run. `basic_float16{}` is +0.
  basic_float16() = default;

  static FUSE_HD constexpr basic_float16 from_bits(std::uint16_t bits) noexcept {
    basic_float16 r;
    r.bits_ = bits;
    return r;
  }
  FUSE_HD constexpr std::uint16_t bits() const noexcept { return bits_; }

  // ---- into the format: explicit, because these round ------------------------------------
  FUSE_HD explicit constexpr basic_float16(float v) noexcept : bits_(rounded<detail::f16::float32_layout>(v)) {}
  FUSE_HD explicit constexpr basic_float16(double v) noexcept : bits_(rounded<detail::f16::float64_layout>(v)) {}

  /// Host only (device code has no long double). Rounds to double with round-to-odd first:
  /// a double keeps more than twice the target's bits plus two, so round-to-odd followed by
  /// round-to-nearest-even equals one direct rounding.
  explicit constexpr basic_float16(long double v) noexcept : bits_(0) {
    double d = static_cast<double>(v);
    if (static_cast<long double>(d) != v && d == d) {
      std::uint64_t b = detail::f16::bit_cast<std::uint64_t>(d);
      if ((b & 1) == 0) {  // inexact and even: step to the neighbour on v's side, which is odd
        const bool v_is_farther_from_zero = (v < 0 ? -v : v) > static_cast<long double>(d < 0 ? -d : d);
        b = v_is_farther_from_zero ? b + 1 : b - 1;
      }
      d = detail::f16::bit_cast<double>(b);
    }
    bits_ = basic_float16(d).bits_;
  }

  /// Integers round once, directly (an int64 above 2^24 does not round through float or double).
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  FUSE_HD explicit constexpr basic_float16(T v) noexcept : bits_(0) {
    if constexpr (std::is_same_v<T, bool>) {
      bits_ = basic_float16(v ? 1.0f : 0.0f).bits_;
    } else {
      using U = std::make_unsigned_t<T>;
      const bool negative = v < T(0);
      const U magnitude = negative ? U(U(0) - U(v)) : U(v);  // well defined for the minimum too
      // Below 2^24 the integer is exact in float and takes float's rounding path (the common
      // case: int8, int16, small int32); above, it is rounded here, once.
      bool exact_in_float = true;
      if constexpr (std::numeric_limits<U>::digits > 24) exact_in_float = magnitude < (U(1) << 24);
      if (exact_in_float) {
        const float f = float(magnitude);
        bits_ = basic_float16(negative ? -f : f).bits_;
      } else {
        bits_ = detail::f16::round_integer<layout>(negative, magnitude);
      }
    }
  }

  // ---- out of the format: exact ----------------------------------------------------------
  /// Implicit: every value of the format is a float, so nothing is ever lost (as float ->
  /// double is implicit). It lets these values take part in float math (std::exp(h),
  /// h * 0.5f) without casts; mixed expressions then compute in float and yield float.
  FUSE_HD constexpr operator float() const noexcept { return detail::f16::widen_to_float<layout>(bits_); }

  /// double, integers, bool: the C++ conversion of the exact float value.
  template <class T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>, int> = 0>
  FUSE_HD explicit constexpr operator T() const noexcept {
    return static_cast<T>(detail::f16::widen_to_float<layout>(bits_));
  }

  // ---- arithmetic: computed in float, rounded once -----------------------------------------
  // For + - * / of two values of either format the float result rounded once is the correctly
  // rounded result (float keeps at least 2p+2 bits for both p = 11 and p = 8).
  friend FUSE_HD constexpr basic_float16 operator+(basic_float16 a) noexcept { return a; }
  friend FUSE_HD constexpr basic_float16 operator-(basic_float16 a) noexcept {
    return from_bits(std::uint16_t(a.bits_ ^ layout::sign_mask));  // also flips NaN's and 0's sign
  }
  friend FUSE_HD constexpr basic_float16 operator+(basic_float16 a, basic_float16 b) noexcept {
    return basic_float16(float(a) + float(b));
  }
  friend FUSE_HD constexpr basic_float16 operator-(basic_float16 a, basic_float16 b) noexcept {
    return basic_float16(float(a) - float(b));
  }
  friend FUSE_HD constexpr basic_float16 operator*(basic_float16 a, basic_float16 b) noexcept {
    return basic_float16(float(a) * float(b));
  }
  friend FUSE_HD constexpr basic_float16 operator/(basic_float16 a, basic_float16 b) noexcept {
    return basic_float16(float(a) / float(b));
  }
  friend FUSE_HD constexpr basic_float16& operator+=(basic_float16& a, basic_float16 b) noexcept { return a = a + b; }
  friend FUSE_HD constexpr basic_float16& operator-=(basic_float16& a, basic_float16 b) noexcept { return a = a - b; }
  friend FUSE_HD constexpr basic_float16& operator*=(basic_float16& a, basic_float16 b) noexcept { return a = a * b; }
  friend FUSE_HD constexpr basic_float16& operator/=(basic_float16& a, basic_float16 b) noexcept { return a = a / b; }

  // ---- comparisons: IEEE (NaN unordered, -0 == +0), through the exact float values ----------
  friend FUSE_HD constexpr bool operator==(basic_float16 a, basic_float16 b) noexcept { return float(a) == float(b); }
  friend FUSE_HD constexpr bool operator!=(basic_float16 a, basic_float16 b) noexcept { return float(a) != float(b); }
  friend FUSE_HD constexpr bool operator<(basic_float16 a, basic_float16 b) noexcept { return float(a) < float(b); }
  friend FUSE_HD constexpr bool operator<=(basic_float16 a, basic_float16 b) noexcept { return float(a) <= float(b); }
  friend FUSE_HD constexpr bool operator>(basic_float16 a, basic_float16 b) noexcept { return float(a) > float(b); }
  friend FUSE_HD constexpr bool operator>=(basic_float16 a, basic_float16 b) noexcept { return float(a) >= float(b); }

 private:
  template <class SourceLayout, class Source>
  static FUSE_HD constexpr std::uint16_t rounded(Source v) noexcept {
    using source_bits = typename SourceLayout::bits_type;
    return detail::f16::round_to_narrower<layout, SourceLayout>(detail::f16::bit_cast<source_bits>(v));
  }

  std::uint16_t bits_;
};

static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);
static_assert(std::is_trivially_copyable_v<half> && std::is_trivially_copyable_v<bfloat16>);
static_assert(std::is_trivially_default_constructible_v<half> && std::is_standard_layout_v<half>);

template <class Format>
FUSE_HD constexpr bool isnan(basic_float16<Format> x) noexcept {
  using L = detail::f16::float16_layout<Format>;
  return (x.bits() & ~L::sign_mask & 0xFFFFu) > L::exponent_mask;
}
template <class Format>
FUSE_HD constexpr bool isinf(basic_float16<Format> x) noexcept {
  using L = detail::f16::float16_layout<Format>;
  return (x.bits() & ~L::sign_mask & 0xFFFFu) == L::exponent_mask;
}
template <class Format>
FUSE_HD constexpr bool isfinite(basic_float16<Format> x) noexcept {
  using L = detail::f16::float16_layout<Format>;
  return (x.bits() & L::exponent_mask) != L::exponent_mask;
}

}  // namespace fuse

template <class Format>
class std::numeric_limits<fuse::basic_float16<Format>> {
  using T = fuse::basic_float16<Format>;
  using L = fuse::detail::f16::float16_layout<Format>;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = Format::is_iec559;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = L::mantissa_bits + 1;
  // floor((digits - 1) * log10(2)) and ceil(1 + digits * log10(2)), log10(2) ~ 0.30103.
  static constexpr int digits10 = (digits - 1) * 30103 / 100000;
  static constexpr int max_digits10 = 2 + digits * 30103 / 100000;
  static constexpr int radix = 2;
  static constexpr int min_exponent = 2 - L::bias;
  static constexpr int min_exponent10 = Format::min_exponent10;
  static constexpr int max_exponent = L::bias + 1;
  static constexpr int max_exponent10 = Format::max_exponent10;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  static FUSE_HD constexpr T min() noexcept { return T::from_bits(std::uint16_t(1u << L::mantissa_bits)); }
  static FUSE_HD constexpr T max() noexcept { return T::from_bits(std::uint16_t(L::exponent_mask - 1u)); }
  static FUSE_HD constexpr T lowest() noexcept {
    return T::from_bits(std::uint16_t(L::sign_mask | (L::exponent_mask - 1u)));
  }
  static FUSE_HD constexpr T epsilon() noexcept {  // 2^-mantissa_bits
    return T::from_bits(std::uint16_t(unsigned(L::bias - L::mantissa_bits) << L::mantissa_bits));
  }
  static FUSE_HD constexpr T round_error() noexcept {  // 0.5
    return T::from_bits(std::uint16_t(unsigned(L::bias - 1) << L::mantissa_bits));
  }
  static FUSE_HD constexpr T infinity() noexcept { return T::from_bits(L::exponent_mask); }
  static FUSE_HD constexpr T quiet_NaN() noexcept {
    return T::from_bits(std::uint16_t(L::exponent_mask | L::quiet_bit));
  }
  static FUSE_HD constexpr T signaling_NaN() noexcept {
    return T::from_bits(std::uint16_t(L::exponent_mask | (L::quiet_bit >> 1)));
  }
  static FUSE_HD constexpr T denorm_min() noexcept { return T::from_bits(1); }
};
