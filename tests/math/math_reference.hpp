// What the math tests and tools/ulp_sweep.cpp measure against: double-precision references for
// each fuse::math function, the ULP error of a float result, and the edge rules every result
// must keep. Header-only so that the sweep tool can share it without a library.
#pragma once

#include <fuse/simd/math_batch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace fuse::test {

inline float float_of_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint32_t bits_of_float(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// Error of `got` in units in the last place of the exact value `ref`: the spacing of floats in
/// the binade of |ref| (not of the rounded result, so a value just below a power of two is
/// measured with the finer spacing), and the subnormal spacing 2^-149 below 2^-126. A result
/// that should overflow must be that infinity; one that should not must not be infinite.
inline double ulp_error(float got, double ref) {
  if (ref != ref) return got != got ? 0.0 : std::numeric_limits<double>::infinity();
  if (got != got) return std::numeric_limits<double>::infinity();
  const float rounded = static_cast<float>(ref);  // correctly rounded (overflow -> inf)
  if (std::isinf(rounded) || std::isinf(got)) return got == rounded ? 0.0 : std::numeric_limits<double>::infinity();
  std::uint64_t b;
  std::memcpy(&b, &ref, 8);
  int binade = static_cast<int>((b >> 52) & 0x7ff) - 1023;  // floor(log2 |ref|) for normal doubles
  if (binade < -126) binade = -126;                         // the subnormal float spacing
  const std::uint64_t ulp_bits = static_cast<std::uint64_t>(binade - 23 + 1023) << 52;
  double ulp;
  std::memcpy(&ulp, &ulp_bits, 8);
  return std::fabs(static_cast<double>(got) - ref) / ulp;
}

/// The functions under test, each with its reference and the edge rules of its result.
enum class fn { exp, expm1, log, tanh, sigmoid, erf, erfc };
inline constexpr fn all_fns[] = {fn::exp, fn::expm1, fn::log, fn::tanh, fn::sigmoid, fn::erf, fn::erfc};

inline const char* name(fn f) {
  switch (f) {
    case fn::exp: return "exp";
    case fn::expm1: return "expm1";
    case fn::log: return "log";
    case fn::tanh: return "tanh";
    case fn::sigmoid: return "sigmoid";
    case fn::erf: return "erf";
    case fn::erfc: return "erfc";
  }
  return "?";
}

inline double reference(fn f, float xf) {
  const double x = xf;
  switch (f) {
    case fn::exp: return std::exp(x);
    case fn::expm1: return std::expm1(x);
    case fn::log: return std::log(x);
    case fn::tanh: return std::tanh(x);
    case fn::sigmoid: return 1.0 / (1.0 + std::exp(-x));  // 2^-52 relative: exact enough here
    case fn::erf: return std::erf(x);
    case fn::erfc: return std::erfc(x);
  }
  return 0.0;
}

/// fuse::math's function f in mode Mode, on V = float or an xsimd batch.
template <class Mode, class V>
V evaluate(fn f, V x) {
  switch (f) {
    case fn::exp: return fuse::math::exp<Mode>(x);
    case fn::expm1: return fuse::math::expm1<Mode>(x);
    case fn::log: return fuse::math::log<Mode>(x);
    case fn::tanh: return fuse::math::tanh<Mode>(x);
    case fn::sigmoid: return fuse::math::sigmoid<Mode>(x);
    case fn::erf: return fuse::math::erf<Mode>(x);
    case fn::erfc: return fuse::math::erfc<Mode>(x);
  }
  return x;
}

/// The bound each function must meet over the whole float range, accurate and fast mode
/// (docs/math.md lists the measured maxima, which are lower).
template <class Mode>
double ulp_bound(fn f) {
  if constexpr (std::is_same_v<Mode, fuse::fast_math_t>) {
    // Eigen's tanh: 4.9 ULP; its logistic: 2.9 for x > 0, thousands below 0. Without FMA
    // (plain SSE builds) every polynomial step rounds twice.
    if (f == fn::tanh || f == fn::sigmoid) return FUSE_MATH_FUSED_FMA ? 6.0 : 7.0;
  }
  return 2.0;
}

/// Fast sigmoid returns 0 once 2^-n in its reduction would overflow (x < -88.3763, where the
/// true value is below 4.2e-39): a documented flush, outside its ULP bound.
inline constexpr float fast_sigmoid_flush_below = -88.376f;

template <class Mode>
bool outside_ulp_bound_domain(fn f, float x) {
  return std::is_same_v<Mode, fuse::fast_math_t> && f == fn::sigmoid && x < fast_sigmoid_flush_below;
}

/// Rules a result must keep whatever its ULP error: NaN in gives NaN out, the special values
/// are exact, the range of the function is respected, the sign of zero is kept by the odd
/// functions, and saturation is exact (where the correctly rounded result is 0, +-1 or 2 because
/// x is beyond the point where f rounds to it, f returns exactly that). Returns the rule
/// broken (nullptr if none). ref is reference(f, x).
inline const char* edge_violation(fn f, float x, float y, double ref) {
  const float inf = std::numeric_limits<float>::infinity();
  const auto same = [](float a, float b) { return bits_of_float(a) == bits_of_float(b); };
  if (std::isnan(x)) return std::isnan(y) ? nullptr : "NaN input gave a number";
  if (std::isnan(y)) {
    if (f == fn::log && x < 0) return nullptr;
    return "NaN for a non-NaN input";
  }
  switch (f) {
    case fn::exp:
      if (x == -inf && !same(y, 0.0f)) return "exp(-inf) != +0";
      if (x == inf && y != inf) return "exp(+inf) != +inf";
      if (y < 0) return "exp < 0";
      break;
    case fn::expm1:
      if (x == 0 && !same(y, x)) return "expm1(+-0) != +-0";
      if (x == -inf && y != -1.0f) return "expm1(-inf) != -1";
      if (x == inf && y != inf) return "expm1(+inf) != +inf";
      if (y < -1.0f) return "expm1 < -1";
      if ((y < 0) != (x < 0)) return "expm1 changed sign";
      break;
    case fn::log:
      if (x == 0 && y != -inf) return "log(+-0) != -inf";
      if (x < 0) return "log(x < 0) is not NaN";
      if (x == inf && y != inf) return "log(+inf) != +inf";
      if (x == 1.0f && !same(y, 0.0f)) return "log(1) != +0";
      break;
    case fn::tanh:
    case fn::erf: {
      if (x == 0 && !same(y, x)) return "f(+-0) != +-0";
      if (std::fabs(y) > 1.0f) return "|f| > 1";
      if ((y < 0) != (x < 0) && y != 0) return "f changed sign";
      if (std::fabs(static_cast<float>(ref)) == 1.0f && y != static_cast<float>(ref)) return "not saturated to +-1";
      break;
    }
    case fn::sigmoid: {
      if (y < 0.0f || y > 1.0f) return "sigmoid outside [0, 1]";
      if (x == inf && y != 1.0f) return "sigmoid(+inf) != 1";
      if (x == -inf && !same(y, 0.0f)) return "sigmoid(-inf) != +0";
      const float r = static_cast<float>(ref);
      if ((r == 1.0f || r == 0.0f) && y != r) return "not saturated to 0 or 1";
      break;
    }
    case fn::erfc: {
      if (y < 0.0f || y > 2.0f) return "erfc outside [0, 2]";
      if (x == -inf && y != 2.0f) return "erfc(-inf) != 2";
      if (x == inf && !same(y, 0.0f)) return "erfc(+inf) != +0";
      const float r = static_cast<float>(ref);
      if ((r == 2.0f || r == 0.0f) && y != r) return "not saturated to 0 or 2";
      break;
    }
  }
  return nullptr;
}

}  // namespace fuse::test
