// The floating op test case, applied to float and double in test_ops_math.cpp and to the
// 16-bit floating dtypes in test_ops_math_half.cpp: one translation unit for all four took
// 1.0 GB of compiler memory.
#pragma once

#include "expr/op_checks.hpp"

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
    // x sigmoid(z), z = 1.5958 x (1 + 0.044715 x^2): for x near -9, z near -66 carries ~2.5 ulps
    // of float rounding (1e-5 absolute), which sigmoid(z) ~ e^z turns into 1e-5 relative; the
    // float result cannot do better than that (seen at 1.14e-5 with a random seed).
    check_unary<T>([](auto&& a) { return gelu_tanh(a); }, -9, 9, op_ulps<T>(4), {3e-5, 1e-30});
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
