// Elementwise nodes (`map_expr`) and the functions and operators that build them:
// fuse::add(a, b), a + b, fuse::sigmoid(x), fuse::where(c, a, b), fuse::cast<int8_t>(x), ...
//
// Operands broadcast as in NumPy/Relay. C++ scalars adopt the dtype of the other operands
// (x * 0.5 on float16 is a float16 multiply); a floating scalar never silently truncates into
// an integer tensor (compile error), and an integer scalar must fit the dtype (shape_error).
#pragma once

#include <cmath>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fuse/expr/broadcast.hpp"
#include "fuse/expr/node.hpp"
#include "fuse/expr/ops.hpp"
#include "fuse/expr/views.hpp"

namespace fuse {

/// An elementwise op applied to broadcast operands.
template <class Op, class... A>
struct map_expr {
  using op_type = Op;
  using value_type = typename Op::template result<typename A::value_type...>;
  using shape_type = broadcast_shape_t<Op, typename A::shape_type...>;
  static constexpr std::size_t rank = shape_type::rank;
  static constexpr bool is_fuse_expr = true;
  static constexpr node_kind kind_tag = node_kind::elementwise;

  [[no_unique_address]] Op op;
  tuple<A...> args;
  [[no_unique_address]] shape_type shape_;

  FUSE_HD constexpr shape_type shape() const { return shape_; }
  FUSE_HD constexpr tuple<const A&...> children() const { return refs_of(args); }
  /// The same op over other operands (fuse::with_children checks their shapes).
  template <class... C>
  auto with_children(C&&... c) const {
    return make_map(op, static_cast<C&&>(c)...);
  }
};

namespace detail {

template <class X>
struct cxx_dtype {
  using D = std::remove_cvref_t<X>;
  using type = std::conditional_t<
      std::is_same_v<D, bool> || std::is_same_v<D, float> || std::is_same_v<D, double> || std::is_same_v<D, half> ||
          std::is_same_v<D, bfloat16> || std::is_same_v<D, std::int8_t> || std::is_same_v<D, std::uint8_t>,
      D,
      std::conditional_t<std::is_integral_v<D> && std::is_signed_v<D> && sizeof(D) <= 4, std::int32_t,
                         std::conditional_t<std::is_integral_v<D> && sizeof(D) == 8, std::int64_t, void>>>;
  static_assert(!std::is_void_v<type>, "fuse: this C++ scalar type has no fuse dtype");
};

/// The dtype C++ scalars adopt: that of the first non-scalar operand, else the first scalar's own.
template <class X0, class... X>
constexpr auto pick_dtype() {
  if constexpr (!arithmetic_scalar<X0>) return std::type_identity<typename expr_t<X0>::value_type>{};
  else if constexpr ((!arithmetic_scalar<X> || ...)) return pick_dtype<X...>();
  else return std::type_identity<typename cxx_dtype<X0>::type>{};
}
template <class... X>
using adopted_dtype_t = typename decltype(pick_dtype<X...>())::type;

template <class T, class S>
inline constexpr bool floating_scalar_into_integer_dtype = !(std::is_floating_point_v<S> && !is_floating_dtype<T>);

/// A C++ scalar as a node of dtype T.
template <element T, class S>
scalar_expr<T> adopt_scalar(S v, const char* op_name) {
  static_assert(floating_scalar_into_integer_dtype<T, std::remove_cvref_t<S>>,
                "fuse: a floating C++ scalar cannot be an operand of an integer or bool expression (it would be "
                "truncated); write an integer scalar, or cast the expression with fuse::cast<float>(...)");
  if constexpr (std::is_integral_v<S> && is_integer_dtype<T>) {
    if (static_cast<std::int64_t>(v) < static_cast<std::int64_t>(std::numeric_limits<T>::lowest()) ||
        (v > 0 && static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max())))
      throw_shape_error(op_name, ": scalar ", static_cast<std::int64_t>(v), " does not fit dtype ", dtype_name<T>);
  }
  if constexpr (is_bool_dtype<T>) return {static_cast<bool>(v)};
  else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) return {T(static_cast<double>(v))};
  else return {static_cast<T>(v)};
}

