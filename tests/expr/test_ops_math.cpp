// Floating ops (math, rounding) on every floating dtype, and the NaN and integer edge rules.
#include "expr/op_checks.hpp"

using namespace fuse;
using namespace fuse::test::ops;
using fuse::test::expect_matches;
using fuse::test::tolerance;

TEST_CASE_TEMPLATE_DEFINE("floating ops on every floating dtype", T, floating) {
  // float32 results of the accurate math are within 2 ULP of the correctly rounded value.
  SUBCASE("exp") {
    check_unary<T>([](auto&& a) { return exp(a); }, -100, 100, op_ulps<T>(2));
  }
  SUBCASE("log") {
    check_unary<T>([](auto&& a) { return log(a); }, 0, 1e6, op_ulps<T>(2));
  }
  SUBCASE("tanh") {
    check_unary<T>([](auto&& a) { return tanh(a); }, -12, 12, op_ulps<T>(2));
  }
  SUBCASE("sigmoid") {
    check_unary<T>([](auto&& a) { return sigmoid(a); }, -110, 30, op_ulps<T>(2));
  }
  SUBCASE("erf") {
    check_unary<T>([](auto&& a) { return erf(a); }, -5, 5, op_ulps<T>(2));
  }
  // TVM's approximations: their error class (tests/math/test_math.cpp; docs/ops.md), exact on
  // float64 as in TVM.
  SUBCASE("fast_exp") {
    check_unary<T>([](auto&& a) { return fast_exp(a); }, -87, 88, op_ulps<T>(4), {3.12e-7, 0x1p-126});
  }
  SUBCASE("fast_tanh") {
    check_unary<T>([](auto&& a) { return fast_tanh(a); }, -12, 12, op_ulps<T>(4), {0, 3.26e-7});
  }
  SUBCASE("fast_erf") {
    check_unary<T>([](auto&& a) { return fast_erf(a); }, -5, 5, op_ulps<T>(4), {0, 4.43e-7});
  }
  SUBCASE("sqrt") {
    check_unary<T>([](auto&& a) { return sqrt(a); }, 0, 1e6, op_ulps<T>(0.5));
  }
  SUBCASE("rsqrt") {
    check_unary<T>([](auto&& a) { return rsqrt(a); }, 0, 1e6, op_ulps<T>(2));
  }
  // GELU composes several roundings; its tails amplify the rounding of x/sqrt(2) (docs/ops.md).
  SUBCASE("gelu") {
    check_unary<T>([](auto&& a) { return gelu(a); }, -9, 9, op_ulps<T>(4), {1e-5, 1e-30});
  }
  SUBCASE("gelu_tanh") {
    check_unary<T>([](auto&& a) { return gelu_tanh(a); }, -9, 9, op_ulps<T>(4), {1e-5, 1e-30});
  }
  SUBCASE("nn.leaky_relu") {
    check_unary<T>([](auto&& a) { return leaky_relu(a, 0.1); }, -50, 50, op_ulps<T>(1));
  }  // alpha rounds to the dtype
  SUBCASE("round") {
    check_unary<T>([](auto&& a) { return round(a * 2); }, -40, 40, 0);
  }
  SUBCASE("floor") {
    check_unary<T>([](auto&& a) { return floor(a); }, -40, 40, 0);
  }
  SUBCASE("ceil") {
    check_unary<T>([](auto&& a) { return ceil(a); }, -40, 40, 0);
  }
  SUBCASE("trunc") {
    check_unary<T>([](auto&& a) { return trunc(a); }, -40, 40, 0);
  }
  SUBCASE("fast math stays in Eigen's accuracy class") {
    auto g = test::rng(99);
    tensor<T, 1> a({1023}), out({1023});
    test::fill(a.view(), g, -9, 9);
    eval(out, sigmoid(a) + tanh(a) * exp(a), fast_math);
    expect_matches(out, reference(sigmoid(a) + tanh(a) * exp(a)), {2e-6, 8100 * 1e-6}, op_ulps<T>(16), "fast");
  }
}
TEST_CASE_TEMPLATE_APPLY(floating, std::tuple<float, double, half, bfloat16>);

TEST_CASE("round is Relay's: half away from zero, sign kept") {
  tensor<float, 1> a({8}), out({8});
  const float in[8] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -0.4f, 0.49999997f, 8388609.0f};
  const float want[8] = {1, 2, 3, -1, -3, -0.0f, 0, 8388609.0f};
  for (int i = 0; i < 8; ++i) a(i) = in[i];
  eval(out, round(a));
  for (int i = 0; i < 8; ++i) {
    CHECK(out(i) == want[i]);
    CHECK(std::signbit(out(i)) == std::signbit(want[i]));
  }
}

TEST_CASE("NaN propagates through maximum, minimum, relu and clip; sign keeps NaN and -0") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  tensor<float, 1> a({3}), b({3}), out({3});
  a(0) = nan, a(1) = 1, a(2) = -0.0f;
  b(0) = 1, b(1) = nan, b(2) = 0.0f;
  eval(out, maximum(a, b));
  CHECK(std::isnan(out(0)));
  CHECK(std::isnan(out(1)));
  eval(out, minimum(a, b));
  CHECK(std::isnan(out(0)));
  CHECK(std::isnan(out(1)));
  eval(out, relu(a));
  CHECK(std::isnan(out(0)));
  eval(out, clip(a, -1, 1));
  CHECK(std::isnan(out(0)));
  eval(out, sign(a));
  CHECK(std::isnan(out(0)));
  CHECK(out(1) == 1);
  CHECK((out(2) == 0 && std::signbit(out(2))));
}

TEST_CASE("integer semantics: wrapping, division by zero, abs of the minimum") {
  tensor<std::int8_t, 1> a({6}), b({6}), out({6});
  const std::int8_t av[6] = {127, -128, -128, 7, -7, 100};
  const std::int8_t bv[6] = {1, -1, 0, 2, 2, 100};
  for (int i = 0; i < 6; ++i) a(i) = av[i], b(i) = bv[i];
  eval(out, a + b);
  CHECK(out(0) == -128);  // 127 + 1 wraps
  CHECK(out(5) == -56);   // 200 wraps
  eval(out, a / b);
  CHECK(out(1) == -128);  // -128 / -1 wraps to -128
  CHECK(out(2) == 0);     // x / 0 = 0
  CHECK(out(3) == 3);
  CHECK(out(4) == -3);  // truncating
  eval(out, abs(a));
  CHECK(out(1) == -128);
  eval(out, a * b);
  CHECK(out(5) == 16);  // 10000 mod 256
  tensor<std::uint8_t, 1> u({2}), uo({2});
  u(0) = 0, u(1) = 255;
  eval(uo, u - std::uint8_t{1});
  CHECK(uo(0) == 255);
  CHECK(uo(1) == 254);
  CHECK_THROWS_AS(eval(uo, u + 300), shape_error);  // the scalar does not fit uint8
}
