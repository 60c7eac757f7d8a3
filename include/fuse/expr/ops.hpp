// THE op table: every elementwise op of fuse, defined once.
//
// An op is a small struct (empty, or holding its attributes such as clip's bounds) with
//   name                      the Relay name ("add", "nn.relu", ...)
//   dtype rule                `result<T...>` (the node's dtype) and `check<T...>()`, whose
//                             static_asserts name the op and the dtypes when they do not fit
//   apply<Mode>(v...)         the computation on lanes: one scalar lane (host or CUDA device) or
//                             a SIMD vector; written once against `fuse::lanes<V>` and
//                             fuse/math, so every executor runs the same code. Overloads that
//                             only accept some lane types (float_lanes...) leave the others to
//                             the executor's lane-by-lane fallback, which calls the scalar form.
//   reference(x...)           double-precision reference (and exact integer reference where
//                             the op takes integers), used by tests and the Relay interpreter.
// Operands reach `apply` as compute values of the operand dtypes (see core/dtype.hpp); the
// executor brings the result to the node's dtype with `canonical` afterwards.
//
// Exact semantics for users: docs/ops.md.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "fuse/core/dtype.hpp"
#include "fuse/expr/convert.hpp"
#include "fuse/expr/lanes.hpp"
#include "fuse/math/math.hpp"

