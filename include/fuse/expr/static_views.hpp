// Views with compile-time parameters: on operands of static shape, bad axes, split sections,
// permutations and reshape codes fail to compile (the note names the view, the parameters and
// the shape), and views of static-shape tensors keep static shapes, so later shape mismatches
// are caught at compile time too.
//
//   fuse::tensor<float, fuse::fixed<1, 30>> a;
//   auto s = fuse::split<3>(a, fuse::axis<1>);     // three tensor_view<const float, fixed<1, 10>>
//   auto t = fuse::transpose<1, 0>(a);              // tensor_view<..., fixed<30, 1>>
//   auto r = fuse::reshape<3, -1>(a);               // codes checked against (1, 30) at compile time
//   fuse::split<4>(a, fuse::axis<1>);               // does not compile: 30 is not a multiple of 4
//
// With dynamic shapes the same calls check at run time and throw fuse::shape_error.
#pragma once

#include <array>
#include <type_traits>

#include "fuse/expr/views.hpp"

namespace fuse {

/// A compile-time axis argument: fuse::axis<1>.
template <index_t A>
struct axis_t {
  static constexpr index_t value = A;
};
template <index_t A>
inline constexpr axis_t<A> axis{};

/// Names of the views in compile-time diagnostics.
namespace view_ops {
struct split {};
struct transpose {};
struct squeeze {};
struct expand_dims {};
struct reshape {};
}  // namespace view_ops

namespace detail {

template <class S>
constexpr std::array<index_t, S::rank> static_extents() {
  std::array<index_t, S::rank> e{};
  for (std::size_t i = 0; i < S::rank; ++i) e[i] = S::extents[i];
  return e;
}

template <auto Arr, std::size_t... I>
shape<Arr[I]...> shape_of_array(std::index_sequence<I...>);
/// The static shape whose extents are the constexpr array Arr.
template <auto Arr>
using shape_of_array_t = decltype(shape_of_array<Arr>(std::make_index_sequence<Arr.size()>{}));

template <index_t A, std::size_t R>
constexpr index_t normalized_axis() {
  return A < 0 ? A + static_cast<index_t>(R) : A;
}

/// A view of a static-shape tensor_view, retyped with its static result shape S.
template <class S, class V>
auto with_static_shape(const V& v) {
  if constexpr (is_tensor_view<V>::value)
    return tensor_view<typename V::element_type, S{}, typename V::memory_space_type>(v.data(), S{}, v.strides());
  else return v;
}

}  // namespace detail

// ---- the rules, named so that compiler notes name the view, its parameters and the shape -------------

template <class Op, index_t Axis, class S>
inline constexpr bool axis_is_in_range_for =
    Axis >= -static_cast<index_t>(S::rank) && Axis < static_cast<index_t>(S::rank);

template <index_t Sections, index_t Axis, class S>
inline constexpr bool split_sections_divide_the_axis = [] {
  if constexpr (!axis_is_in_range_for<view_ops::split, Axis, S> || Sections <= 0) return false;
  else return S::extents[static_cast<std::size_t>(detail::normalized_axis<Axis, S::rank>())] % Sections == 0;
}();

template <class S, index_t... P>
inline constexpr bool axes_are_a_permutation_of = [] {
  if (sizeof...(P) != S::rank) return false;
  bool seen[sizeof...(P) + 1] = {};
  for (index_t p : {P...}) {
    const index_t a = p < 0 ? p + static_cast<index_t>(S::rank) : p;
    if (a < 0 || a >= static_cast<index_t>(S::rank) || seen[a]) return false;
    seen[a] = true;
  }
  return true;
}();

template <class S, index_t... A>
inline constexpr bool squeezed_axes_have_extent_1 = [] {
  bool seen[S::rank + 1] = {};
  for (index_t p : {A...}) {
    const index_t a = p < 0 ? p + static_cast<index_t>(S::rank) : p;
    if (a < 0 || a >= static_cast<index_t>(S::rank) || seen[a] || S::extents[static_cast<std::size_t>(a)] != 1)
      return false;
    seen[a] = true;
  }
  return true;
}();

template <index_t Axis, std::size_t NumNew, class S>
inline constexpr bool expand_dims_axis_is_in_range_for =
    Axis >= -static_cast<index_t>(S::rank) - 1 && Axis <= static_cast<index_t>(S::rank);

namespace detail {
/// Relay's reshape codes at compile time (the rules of resolve_reshape); ok is false when the
/// codes do not fit the shape.
template <std::size_t R, std::size_t N>
struct static_reshape {
  bool ok = false;
  std::size_t rank = 0;
  std::array<index_t, 2 * N + R + 1> out{};
};
template <class S, index_t... Codes>
constexpr auto resolve_static_reshape() {
  constexpr std::size_t R = S::rank, N = sizeof...(Codes);
  static_reshape<R, N> r{};
  const index_t codes[N + 1] = {Codes..., 0};
  std::size_t src = 0, k = 0;
  index_t infer = -1;
  for (std::size_t i = 0; i < N; ++i) {
    const index_t c = codes[i];
    if (c > 0) {
      r.out[k++] = c;
      ++src;
    } else if (c == 0) {
      if (src >= R) return r;
      r.out[k++] = S::extents[src++];
    } else if (c == -1) {
      if (infer >= 0) return r;
      infer = static_cast<index_t>(k);
      r.out[k++] = 1;
      ++src;
    } else if (c == -2) {
      while (src < R) r.out[k++] = S::extents[src++];
    } else if (c == -3) {
      if (src + 2 > R) return r;
      r.out[k++] = S::extents[src] * S::extents[src + 1];
      src += 2;
    } else if (c == -4) {
      if (i + 2 >= N || src >= R) return r;
      const index_t d0 = S::extents[src++];
      index_t d1 = codes[++i], d2 = codes[++i];
      if (d1 == -1 && d2 > 0 && d0 % d2 == 0) d1 = d0 / d2;
      else if (d2 == -1 && d1 > 0 && d0 % d1 == 0) d2 = d0 / d1;
      if (d1 <= 0 || d2 <= 0 || d1 * d2 != d0) return r;
      r.out[k++] = d1;
      r.out[k++] = d2;
    } else {
      return r;
    }
  }
  index_t total = 1, known = 1;
  for (std::size_t i = 0; i < R; ++i) total *= S::extents[i];
  for (std::size_t i = 0; i < k; ++i)
    if (static_cast<index_t>(i) != infer) known *= r.out[i];
  if (infer >= 0) {
    if (known == 0 || total % known) return r;
    r.out[static_cast<std::size_t>(infer)] = total / known;
  } else if (known != total) {
    return r;
  }
  r.ok = true;
  r.rank = k;
  return r;
}
}  // namespace detail

template <class S, index_t... Codes>
inline constexpr bool reshape_codes_fit = detail::resolve_static_reshape<S, Codes...>().ok;

// ---- the views ------------------------------------------------------------------------------------------------

/// split<N>(x, axis<A>): on a static shape, checked at compile time and typed with static shapes.
template <std::size_t N, class X, index_t A>
  requires expr_operand<X>
auto split(X&& x_, axis_t<A>) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using S = typename decltype(x)::shape_type;
  if constexpr (S::is_static) {
    static_assert(axis_is_in_range_for<view_ops::split, A, S>,
                  "fuse::split: the axis is out of range for the shape (see the note)");
    static_assert(
        !axis_is_in_range_for<view_ops::split, A, S> || split_sections_divide_the_axis<static_cast<index_t>(N), A, S>,
        "fuse::split: the sections do not divide the axis' extent (see the note)");
    if constexpr (split_sections_divide_the_axis<static_cast<index_t>(N), A, S>) {
      constexpr auto part = [] {
        auto e = detail::static_extents<S>();
        e[static_cast<std::size_t>(detail::normalized_axis<A, S::rank>())] /= static_cast<index_t>(N);
        return e;
      }();
      using P = detail::shape_of_array_t<part>;
      auto parts = split<N>(x, A);
      using V = decltype(detail::with_static_shape<P>(parts[0]));
      std::array<V, N> out;
      for (std::size_t i = 0; i < N; ++i) out[i] = detail::with_static_shape<P>(parts[i]);
      return out;
    }
  } else {
    return split<N>(x, A);
  }
}

