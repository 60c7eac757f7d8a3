// The two accuracy modes of fuse's transcendental functions, passed as a template argument
// (`fuse::math::tanh<fuse::fast_math_t>(x)`) so both modes live in one binary.
//
//   accurate_math: at most 2 ULP from the correctly rounded result over the whole float32 range
//                  (the default; docs/math.md lists the measured bound of each function).
//   fast_math:     Eigen's accuracy class (a few ULP), cheaper; edges stay correct.
#pragma once

namespace fuse {

struct accurate_math_t {};
struct fast_math_t {};

inline constexpr accurate_math_t accurate_math{};
inline constexpr fast_math_t fast_math{};

}  // namespace fuse
