// fuse::math: accuracy against double-precision references over a dense sample of the whole
// float32 range plus random inputs (fresh seed each run) and every edge, for both modes; and
// scalar lanes against SIMD lanes, bit for bit, for the native batch and every other x86
// batch this build can run. The exhaustive 2^32 sweep is tools/ulp_sweep.cpp (ctest label
// `slow`).
#include <doctest/doctest.h>

#include <fuse/simd/math_batch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "math/math_reference.hpp"
#include "support/random.hpp"

namespace {

using fuse::test::bits_of_float;
using fuse::test::float_of_bits;
using fuse::test::fn;
using accurate = fuse::accurate_math_t;
using fast = fuse::fast_math_t;

constexpr float inf = std::numeric_limits<float>::infinity();

/// Every value the issue and the design call out, their float neighbours, and the classics.
std::vector<float> edge_inputs() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          inf,
                          -inf,
                          1.0f,
                          -1.0f,
                          0.5f,
                          -0.5f,
                          2.0f,
                          -2.0f,
                          std::numeric_limits<float>::min(),
                          -std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(),
                          float_of_bits(0x007fffffu),
                          float_of_bits(0x807fffffu),  // largest subnormals
                          float_of_bits(0x00012345u),
                          float_of_bits(0x3f800001u),
                          float_of_bits(0x3f7fffffu),
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          1e30f,
                          -1e30f,
                          0x1.62e42ep+6f,  // 88.7228317: the largest x with e^x finite
                          0x1.62e430p+6f,  // 88.7228394: the first x with e^x = inf
                          88.376f,
                          88.3763f,
                          89.0f,
                          100.0f,
                          -87.33f,
                          -87.3365f,
                          -88.0f,
                          -88.3763f,
                          -88.7f,
                          -100.0f,
                          -103.972f,
                          -103.973f,
                          -103.98f,
                          -104.0f,
                          -105.0f,
                          -150.0f,
                          9.0109f,
                          9.02f,
                          -9.0109f,
                          8.3f,
                          8.9f,
                          17.33f,
                          17.4f,
                          17.5f,
                          -17.4f,
                          -17.5f,
                          3.9192f,
                          3.92f,
                          -3.92f,
                          10.05f,
                          10.06f,
                          10.1f,
                          -10.1f,
                          26.0f,
                          1e-20f,
                          -1e-20f,
                          1e-8f,
                          -1e-8f,
                          1e-4f,
                          0.3f,
                          0.35f,
                          0.625f,
                          0.3125f,
                          1.125f,
                          0.5625f,
                          0x1.04p-2f,
                          0x1.5p-1f,
                          0.693147f,
                          -0.693147f,
                          -17.0f,
                          6.0f,
                          -6.0f,
                          20.0f,
                          -20.0f,
                          40.0f,
                          -40.0f};
  // NaNs with payloads, quiet and signalling, both signs.
  for (std::uint32_t bits :
       {0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0xffc54321u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7fffffffu})
    v.push_back(float_of_bits(bits));
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(v[i]) || std::isinf(v[i])) continue;
    v.push_back(std::nextafter(v[i], inf));
    v.push_back(std::nextafter(v[i], -inf));
  }
  return v;
}

/// The inputs of one run: every 509th bit pattern (the whole range, ~8.4M values), the edges,
/// random bit patterns and random values where each function changes fastest.
std::vector<float> sample_inputs(std::uint64_t salt) {
  std::vector<float> v = edge_inputs();
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 509)
    v.push_back(float_of_bits(static_cast<std::uint32_t>(u)));
  auto gen = fuse::test::rng(salt);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::uniform_real_distribution<float> wide(-110.0f, 110.0f), narrow(-12.0f, 12.0f);
  for (int i = 0; i < 300000; ++i) {
    v.push_back(float_of_bits(bits(gen)));
    v.push_back(wide(gen));
    v.push_back(narrow(gen));
  }
  while (v.size() % 64 != 0) v.push_back(0.0f);  // whole batches of every width
  return v;
}

