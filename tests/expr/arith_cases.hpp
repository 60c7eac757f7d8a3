// The arithmetic op test case, applied to the floating dtypes in test_ops_arith.cpp and to the
// integer ones in test_ops_arith_int.cpp: one translation unit for all eight took 1.5 GB of
// compiler memory.
#pragma once

#include "expr/op_checks.hpp"

TEST_CASE_TEMPLATE_DEFINE("arithmetic ops on every numeric dtype", T, arithmetic) {
  const double lo = is_integer_dtype<T> ? -1e9 : -50, hi = is_integer_dtype<T> ? 1e9 : 50;
  SUBCASE("add") {
    check_binary<T>([](auto&& a, auto&& b) { return a + b; }, lo, hi, op_ulps<T>(0.5), {}, true, true);
  }
  SUBCASE("subtract") {
    check_binary<T>([](auto&& a, auto&& b) { return a - b; }, lo, hi, op_ulps<T>(0.5));
  }
  SUBCASE("multiply") {
    check_binary<T>([](auto&& a, auto&& b) { return a * b; }, lo, hi, op_ulps<T>(0.5));
  }
  SUBCASE("divide") {
    check_binary<T>([](auto&& a, auto&& b) { return a / b; }, lo, hi, op_ulps<T>(0.5));
  }
  SUBCASE("maximum") {
    check_binary<T>([](auto&& a, auto&& b) { return maximum(a, b); }, lo, hi, 0, {}, true, true);
  }
  SUBCASE("minimum") {
    check_binary<T>([](auto&& a, auto&& b) { return minimum(a, b); }, lo, hi, 0);
  }
  SUBCASE("power") {
    if constexpr (is_integer_dtype<T>)
      check_binary<T>([](auto&& a, auto&& b) { return power(a, b); }, -6, 6, 0, {}, false);
    else check_binary<T>([](auto&& a, auto&& b) { return power(a, b); }, 0, 4, op_ulps<T>(0.5));
  }
  SUBCASE("negative") {
    check_unary<T>([](auto&& a) { return -a; }, lo, hi, 0);
  }
  SUBCASE("abs") {
    check_unary<T>([](auto&& a) { return abs(a); }, lo, hi, 0);
  }
  SUBCASE("sign") {
    check_unary<T>([](auto&& a) { return sign(a); }, lo, hi, 0);
  }
  SUBCASE("nn.relu") {
    check_unary<T>([](auto&& a) { return relu(a); }, lo, hi, 0);
  }
  SUBCASE("clip") {
    check_unary<T>([](auto&& a) { return clip(a, -20.5, 100.25); }, lo, hi, 0);
  }
  SUBCASE("scalar operands adopt the dtype") {
    // Terms reach ~70 and cancel: allow float32 rounding of the terms, absolutely.
    const tolerance tol = std::is_same_v<T, float> ? tolerance{1e-6, 70 * 3e-7} : tolerance{};
    check_unary<T>([](auto&& a) { return (a + 3) * 2 - maximum(a, 5); }, -30, 30, op_ulps<T>(1), tol);
  }
}
