// The exceptions fuse throws, and the formatting of shapes inside their messages.
//
// Host only: device code never throws; every check runs on the host while an expression is
// built or before a kernel starts.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "fuse/core/shape.hpp"

namespace fuse {

/// Base of every fuse exception.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Shapes (or axes, split sections, reshape codes...) that do not fit an op. The message names
/// the op and the shapes involved, e.g. "add: shapes (2, 3) and (4, 5) do not broadcast".
class shape_error : public error {
 public:
  using error::error;
};

/// Memory that fuse cannot use as asked (overlapping outputs, misaligned storage...).
class memory_error : public error {
 public:
  using error::error;
};

/// "(2, 3)": how every message prints an extent list (as TVM prints tensor types; "()" is a
/// scalar).
template <std::size_t R>
std::string to_string(const index_array<R>& a) {
  std::string s = "(";
  for (std::size_t i = 0; i < R; ++i) {
    if (i) s += ", ";
    s += std::to_string(a[i]);
  }
  return s + ")";
}
template <shape_type S>
std::string to_string(const S& s) {
  return to_string(s.array());
}

namespace detail {
/// Builds messages without <format> (not in g++ 12) or iostreams.
inline void append_all(std::string&) {}
template <class A, class... Rest>
void append_all(std::string& s, const A& a, const Rest&... rest) {
  if constexpr (std::is_convertible_v<const A&, std::string_view>) s += std::string_view(a);
  else if constexpr (std::is_arithmetic_v<A>) s += std::to_string(a);
  else s += to_string(a);
  append_all(s, rest...);
}
}  // namespace detail

/// Concatenates strings, numbers and shapes into one message.
template <class... Parts>
std::string message(const Parts&... parts) {
  std::string s;
  detail::append_all(s, parts...);
  return s;
}

template <class... Parts>
[[noreturn]] void throw_shape_error(const Parts&... parts) {
  throw shape_error(message(parts...));
}

}  // namespace fuse