const std::vector<float>& inputs() {
  static const std::vector<float> v = sample_inputs(2);
  return v;
}

/// Evaluates f over xs (a whole number of batches) with batches of B.
template <class Mode, class B>
std::vector<float> evaluate_simd(fn f, const std::vector<float>& xs) {
  std::vector<float> out(xs.size());
  for (std::size_t i = 0; i + B::size <= xs.size(); i += B::size)
    fuse::test::evaluate<Mode>(f, B::load_unaligned(xs.data() + i)).store_unaligned(out.data() + i);
  return out;
}

struct worst_case {
  double ulp = 0;
  float x = 0;
  float y = 0;
  std::size_t over = 0;
};

template <class Mode>
void check_accuracy(fn f) {
  using native = xsimd::batch<float>;
  const auto& xs = inputs();
  const auto ys = evaluate_simd<Mode, native>(f, xs);
  const double bound = fuse::test::ulp_bound<Mode>(f);
  worst_case worst;
  std::size_t edge_failures = 0;
  std::string first_edge;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const float x = xs[i], y = ys[i];
    const double ref = fuse::test::reference(f, x);
    if (const char* rule = fuse::test::edge_violation(f, x, y, ref)) {
      if (edge_failures++ == 0) {
        std::ostringstream where;
        where << rule << " at x = " << std::hexfloat << x << " -> " << y;
        first_edge = where.str();
      }
      continue;
    }
    if (std::isnan(x)) continue;
    if (fuse::test::outside_ulp_bound_domain<Mode>(f, x)) continue;
    const double e = fuse::test::ulp_error(y, ref);
    if (e > bound) ++worst.over;
    if (e > worst.ulp) worst = {e, x, y, worst.over};
  }
  std::ostringstream msg;
  msg << fuse::test::name(f) << (std::is_same_v<Mode, fast> ? " (fast)" : " (accurate)") << ": max " << worst.ulp
      << " ULP at x = " << std::hexfloat << worst.x << " -> " << worst.y << std::defaultfloat << " over " << xs.size()
      << " inputs; first edge failure: " << first_edge;
  INFO(msg.str());
  CHECK(worst.over == 0);
  CHECK(worst.ulp <= bound);
  CHECK(edge_failures == 0);
}

/// Lanes of every batch width agree with the scalar path bit for bit (NaNs included).
template <class Mode, class B>
void check_lanes_match_scalar(fn f, const char* arch) {
  const auto& xs = inputs();
  const auto ys = evaluate_simd<Mode, B>(f, xs);
  std::size_t mismatches = 0;
  float first = 0, scalar_y = 0, simd_y = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const float s = fuse::test::evaluate<Mode>(f, xs[i]);
    if (bits_of_float(s) != bits_of_float(ys[i]) && mismatches++ == 0) {
      first = xs[i];
      scalar_y = s;
      simd_y = ys[i];
    }
  }
  std::ostringstream msg;
  msg << fuse::test::name(f) << (std::is_same_v<Mode, fast> ? " (fast)" : " (accurate)") << " on " << arch << ": "
      << mismatches << " lanes differ; first x = " << std::hexfloat << first << ": scalar " << scalar_y << ", SIMD "
      << simd_y;
  INFO(msg.str());
  CHECK(mismatches == 0);
}

template <class Mode>
void check_all_archs(fn f) {
  check_lanes_match_scalar<Mode, xsimd::batch<float>>(f, xsimd::default_arch::name());
#if defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
  check_lanes_match_scalar<Mode, xsimd::batch<float, xsimd::fma3<xsimd::avx2>>>(f, "fma3<avx2>");
#endif
#if defined(__AVX__)
  check_lanes_match_scalar<Mode, xsimd::batch<float, xsimd::sse4_2>>(f, "sse4_2");
#endif
}

}  // namespace

