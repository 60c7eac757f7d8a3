// THE op table: every elementwise op of fuse, defined once.
//
// An op is a small struct (empty, or holding its attributes such as clip's bounds) with
//   name                      the Relay name ("add", "nn.relu", ...)
//   arity, pattern            operands, and TVM's fusion pattern (unary_op: elemwise,
//                             binary_op: broadcast), which the Relay planner reads
//   attributes(op, f)         (ops with attributes) each attribute's Relay name, whether Relay
//                             has a default, and its value, in the builder's order:
//                             fuse::clip(x, a_min, a_max)
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
// FUSE_ELEMENTWISE_OPS at the end lists them: the builders fuse::NAME (fuse/expr/elementwise.hpp),
// the Relay registry, interpreter and emitter (fuse/relay/) are generated from that list, so
// an op is added here and nowhere else.
//
// Exact semantics for users: docs/ops.md.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "fuse/core/dtype.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/limits.hpp"
#include "fuse/expr/convert.hpp"
#include "fuse/expr/lanes.hpp"
#include "fuse/math/math.hpp"

namespace fuse {

/// TVM's OpPatternKind (include/tvm/relay/op_attr_types.h): what TVM's FuseOps may fuse an op
/// with; `none` for ops TVM lowers before FuseOps (qnn.*, nn.layer_norm).
enum class op_pattern : int {
  elemwise = 0,
  broadcast = 1,
  injective = 2,
  comm_reduce = 3,
  out_ewise_fusable = 4,
  tuple = 7,
  opaque = 8,
  none = -1
};

}  // namespace fuse

