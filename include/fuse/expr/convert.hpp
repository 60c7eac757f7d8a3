// Value conversions between dtypes (what `cast` computes), for one lane. The SIMD versions in
// fuse/simd/convert_simd.hpp must agree with these bit for bit.
//
// Semantics (docs/ops.md):
//  - floating -> integer: truncate toward zero, saturate to the target's range, NaN -> 0;
//  - integer -> narrower integer: wrap (two's complement), as C and TVM do;
//  - anything -> floating: round to nearest even, once;
//  - bool -> number: 0 or 1; number -> bool: x != 0 (NaN -> true).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "fuse/core/dtype.hpp"
#include "fuse/core/limits.hpp"

namespace fuse {

namespace detail {

/// float/double -> integer of [lo, hi], truncating, saturating, NaN -> 0.
template <class I, class F>
FUSE_HD constexpr I saturating_trunc(F x, I lo, I hi) {
  if (!(x == x)) return I(0);
  // Compare in F against bounds that F represents exactly: lo is a power of two (or 0) and
  // hi + 1 is a power of two, so both are exact.
  if (x <= static_cast<F>(lo)) return lo;
  if (x >= static_cast<F>(hi) + F(1)) return hi;
  return static_cast<I>(x);
}

}  // namespace detail

/// Converts `x`, a compute value of dtype From, to the compute value of dtype To.
template <element To, element From>
FUSE_HD constexpr compute_t<To> convert_value(compute_t<From> x) {
  using T = std::remove_cv_t<To>;
  using F = std::remove_cv_t<From>;
  using CT = compute_t<To>;
  if constexpr (std::is_same_v<T, F>) {
    return x;
  } else if constexpr (is_bool_dtype<T>) {
    return x != compute_t<From>(0);
  } else if constexpr (is_bool_dtype<F>) {
    return x ? CT(1) : CT(0);
  } else if constexpr (is_integer_dtype<T> && is_floating_dtype<F>) {
    return static_cast<CT>(detail::saturating_trunc<T>(x, lowest_of<T>(), highest_of<T>()));
  } else if constexpr (is_integer_dtype<T> && is_integer_dtype<F>) {
    // wrap: through the unsigned type of the target's width
    using U = std::make_unsigned_t<T>;
    return static_cast<CT>(static_cast<T>(static_cast<U>(x)));
  } else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return static_cast<float>(T(x));  // half/bfloat16 round once from any source type
  } else {
    static_assert(is_floating_dtype<T>);
    return static_cast<CT>(x);
  }
}

}  // namespace fuse
