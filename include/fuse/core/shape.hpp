// Shapes: static (`fuse::shape<2, 3>`, every extent known at compile time) and dynamic
// (`fuse::dynamic_shape<2>`, rank known, extents at run time), plus the small fixed-size
// index array both are built on.
//
// Device-ready: no std::array or other host-only constexpr functions in anything a kernel calls.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <type_traits>

#include "fuse/core/config.hpp"

namespace fuse {

/// A fixed-size array of indices usable on host and device (std::array's members are not
/// __device__). Rank 0 keeps one unused slot so that the type is never zero-sized.
template <std::size_t R>
struct index_array {
  index_t v[R > 0 ? R : 1]{};

  FUSE_HD constexpr index_t& operator[](std::size_t i) { return v[i]; }
  FUSE_HD constexpr const index_t& operator[](std::size_t i) const { return v[i]; }
  FUSE_HD static constexpr std::size_t size() { return R; }
  FUSE_HD constexpr index_t* data() { return v; }
  FUSE_HD constexpr const index_t* data() const { return v; }

  FUSE_HD static constexpr index_array filled(index_t x) {
    index_array a;
    for (std::size_t i = 0; i < R; ++i) a.v[i] = x;
    return a;
  }
  friend FUSE_HD constexpr bool operator==(const index_array& a, const index_array& b) {
    for (std::size_t i = 0; i < R; ++i)
      if (a.v[i] != b.v[i]) return false;
    return true;
  }
};

template <index_t... N>
struct shape;

/// A shape whose rank is known at compile time and whose extents are known at run time.
template <std::size_t R>
struct dynamic_shape {
  static constexpr std::size_t rank = R;
  static constexpr bool is_static = false;

  index_array<R> extents{};

  constexpr dynamic_shape() = default;
  FUSE_HD constexpr explicit dynamic_shape(const index_array<R>& e) : extents(e) {}
  /// From a braced list of exactly R extents: `dynamic_shape<2>{{1, 30}}`. The count is
  /// checked by tensor constructors, which throw fuse::shape_error; here it is truncated/padded
  /// only to stay constexpr-friendly.
  constexpr dynamic_shape(std::initializer_list<index_t> l) {
    std::size_t i = 0;
    for (index_t x : l) {
      if (i < R) extents[i] = x;
      ++i;
    }
  }
  /// Any static shape of the same rank converts to its dynamic form.
  template <index_t... N>
    requires(sizeof...(N) == R)
  FUSE_HD constexpr dynamic_shape(shape<N...>) : extents{{N...}} {}

  FUSE_HD constexpr index_t operator[](std::size_t i) const { return extents[i]; }
  FUSE_HD constexpr index_t& operator[](std::size_t i) { return extents[i]; }
  FUSE_HD constexpr index_t size() const {
    index_t n = 1;
    for (std::size_t i = 0; i < R; ++i) n *= extents[i];
    return n;
  }
  FUSE_HD constexpr const index_array<R>& array() const { return extents; }
  friend FUSE_HD constexpr bool operator==(const dynamic_shape& a, const dynamic_shape& b) {
    return a.extents == b.extents;
  }
};

/// A shape known entirely at compile time: `fuse::shape<2, 3>`.
template <index_t... N>
struct shape {
  static constexpr std::size_t rank = sizeof...(N);
  static constexpr bool is_static = true;
  static constexpr index_array<sizeof...(N)> extents{{N...}};
  static_assert(((N >= 0) && ...), "fuse::shape: extents must be non-negative");

  FUSE_HD constexpr index_t operator[](std::size_t i) const { return extents[i]; }
  FUSE_HD static constexpr index_t size() { return (index_t{1} * ... * N); }
  FUSE_HD constexpr index_array<sizeof...(N)> array() const { return extents; }
  FUSE_HD constexpr operator dynamic_shape<sizeof...(N)>() const { return dynamic_shape<sizeof...(N)>(extents); }
  friend constexpr bool operator==(shape, shape) { return true; }
};

/// `fuse::fixed<2, 3>` is the value of the static shape, for `fuse::tensor<float, fuse::fixed<2, 3>>`.
template <index_t... N>
inline constexpr shape<N...> fixed{};

template <class S>
struct is_shape : std::false_type {};
template <index_t... N>
struct is_shape<shape<N...>> : std::true_type {};
template <std::size_t R>
struct is_shape<dynamic_shape<R>> : std::true_type {};

/// Anything with a compile-time rank and indexable extents.
template <class S>
concept shape_type = is_shape<std::remove_cvref_t<S>>::value;

namespace detail {
template <auto E>
struct shape_from_param;
template <auto E>
  requires std::is_integral_v<decltype(E)>
struct shape_from_param<E> {
  static_assert(E >= 0, "fuse: a tensor's rank must be non-negative");
  using type = dynamic_shape<static_cast<std::size_t>(E)>;
};
template <auto E>
  requires shape_type<decltype(E)>
struct shape_from_param<E> {
  using type = std::remove_cvref_t<decltype(E)>;
};
}  // namespace detail

/// The shape type named by a tensor's second template argument: a rank (dynamic extents) or a
/// static shape value such as `fuse::fixed<2, 3>`.
template <auto E>
using shape_from_param_t = typename detail::shape_from_param<E>::type;

namespace detail {
template <class S>
struct shape_param;
template <std::size_t R>
struct shape_param<dynamic_shape<R>> {
  static constexpr int value = static_cast<int>(R);
};
template <index_t... N>
struct shape_param<shape<N...>> {
  static constexpr shape<N...> value{};
};
}  // namespace detail

/// The inverse of shape_from_param_t: the template argument that names shape type S in
/// `tensor<T, ...>` / `tensor_view<T, ...>` (an `int` rank, as users write it, or a static
/// shape value), so that every view of a given shape has one and the same type.
template <class S>
inline constexpr auto shape_param_v = detail::shape_param<std::remove_cvref_t<S>>::value;

/// Row-major (C order) strides of a shape, in elements.
template <std::size_t R>
FUSE_HD constexpr index_array<R> row_major_strides(const index_array<R>& extents) {
  index_array<R> s{};
  index_t acc = 1;
  for (std::size_t i = R; i-- > 0;) {
    s[i] = acc;
    acc *= extents[i];
  }
  return s;
}

template <std::size_t R>
FUSE_HD constexpr index_t product(const index_array<R>& a) {
  index_t n = 1;
  for (std::size_t i = 0; i < R; ++i) n *= a[i];
  return n;
}

}  // namespace fuse
