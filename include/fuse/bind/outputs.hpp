// What an eval writes to, shared by every executor: the writable view an output argument
// becomes (fuse::outputs for several), and the compile-time rules an output must meet.
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>

#include "fuse/bind/index_map.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/expr/broadcast.hpp"
#include "fuse/expr/node.hpp"
#include "fuse/expr/views.hpp"

namespace fuse {

// ---- outputs ----------------------------------------------------------------------------------------------

template <class Out, class T>
inline constexpr bool output_is_writable = !std::is_const_v<T>;

/// The writable view an output argument becomes: a tensor, a non-const tensor_view, a view
/// made by split/transpose/... of those, a reshape of one whose layout allows it, or a foreign
/// container (Eigen) with a view_traits specialisation.
template <class X>
auto as_output(X&& x) {
  using D = std::remove_cvref_t<X>;
  if constexpr (is_tensor<D>::value) {
    static_assert(!std::is_const_v<std::remove_reference_t<X>>, "fuse::eval: the output tensor is const");
    return x.view();
  } else if constexpr (is_tensor_view<D>::value) {
    static_assert(output_is_writable<D, typename D::element_type>,
                  "fuse::eval: the output is a view of const elements; it cannot be written");
    return tensor_view<typename D::element_type, shape_param_v<typename D::shape_type>, typename D::memory_space_type>(
        x);
  } else if constexpr (is_reshape_view<D>::value) {
    auto inner = as_output(x.child);
    using V = decltype(inner);
    constexpr std::size_t R = D::rank;
    index_array<R> s{};
    if (!bind::detail::reshape_strides(inner.shape().array(), inner.strides(), x.shape().array(), s))
      throw_shape_error("eval: the output reshape to ", x.shape().array(), " of a view of shape ",
                        inner.shape().array(), " cannot be expressed with strides (the view is not contiguous enough)");
    return tensor_view<typename V::element_type, static_cast<int>(R), typename V::memory_space_type>(inner.data(),
                                                                                                     x.shape(), s);
  } else if constexpr (foreign_viewable<X>) {
    return as_output(view_traits<D>::view(x));
  } else {
    static_assert(sizeof(D) == 0, "fuse::eval: this output is not a tensor, a writable view or a viewable container");
  }
}

template <class... O>
struct outputs_t {
  std::tuple<O...> views;
};
template <class T>
inline constexpr bool is_outputs = false;
template <class... O>
inline constexpr bool is_outputs<outputs_t<O...>> = true;
/// Several outputs for one pass: fuse::eval(fuse::outputs(a, b), expr_a, expr_b).
template <class... X>
auto outputs(X&&... x) {
  return outputs_t<decltype(as_output(static_cast<X&&>(x)))...>{{as_output(static_cast<X&&>(x))...}};
}

template <class Out, class Expr>
inline constexpr bool output_dtype_matches_expression = std::is_same_v<Out, Expr>;

template <class OutShape, class ExprShape>
inline constexpr bool static_expression_shape_fits_output = [] {
  if constexpr (OutShape::is_static && ExprShape::is_static) {
    if (ExprShape::rank > OutShape::rank) return false;
    constexpr auto r = fuse::detail::static_broadcast<ExprShape, OutShape>();
    return r.ok && r.extents == OutShape::extents;
  } else {
    return true;
  }
}();

/// The compile-time rules an output of type O meets for an expression of type E (fuse::eval and
/// fuse::cuda::eval check them; the notes of a failure name both types).
template <class O, class E>
constexpr void check_output() {
  static_assert(output_dtype_matches_expression<typename O::value_type, typename E::value_type>,
                "fuse: eval's output has another dtype than the expression (the note names both); "
                "convert with fuse::cast<T>(...)");
  static_assert(static_expression_shape_fits_output<typename O::shape_type, typename E::shape_type>,
                "fuse: the expression's static shape does not broadcast to eval's output");
  static_assert(E::rank <= O::rank, "fuse: the expression has a higher rank than eval's output");
}

/// The same for several outputs (a std::tuple of views) written by one pass or kernel, each with
/// its expression (a std::tuple of the same length).
template <class Outs, class Exprs>
constexpr void check_outputs() {
  []<std::size_t... I>(std::index_sequence<I...>) {
    constexpr std::size_t Q = std::tuple_element_t<0, Outs>::rank;
    static_assert(((std::tuple_element_t<I, Outs>::rank == Q) && ...),
                  "fuse: the outputs of one eval must have the same rank");
    static_assert((output_dtype_matches_expression<typename std::tuple_element_t<I, Outs>::value_type,
                                                   typename std::tuple_element_t<I, Exprs>::value_type> &&
                   ...),
                  "fuse: an output of eval has another dtype than its expression; convert with fuse::cast<T>(...)");
  }(std::make_index_sequence<std::tuple_size_v<Outs>>{});
}

/// The extents of one pass over outs (run time): every output has them and every expression
/// broadcasts to them, or `who` (the eval) throws shape_error.
template <std::size_t Q, class... T, class M, class... E>
index_array<Q> pass_extents(const std::tuple<tensor_view<T, static_cast<int>(Q), M>...>& outs,
                            const std::tuple<E...>& exprs, const char* who) {
  const index_array<Q> ext = std::get<0>(outs).shape().array();
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((std::get<I>(outs).shape().array() == ext
          ? (void)0
          : throw_shape_error(who, ": outputs of one pass must share a shape; got ", ext, " and ",
                              std::get<I>(outs).shape().array())),
     ...);
    ((broadcastable_to(std::get<I>(exprs).shape().array(), ext)
          ? (void)0
          : throw_shape_error(who, ": the expression of shape ", std::get<I>(exprs).shape().array(),
                              " does not fit the output of shape ", ext)),
     ...);
  }(std::index_sequence_for<T...>{});
  return ext;
}

}  // namespace fuse
