// Row reductions: sum, mean, max, min, prod over any axes (keepdims / exclude as in Relay),
// and the row ops softmax, log_softmax and layer_norm. Each is evaluated by a single-pass
// kernel that fuses its input expression (fuse/cpu/reduce.hpp); used inside a larger tree it
// is evaluated first into a small buffer, and the rest of the tree stays one loop.
//
// Semantics (docs/ops.md): NaN propagates through max/min; reducing an empty axis gives the
// identity (sum 0, prod 1, max the dtype's lowest, min its highest, mean NaN for floats);
// integer sums wrap to the dtype and integer means divide the wrapped sum, truncating, as Relay.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "fuse/core/dtype.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/limits.hpp"
#include "fuse/expr/lanes.hpp"
#include "fuse/expr/node.hpp"
#include "fuse/expr/ops.hpp"
#include "fuse/expr/views.hpp"

namespace fuse {

enum class reduce_kind : std::uint8_t { sum, mean, max, min, prod };

inline constexpr const char* reduce_name(reduce_kind k) {
  switch (k) {
    case reduce_kind::sum: return "sum";
    case reduce_kind::mean: return "mean";
    case reduce_kind::max: return "max";
    case reduce_kind::min: return "min";
    default: return "prod";
  }
}

// ---- what a reduction computes, for every executor ---------------------------------------------

/// The type partial results of reduce kind K over compute type C are held in: double for
/// float and double sums, means and products (long rows lose nothing to rounding), int64 for
/// integer ones (wrapped to the dtype at the end, as Relay sums in the dtype), C for max/min.
template <reduce_kind K, class C>
using reduce_partial_t = std::conditional_t<K == reduce_kind::max || K == reduce_kind::min, C,
                                            std::conditional_t<std::is_floating_point_v<C>, double, std::int64_t>>;

/// The identity and the combination of partial results of kind K in type S.
template <reduce_kind K, class S>
struct reduce_partial {
  FUSE_HD static constexpr S identity() {
    if constexpr (K == reduce_kind::prod) return S(1);
    else if constexpr (K == reduce_kind::max) {
      if constexpr (std::is_floating_point_v<S>) return -infinity_of<S>();
      else return lowest_of<S>();
    } else if constexpr (K == reduce_kind::min) {
      if constexpr (std::is_floating_point_v<S>) return infinity_of<S>();
      else return highest_of<S>();
    } else return S(0);
  }
  /// NaN propagates through max and min.
  FUSE_HD static S combine(S a, S b) {
    if constexpr (K == reduce_kind::max) return lanes<S>::max(a, b);
    else if constexpr (K == reduce_kind::min) return lanes<S>::min(a, b);
    else if constexpr (K == reduce_kind::prod) return lanes<S>::mul(a, b);
    else return lanes<S>::add(a, b);
  }
};

/// The compute value an output element of dtype T gets from partial result r over `count`
/// elements: mean divides (in double for floats; truncating the wrapped sum for integers, and
/// 0 for an empty integer row), integers wrap to the dtype, an empty integer max/min is the
/// dtype's lowest/highest.
template <reduce_kind K, class T, class S>
FUSE_HD compute_t<T> reduce_finish(S r, index_t count) {
  using C = compute_t<T>;
  if constexpr (std::is_floating_point_v<C>) {
    double v = static_cast<double>(r);
    if constexpr (K == reduce_kind::mean) v = v / static_cast<double>(count);
    return canonical<T>(static_cast<C>(v));
  } else {
    // An empty max/min is the DTYPE's lowest/highest (the partial's identity is its compute
    // type's, which would wrap: int8's max would read 0).
    if constexpr (K == reduce_kind::max || K == reduce_kind::min)
      if (count == 0) return static_cast<C>(K == reduce_kind::max ? lowest_of<T>() : highest_of<T>());
    auto w = static_cast<std::int64_t>(r);
    w = ops::detail::wrap_to<T>(w);
    if constexpr (K == reduce_kind::mean) w = count ? w / count : 0;
    return static_cast<C>(w);
  }
}

// ---- what softmax, log_softmax and layer_norm compute, for every executor ------------------------
//
// Per row along the op's axis, with C the compute type of the dtype:
//   softmax:      mx = max(x) (C, NaN propagates), total = sum(double(e)) with e = shifted_exp(x, mx),
//                 y = e * C(1 / total)
//   log_softmax:  y = x - C(double(mx) + log(total))
//   layer_norm:   mean = sum(double(x)) / n, var = sum((double(x) - mean)^2) / n (two passes),
//                 y = C((double(x) - mean) * (1 / sqrt(var + eps)) [* gamma] [+ beta])
// The CPU's vector loops spell the same formulas in lanes; these scalar forms are its tails and
// the CUDA executor's whole computation.

/// exp(x - mx) with the subtraction's rounding error put back: the error e (recovered exactly
/// by TwoSum) would be multiplied by |x - mx| inside exp; exp(d + e) = exp(d) (1 + e).
template <class Mode, class C>
FUSE_HD C softmax_shifted_exp(C x, C mx) {
  const C d = x - mx, bb = d - x;
  C err = (x - (d - bb)) - (mx + bb);
  if (err != err) err = 0;  // x = -inf: no correction
  const C e = ops::exp{}.template apply<Mode>(d);
  return e + e * err;
}
/// softmax's factor for a row whose shifted exponentials sum to total.
template <class C>
FUSE_HD C softmax_scale(double total) {
  return static_cast<C>(1.0 / total);
}
/// log_softmax's shift for a row of maximum mx whose shifted exponentials sum to total.
template <class C>
FUSE_HD C log_softmax_shift(C mx, double total) {
  return static_cast<C>(static_cast<double>(mx) + std::log(total));
}
/// layer_norm's 1 / sqrt(var + eps); eps is a float32 constant, as Relay makes it.
FUSE_HD inline double layer_norm_inverse_deviation(double var, double epsilon) {
  return 1.0 / std::sqrt(var + static_cast<double>(static_cast<float>(epsilon)));
}
/// layer_norm of one element: y = (x - mean) * inv [* gamma] [+ beta], in double.
template <class C>
FUSE_HD C layer_norm_value(C x, double mean, double inv, C gamma, C beta, bool scale, bool center) {
  double y = (static_cast<double>(x) - mean) * inv;
  if (scale) y *= static_cast<double>(gamma);
  if (center) y += static_cast<double>(beta);
  return static_cast<C>(y);
}

/// Keep reduced axes as extent 1 (Relay's keepdims=True).
struct keepdims_t {};
inline constexpr keepdims_t keepdims{};
/// Reduce every axis except the listed ones (Relay's exclude=True).
struct exclude_t {};
inline constexpr exclude_t exclude{};

/// A reduction of Child over the axes flagged in `reduced`; output rank R.
template <reduce_kind K, class Child, std::size_t R>
struct reduce_expr {
  using child_type = Child;
  using value_type = typename Child::value_type;
  using shape_type = dynamic_shape<R>;
  static constexpr std::size_t rank = R;
  static constexpr bool is_fuse_expr = true;
  static constexpr node_kind kind_tag = node_kind::reduction;
  static constexpr reduce_kind kind = K;