TEST_CASE("math: the ULP measure") {
  // The yardstick itself: one float step is one ULP, in every binade and below 2^-126.
  for (float x : {1.0f, 1.5f, 3.0e-39f, 7.0e-45f, 1.0e30f, 0.75f}) {
    const float up = std::nextafter(x, inf);
    CHECK(fuse::test::ulp_error(up, x) == doctest::Approx(1.0));
    CHECK(fuse::test::ulp_error(x, x) == 0.0);
  }
  CHECK(fuse::test::ulp_error(inf, 3.5e38) == 0.0);  // rounds to inf: inf is exact
  CHECK(std::isinf(fuse::test::ulp_error(std::numeric_limits<float>::max(), 3.5e38)));
  CHECK(std::isinf(fuse::test::ulp_error(inf, 3.0e38)));
  CHECK(std::isinf(fuse::test::ulp_error(1.0f, std::nan(""))));
  // A deliberately bad function is caught by the same checks the real ones pass.
  CHECK(fuse::test::ulp_error(std::nextafter(std::nextafter(std::nextafter(0.5f, 1.0f), 1.0f), 1.0f), 0.5) > 2.0);
  CHECK(fuse::test::edge_violation(fn::tanh, inf, 0.99999994f, 1.0) != nullptr);
  CHECK(fuse::test::edge_violation(fn::sigmoid, -100.0f, -1e-45f, 3.7e-44) != nullptr);
  CHECK(fuse::test::edge_violation(fn::exp, std::nanf(""), 1.0f, std::nan("")) != nullptr);
}

TEST_CASE("math: accurate mode stays within 2 ULP over a dense sample, with its edges") {
  for (fn f : fuse::test::all_fns) check_accuracy<accurate>(f);
}

TEST_CASE("math: fast mode stays within its bound, with the same edges") {
  for (fn f : fuse::test::all_fns) check_accuracy<fast>(f);
}

TEST_CASE("math: SIMD lanes and scalar lanes agree bit for bit") {
  for (fn f : fuse::test::all_fns) {
    check_all_archs<accurate>(f);
    check_all_archs<fast>(f);
  }
}

TEST_CASE("math: the values the issue names") {
  namespace fm = fuse::math;
  // exp overflows exactly past ln(FLT_MAX) (xsimd 8 already at 88.376) and keeps subnormals.
  CHECK(fm::exp(88.376f) < inf);
  CHECK(fm::exp(0x1.62e42ep+6f) == doctest::Approx(3.4028e38f).epsilon(1e-4));
  CHECK(fm::exp(0x1.62e430p+6f) == inf);
  CHECK(fm::exp(-100.0f) > 0.0f);
  CHECK(fm::exp(-100.0f) < std::numeric_limits<float>::min());
  CHECK(fm::exp(-103.0f) > 0.0f);
  CHECK(bits_of_float(fm::exp(-inf)) == 0u);
  CHECK(fm::exp(0.0f) == 1.0f);
  CHECK(std::isnan(fm::exp(std::nanf(""))));
  // tanh: odd, +-1 at the ends, sign of zero kept.
  CHECK(fm::tanh(inf) == 1.0f);
  CHECK(fm::tanh(-inf) == -1.0f);
  CHECK(fm::tanh(40.0f) == 1.0f);
  CHECK(bits_of_float(fm::tanh(-0.0f)) == 0x80000000u);
  CHECK(fm::tanh<fast>(inf) == 1.0f);
  CHECK(fm::tanh<fast>(-inf) == -1.0f);
  CHECK(bits_of_float(fm::tanh<fast>(-0.0f)) == 0x80000000u);
  // sigmoid(-100) is the right subnormal, not 0 and not 0.5 + 0.5*tanh(-50) = 0.
  const double s100 = 1.0 / (1.0 + std::exp(100.0));
  CHECK(fuse::test::ulp_error(fm::sigmoid(-100.0f), s100) <= 1.0);
  CHECK(fm::sigmoid(-100.0f) > 0.0f);
  CHECK(fm::sigmoid(100.0f) == 1.0f);
  CHECK(fm::sigmoid(0.0f) == 0.5f);
  CHECK(fm::sigmoid(-inf) == 0.0f);
  CHECK(fm::sigmoid<fast>(inf) == 1.0f);
  CHECK(fm::sigmoid<fast>(-inf) == 0.0f);
  CHECK(std::isnan(fm::sigmoid<fast>(std::nanf(""))));
  // log
  CHECK(fm::log(0.0f) == -inf);
  CHECK(fm::log(-0.0f) == -inf);
  CHECK(std::isnan(fm::log(-1.0f)));
  CHECK(fm::log(inf) == inf);
  CHECK(fm::log(1.0f) == 0.0f);
  CHECK(fuse::test::ulp_error(fm::log(1e-45f), std::log(double(1e-45f))) <= 1.0);
  // erf, erfc: saturation and erfc's tail, which GELU's erf form depends on.
  CHECK(fm::erf(inf) == 1.0f);
  CHECK(fm::erf(-inf) == -1.0f);
  CHECK(fm::erfc(-inf) == 2.0f);
  CHECK(fm::erfc(inf) == 0.0f);
  CHECK(fuse::test::ulp_error(fm::erfc(9.5f), std::erfc(9.5)) <= 2.0);  // subnormal result
  CHECK(fuse::test::ulp_error(fm::erfc(5.0f), std::erfc(5.0)) <= 2.0);
  CHECK(fuse::test::ulp_error(fm::erfc(-3.0f), std::erfc(-3.0)) <= 2.0);
  CHECK(fm::erfc(10.1f) == 0.0f);
  // NaN payloads survive the odd functions.
  const float payload = float_of_bits(0x7fc12345u);
  CHECK(bits_of_float(fm::tanh(payload)) == 0x7fc12345u);
  CHECK(bits_of_float(fm::erf(payload)) == 0x7fc12345u);
}

