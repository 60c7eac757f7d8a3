// The ops added through the op table alone (issue 13): the C library's functions in double per
// lane (log2 ... atanh), classification (isnan, isinf, isfinite) and nn.prelu, on every dtype
// they take, contiguous and strided, with edge values, against fuse::reference (the division
// family and the bitwise ops: test_ops_division.cpp).
#include <cmath>

#include "expr/op_checks.hpp"

// The thirteen share one form (FUSE_DOUBLE_UNARY): every one on float32 with edges and a strided
// view, and one of them on the other floating dtypes (each instantiation costs compile time).
TEST_CASE("the C library's functions, per lane in double: edges and strided views") {
  using T = float;
  // Rounded once from double: within 1 ULP of the correctly rounded result (0.5 in practice).
  check_unary<T>([](auto&& a) { return log2(a); }, 0, 1e6, 1);
  check_unary<T>([](auto&& a) { return log10(a); }, 0, 1e6, 1);
  check_unary<T>([](auto&& a) { return sin(a); }, -100, 100, 1);
  check_unary<T>([](auto&& a) { return cos(a); }, -100, 100, 1);
  check_unary<T>([](auto&& a) { return tan(a); }, -1.5, 1.5, 1);
  check_unary<T>([](auto&& a) { return asin(a); }, -1, 1, 1);
  check_unary<T>([](auto&& a) { return acos(a); }, -1, 1, 1);
  check_unary<T>([](auto&& a) { return atan(a); }, -100, 100, 1);
  check_unary<T>([](auto&& a) { return sinh(a); }, -90, 90, 1);
  check_unary<T>([](auto&& a) { return cosh(a); }, -90, 90, 1);
  check_unary<T>([](auto&& a) { return asinh(a); }, -1e6, 1e6, 1);
  check_unary<T>([](auto&& a) { return acosh(a); }, 1, 1e6, 1);
  check_unary<T>([](auto&& a) { return atanh(a); }, -1, 1, 1);
}
TEST_CASE_TEMPLATE_DEFINE("the C library's functions on the other floating dtypes", T, libm) {
  check_unary<T>([](auto&& a) { return sin(a); }, -100, 100, op_ulps<T>(1));
}
TEST_CASE_TEMPLATE_APPLY(libm, std::tuple<double, half, bfloat16>);

TEST_CASE("the C library's functions over the whole float32 range: within 1 ULP") {
  // Every 65537th bit pattern (all exponents, both signs, subnormals, inf, NaN).
  tensor<float, 1> x({65537}), out({65537});
  for (index_t i = 0; i < x.size(); ++i) {
    const auto bits = static_cast<std::uint32_t>(i) * 65537u;
    std::memcpy(&x(i), &bits, sizeof(float));
  }
  const auto all = [&](auto make, const char* what) {
    eval(out, make(x));
    expect_matches(out, reference(make(x)), {}, 1, what);
  };
  all([](auto&& a) { return log2(a); }, "log2");
  all([](auto&& a) { return log10(a); }, "log10");
  all([](auto&& a) { return sin(a); }, "sin");
  all([](auto&& a) { return cos(a); }, "cos");
  all([](auto&& a) { return tan(a); }, "tan");
  all([](auto&& a) { return asin(a); }, "asin");
  all([](auto&& a) { return acos(a); }, "acos");
  all([](auto&& a) { return atan(a); }, "atan");
  all([](auto&& a) { return sinh(a); }, "sinh");
  all([](auto&& a) { return cosh(a); }, "cosh");
  all([](auto&& a) { return asinh(a); }, "asinh");
  all([](auto&& a) { return acosh(a); }, "acosh");
  all([](auto&& a) { return atanh(a); }, "atanh");
}

