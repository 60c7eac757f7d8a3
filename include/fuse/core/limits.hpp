// Limits of the integer and floating compute types, usable in device code
// (std::numeric_limits' members are constexpr host functions that nvcc will not call from
// __device__ code without --expt-relaxed-constexpr).
#pragma once

#include <cstdint>
#include <type_traits>

#include "fuse/core/config.hpp"

namespace fuse {

/// The smallest value of integer type T.
template <class T>
  requires std::is_integral_v<T>
FUSE_HD constexpr T lowest_of() {
  if constexpr (std::is_signed_v<T>) return static_cast<T>(T(1) << (8 * sizeof(T) - 1));
  else return T(0);
}
/// The largest value of integer type T.
template <class T>
  requires std::is_integral_v<T>
FUSE_HD constexpr T highest_of() {
  if constexpr (std::is_signed_v<T>) return static_cast<T>(~lowest_of<T>());
  else return static_cast<T>(~T(0));
}
/// 2^(digits - 1) of float or double: from there on every value is an integer.
template <class T>
  requires std::is_floating_point_v<T>
FUSE_HD constexpr T integer_threshold() {
  return sizeof(T) == 4 ? T(8388608.0) : T(4503599627370496.0);
}
/// +infinity of float or double.
template <class T>
  requires std::is_floating_point_v<T>
FUSE_HD constexpr T infinity_of() {
  return __builtin_huge_val();
}

}  // namespace fuse