/// An operand as a node (make_map copies it once, into its slot): C++ scalars adopt dtype T.
template <element T, class X>
decltype(auto) operand(X&& x, const char* op_name) {
  if constexpr (arithmetic_scalar<X>) return adopt_scalar<T>(x, op_name);
  else return as_node(static_cast<X&&>(x));
}

}  // namespace detail

/// Builds the node of `op` over already-converted operand nodes, checking dtypes (compile time)
/// and shapes (compile time when static, else run time).
template <class Op, class... A>
  requires(expression<std::remove_cvref_t<A>> && ...)
map_expr<Op, std::remove_cvref_t<A>...> make_map(Op op, A&&... a) {
  Op::template check<Op, typename std::remove_cvref_t<A>::value_type...>();
  const auto shape = broadcast_shapes<Op>(Op::name, a.shape()...);
  return {op, tuple<std::remove_cvref_t<A>...>(static_cast<A&&>(a)...), shape};
}

/// Builds `op` over user arguments: expressions, tensors, views, viewable containers, scalars.
template <class Op, class... X>
  requires((expr_operand<X> || arithmetic_scalar<X>) && ...) && (expr_operand<X> || ...)
auto apply_op(Op op, X&&... x) {
  using T = detail::adopted_dtype_t<X...>;
  return make_map(op, detail::operand<T>(static_cast<X&&>(x), Op::name)...);
}

// ---- the ops, by their Relay names ---------------------------------------------------------------

namespace detail {

/// Op with its attributes set from `values`, in the order Op::attributes lists them (fewer
/// values keep the defaults), then validated.
template <class Op, class... D>
Op configured(const D&... values) {
  Op op{};
  if constexpr (sizeof...(D) > 0) {
    const double v[] = {static_cast<double>(values)...};
    std::size_t i = 0;
    Op::attributes(op, [&](ops::attribute, double& slot) {
      if (i < sizeof...(D)) slot = v[i];
      ++i;
    });
  }
  if constexpr (requires { op.validate(); }) op.validate();
  return op;
}

template <class X>
concept operand_or_scalar = expr_operand<X> || arithmetic_scalar<X>;

/// The arguments of builder fuse::NAME for Op: Op::arity operands (expressions, tensors, views
/// or C++ scalars, at least one not a scalar), then up to attribute_count<Op>() numbers.
template <class Op, class... X>
constexpr bool builder_arguments() {
  constexpr std::size_t n = Op::arity, total = sizeof...(X);
  if constexpr (total < n || total > n + ops::attribute_count<Op>()) {
    return false;
  } else {
    constexpr bool kinds[] = {operand_or_scalar<X>...}, exprs[] = {expr_operand<X>...},
                   numbers[] = {std::is_arithmetic_v<std::remove_cvref_t<X>>...};
    bool operands = true, any_expr = false, attributes = true;
    for (std::size_t i = 0; i < total; ++i) {
      if (i < n) operands = operands && kinds[i], any_expr = any_expr || exprs[i];
      else attributes = attributes && numbers[i];
    }
    return operands && any_expr && attributes;
  }
}

/// The node of an op whose operand 1 is 1-D along `op.axis` of operand 0 (nn.prelu): that
/// operand seen as rank R with its extent at the axis and 1 elsewhere, so that it broadcasts.
template <class Op, class X, class C>
auto build_channel(const Op& op, X&& x, C&& channel) {
  auto xe = as_expr(static_cast<X&&>(x));
  auto ce = as_expr(static_cast<C&&>(channel));
  using XE = decltype(xe);
  static_assert(decltype(ce)::rank == 1, "fuse: this op's second operand must be 1-D (one value per channel)");
  static_assert(XE::rank >= 1, "fuse: this op's first operand must have rank >= 1");
  const auto xs = xe.shape().array();
  const auto a = static_cast<std::size_t>(normalize_axis(static_cast<index_t>(op.axis), Op::name, xs));
  if (static_cast<double>(static_cast<index_t>(op.axis)) != op.axis)
    throw_shape_error(Op::name, ": axis ", op.axis, " is not an integer");
  if (ce.shape()[0] != xs[a])
    throw_shape_error(Op::name, ": the channel operand ", ce.shape().array(), " must have the extent of axis ", op.axis,
                      " of ", xs);
  axis_map<1> m{};
  m.src[0] = static_cast<index_t>(a);
  m.scale[0] = 1;
  dynamic_shape<XE::rank> shape{};
  for (std::size_t d = 0; d < XE::rank; ++d) shape[d] = d == a ? xs[a] : 1;
  return make_map(op, std::move(xe), apply_axis_map(std::move(ce), shape, m));
}

/// fuse::NAME(operands..., attributes...): the node of Op over the operands.
template <class Op, class... X>
auto build(X&&... x) {
  auto args = std::forward_as_tuple(static_cast<X&&>(x)...);
  return [&]<std::size_t... I, std::size_t... J>(std::index_sequence<I...>, std::index_sequence<J...>) {
    if constexpr (ops::has_channel_operand<Op>)
      return build_channel(configured<Op>(std::get<Op::arity + J>(args)...), std::get<I>(std::move(args))...);
    else return apply_op(configured<Op>(std::get<Op::arity + J>(args)...), std::get<I>(std::move(args))...);
  }(std::make_index_sequence<Op::arity>{}, std::make_index_sequence<sizeof...(X) - Op::arity>{});
}

}  // namespace detail