TEST_CASE_TEMPLATE_DEFINE("isnan, isinf, isfinite on every floating dtype", T, classify) {
  auto g = test::rng(sizeof(T) + 5);
  for (index_t n : test::odd_sizes) {
    CAPTURE(n);
    tensor<T, 1> a({n});
    tensor<bool, 1> out({n});
    test::fill(a.view(), g, -1e3, 1e3);
    test::sprinkle_edges(a, g);
    eval(out, isnan(a));
    expect_matches(out, reference(isnan(a)), {}, 0, "isnan");
    eval(out, isinf(a));
    expect_matches(out, reference(isinf(a)), {}, 0, "isinf");
    eval(out, isfinite(a));
    expect_matches(out, reference(isfinite(a)), {}, 0, "isfinite");
  }
  tensor<T, 1> e({3});
  e(0) = std::numeric_limits<T>::quiet_NaN();
  e(1) = std::numeric_limits<T>::infinity();
  e(2) = T(-1.5);
  const auto nan = materialize(isnan(e)), inf = materialize(isinf(e)), fin = materialize(isfinite(e));
  CHECK((nan(0) && !nan(1) && !nan(2)));
  CHECK((!inf(0) && inf(1) && !inf(2)));
  CHECK((!fin(0) && !fin(1) && fin(2)));
}
TEST_CASE_TEMPLATE_APPLY(classify, std::tuple<float, double, half, bfloat16>);

TEST_CASE_TEMPLATE_DEFINE("nn.prelu: alpha per channel of any axis, against the reference", T, prelu_dtypes) {
  auto g = test::rng(sizeof(T) * 3 + 1);
  tensor<T, 4> x({2, 7, 5, 17});
  test::fill(x.view(), g, -4, 4);
  test::sprinkle_edges(x, g);
  for (int axis : {1, 0, 2, 3, -1, -3}) {
    CAPTURE(axis);
    const index_t c = x.shape()[static_cast<std::size_t>(axis < 0 ? axis + 4 : axis)];
    tensor<T, 1> alpha({c});
    test::fill(alpha.view(), g, -1, 1);
    tensor<T, 4> out({2, 7, 5, 17});
    eval(out, prelu(x, alpha, axis));
    expect_matches(out, reference(prelu(x, alpha, axis)), {}, op_ulps<T>(0.5), "prelu");
    // Against the formula, element by element.
    for (index_t i = 0; i < 2; ++i)
      for (index_t j = 0; j < 7; ++j)
        for (index_t k = 0; k < 5; ++k)
          for (index_t l = 0; l < 17; ++l) {
            const index_t at[4] = {i, j, k, l};
            const auto v = to_compute<T>(x(i, j, k, l));
            const auto a = to_compute<T>(alpha(at[axis < 0 ? axis + 4 : axis]));
            const double want = double(to_compute<T>(T(v > 0 ? v : a * v)));  // in the compute type
            const double got = double(to_compute<T>(out(i, j, k, l)));
            if (!(got == want || (std::isnan(got) && std::isnan(want)))) {
              FAIL_CHECK("prelu at (" << i << ", " << j << ", " << k << ", " << l << "): " << got << ", not " << want);
              return;
            }
          }
  }
  // The default axis is 1 (Relay's); through a strided view.
  tensor<T, 1> alpha7({7});
  test::fill(alpha7.view(), g, -1, 1);
  auto v = strided_slice(x, {0, 0, 0, 0}, {2, 7, 5, 17}, {1, 1, 2, 3});
  tensor<T, 4> out2({2, 7, 3, 6});
  eval(out2, prelu(v, alpha7));
  expect_matches(out2, reference(prelu(v, alpha7, 1)), {}, op_ulps<T>(0.5), "prelu, default axis, strided");
  tensor<T, 1> wrong({6});
  CHECK_THROWS_WITH_AS(prelu(x, wrong, 1), doctest::Contains("must have the extent of axis"), shape_error);
  CHECK_THROWS_AS(prelu(x, alpha7, 4), shape_error);
}
TEST_CASE_TEMPLATE_APPLY(prelu_dtypes, std::tuple<float, double, half, bfloat16>);
