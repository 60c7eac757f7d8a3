// The two accuracy modes of fuse's transcendental functions, passed as a template argument
// (`fuse::math::tanh<fuse::fast_math_t>(x)`) so both modes live in one binary.
//
//   accurate_math: at most 2 ULP from the correctly rounded result over the whole float32 range
//                  (the default; docs/math.md lists the measured bound of each function).
//   fast_math:     Eigen's accuracy class (a few ULP), cheaper; edges stay correct.
#pragma once

#include <type_traits>

namespace fuse {

struct accurate_math_t {};
struct fast_math_t {};

inline constexpr accurate_math_t accurate_math{};
inline constexpr fast_math_t fast_math{};

namespace detail {
template <class... Opt>
struct math_mode_of {
  using type = accurate_math_t;
};
template <class O0, class... Opt>
struct math_mode_of<O0, Opt...> {
  using type = std::conditional_t<std::is_same_v<O0, fast_math_t> || std::is_same_v<O0, accurate_math_t>, O0,
                                  typename math_mode_of<Opt...>::type>;
};
}  // namespace detail

/// The math mode named among an eval's options, whichever executor (accurate unless fast_math
/// is given).
template <class... Opt>
using math_mode_t = typename detail::math_mode_of<std::remove_cvref_t<Opt>...>::type;

}  // namespace fuse