namespace fuse::ops {

// ---- dtype rules -------------------------------------------------------------------------------
// The variable templates below appear by name in compiler notes ("'...<fuse::ops::add, float,
// int>' evaluates to false"), so they are named after the rule they state.

template <class Op, class... T>
inline constexpr bool operands_have_the_same_dtype = true;
template <class Op, class T0, class... T>
inline constexpr bool operands_have_the_same_dtype<Op, T0, T...> = (std::is_same_v<T0, T> && ...);

template <class Op, class T>
inline constexpr bool operand_dtype_is_numeric = is_floating_dtype<T> || is_integer_dtype<T>;
template <class Op, class T>
inline constexpr bool operand_dtype_is_floating = is_floating_dtype<T>;
template <class Op, class T>
inline constexpr bool operand_dtype_is_bool = is_bool_dtype<T>;
template <class Op, class T>
inline constexpr bool operand_dtype_is_integer = is_integer_dtype<T>;

/// Same-dtype numeric operands; the result has their dtype (add, maximum, nn.relu, ...).
struct numeric_rule {
  template <class T0, class... T>
  using result = T0;
  template <class Op, class T0, class... T>
  static constexpr void check() {
    static_assert(operands_have_the_same_dtype<Op, T0, T...>,
                  "fuse: the operands of this op must have the same dtype (Relay does not promote); "
                  "convert one with fuse::cast<T>(...)");
    static_assert(operand_dtype_is_numeric<Op, T0>, "fuse: this op takes numeric operands, not bool");
  }
};
/// Floating operands only (exp, sigmoid, round, ...).
struct floating_rule {
  template <class T0, class... T>
  using result = T0;
  template <class Op, class T0, class... T>
  static constexpr void check() {
    static_assert(operands_have_the_same_dtype<Op, T0, T...>,
                  "fuse: the operands of this op must have the same dtype (Relay does not promote); "
                  "convert one with fuse::cast<T>(...)");
    static_assert(operand_dtype_is_floating<Op, T0>,
                  "fuse: this op takes floating operands (float32, float64, float16, bfloat16); "
                  "convert with fuse::cast<float>(...)");
  }
};
/// Integer operands only (right_shift, left_shift).
struct integer_rule {
  template <class T0, class... T>
  using result = T0;
  template <class Op, class T0, class... T>
  static constexpr void check() {
    static_assert(operands_have_the_same_dtype<Op, T0, T...>,
                  "fuse: the operands of this op must have the same dtype (Relay does not promote); "
                  "convert one with fuse::cast<T>(...)");
    static_assert(operand_dtype_is_integer<Op, T0>, "fuse: this op takes integer operands (int8, uint8, int32, int64)");
  }
};
/// Comparisons: same-dtype operands (bool allowed), bool result.
struct compare_rule {
  template <class T0, class... T>
  using result = bool;
  template <class Op, class T0, class... T>
  static constexpr void check() {
    static_assert(operands_have_the_same_dtype<Op, T0, T...>,
                  "fuse: the operands of a comparison must have the same dtype; convert one with fuse::cast<T>(...)");
  }
};
/// Logical ops: bool operands, bool result.
struct logical_rule {
  template <class T0, class... T>
  using result = bool;
  template <class Op, class T0, class... T>
  static constexpr void check() {
    static_assert((operand_dtype_is_bool<Op, T0> && ... && operand_dtype_is_bool<Op, T>),
                  "fuse: logical ops take bool operands (compare first, or fuse::cast<bool>(...))");
  }
};

// ---- helpers shared by several ops -----------------------------------------------------------

namespace detail {
template <class V>
FUSE_HD V constant(double c) {
  return lanes<V>::splat(static_cast<lane_t<V>>(c));
}
/// Relay bounds (clip's a_min/a_max) are doubles; on integer dtypes only the integers inside
/// [lo, hi] matter, so bounds are rounded inward and saturated to the lane type.
template <class S>
FUSE_HD S bound_to_lane(double b, bool is_lower) {
  if constexpr (std::is_floating_point_v<S>) {
    return static_cast<S>(b);
  } else {
    double r = is_lower ? std::ceil(b) : std::floor(b);
    if (!(r == r)) r = is_lower ? -1e300 : 1e300;  // NaN bound: no bound
    if (r <= static_cast<double>(lowest_of<S>())) return lowest_of<S>();
    if (r >= static_cast<double>(highest_of<S>())) return highest_of<S>();
    return static_cast<S>(r);
  }
}
/// Integer division of Relay's `divide` on integers: truncating, x / 0 = 0, MIN / -1 = MIN.
template <class I>
FUSE_HD I int_div(I a, I b) {
  if (b == 0) return 0;
  if (b == -1) return lanes<I>::neg(a);
  return static_cast<I>(a / b);
}
/// Integer power: wrapping repeated squaring; negative exponents give the truncated rational
/// result (1 for base 1, +-1 for base -1, 0 otherwise; 0^negative = 0).
template <class I>
FUSE_HD I int_pow(I base, I e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return (e & 1) ? I(-1) : I(1);
    return 0;
  }
  I r = 1;
  while (e) {
    if (e & 1) r = lanes<I>::mul(r, base);
    base = lanes<I>::mul(base, base);
    e >>= 1;
  }
  return r;
}
/// Shifts with every amount defined (NumPy's rule): an amount outside [0, bits of I) shifts every
/// bit out, so right gives the sign fill (0 or -1) and left gives 0. Right shifts of signed
/// values are arithmetic (C++20), left shifts wrap.
template <class I>
FUSE_HD I shift_right(I a, I b) {
  if (b < 0 || b >= I(8 * sizeof(I))) return a < 0 ? I(-1) : I(0);
  return static_cast<I>(a >> b);
}
template <class I>
FUSE_HD I shift_left(I a, I b) {
  using U = std::make_unsigned_t<I>;
  if (b < 0 || b >= I(8 * sizeof(I))) return I(0);
  return static_cast<I>(static_cast<U>(static_cast<U>(a) << b));
}
/// Two's-complement wrap of an exact integer reference to the bits of dtype T.
template <class T>
std::int64_t wrap_to(std::int64_t x) {
  if constexpr (std::is_same_v<T, std::int64_t>) return x;
  else return static_cast<std::int64_t>(static_cast<T>(static_cast<std::make_unsigned_t<T>>(x)));
}
}  // namespace detail

// ---- binary arithmetic -----------------------------------------------------------------------