/// transpose<P...>(x): output axis k is input axis P_k.
template <index_t... P, class X>
  requires(expr_operand<X> && sizeof...(P) > 0)
auto transpose(X&& x_) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using S = typename decltype(x)::shape_type;
  const index_t axes[] = {P...};
  if constexpr (S::is_static) {
    static_assert(axes_are_a_permutation_of<S, P...>,
                  "fuse::transpose: the axes are not a permutation of the shape's (see the note)");
    if constexpr (axes_are_a_permutation_of<S, P...>) {
      constexpr std::array<index_t, sizeof...(P)> out = {
          S::extents[static_cast<std::size_t>(P < 0 ? P + static_cast<index_t>(S::rank) : P)]...};
      return detail::with_static_shape<detail::shape_of_array_t<out>>(transpose(x, axes));
    }
  } else {
    return transpose(x, axes);
  }
}

/// squeeze<A...>(x): removes the listed extent-1 axes.
template <index_t... Ax, class X>
  requires(expr_operand<X> && sizeof...(Ax) > 0)
auto squeeze(X&& x_) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using S = typename decltype(x)::shape_type;
  const index_t axes[] = {Ax...};
  if constexpr (S::is_static) {
    static_assert(squeezed_axes_have_extent_1<S, Ax...>,
                  "fuse::squeeze: an axis is out of range, repeated, or of extent other than 1 (see the note)");
    if constexpr (squeezed_axes_have_extent_1<S, Ax...>) {
      constexpr auto out = [] {
        std::array<index_t, S::rank - sizeof...(Ax)> o{};
        std::size_t k = 0;
        for (std::size_t d = 0; d < S::rank; ++d) {
          bool drop = false;
          for (index_t a : {Ax...})
            drop = drop || (a < 0 ? a + static_cast<index_t>(S::rank) : a) == static_cast<index_t>(d);
          if (!drop) o[k++] = S::extents[d];
        }
        return o;
      }();
      return detail::with_static_shape<detail::shape_of_array_t<out>>(squeeze(x, axes));
    }
  } else {
    return squeeze(x, axes);
  }
}

