// NumPy/Relay broadcasting of operand shapes: align trailing axes; each pair of extents must be
// equal or one of them 1. Static shapes are checked at compile time, dynamic ones at run time.
#pragma once

#include <type_traits>
#include <utility>

#include "fuse/core/error.hpp"
#include "fuse/core/shape.hpp"

namespace fuse {

namespace detail {

template <class... S>
inline constexpr std::size_t max_rank = 0;
template <class S0, class... S>
inline constexpr std::size_t max_rank<S0, S...> = (S0::rank > max_rank<S...>) ? S0::rank : max_rank<S...>;

template <std::size_t R>
struct broadcast_result {
  bool ok = true;
  index_array<R> extents{};
};

/// Folds one operand's extents into the running broadcast result (both right-aligned).
template <std::size_t R, std::size_t Q>
FUSE_HD constexpr void broadcast_into(broadcast_result<R>& acc, const index_array<Q>& e) {
  for (std::size_t i = 0; i < Q; ++i) {
    index_t& a = acc.extents[R - Q + i];
    const index_t b = e[i];
    if (a == b || b == 1) continue;
    if (a == 1) a = b;
    else acc.ok = false;
  }
}

template <class... S>
constexpr broadcast_result<max_rank<S...>> static_broadcast() {
  constexpr std::size_t R = max_rank<S...>;
  broadcast_result<R> acc{true, index_array<R>::filled(1)};
  (broadcast_into(acc, S::extents), ...);
  return acc;
}

template <auto Arr, std::size_t... I>
shape<Arr[I]...> shape_from_array(std::index_sequence<I...>);

}  // namespace detail

/// Named in compiler notes when static shapes do not broadcast: the note reads
/// "'fuse::static_shapes_broadcast_in<fuse::ops::add, fuse::shape<2, 3>, fuse::shape<4, 5>>'
/// evaluates to false", naming the op and every shape.
template <class Op, class... S>
inline constexpr bool static_shapes_broadcast_in = detail::static_broadcast<S...>().ok;

template <class Op, class... S>
struct static_broadcast_shape {
  static_assert(static_shapes_broadcast_in<Op, S...>,
                "fuse: the operands' static shapes do not broadcast (the note below names the op and the shapes)");
  static constexpr auto result = detail::static_broadcast<S...>();
  using type = decltype(detail::shape_from_array<result.extents>(std::make_index_sequence<result.extents.size()>{}));
};

/// The shape type of a node whose operands have shape types S...: static when all are static.
template <class Op, class... S>
using broadcast_shape_t = typename std::conditional_t<(S::is_static && ...), static_broadcast_shape<Op, S...>,
                                                      std::type_identity<dynamic_shape<detail::max_rank<S...>>>>::type;

namespace detail {
inline void append_shapes(std::string&) {}
template <class S0, class... S>
void append_shapes(std::string& m, const S0& s0, const S&... s) {
  m += to_string(s0);
  if constexpr (sizeof...(S) == 1) m += " and ";
  else if constexpr (sizeof...(S) > 1) m += ", ";
  append_shapes(m, s...);
}
}  // namespace detail

/// Run-time broadcast of operand shapes; throws shape_error naming the op and every shape.
template <class Op, shape_type... S>
auto broadcast_shapes(const char* op_name, const S&... shapes) {
  using R = broadcast_shape_t<Op, S...>;
  if constexpr (R::is_static) {
    return R{};
  } else {
    constexpr std::size_t N = R::rank;
    detail::broadcast_result<N> acc{true, index_array<N>::filled(1)};
    (detail::broadcast_into(acc, shapes.array()), ...);
    if (!acc.ok) {
      std::string m = op_name;
      m += ": shapes ";
      detail::append_shapes(m, shapes...);
      m += " do not broadcast";
      throw shape_error(m);
    }
    return R(acc.extents);
  }
}

/// Can `from` be broadcast to exactly `to` (as when evaluating into an output)?
template <std::size_t F, std::size_t T>
FUSE_HD constexpr bool broadcastable_to(const index_array<F>& from, const index_array<T>& to) {
  if (F > T) return false;
  for (std::size_t i = 0; i < F; ++i) {
    const index_t a = from[i], b = to[T - F + i];
    if (a != b && a != 1) return false;
  }
  return true;
}

}  // namespace fuse