// One builder per op of FUSE_ELEMENTWISE_OPS (fuse/expr/ops.hpp): fuse::add(a, b),
// fuse::sigmoid(x), fuse::clip(x, a_min, a_max), fuse::leaky_relu(x) or (x, alpha), ...
#define FUSE_OP_BUILDER_(NAME)                               \
  template <class... X>                                      \
    requires(detail::builder_arguments<ops::NAME, X...>())   \
  auto NAME(X&&... x) {                                      \
    return detail::build<ops::NAME>(static_cast<X&&>(x)...); \
  }
FUSE_ELEMENTWISE_OPS(FUSE_OP_BUILDER_)
#undef FUSE_OP_BUILDER_

/// cast<To>(x), Relay's cast(x, dtype=...): see fuse/expr/convert.hpp for the rules.
template <element To, expr_operand A>
auto cast(A&& a) {
  return make_map(ops::cast<To>{}, detail::operand<To>(static_cast<A&&>(a), "cast"));
}
/// where(cond, a, b): cond bool; scalars among a and b adopt the dtype of the other.
template <expr_operand C, class A, class B>
  requires((expr_operand<A> || arithmetic_scalar<A>) && (expr_operand<B> || arithmetic_scalar<B>))
auto where(C&& c, A&& a, B&& b) {
  using T = detail::adopted_dtype_t<A, B>;
  constexpr const char* name = ops::where::name;
  return make_map(ops::where{}, detail::operand<bool>(static_cast<C&&>(c), name),
                  detail::operand<T>(static_cast<A&&>(a), name), detail::operand<T>(static_cast<B&&>(b), name));
}

// ---- operators ------------------------------------------------------------------------------------
// At least one side must be a fuse expression or tensor, so that these never compete with the
// operators of other libraries' types (Eigen's) under `using namespace fuse`.

template <class X>
concept fuse_operand = expression<std::remove_cvref_t<X>> || is_tensor<std::remove_cvref_t<X>>::value;

#define FUSE_BINARY_OPERATOR(SYM, FN)                                                                  \
  template <class A, class B>                                                                          \
    requires((expr_operand<A> || arithmetic_scalar<A>) && (expr_operand<B> || arithmetic_scalar<B>) && \
             (fuse_operand<A> || fuse_operand<B>))                                                     \
  auto operator SYM(A&& a, B&& b) {                                                                    \
    return FN(static_cast<A&&>(a), static_cast<B&&>(b));                                               \
  }
FUSE_BINARY_OPERATOR(+, add)
FUSE_BINARY_OPERATOR(-, subtract)
FUSE_BINARY_OPERATOR(*, multiply)
FUSE_BINARY_OPERATOR(/, divide)
FUSE_BINARY_OPERATOR(<, less)
FUSE_BINARY_OPERATOR(<=, less_equal)
FUSE_BINARY_OPERATOR(>, greater)
FUSE_BINARY_OPERATOR(>=, greater_equal)
FUSE_BINARY_OPERATOR(&&, logical_and)
FUSE_BINARY_OPERATOR(||, logical_or)
#undef FUSE_BINARY_OPERATOR

template <fuse_operand A>
auto operator-(A&& a) {
  return negative(static_cast<A&&>(a));
}
template <fuse_operand A>
auto operator!(A&& a) {
  return logical_not(static_cast<A&&>(a));
}

}  // namespace fuse
