// Element types: what each storage type is called in Relay, and the type fuse computes in.
//
// Storage types are what tensors hold. Arithmetic happens in a *compute type*: float16 and
// bfloat16 compute in float, int8 and uint8 in int32. After every op the result is brought back
// to the node's dtype (rounded to half, wrapped to 8 bits...), so a fused tree gives exactly what
// op-by-op execution in the node dtypes gives; see `canonical`.
#pragma once

#include <cstdint>
#include <type_traits>

#include "fuse/core/config.hpp"
#include "fuse/core/half.hpp"

namespace fuse {

enum class dtype : std::uint8_t { boolean, int8, uint8, int32, int64, float16, bfloat16, float32, float64 };

template <class T>
struct dtype_traits;  // not defined for types fuse does not support

#define FUSE_DTYPE(T, CODE, NAME, COMPUTE)     \
  template <>                                  \
  struct dtype_traits<T> {                     \
    static constexpr dtype code = dtype::CODE; \
    static constexpr const char* name = NAME;  \
    using compute_type = COMPUTE;              \
  };
FUSE_DTYPE(bool, boolean, "bool", bool)
FUSE_DTYPE(std::int8_t, int8, "int8", std::int32_t)
FUSE_DTYPE(std::uint8_t, uint8, "uint8", std::int32_t)
FUSE_DTYPE(std::int32_t, int32, "int32", std::int32_t)
FUSE_DTYPE(std::int64_t, int64, "int64", std::int64_t)
FUSE_DTYPE(half, float16, "float16", float)
FUSE_DTYPE(bfloat16, bfloat16, "bfloat16", float)
FUSE_DTYPE(float, float32, "float32", float)
FUSE_DTYPE(double, float64, "float64", double)
#undef FUSE_DTYPE

/// A type fuse tensors may hold (cv-qualifiers ignored).
template <class T>
concept element = requires { dtype_traits<std::remove_cv_t<T>>::code; };

template <element T>
using compute_t = typename dtype_traits<std::remove_cv_t<T>>::compute_type;

template <element T>
inline constexpr const char* dtype_name = dtype_traits<std::remove_cv_t<T>>::name;

template <class T>
inline constexpr bool is_floating_dtype =
    std::is_same_v<std::remove_cv_t<T>, float> || std::is_same_v<std::remove_cv_t<T>, double> ||
    std::is_same_v<std::remove_cv_t<T>, half> || std::is_same_v<std::remove_cv_t<T>, bfloat16>;

template <class T>
inline constexpr bool is_integer_dtype =
    std::is_same_v<std::remove_cv_t<T>, std::int8_t> || std::is_same_v<std::remove_cv_t<T>, std::uint8_t> ||
    std::is_same_v<std::remove_cv_t<T>, std::int32_t> || std::is_same_v<std::remove_cv_t<T>, std::int64_t>;

template <class T>
inline constexpr bool is_bool_dtype = std::is_same_v<std::remove_cv_t<T>, bool>;

template <class T>
inline constexpr bool is_signed_dtype =
    is_floating_dtype<T> || std::is_same_v<std::remove_cv_t<T>, std::int8_t> ||
    std::is_same_v<std::remove_cv_t<T>, std::int32_t> || std::is_same_v<std::remove_cv_t<T>, std::int64_t>;

/// Storage value -> compute value (exact for every dtype).
template <element T>
FUSE_HD constexpr compute_t<T> to_compute(T v) {
  if constexpr (std::is_same_v<std::remove_cv_t<T>, half> || std::is_same_v<std::remove_cv_t<T>, bfloat16>)
    return static_cast<float>(v);
  else return static_cast<compute_t<T>>(v);
}

/// Compute value -> storage value. The value must already be canonical for T (see `canonical`),
/// so this never rounds or wraps anything that op-by-op execution would not.
template <element T>
FUSE_HD constexpr T to_storage(compute_t<T> v) {
  if constexpr (std::is_same_v<std::remove_cv_t<T>, std::uint8_t>)
    return static_cast<std::uint8_t>(static_cast<std::uint32_t>(v));
  else if constexpr (std::is_same_v<std::remove_cv_t<T>, std::int8_t>)
    return static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<std::uint32_t>(v)));
  else return static_cast<T>(v);
}

/// Brings a compute value to the set of values dtype T can hold, as the op producing it in T
/// would: round to the nearest float16/bfloat16, wrap to 8 bits (two's complement). Identity for
/// the types that compute in themselves.
template <element T>
FUSE_HD constexpr compute_t<T> canonical(compute_t<T> v) {
  using S = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<S, half> || std::is_same_v<S, bfloat16>) return static_cast<float>(S(v));
  else if constexpr (std::is_same_v<S, std::int8_t>)
    return static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<std::uint32_t>(v)));
  else if constexpr (std::is_same_v<S, std::uint8_t>)
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(v) & 0xFFu);
  else return v;
}

}  // namespace fuse