struct add : numeric_rule {
  static constexpr const char* name = "add";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const { return lanes<V>::add(a, b); }
  double reference(double a, double b) const { return a + b; }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return fuse::detail::wrap_add(a, b); }
};
struct subtract : numeric_rule {
  static constexpr const char* name = "subtract";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const { return lanes<V>::sub(a, b); }
  double reference(double a, double b) const { return a - b; }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return fuse::detail::wrap_sub(a, b); }
};
struct multiply : numeric_rule {
  static constexpr const char* name = "multiply";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const { return lanes<V>::mul(a, b); }
  double reference(double a, double b) const { return a * b; }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return fuse::detail::wrap_mul(a, b); }
};
/// Floating: IEEE division. Integer: truncating, x / 0 = 0, MIN / -1 wraps to MIN.
struct divide : numeric_rule {
  static constexpr const char* name = "divide";
  template <class M, class V>
    requires std::is_floating_point_v<lane_t<V>>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const { return lanes<V>::div(a, b); }
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const { return detail::int_div(a, b); }
  double reference(double a, double b) const { return a / b; }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::int_div(a, b); }
};
/// Floating: pow of the C library, evaluated in double and rounded once (so float32 results are
/// correctly rounded in all but rare halfway cases). Integer: exact wrapping power.
struct power : numeric_rule {
  static constexpr const char* name = "power";
  template <class M>
  FUSE_HD float apply(float a, float b) const { return static_cast<float>(std::pow(double(a), double(b))); }
  template <class M>
  FUSE_HD double apply(double a, double b) const { return std::pow(a, b); }
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const { return detail::int_pow(a, b); }
  double reference(double a, double b) const { return std::pow(a, b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::int_pow(a, b); }
};
/// NaN-propagating maximum (NumPy's maximum).
struct maximum : numeric_rule {
  static constexpr const char* name = "maximum";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const { return lanes<V>::max(a, b); }
  double reference(double a, double b) const { return std::isnan(a) || std::isnan(b) ? NAN : std::fmax(a, b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return a < b ? b : a; }
};
/// NaN-propagating minimum (NumPy's minimum).
struct minimum : numeric_rule {
  static constexpr const char* name = "minimum";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const { return lanes<V>::min(a, b); }
  double reference(double a, double b) const { return std::isnan(a) || std::isnan(b) ? NAN : std::fmin(a, b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return b < a ? b : a; }
};

/// right_shift(a, b): a >> b, arithmetic for signed dtypes. An amount outside [0, bits) gives
/// the sign fill (0 or -1); computed in the compute type's bits, so int8 and uint8 values
/// (computed as int32) give the same results as in their own width.
struct right_shift : integer_rule {
  static constexpr const char* name = "right_shift";
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const { return detail::shift_right(a, b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::shift_right(a, b); }
};
/// left_shift(a, b): a << b, wrapping to the dtype; an amount outside [0, bits) gives 0.
struct left_shift : integer_rule {
  static constexpr const char* name = "left_shift";
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const { return detail::shift_left(a, b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::shift_left(a, b); }
};

// ---- unary arithmetic ------------------------------------------------------------------------

struct negative : numeric_rule {
  static constexpr const char* name = "negative";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const { return lanes<V>::neg(a); }
  double reference(double a) const { return -a; }
  std::int64_t reference(std::int64_t a) const { return fuse::detail::wrap_sub(std::int64_t{0}, a); }
};
/// |x|; abs(MIN) of a signed integer type wraps to MIN.
struct abs : numeric_rule {
  static constexpr const char* name = "abs";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const { return lanes<V>::abs(a); }
  double reference(double a) const { return std::fabs(a); }
  std::int64_t reference(std::int64_t a) const { return a < 0 ? fuse::detail::wrap_sub(std::int64_t{0}, a) : a; }
};
/// -1, 0 or +1 (of the operand's dtype); sign(+-0) = +-0, sign(NaN) = NaN.
struct sign : numeric_rule {
  static constexpr const char* name = "sign";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const {
    using L = lanes<V>;
    const V zero = L::splat(lane_t<V>(0));
    const V r = L::select(L::gt(a, zero), L::splat(lane_t<V>(1)), L::select(L::lt(a, zero), L::splat(lane_t<V>(-1)), zero));
    if constexpr (std::is_floating_point_v<lane_t<V>>)
      return L::select(L::eq(a, zero), a, L::select(L::is_nan(a), a, r));  // keeps -0 and NaN
    else
      return r;
  }
  double reference(double a) const { return std::isnan(a) || a == 0 ? a : (a > 0 ? 1.0 : -1.0); }
  std::int64_t reference(std::int64_t a) const { return (a > 0) - (a < 0); }
};
/// nn.relu = maximum(x, 0): NaN propagates.
struct relu : numeric_rule {
  static constexpr const char* name = "nn.relu";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const { return lanes<V>::max(a, lanes<V>::splat(lane_t<V>(0))); }
  double reference(double a) const { return std::isnan(a) ? a : (a > 0 ? a : 0.0); }
  std::int64_t reference(std::int64_t a) const { return a > 0 ? a : 0; }
};
/// nn.leaky_relu: x > 0 ? x : alpha * x.
struct leaky_relu : floating_rule {
  static constexpr const char* name = "nn.leaky_relu";
  double alpha = 0.25;
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const {
    using L = lanes<V>;
    return L::select(L::gt(a, L::splat(lane_t<V>(0))), a, L::mul(a, detail::constant<V>(alpha)));
  }
  double reference(double a) const { return a > 0 ? a : alpha * a; }
};
/// clip(x, a_min, a_max) = minimum(maximum(x, a_min), a_max): NaN propagates. On integer dtypes
/// the bounds are rounded inward to integers first.
struct clip : numeric_rule {
  static constexpr const char* name = "clip";
  double a_min = 0, a_max = 0;
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const {
    using L = lanes<V>;
    using S = lane_t<V>;
    return L::min(L::max(a, L::splat(detail::bound_to_lane<S>(a_min, true))), L::splat(detail::bound_to_lane<S>(a_max, false)));
  }
  double reference(double a) const {
    if (std::isnan(a)) return a;
    return std::fmin(std::fmax(a, a_min), a_max);
  }
  std::int64_t reference(std::int64_t a) const {
    const double lo = std::ceil(a_min), hi = std::floor(a_max);
    const double x = static_cast<double>(a);
    return x < lo ? static_cast<std::int64_t>(lo) : x > hi ? static_cast<std::int64_t>(hi) : a;
  }
};

// ---- floating math -----------------------------------------------------------------------------

#define FUSE_FLOAT_UNARY(NAME, RELAY, FLOAT_EXPR, DOUBLE_EXPR)                         \
  struct NAME : floating_rule {                                                      \
    static constexpr const char* name = RELAY;                                       \
    template <class M, class V>                                                      \
      requires float_lanes<V>                                                        \
    FUSE_HD FUSE_FORCE_INLINE V apply(V x) const { return FLOAT_EXPR; }                                \
    template <class M>                                                               \
    FUSE_HD double apply(double x) const { return DOUBLE_EXPR; }                     \
    double reference(double x) const { return DOUBLE_EXPR; }                         \
  };

FUSE_FLOAT_UNARY(exp, "exp", math::exp<M>(x), std::exp(x))
FUSE_FLOAT_UNARY(log, "log", math::log<M>(x), std::log(x))
FUSE_FLOAT_UNARY(tanh, "tanh", math::tanh<M>(x), std::tanh(x))
FUSE_FLOAT_UNARY(sigmoid, "sigmoid", math::sigmoid<M>(x), 1.0 / (1.0 + std::exp(-x)))
FUSE_FLOAT_UNARY(erf, "erf", math::erf<M>(x), std::erf(x))
// Correctly rounded sqrt, then a correctly rounded division (as Relay computes it): < 2 ULP.
FUSE_FLOAT_UNARY(rsqrt, "rsqrt", lanes<V>::div(lanes<V>::splat(1.0f), lanes<V>::sqrt(x)), 1.0 / std::sqrt(x))
// GELU, erf form, written with erfc so that negative x keeps its relative accuracy:
// 0.5 x (1 + erf(x/sqrt2)) = 0.5 x erfc(-x/sqrt2).
FUSE_FLOAT_UNARY(gelu, "gelu", lanes<V>::mul(lanes<V>::mul(x, lanes<V>::splat(0.5f)),
                                             math::erfc<M>(lanes<V>::mul(x, lanes<V>::splat(-0.70710678118654752f)))),
                 0.5 * x * std::erfc(-x * 0.70710678118654752440))
// GELU, tanh form: 0.5 x (1 + tanh(y)) with y = sqrt(2/pi) (x + 0.044715 x^3), written as
// x * sigmoid(2y) (exact identity) so that negative x does not cancel.
FUSE_FLOAT_UNARY(gelu_tanh, "gelu_tanh",
                 lanes<V>::mul(x, math::sigmoid<M>(lanes<V>::mul(
                                      lanes<V>::mul(x, lanes<V>::splat(1.5957691216057308f)),
                                      lanes<V>::add(lanes<V>::splat(1.0f), lanes<V>::mul(lanes<V>::splat(0.044715f), lanes<V>::mul(x, x)))))),
                 x / (1.0 + std::exp(-1.5957691216057307593 * x * (1.0 + 0.044715 * x * x))))
#undef FUSE_FLOAT_UNARY

// Ops that are one `lanes` function and one C library function.
#define FUSE_LANES_UNARY(NAME, RELAY, LANES_FN, STD_FN)                                   \
  struct NAME : floating_rule {                                                        \
    static constexpr const char* name = RELAY;                                         \
    template <class M, class V>                                                        \
    FUSE_HD FUSE_FORCE_INLINE V apply(V x) const { return lanes<V>::LANES_FN(x); }     \
    double reference(double x) const { return std::STD_FN(x); }                        \
  };
/// Correctly rounded square root (IEEE): sqrt(-x) = NaN, sqrt(-0) = -0.
FUSE_LANES_UNARY(sqrt, "sqrt", sqrt, sqrt)
/// Relay's round as TVM executes it on CPU (llvm.round) and CUDA (roundf): half away from
/// zero, sign kept (round(-0.4) = -0). NumPy rounds half to even; the two differ only on ties.
FUSE_LANES_UNARY(round, "round", round_away, round)
FUSE_LANES_UNARY(floor, "floor", floor, floor)
FUSE_LANES_UNARY(ceil, "ceil", ceil, ceil)
FUSE_LANES_UNARY(trunc, "trunc", trunc, trunc)
#undef FUSE_LANES_UNARY

// ---- comparisons and logic ---------------------------------------------------------------------

#define FUSE_COMPARE(NAME, RELAY, FN, OPERATOR)                                                   \
  struct NAME : compare_rule {                                                                    \
    static constexpr const char* name = RELAY;                                                    \
    template <class M, class V>                                                                   \
    FUSE_HD FUSE_FORCE_INLINE mask_t<V> apply(V a, V b) const { return lanes<V>::FN(a, b); }                        \
    bool reference(double a, double b) const { return a OPERATOR b; }                             \
    bool reference(std::int64_t a, std::int64_t b) const { return a OPERATOR b; }                 \
  };
FUSE_COMPARE(equal, "equal", eq, ==)
FUSE_COMPARE(not_equal, "not_equal", ne, !=)
FUSE_COMPARE(less, "less", lt, <)
FUSE_COMPARE(less_equal, "less_equal", le, <=)
FUSE_COMPARE(greater, "greater", gt, >)
FUSE_COMPARE(greater_equal, "greater_equal", ge, >=)
#undef FUSE_COMPARE

#define FUSE_LOGICAL2(NAME, RELAY, FN, EXPR)                                                      \
  struct NAME : logical_rule {                                                                    \
    static constexpr const char* name = RELAY;                                                    \
    template <class M, class V>                                                                   \
    FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const { return lanes<V>::FN(a, b); }                                \
    bool reference(std::int64_t a, std::int64_t b) const { return EXPR; }                        \
  };
FUSE_LOGICAL2(logical_and, "logical_and", logical_and, a && b)
FUSE_LOGICAL2(logical_or, "logical_or", logical_or, a || b)
FUSE_LOGICAL2(logical_xor, "logical_xor", logical_xor, (a != 0) != (b != 0))
#undef FUSE_LOGICAL2

struct logical_not : logical_rule {
  static constexpr const char* name = "logical_not";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const { return lanes<V>::logical_not(a); }
  bool reference(std::int64_t a) const { return !a; }
};

// ---- where and cast ----------------------------------------------------------------------------

template <class Op, class C>
inline constexpr bool where_condition_is_bool = is_bool_dtype<C>;

/// where(cond, a, b): cond is bool; a and b share a dtype, which is the result's.
struct where {
  static constexpr const char* name = "where";
  template <class C, class A, class B>
  using result = A;
  template <class Op, class C, class A, class B>
  static constexpr void check() {
    static_assert(where_condition_is_bool<Op, C>, "fuse: where's condition must be bool (compare first)");
    static_assert(operands_have_the_same_dtype<Op, A, B>,
                  "fuse: where's two value operands must have the same dtype; convert one with fuse::cast<T>(...)");
  }
  template <class M, class Mask, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(Mask c, V a, V b) const { return lanes<V>::select(c, a, b); }
  double reference(std::int64_t c, double a, double b) const { return c ? a : b; }
  std::int64_t reference(std::int64_t c, std::int64_t a, std::int64_t b) const { return c ? a : b; }
};

template <class Op>
inline constexpr bool is_cast = false;

/// cast<To>: see fuse/expr/convert.hpp for the exact rules.
template <element To>
struct cast {
  static constexpr const char* name = "cast";
  using to = To;
  template <class From>
  using result = To;
  template <class Op, class From>
  static constexpr void check() {}
};
template <element To>
inline constexpr bool is_cast<cast<To>> = true;

}  // namespace fuse::ops
