// Options of fuse::eval, passed as trailing arguments:
//   fuse::eval(out, expr, fuse::fast_math);             // Eigen-class math, faster
//   fuse::eval(out, expr, fuse::streaming_stores::on);  // force non-temporal stores
#pragma once

#include <cstddef>
#include <type_traits>

#include "fuse/math/mode.hpp"

namespace fuse {

/// Non-temporal ("streaming") stores write output lines without reading them first and without
/// keeping them in cache: right for outputs far larger than the cache, wrong for small ones.
enum class streaming_stores { automatic, on, off };

/// Outputs of at least this many bytes use streaming stores under streaming_stores::automatic
/// (half the L3 of the machines fuse is tuned on: such an output cannot stay cached anyway).
inline constexpr std::size_t streaming_threshold_bytes = std::size_t{16} << 20;

template <class T>
inline constexpr bool is_eval_option =
    std::is_same_v<T, accurate_math_t> || std::is_same_v<T, fast_math_t> || std::is_same_v<T, streaming_stores>;

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

inline void pick_streaming(streaming_stores& s, streaming_stores o) { s = o; }
template <class O>
void pick_streaming(streaming_stores&, const O&) {}

template <class... Opt>
streaming_stores streaming_of(const Opt&... o) {
  streaming_stores s = streaming_stores::automatic;
  (pick_streaming(s, o), ...);
  return s;
}
}  // namespace detail

/// The math mode named among eval's options (accurate unless fast_math is given).
template <class... Opt>
using math_mode_t = typename detail::math_mode_of<std::remove_cvref_t<Opt>...>::type;

}  // namespace fuse