  Child child;
  shape_type shape_;
  index_array<Child::rank> reduced{};  ///< 1 for each reduced axis of the child

  FUSE_HD constexpr shape_type shape() const { return shape_; }
  FUSE_HD constexpr tuple<const Child&> children() const { return tuple<const Child&>(child); }
  template <class C>
  auto with_children(C&& c) const {
    return reduce_expr<K, std::remove_cvref_t<C>, R>{static_cast<C&&>(c), shape_, reduced};
  }
};

enum class row_op_kind : std::uint8_t { softmax, log_softmax };

/// nn.softmax / nn.log_softmax of Child along `axis`.
template <row_op_kind K, class Child>
struct softmax_expr {
  using child_type = Child;
  using value_type = typename Child::value_type;
  using shape_type = dynamic_shape<Child::rank>;
  static constexpr std::size_t rank = Child::rank;
  static constexpr bool is_fuse_expr = true;
  static constexpr node_kind kind_tag = node_kind::softmax;
  static constexpr row_op_kind kind = K;

  Child child;
  shape_type shape_;
  index_t axis = 0;

  FUSE_HD constexpr shape_type shape() const { return shape_; }
  FUSE_HD constexpr tuple<const Child&> children() const { return tuple<const Child&>(child); }
  template <class C>
  auto with_children(C&& c) const {
    return softmax_expr<K, std::remove_cvref_t<C>>{static_cast<C&&>(c), shape_, axis};
  }
};

/// nn.layer_norm(x, gamma, beta): (x - mean) / sqrt(var + epsilon) * gamma + beta along `axis`,
/// with the biased variance; gamma and beta are 1-D of the axis' extent.
template <class X, class G, class B>
struct layer_norm_expr {
  using value_type = typename X::value_type;
  using shape_type = dynamic_shape<X::rank>;
  static constexpr std::size_t rank = X::rank;
  static constexpr bool is_fuse_expr = true;
  static constexpr node_kind kind_tag = node_kind::layer_norm;