/// expand_dims<N>(x, axis<A>).
template <std::size_t NumNew = 1, class X, index_t A>
  requires expr_operand<X>
auto expand_dims(X&& x_, axis_t<A>) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using S = typename decltype(x)::shape_type;
  if constexpr (S::is_static) {
    static_assert(expand_dims_axis_is_in_range_for<A, NumNew, S>,
                  "fuse::expand_dims: the axis is out of range (see the note)");
    if constexpr (expand_dims_axis_is_in_range_for<A, NumNew, S>) {
      constexpr auto out = [] {
        std::array<index_t, S::rank + NumNew> o{};
        const index_t a = A < 0 ? A + static_cast<index_t>(S::rank) + 1 : A;
        std::size_t k = 0;
        for (std::size_t d = 0; d <= S::rank; ++d) {
          if (static_cast<index_t>(d) == a)
            for (std::size_t n = 0; n < NumNew; ++n) o[k++] = 1;
          if (d < S::rank) o[k++] = S::extents[d];
        }
        return o;
      }();
      return detail::with_static_shape<detail::shape_of_array_t<out>>(expand_dims<NumNew>(x, A));
    }
  } else {
    return expand_dims<NumNew>(x, A);
  }
}

/// reshape<codes...>(x): Relay's newshape as template arguments; on a static shape the codes
/// are checked and the result's rank found at compile time.
template <index_t... Codes, class X>
  requires(expr_operand<X> && sizeof...(Codes) > 0)
auto reshape(X&& x_) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using S = typename decltype(x)::shape_type;
  const index_t codes[] = {Codes...};
  if constexpr (S::is_static) {
    static_assert(reshape_codes_fit<S, Codes...>,
                  "fuse::reshape: the newshape codes do not fit the shape (see the note)");
    constexpr auto r = detail::resolve_static_reshape<S, Codes...>();
    if constexpr (r.ok) return reshape<r.rank>(x, codes);
  } else {
    constexpr std::size_t R = [] {
      std::size_t n = 0;
      for (index_t c : {Codes...}) n += (c != -2 && c != -3 && c != -4) ? 1 : 0;
      return n;
    }();
    static_assert(((Codes != -2 && Codes != -3 && Codes != -4) && ...),
                  "fuse::reshape<codes...> on a dynamic shape: -2/-3/-4 make the rank depend on the extents; "
                  "use fuse::reshape<R>(x, {codes...}) with the output rank R");
    return reshape<R>(x, codes);
  }
}

}  // namespace fuse
