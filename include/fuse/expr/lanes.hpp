// The vocabulary every op in ops.hpp is written in, for one lane (this file) and for SIMD
// vectors (fuse/simd/lanes_simd.hpp specialises the same struct for xsimd batches).
//
// `lanes<V>` is a customisation struct rather than a set of overloads so that ops.hpp, which
// must compile under nvcc without xsimd, can name it before the SIMD specialisations exist.
//
// Semantics fixed here (docs/ops.md states them for users):
//  - integer add/sub/mul wrap (two's complement), never UB;
//  - floating min/max propagate NaN (as NumPy's maximum/minimum);
//  - masks (the lanes of a bool value) are `bool` for one lane.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "fuse/core/config.hpp"
#include "fuse/core/limits.hpp"

namespace fuse {

template <class V>
struct lanes;  // specialised for the scalar compute types below and for SIMD vectors

namespace detail {
template <class T>
FUSE_HD constexpr T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T>
FUSE_HD constexpr T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <class T>
FUSE_HD constexpr T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
}  // namespace detail

/// One lane of a floating compute type (float or double).
template <class T>
  requires std::is_floating_point_v<T>
struct lanes<T> {
  using value = T;
  using scalar = T;
  using mask = bool;
  static constexpr int size = 1;

  FUSE_HD static T splat(T x) { return x; }
  FUSE_HD static T add(T a, T b) { return a + b; }
  FUSE_HD static T sub(T a, T b) { return a - b; }
  FUSE_HD static T mul(T a, T b) { return a * b; }
  FUSE_HD static T div(T a, T b) { return a / b; }
  FUSE_HD static T neg(T a) { return -a; }
  FUSE_HD static T abs(T a) { return std::fabs(a); }
  FUSE_HD static T fma(T a, T b, T c) { return std::fma(a, b, c); }
  FUSE_HD static T max(T a, T b) { return (a != a) ? a : (b != b) ? b : (a < b ? b : a); }
  FUSE_HD static T min(T a, T b) { return (a != a) ? a : (b != b) ? b : (b < a ? b : a); }
  FUSE_HD static T sqrt(T a) { return std::sqrt(a); }
  FUSE_HD static T floor(T a) { return std::floor(a); }
  FUSE_HD static T ceil(T a) { return std::ceil(a); }
  FUSE_HD static T trunc(T a) { return std::trunc(a); }
  /// Round half to even (IEEE roundTiesToEven), independent of the current rounding mode.
  FUSE_HD static T round_even(T a) {
    // 2^(digits-1): from there on every value is an integer.
    constexpr T big = integer_threshold<T>();
    const T m = std::fabs(a);
    if (!(m < big)) return a;  // huge, inf or NaN
    T r = std::floor(m);
    const T diff = m - r;
    if (diff > T(0.5) || (diff == T(0.5) && std::fmod(r, T(2)) != T(0))) r += T(1);
    return std::copysign(r, a);
  }
  /// Round half away from zero (C's round).
  FUSE_HD static T round_away(T a) { return std::round(a); }
  FUSE_HD static bool eq(T a, T b) { return a == b; }
  FUSE_HD static bool ne(T a, T b) { return a != b; }
  FUSE_HD static bool lt(T a, T b) { return a < b; }
  FUSE_HD static bool le(T a, T b) { return a <= b; }
  FUSE_HD static bool gt(T a, T b) { return a > b; }
  FUSE_HD static bool ge(T a, T b) { return a >= b; }
  FUSE_HD static bool is_nan(T a) { return a != a; }
  FUSE_HD static T select(bool m, T a, T b) { return m ? a : b; }
};

/// One lane of an integer compute type (int32 or int64): arithmetic wraps.
template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
struct lanes<T> {
  using value = T;
  using scalar = T;
  using mask = bool;
  static constexpr int size = 1;

  FUSE_HD static T splat(T x) { return x; }
  FUSE_HD static T add(T a, T b) { return detail::wrap_add(a, b); }
  FUSE_HD static T sub(T a, T b) { return detail::wrap_sub(a, b); }
  FUSE_HD static T mul(T a, T b) { return detail::wrap_mul(a, b); }
  FUSE_HD static T neg(T a) { return detail::wrap_sub(T(0), a); }
  FUSE_HD static T abs(T a) { return a < 0 ? neg(a) : a; }
  FUSE_HD static T max(T a, T b) { return a < b ? b : a; }
  FUSE_HD static T min(T a, T b) { return b < a ? b : a; }
  FUSE_HD static bool eq(T a, T b) { return a == b; }
  FUSE_HD static bool ne(T a, T b) { return a != b; }
  FUSE_HD static bool lt(T a, T b) { return a < b; }
  FUSE_HD static bool le(T a, T b) { return a <= b; }
  FUSE_HD static bool gt(T a, T b) { return a > b; }
  FUSE_HD static bool ge(T a, T b) { return a >= b; }
  FUSE_HD static T select(bool m, T a, T b) { return m ? a : b; }
};

/// One lane of a mask (a bool value).
template <>
struct lanes<bool> {
  using value = bool;
  using scalar = bool;
  using mask = bool;
  static constexpr int size = 1;

  FUSE_HD static bool splat(bool x) { return x; }
  FUSE_HD static bool logical_and(bool a, bool b) { return a && b; }
  FUSE_HD static bool logical_or(bool a, bool b) { return a || b; }
  FUSE_HD static bool logical_xor(bool a, bool b) { return a != b; }
  FUSE_HD static bool logical_not(bool a) { return !a; }
  FUSE_HD static bool eq(bool a, bool b) { return a == b; }
  FUSE_HD static bool ne(bool a, bool b) { return a != b; }
  FUSE_HD static bool lt(bool a, bool b) { return !a && b; }
  FUSE_HD static bool le(bool a, bool b) { return !a || b; }
  FUSE_HD static bool gt(bool a, bool b) { return a && !b; }
  FUSE_HD static bool ge(bool a, bool b) { return a || !b; }
  FUSE_HD static bool select(bool m, bool a, bool b) { return m ? a : b; }
};

/// The scalar type of one lane of V (V itself for scalars).
template <class V>
using lane_t = typename lanes<V>::scalar;
/// The mask (bool lanes) type that comparisons of V produce.
template <class V>
using mask_t = typename lanes<V>::mask;

/// V holds float lanes: what the float32 math of fuse/math accepts.
template <class V>
concept float_lanes = std::is_same_v<lane_t<V>, float>;

}  // namespace fuse