namespace {

/// TVM's formulas (fast_exp_float32, fast_tanh_float, fast_erf_float_expr) in float32, each
/// product that feeds an addition contracted into an FMA (as LLVM does where it may contract,
/// and as fuse does), 2^n from the exponent bits.
float tvm_fast_exp(float x) {
  const float xc = std::max(std::min(x, 88.3762626647950f), -88.3762626647949f);
  const float n = std::floor(std::fma(xc, 1.44269504088896341f, 0.5f));
  const float f = std::fma(-n, 0.6931471805599453f, xc);
  const float p[6] = {1.9875691500E-4f, 1.3981999507E-3f, 8.3334519073E-3f,
                      4.1665795894E-2f, 1.6666665459E-1f, 5.0000001201E-1f};
  float y = p[0];
  for (int i = 1; i < 6; ++i) y = std::fma(y, f, p[i]);
  y = std::fma(y * f, f, f) + 1;
  const float two_n = float_of_bits(static_cast<std::uint32_t>(static_cast<std::int32_t>(n + 127.0f)) << 23);
  return std::isnan(x) ? x : std::max(two_n * y, x);
}
float tvm_rational(float x, float clamp, const std::vector<float>& odd, const std::vector<float>& even) {
  const float xc = std::max(-clamp, std::min(clamp, x)), x2 = xc * xc;
  float p = odd.back(), q = even.back();
  for (std::size_t i = odd.size() - 1; i-- > 0;) p = std::fma(x2, p, odd[i]);
  for (std::size_t i = even.size() - 1; i-- > 0;) q = std::fma(x2, q, even[i]);
  return std::isnan(x) ? x : xc * p / q;
}
float tvm_fast_tanh(float x) {
  return tvm_rational(x, 9,
                      {4.89352455891786e-03f, 6.37261928875436e-04f, 1.48572235717979e-05f, 5.12229709037114e-08f,
                       -8.60467152213735e-11f, 2.00018790482477e-13f, -2.76076847742355e-16f},
                      {4.89352518554385e-03f, 2.26843463243900e-03f, 1.18534705686654e-04f, 1.19825839466702e-06f});
}
float tvm_fast_erf(float x) {
  return tvm_rational(x, 4,
                      {-1.60960333262415e-02f, -2.95459980854025e-03f, -7.34990630326855e-04f, -5.69250639462346e-05f,
                       -2.10102402082508e-06f, 2.77068142495902e-08f, -2.72614225801306e-10f},
                      {-1.42647390514189e-02f, -7.37332916720468e-03f, -1.68282697438203e-03f, -2.13374055278905e-04f,
                       -1.45660718464996e-05f});
}

}  // namespace