  X x;
  G gamma;
  B beta;
  shape_type shape_;
  index_t axis = -1;
  double epsilon = 1e-5;
  bool center = true, scale = true;

  FUSE_HD constexpr shape_type shape() const { return shape_; }
  FUSE_HD constexpr tuple<const X&, const G&, const B&> children() const {
    return tuple<const X&, const G&, const B&>(x, gamma, beta);
  }
  template <class X2, class G2, class B2>
  auto with_children(X2&& x2, G2&& g2, B2&& b2) const {
    return layer_norm_expr<std::remove_cvref_t<X2>, std::remove_cvref_t<G2>, std::remove_cvref_t<B2>>{
        static_cast<X2&&>(x2), static_cast<G2&&>(g2), static_cast<B2&&>(b2), shape_, axis, epsilon, center, scale};
  }
};

namespace detail {

template <reduce_kind K, std::size_t R, class Child>
auto make_reduce(const Child& c, const index_t* axes, std::size_t N, bool exclude_listed, bool keep) {
  constexpr std::size_t Rc = Child::rank;
  const auto in = c.shape().array();
  index_array<Rc> listed{};
  for (std::size_t i = 0; i < N; ++i) {
    const auto d = static_cast<std::size_t>(normalize_axis(axes[i], reduce_name(K), in));
    listed[d] = 1;  // Relay removes duplicate axes
  }
  reduce_expr<K, Child, R> e{c, {}, {}};
  std::size_t k = 0, nred = 0;
  for (std::size_t d = 0; d < Rc; ++d) {
    const bool red = exclude_listed ? !listed[d] : (N == 0 || listed[d]);
    e.reduced[d] = red;
    nred += red;
    if (keep) e.shape_[d] = red ? 1 : in[d];
    else if (!red) {
      if (k < R) e.shape_[k] = in[d];
      ++k;
    }
  }
  if (!keep && Rc - nred != R)
    throw_shape_error(reduce_name(K), ": reducing axes of shape ", in, " leaves rank ", static_cast<index_t>(Rc - nred),
                      ", not ", R, " (were axes listed twice?)");
  return e;
}

}  // namespace detail

#define FUSE_REDUCTION(NAME, KIND)                                                               \
  /** NAME over every axis: a rank-0 result. */                                                  \
  template <expr_operand X>                                                                      \
  auto NAME(X&& x) {                                                                             \
    auto c = as_expr(static_cast<X&&>(x));                                                       \
    return detail::make_reduce<KIND, 0>(c, nullptr, 0, false, false);                            \
  }                                                                                              \
  template <expr_operand X>                                                                      \
  auto NAME(X&& x, keepdims_t) {                                                                 \
    auto c = as_expr(static_cast<X&&>(x));                                                       \
    return detail::make_reduce<KIND, decltype(c)::rank>(c, nullptr, 0, false, true);             \
  }                                                                                              \
  /** NAME over one axis. */                                                                     \
  template <expr_operand X>                                                                      \
  auto NAME(X&& x, index_t axis) {                                                               \
    auto c = as_expr(static_cast<X&&>(x));                                                       \
    static_assert(decltype(c)::rank >= 1, "fuse: cannot reduce an axis of a rank-0 expression"); \
    const index_t a[1] = {axis};                                                                 \
    return detail::make_reduce<KIND, decltype(c)::rank - 1>(c, a, 1, false, false);              \
  }                                                                                              \
  template <expr_operand X>                                                                      \
  auto NAME(X&& x, index_t axis, keepdims_t) {                                                   \
    auto c = as_expr(static_cast<X&&>(x));                                                       \
    const index_t a[1] = {axis};                                                                 \
    return detail::make_reduce<KIND, decltype(c)::rank>(c, a, 1, false, true);                   \
  }                                                                                              \
  /** NAME over the listed axes. */                                                              \
  template <expr_operand X, std::size_t N>                                                       \
  auto NAME(X&& x, const index_t(&axes)[N]) {                                                    \
    auto c = as_expr(static_cast<X&&>(x));                                                       \
    static_assert(N <= decltype(c)::rank, "fuse: more reduction axes than dimensions");          \
    return detail::make_reduce<KIND, decltype(c)::rank - N>(c, axes, N, false, false);           \
  }                                                                                              \
  template <expr_operand X, std::size_t N>                                                       \
  auto NAME(X&& x, const index_t(&axes)[N], keepdims_t) {                                        \
    auto c = as_expr(static_cast<X&&>(x));                                                       \
    return detail::make_reduce<KIND, decltype(c)::rank>(c, axes, N, false, true);                \
  }                                                                                              \
  /** NAME over every axis except the listed ones. */                                            \
  template <expr_operand X, std::size_t N>                                                       \
  auto NAME(X&& x, const index_t(&axes)[N], exclude_t) {                                         \
    auto c = as_expr(static_cast<X&&>(x));                                                       \
    return detail::make_reduce<KIND, N>(c, axes, N, true, false);                                \
  }                                                                                              \
  template <expr_operand X, std::size_t N>                                                       \
  auto NAME(X&& x, const index_t(&axes)[N], exclude_t, keepdims_t) {                             \
    auto c = as_expr(static_cast<X&&>(x));                                                       \
    return detail::make_reduce<KIND, decltype(c)::rank>(c, axes, N, true, true);                 \
  }

FUSE_REDUCTION(sum, reduce_kind::sum)
FUSE_REDUCTION(mean, reduce_kind::mean)
FUSE_REDUCTION(max, reduce_kind::max)
FUSE_REDUCTION(min, reduce_kind::min)
FUSE_REDUCTION(prod, reduce_kind::prod)
#undef FUSE_REDUCTION

namespace detail {
template <row_op_kind K, class X>
auto make_softmax(X&& x, index_t axis, const char* name) {
  auto c = as_expr(static_cast<X&&>(x));
  using C = decltype(c);
  static_assert(is_floating_dtype<typename C::value_type>, "fuse::softmax / log_softmax: needs a floating dtype");
  static_assert(C::rank >= 1, "fuse::softmax / log_softmax: needs rank >= 1");
  const auto a = normalize_axis(axis, name, c.shape().array());
  return softmax_expr<K, C>{c, dynamic_shape<C::rank>(c.shape()), a};
}
}  // namespace detail

/// nn.softmax(x, axis=-1): exp(x - max) / sum(exp(x - max)) along axis.
template <expr_operand X>
auto softmax(X&& x, index_t axis = -1) {
  return detail::make_softmax<row_op_kind::softmax>(static_cast<X&&>(x), axis, "nn.softmax");
}
/// nn.log_softmax(x, axis=-1): x - max - log(sum(exp(x - max))) along axis.
template <expr_operand X>
auto log_softmax(X&& x, index_t axis = -1) {
  return detail::make_softmax<row_op_kind::log_softmax>(static_cast<X&&>(x), axis, "nn.log_softmax");
}

/// nn.layer_norm(x, gamma, beta, axis=-1, epsilon=1e-5, center=true, scale=true).
template <expr_operand X, expr_operand G, expr_operand B>
auto layer_norm(X&& x, G&& gamma, B&& beta, index_t axis = -1, double epsilon = 1e-5, bool center = true,
                bool scale = true) {
  auto xe = as_expr(static_cast<X&&>(x));
  auto ge = as_expr(static_cast<G&&>(gamma));
  auto be = as_expr(static_cast<B&&>(beta));
  using XE = decltype(xe);
  using T = typename XE::value_type;
  static_assert(is_floating_dtype<T>, "fuse::layer_norm: needs a floating dtype");
  static_assert(
      std::is_same_v<T, typename decltype(ge)::value_type> && std::is_same_v<T, typename decltype(be)::value_type>,
      "fuse::layer_norm: gamma and beta must have the dtype of x");
  static_assert(decltype(ge)::rank == 1 && decltype(be)::rank == 1, "fuse::layer_norm: gamma and beta are 1-D");
  const auto in = xe.shape().array();
  const auto a = detail::normalize_axis(axis, "nn.layer_norm", in);
  const index_t n = in[static_cast<std::size_t>(a)];
  if (ge.shape()[0] != n || be.shape()[0] != n)
    throw_shape_error("nn.layer_norm: gamma ", ge.shape().array(), " and beta ", be.shape().array(),
                      " must have the extent of axis ", axis, " of x ", in);
  if (!(epsilon >= 0)) throw_shape_error("nn.layer_norm: epsilon must be >= 0, got ", epsilon);
  return layer_norm_expr<XE, decltype(ge), decltype(be)>{xe, ge,      be,     dynamic_shape<XE::rank>(xe.shape()),
                                                         a,  epsilon, center, scale};
}

}  // namespace fuse