namespace fuse::ops {

/// The kind of an op's dtype rule, which the Relay type checker states as a type relation.
enum class rule_kind { numeric, floating, integer, compare, logical, classify, where };

/// One operand, elementwise (TVM: kElemWise); two operands that broadcast (kBroadcast).
struct unary_op {
  static constexpr int arity = 1;
  static constexpr op_pattern pattern = op_pattern::elemwise;
};
struct binary_op {
  static constexpr int arity = 2;
  static constexpr op_pattern pattern = op_pattern::broadcast;
};

/// An attribute of an op as Relay writes it (`alpha=0.1f`): its name, whether Relay has a
/// default for it (the op's default member value) or requires it, and whether it is an integer.
struct attribute {
  const char* name;
  bool has_default;
  bool integer = false;  ///< an integer in Relay (an axis), held as a double here
};

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
  static constexpr rule_kind kind = rule_kind::numeric;
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
  static constexpr rule_kind kind = rule_kind::floating;
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
  static constexpr rule_kind kind = rule_kind::integer;
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
/// Classification: a floating operand, bool result (isnan, isinf, isfinite).
struct classify_rule {
  static constexpr rule_kind kind = rule_kind::classify;
  template <class T0, class... T>
  using result = bool;
  template <class Op, class T0, class... T>
  static constexpr void check() {
    static_assert(operand_dtype_is_floating<Op, T0>,
                  "fuse: this op takes floating operands (float32, float64, float16, bfloat16)");
  }
};
/// Comparisons: same-dtype operands (bool allowed), bool result.
struct compare_rule {
  static constexpr rule_kind kind = rule_kind::compare;
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
  static constexpr rule_kind kind = rule_kind::logical;
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
/// Integer floor division and modulo (Python's): x / 0 = 0 and x mod 0 = 0 (as divide), MIN / -1
/// wraps to MIN, MIN mod -1 = 0.
template <class I>
FUSE_HD I int_floor_div(I a, I b) {
  if (b == 0) return 0;
  if (b == -1) return lanes<I>::neg(a);
  I q = static_cast<I>(a / b);
  if (static_cast<I>(a % b) != 0 && ((a < 0) != (b < 0))) q = static_cast<I>(q - 1);
  return q;
}
template <class I>
FUSE_HD I int_floor_mod(I a, I b) {
  if (b == 0 || b == -1) return 0;
  I r = static_cast<I>(a % b);
  if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<I>(r + b);
  return r;
}
/// Integer truncating modulo (C's %): x mod 0 = 0, MIN mod -1 = 0.
template <class I>
FUSE_HD I int_trunc_mod(I a, I b) {
  if (b == 0 || b == -1) return 0;
  return static_cast<I>(a % b);
}
/// Two's-complement wrap of an exact integer reference to the bits of dtype T.
template <class T>
FUSE_HD std::int64_t wrap_to(std::int64_t x) {
  if constexpr (std::is_same_v<T, std::int64_t>) return x;
  else return static_cast<std::int64_t>(static_cast<T>(static_cast<std::make_unsigned_t<T>>(x)));
}
}  // namespace detail

// ---- binary arithmetic -----------------------------------------------------------------------

struct add : numeric_rule, binary_op {
  static constexpr const char* name = "add";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const {
    return lanes<V>::add(a, b);
  }
  double reference(double a, double b) const { return a + b; }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return fuse::detail::wrap_add(a, b); }
};
struct subtract : numeric_rule, binary_op {
  static constexpr const char* name = "subtract";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const {
    return lanes<V>::sub(a, b);
  }
  double reference(double a, double b) const { return a - b; }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return fuse::detail::wrap_sub(a, b); }
};
struct multiply : numeric_rule, binary_op {
  static constexpr const char* name = "multiply";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const {
    return lanes<V>::mul(a, b);
  }
  double reference(double a, double b) const { return a * b; }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return fuse::detail::wrap_mul(a, b); }
};
/// Floating: IEEE division. Integer: truncating, x / 0 = 0, MIN / -1 wraps to MIN.
struct divide : numeric_rule, binary_op {
  static constexpr const char* name = "divide";
  template <class M, class V>
    requires std::is_floating_point_v<lane_t<V>>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const {
    return lanes<V>::div(a, b);
  }
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const {
    return detail::int_div(a, b);
  }
  double reference(double a, double b) const { return a / b; }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::int_div(a, b); }
};
/// Floating: pow of the C library, evaluated in double and rounded once (so float32 results are
/// correctly rounded in all but rare halfway cases). Integer: exact wrapping power.
struct power : numeric_rule, binary_op {
  static constexpr const char* name = "power";
  template <class M>
  FUSE_HD float apply(float a, float b) const {
    return static_cast<float>(std::pow(double(a), double(b)));
  }
  template <class M>
  FUSE_HD double apply(double a, double b) const {
    return std::pow(a, b);
  }
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const {
    return detail::int_pow(a, b);
  }
  double reference(double a, double b) const { return std::pow(a, b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::int_pow(a, b); }
};
/// NaN-propagating maximum (NumPy's maximum).
struct maximum : numeric_rule, binary_op {
  static constexpr const char* name = "maximum";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const {
    return lanes<V>::max(a, b);
  }
  double reference(double a, double b) const { return std::isnan(a) || std::isnan(b) ? NAN : std::fmax(a, b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return a < b ? b : a; }
};
/// NaN-propagating minimum (NumPy's minimum).
struct minimum : numeric_rule, binary_op {
  static constexpr const char* name = "minimum";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const {
    return lanes<V>::min(a, b);
  }
  double reference(double a, double b) const { return std::isnan(a) || std::isnan(b) ? NAN : std::fmin(a, b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return b < a ? b : a; }
};

/// right_shift(a, b): a >> b, arithmetic for signed dtypes. An amount outside [0, bits) gives
/// the sign fill (0 or -1); computed in the compute type's bits, so int8 and uint8 values
/// (computed as int32) give the same results as in their own width.
struct right_shift : integer_rule, binary_op {
  static constexpr const char* name = "right_shift";
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const {
    return detail::shift_right(a, b);
  }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::shift_right(a, b); }
};
/// left_shift(a, b): a << b, wrapping to the dtype; an amount outside [0, bits) gives 0.
struct left_shift : integer_rule, binary_op {
  static constexpr const char* name = "left_shift";
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const {
    return detail::shift_left(a, b);
  }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::shift_left(a, b); }
};

/// floor_divide: floats floor(a / b) (TVM's formula: the rounded quotient, floored); integers
/// exact floor division, x / 0 = 0, MIN / -1 wraps to MIN.
struct floor_divide : numeric_rule, binary_op {
  static constexpr const char* name = "floor_divide";
  template <class M, class V>
    requires std::is_floating_point_v<lane_t<V>>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const {
    return lanes<V>::floor(lanes<V>::div(a, b));
  }
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const {
    return detail::int_floor_div(a, b);
  }
  double reference(double a, double b) const { return std::floor(a / b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::int_floor_div(a, b); }
};
/// floor_mod: floats a - floor(a / b) * b (TVM's formula, the product and difference as one
/// FMA); integers the modulo with b's sign, x mod 0 = 0.
struct floor_mod : numeric_rule, binary_op {
  static constexpr const char* name = "floor_mod";
  template <class M>
  FUSE_HD float apply(float a, float b) const {
    return std::fma(-std::floor(a / b), b, a);
  }
  template <class M>
  FUSE_HD double apply(double a, double b) const {
    return std::fma(-std::floor(a / b), b, a);
  }
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const {
    return detail::int_floor_mod(a, b);
  }
  double reference(double a, double b) const { return std::fma(-std::floor(a / b), b, a); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::int_floor_mod(a, b); }
};
/// trunc_divide: floats trunc(a / b); integers as divide (truncating, x / 0 = 0).
struct trunc_divide : numeric_rule, binary_op {
  static constexpr const char* name = "trunc_divide";
  template <class M, class V>
    requires std::is_floating_point_v<lane_t<V>>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const {
    return lanes<V>::trunc(lanes<V>::div(a, b));
  }
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const {
    return detail::int_div(a, b);
  }
  double reference(double a, double b) const { return std::trunc(a / b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::int_div(a, b); }
};
/// trunc_mod: floats fmod(a, b) (exact, the sign of a); integers C's %, x mod 0 = 0.
struct trunc_mod : numeric_rule, binary_op {
  static constexpr const char* name = "trunc_mod";
  template <class M>
  FUSE_HD float apply(float a, float b) const {
    return std::fmod(a, b);
  }
  template <class M>
  FUSE_HD double apply(double a, double b) const {
    return std::fmod(a, b);
  }
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a, I b) const {
    return detail::int_trunc_mod(a, b);
  }
  double reference(double a, double b) const { return std::fmod(a, b); }
  std::int64_t reference(std::int64_t a, std::int64_t b) const { return detail::int_trunc_mod(a, b); }
};

// Bitwise ops on integers, computed in the compute type's bits (sign or zero extension commutes
// with them, so int8 and uint8 results are those of their own width).
#define FUSE_BITWISE2(NAME, OPERATOR)                                                     \
  struct NAME : integer_rule, binary_op {                                                 \
    static constexpr const char* name = #NAME;                                            \
    template <class M, class I>                                                           \
      requires std::is_integral_v<I>                                                      \
    FUSE_HD I apply(I a, I b) const {                                                     \
      return static_cast<I>(a OPERATOR b);                                                \
    }                                                                                     \
    std::int64_t reference(std::int64_t a, std::int64_t b) const { return a OPERATOR b; } \
  };
FUSE_BITWISE2(bitwise_and, &)
FUSE_BITWISE2(bitwise_or, |)
FUSE_BITWISE2(bitwise_xor, ^)
#undef FUSE_BITWISE2
struct bitwise_not : integer_rule, unary_op {
  static constexpr const char* name = "bitwise_not";
  template <class M, class I>
    requires std::is_integral_v<I>
  FUSE_HD I apply(I a) const {
    return static_cast<I>(~a);
  }
  std::int64_t reference(std::int64_t a) const { return ~a; }
};

// ---- unary arithmetic ------------------------------------------------------------------------

struct negative : numeric_rule, unary_op {
  static constexpr const char* name = "negative";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const {
    return lanes<V>::neg(a);
  }
  double reference(double a) const { return -a; }
  std::int64_t reference(std::int64_t a) const { return fuse::detail::wrap_sub(std::int64_t{0}, a); }
};
/// |x|; abs(MIN) of a signed integer type wraps to MIN.
struct abs : numeric_rule, unary_op {
  static constexpr const char* name = "abs";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const {
    return lanes<V>::abs(a);
  }
  double reference(double a) const { return std::fabs(a); }
  std::int64_t reference(std::int64_t a) const { return a < 0 ? fuse::detail::wrap_sub(std::int64_t{0}, a) : a; }
};
/// -1, 0 or +1 (of the operand's dtype); sign(+-0) = +-0, sign(NaN) = NaN.
struct sign : numeric_rule, unary_op {
  static constexpr const char* name = "sign";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const {
    using L = lanes<V>;
    const V zero = L::splat(lane_t<V>(0));
    const V r =
        L::select(L::gt(a, zero), L::splat(lane_t<V>(1)), L::select(L::lt(a, zero), L::splat(lane_t<V>(-1)), zero));
    if constexpr (std::is_floating_point_v<lane_t<V>>)
      return L::select(L::eq(a, zero), a, L::select(L::is_nan(a), a, r));  // keeps -0 and NaN
    else return r;
  }
  double reference(double a) const { return std::isnan(a) || a == 0 ? a : (a > 0 ? 1.0 : -1.0); }
  std::int64_t reference(std::int64_t a) const { return (a > 0) - (a < 0); }
};
/// nn.relu = maximum(x, 0): NaN propagates.
struct relu : numeric_rule, unary_op {
  static constexpr const char* name = "nn.relu";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const {
    return lanes<V>::max(a, lanes<V>::splat(lane_t<V>(0)));
  }
  double reference(double a) const { return std::isnan(a) ? a : (a > 0 ? a : 0.0); }
  std::int64_t reference(std::int64_t a) const { return a > 0 ? a : 0; }
};
/// nn.leaky_relu: x > 0 ? x : alpha * x.
struct leaky_relu : floating_rule, unary_op {
  static constexpr const char* name = "nn.leaky_relu";
  double alpha = 0.25;
  template <class Self, class F>
  static constexpr void attributes(Self& op, F&& f) {
    f(attribute{"alpha", true}, op.alpha);
  }
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const {
    using L = lanes<V>;
    return L::select(L::gt(a, L::splat(lane_t<V>(0))), a, L::mul(a, detail::constant<V>(alpha)));
  }
  double reference(double a) const { return a > 0 ? a : alpha * a; }
};
/// clip(x, a_min, a_max) = minimum(maximum(x, a_min), a_max): NaN propagates. On integer dtypes
/// the bounds are rounded inward to integers first.
struct clip : numeric_rule, unary_op {
  static constexpr const char* name = "clip";
  double a_min = 0, a_max = 0;
  template <class Self, class F>
  static constexpr void attributes(Self& op, F&& f) {
    f(attribute{"a_min", false}, op.a_min);
    f(attribute{"a_max", false}, op.a_max);
  }
  /// Called by the builder once the attributes are set.
  void validate() const {
    if (!(a_min <= a_max)) throw_shape_error("clip: a_min (", a_min, ") must not exceed a_max (", a_max, ")");
  }
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const {
    using L = lanes<V>;
    using S = lane_t<V>;
    return L::min(L::max(a, L::splat(detail::bound_to_lane<S>(a_min, true))),
                  L::splat(detail::bound_to_lane<S>(a_max, false)));
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

/// nn.prelu(x, alpha, axis=1): x > 0 ? x : alpha * x, with alpha 1-D, the extent of `axis` of
/// x, broadcast along it (as nn.bias_add's bias). NaN propagates.
struct prelu : floating_rule, binary_op {
  static constexpr const char* name = "nn.prelu";
  /// Operand 1 is 1-D along attribute `axis` of operand 0 (the builder, the Relay type relation
  /// and interpreter place it there).
  static constexpr int channel_operand = 1;
  double axis = 1;
  template <class Self, class F>
  static constexpr void attributes(Self& op, F&& f) {
    f(attribute{"axis", true, true}, op.axis);
  }
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V x, V a) const {
    using L = lanes<V>;
    return L::select(L::gt(x, L::splat(lane_t<V>(0))), x, L::mul(a, x));
  }
  double reference(double x, double a) const { return x > 0 ? x : a * x; }
};

// ---- floating math -----------------------------------------------------------------------------

#define FUSE_FLOAT_UNARY(NAME, RELAY, FLOAT_EXPR, DOUBLE_EXPR) \
  struct NAME : floating_rule, unary_op {                      \
    static constexpr const char* name = RELAY;                 \
    template <class M, class V>                                \
      requires float_lanes<V>                                  \
    FUSE_HD FUSE_FORCE_INLINE V apply(V x) const {             \
      return FLOAT_EXPR;                                       \
    }                                                          \
    template <class M>                                         \
    FUSE_HD double apply(double x) const {                     \
      return DOUBLE_EXPR;                                      \
    }                                                          \
    double reference(double x) const { return DOUBLE_EXPR; }   \
  };

FUSE_FLOAT_UNARY(exp, "exp", math::exp<M>(x), std::exp(x))
FUSE_FLOAT_UNARY(log, "log", math::log<M>(x), std::log(x))
FUSE_FLOAT_UNARY(tanh, "tanh", math::tanh<M>(x), std::tanh(x))
FUSE_FLOAT_UNARY(sigmoid, "sigmoid", math::sigmoid<M>(x), 1.0 / (1.0 + std::exp(-x)))
FUSE_FLOAT_UNARY(erf, "erf", math::erf<M>(x), std::erf(x))
// TVM's approximations (fuse/math/fast.hpp) for float32 (and 16-bit dtypes, computed in float32);
// float64 takes the exact function, as TVM does.
FUSE_FLOAT_UNARY(fast_exp, "fast_exp", math::fast_exp(x), std::exp(x))
FUSE_FLOAT_UNARY(fast_tanh, "fast_tanh", math::fast_tanh(x), std::tanh(x))
FUSE_FLOAT_UNARY(fast_erf, "fast_erf", math::fast_erf(x), std::erf(x))
// Correctly rounded sqrt, then a correctly rounded division (as Relay computes it): < 2 ULP.
FUSE_FLOAT_UNARY(rsqrt, "rsqrt", lanes<V>::div(lanes<V>::splat(1.0f), lanes<V>::sqrt(x)), 1.0 / std::sqrt(x))
// GELU, erf form, written with erfc so that negative x keeps its relative accuracy:
// 0.5 x (1 + erf(x/sqrt2)) = 0.5 x erfc(-x/sqrt2).
FUSE_FLOAT_UNARY(gelu, "gelu",
                 lanes<V>::mul(lanes<V>::mul(x, lanes<V>::splat(0.5f)),
                               math::erfc<M>(lanes<V>::mul(x, lanes<V>::splat(-0.70710678118654752f)))),
                 0.5 * x * std::erfc(-x * 0.70710678118654752440))
// GELU, tanh form: 0.5 x (1 + tanh(y)) with y = sqrt(2/pi) (x + 0.044715 x^3), written as
// x * sigmoid(2y) (exact identity) so that negative x does not cancel.
FUSE_FLOAT_UNARY(gelu_tanh, "gelu_tanh",
                 lanes<V>::mul(x, math::sigmoid<M>(lanes<V>::mul(lanes<V>::mul(x, lanes<V>::splat(1.5957691216057308f)),
                                                                 lanes<V>::add(lanes<V>::splat(1.0f),
                                                                               lanes<V>::mul(lanes<V>::splat(0.044715f),
                                                                                             lanes<V>::mul(x, x)))))),
                 x / (1.0 + std::exp(-1.5957691216057307593 * x * (1.0 + 0.044715 * x * x))))
#undef FUSE_FLOAT_UNARY

// Ops that are one `lanes` function and one C library function.
#define FUSE_LANES_UNARY(NAME, RELAY, LANES_FN, STD_FN)         \
  struct NAME : floating_rule, unary_op {                       \
    static constexpr const char* name = RELAY;                  \
    template <class M, class V>                                 \
    FUSE_HD FUSE_FORCE_INLINE V apply(V x) const {              \
      return lanes<V>::LANES_FN(x);                             \
    }                                                           \
    double reference(double x) const { return std::STD_FN(x); } \
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

// ---- more floating math: evaluated in double per lane -----------------------------------------
// The C library's double function, rounded once to float: within 1 ULP of the correctly rounded
// float result (0.5 ULP plus the double function's error), the same code on every executor's
// scalar lane (SIMD executors run these lane by lane). float64 takes the C library function.

#define FUSE_DOUBLE_UNARY(NAME, RELAY)                              \
  struct NAME : floating_rule, unary_op {                           \
    static constexpr const char* name = RELAY;                      \
    template <class M>                                              \
    FUSE_HD float apply(float x) const {                            \
      return static_cast<float>(std::NAME(static_cast<double>(x))); \
    }                                                               \
    template <class M>                                              \
    FUSE_HD double apply(double x) const {                          \
      return std::NAME(x);                                          \
    }                                                               \
    double reference(double x) const { return std::NAME(x); }       \
  };
FUSE_DOUBLE_UNARY(log2, "log2")
FUSE_DOUBLE_UNARY(log10, "log10")
FUSE_DOUBLE_UNARY(sin, "sin")
FUSE_DOUBLE_UNARY(cos, "cos")
FUSE_DOUBLE_UNARY(tan, "tan")
FUSE_DOUBLE_UNARY(asin, "asin")
FUSE_DOUBLE_UNARY(acos, "acos")
FUSE_DOUBLE_UNARY(atan, "atan")
FUSE_DOUBLE_UNARY(sinh, "sinh")
FUSE_DOUBLE_UNARY(cosh, "cosh")
FUSE_DOUBLE_UNARY(asinh, "asinh")
FUSE_DOUBLE_UNARY(acosh, "acosh")
FUSE_DOUBLE_UNARY(atanh, "atanh")
#undef FUSE_DOUBLE_UNARY

// ---- classification ------------------------------------------------------------------------------

struct isnan : classify_rule, unary_op {
  static constexpr const char* name = "isnan";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE mask_t<V> apply(V x) const {
    return lanes<V>::is_nan(x);
  }
  bool reference(double x) const { return std::isnan(x); }
};
struct isinf : classify_rule, unary_op {
  static constexpr const char* name = "isinf";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE mask_t<V> apply(V x) const {
    return lanes<V>::eq(lanes<V>::abs(x), lanes<V>::splat(infinity_of<lane_t<V>>()));
  }
  bool reference(double x) const { return std::isinf(x); }
};
/// Neither NaN nor infinite.
struct isfinite : classify_rule, unary_op {
  static constexpr const char* name = "isfinite";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE mask_t<V> apply(V x) const {
    return lanes<V>::lt(lanes<V>::abs(x), lanes<V>::splat(infinity_of<lane_t<V>>()));
  }
  bool reference(double x) const { return std::isfinite(x); }
};

// ---- comparisons and logic ---------------------------------------------------------------------

#define FUSE_COMPARE(NAME, RELAY, FN, OPERATOR)                                   \
  struct NAME : compare_rule, binary_op {                                         \
    static constexpr const char* name = RELAY;                                    \
    template <class M, class V>                                                   \
    FUSE_HD FUSE_FORCE_INLINE mask_t<V> apply(V a, V b) const {                   \
      return lanes<V>::FN(a, b);                                                  \
    }                                                                             \
    bool reference(double a, double b) const { return a OPERATOR b; }             \
    bool reference(std::int64_t a, std::int64_t b) const { return a OPERATOR b; } \
  };
FUSE_COMPARE(equal, "equal", eq, ==)
FUSE_COMPARE(not_equal, "not_equal", ne, !=)
FUSE_COMPARE(less, "less", lt, <)
FUSE_COMPARE(less_equal, "less_equal", le, <=)
FUSE_COMPARE(greater, "greater", gt, >)
FUSE_COMPARE(greater_equal, "greater_equal", ge, >=)
#undef FUSE_COMPARE

#define FUSE_LOGICAL2(NAME, RELAY, FN, EXPR)                              \
  struct NAME : logical_rule, binary_op {                                 \
    static constexpr const char* name = RELAY;                            \
    template <class M, class V>                                           \
    FUSE_HD FUSE_FORCE_INLINE V apply(V a, V b) const {                   \
      return lanes<V>::FN(a, b);                                          \
    }                                                                     \
    bool reference(std::int64_t a, std::int64_t b) const { return EXPR; } \
  };
FUSE_LOGICAL2(logical_and, "logical_and", logical_and, a&& b)
FUSE_LOGICAL2(logical_or, "logical_or", logical_or, a || b)
FUSE_LOGICAL2(logical_xor, "logical_xor", logical_xor, (a != 0) != (b != 0))
#undef FUSE_LOGICAL2

struct logical_not : logical_rule, unary_op {
  static constexpr const char* name = "logical_not";
  template <class M, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(V a) const {
    return lanes<V>::logical_not(a);
  }
  bool reference(std::int64_t a) const { return !a; }
};

// ---- where and cast ----------------------------------------------------------------------------

template <class Op, class C>
inline constexpr bool where_condition_is_bool = is_bool_dtype<C>;

/// where(cond, a, b): cond is bool; a and b share a dtype, which is the result's.
struct where {
  static constexpr const char* name = "where";
  static constexpr rule_kind kind = rule_kind::where;
  static constexpr int arity = 3;
  static constexpr op_pattern pattern = op_pattern::broadcast;
  template <class C, class A, class B>
  using result = A;
  template <class Op, class C, class A, class B>
  static constexpr void check() {
    static_assert(where_condition_is_bool<Op, C>, "fuse: where's condition must be bool (compare first)");
    static_assert(operands_have_the_same_dtype<Op, A, B>,
                  "fuse: where's two value operands must have the same dtype; convert one with fuse::cast<T>(...)");
  }
  template <class M, class Mask, class V>
  FUSE_HD FUSE_FORCE_INLINE V apply(Mask c, V a, V b) const {
    return lanes<V>::select(c, a, b);
  }
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

/// The elementwise ops whose builder is fuse::NAME(operands..., attributes...), generated from
/// this one list (fuse/expr/elementwise.hpp); with `where`, the ops the Relay frontend takes from
/// this table (fuse/relay/ops.hpp, interpreter.hpp, emit.hpp). `where` (a bool condition among
/// its operands) and `cast` (a dtype as template argument) have their own builders.
// Kept as written (grouped by kind; the formatter would stair-step it).
// clang-format off
#define FUSE_ELEMENTWISE_OPS(X)                                                                              \
  X(add) X(subtract) X(multiply) X(divide) X(power) X(maximum) X(minimum) X(right_shift) X(left_shift)       \
  X(floor_divide) X(floor_mod) X(trunc_divide) X(trunc_mod) X(bitwise_and) X(bitwise_or) X(bitwise_xor)      \
  X(bitwise_not) X(log2) X(log10) X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) X(sinh) X(cosh) X(asinh)      \
  X(acosh) X(atanh) X(isnan) X(isinf) X(isfinite) X(prelu)                                                  \
  X(equal) X(not_equal) X(less) X(less_equal) X(greater) X(greater_equal) X(logical_and) X(logical_or)       \
  X(logical_xor) X(logical_not) X(negative) X(abs) X(sign) X(relu) X(leaky_relu) X(clip) X(exp) X(log)       \
  X(tanh) X(sigmoid) X(erf) X(fast_exp) X(fast_tanh) X(fast_erf) X(rsqrt) X(gelu) X(gelu_tanh) X(sqrt) X(round) \
  X(floor) X(ceil) X(trunc)
// clang-format on

/// A list of op types.
template <class... Op>
struct op_list {};

#define FUSE_OP_TYPE_(NAME) , NAME
/// Every op the Relay frontend reads from this table.
using relay_elementwise = op_list<where FUSE_ELEMENTWISE_OPS(FUSE_OP_TYPE_)>;
#undef FUSE_OP_TYPE_

/// The C++ builder's name of each listed op (fuse::NAME), for generated code.
template <class Op>
inline constexpr const char* builder_name = nullptr;
template <>
inline constexpr const char* builder_name<where> = "where";
#define FUSE_OP_BUILDER_NAME_(NAME) \
  template <>                       \
  inline constexpr const char* builder_name<NAME> = #NAME;
FUSE_ELEMENTWISE_OPS(FUSE_OP_BUILDER_NAME_)
#undef FUSE_OP_BUILDER_NAME_

/// Ops that are fuse's own, not Relay's (gelu: TVM writes its formula out): not registered in
/// the frontend.
template <class Op>
inline constexpr bool in_relay = true;
template <>
inline constexpr bool in_relay<gelu> = false;
template <>
inline constexpr bool in_relay<gelu_tanh> = false;

/// Whether an op maps floats to discrete values (rounding to integers, comparisons): its
/// result jumps where a float operand crosses a boundary (the Relay check's tolerance rule).
template <class Op>
inline constexpr bool discrete_result = Op::kind == rule_kind::compare || Op::kind == rule_kind::classify;
template <>
inline constexpr bool discrete_result<floor_divide> = true;
template <>
inline constexpr bool discrete_result<floor_mod> = true;
template <>
inline constexpr bool discrete_result<trunc_divide> = true;
template <>
inline constexpr bool discrete_result<trunc_mod> = true;
template <>
inline constexpr bool discrete_result<round> = true;
template <>
inline constexpr bool discrete_result<floor> = true;
template <>
inline constexpr bool discrete_result<ceil> = true;
template <>
inline constexpr bool discrete_result<trunc> = true;

namespace detail {
// A function object, not a lambda: nvcc's front end takes no lambda in a requires-expression.
struct attribute_counter {
  int n = 0;
  constexpr void operator()(attribute, double&) { ++n; }
};
}  // namespace detail

/// Ops with a 1-D operand laid along attribute `axis` of operand 0 (nn.prelu's alpha).
template <class Op>
concept has_channel_operand = requires { Op::channel_operand; };

template <class Op>
concept has_attributes = requires(Op& op, detail::attribute_counter& f) { Op::attributes(op, f); };

/// Number of attributes of Op.
template <class Op>
constexpr int attribute_count() {
  if constexpr (has_attributes<Op>) {
    Op op{};
    detail::attribute_counter count;
    Op::attributes(op, count);
    return count.n;
  } else {
    return 0;
  }
}

}  // namespace fuse::ops