TEST_CASE("math: TVM's fast_exp, fast_tanh and fast_erf are TVM's formulas, in their error class, lane for lane") {
  namespace fm = fuse::math;
  using B = xsimd::batch<float>;
  constexpr std::size_t W = B::size;
  struct case_ {
    const char* name;
    float (*scalar)(float);
    B (*simd)(B);
    float (*formula)(float);
    double (*exact)(double);
    double lo, hi, abs_bound, rel_bound;  // the error class against the exact function
  };
  // The error class: the maxima over every float32 input (docs/ops.md): fast_exp relative
  // 3.112e-7 for normal results (below e^-87.33 the result is subnormal and only 2^-126 absolute
  // holds: 2^n is 0 for n = -127), fast_tanh absolute 3.254e-7, fast_erf absolute 4.423e-7.
  const case_ cases[] = {
      {"fast_exp", [](float x) { return fm::fast_exp(x); }, [](B x) { return fm::fast_exp(x); }, tvm_fast_exp,
       [](double x) { return std::exp(x); }, -87.3, 88.3, 0x1p-126, 3.12e-7},
      {"fast_tanh", [](float x) { return fm::fast_tanh(x); }, [](B x) { return fm::fast_tanh(x); }, tvm_fast_tanh,
       [](double x) { return std::tanh(x); }, -12, 12, 3.26e-7, 0},
      {"fast_erf", [](float x) { return fm::fast_erf(x); }, [](B x) { return fm::fast_erf(x); }, tvm_fast_erf,
       [](double x) { return std::erf(x); }, -5, 5, 4.43e-7, 0},
  };
  auto g = fuse::test::rng(41);
  for (const case_& c : cases) {
    CAPTURE(c.name);
    std::uniform_real_distribution<double> d(c.lo, c.hi);
    std::vector<float> xs = edge_inputs();
    for (int i = 0; i < 200000; ++i) xs.push_back(static_cast<float>(d(g)));
    while (xs.size() % W) xs.push_back(0.25f);
    std::size_t off_formula = 0, off_class = 0, off_lanes = 0;
    for (std::size_t i = 0; i < xs.size(); i += W) {
      alignas(64) float lanes[W];
      c.simd(B::load_unaligned(&xs[i])).store_aligned(lanes);
      for (std::size_t j = 0; j < W; ++j) {
        const float x = xs[i + j], y = c.scalar(x);
        off_lanes += bits_of_float(y) != bits_of_float(lanes[j]);
        if (std::isnan(x)) {
          off_formula += !std::isnan(y);
          continue;
        }
        // TVM's formula, evaluated the same way: the same bits.
        const float f = c.formula(x);
        if (bits_of_float(y) != bits_of_float(f) && !(std::isnan(y) && std::isnan(f))) {
          if (off_formula++ < 3) MESSAGE(std::string(c.name) << "(" << x << ") = " << y << ", TVM's formula " << f);
        }
        if (x >= c.lo && x <= c.hi) {
          const double e = c.exact(x);
          if (!(std::fabs(y - e) <= c.abs_bound + c.rel_bound * std::fabs(e))) {
            if (off_class++ < 3) MESSAGE(std::string(c.name) << "(" << x << ") = " << y << ", exactly " << e);
          }
        }
      }
    }
    CHECK(off_lanes == 0);
    CHECK(off_formula == 0);
    CHECK(off_class == 0);
  }
  CHECK(std::isnan(fm::fast_exp(std::nanf(""))));
  CHECK(fm::fast_exp(-inf) == 0.0f);
  CHECK(fm::fast_exp(inf) == inf);
  CHECK(fm::fast_tanh(inf) == doctest::Approx(1.0));
  CHECK(fm::fast_erf(-inf) == doctest::Approx(-1.0));
}
