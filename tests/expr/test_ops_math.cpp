// Floating ops (math, rounding) on float and double (half and bfloat16:
// test_ops_math_half.cpp), and the NaN and integer edge rules.
#include "expr/math_cases.hpp"

TEST_CASE_TEMPLATE_APPLY(floating, std::tuple<float, double>);

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
