// The ops added through the op table alone (issue 13): the C library's functions in double per
// lane (log2 ... atanh), classification (isnan, isinf, isfinite), the floor/trunc division
// family, bitwise ops; on every dtype they take, contiguous and strided, with edge values,
// against fuse::reference or (where float rounding decides an integer) an exact model.
#include <cmath>
#include <cstring>

#include "expr/op_checks.hpp"

using namespace fuse;
using namespace fuse::test::ops;
using fuse::test::expect_matches;

namespace {

/// op(a, b) of dtype T against model(a, b) computed in T's compute type, bit for bit (NaN as
/// NaN), over random values in [lo, hi] with edges, contiguous and through a reversed view.
template <class T, class Make, class Model>
void check_against_model(Make make, Model model, double lo, double hi) {
  using C = compute_t<T>;
  auto g = test::rng(sizeof(T) * 131 + 7);
  for (index_t n : {index_t{1}, index_t{17}, index_t{1023}}) {
    CAPTURE(n);
    tensor<T, 1> a({n}), b({n}), out({n});
    test::fill(a.view(), g, lo, hi);
    test::fill(b.view(), g, lo, hi);
    test::sprinkle_edges(a, g);
    test::sprinkle_edges(b, g);
    auto rb = strided_slice(b, {n - 1}, {-n - 1}, {-1});  // b reversed
    eval(out, make(a, rb));
    index_t bad = 0;
    for (index_t i = 0; i < n; ++i) {
      const C x = to_compute<T>(a(i)), y = to_compute<T>(b(n - 1 - i));
      const T want = T(model(x, y));
      const T got = out(i);
      const bool same =
          std::memcmp(&want, &got, sizeof(T)) == 0 ||
          (is_floating_dtype<T> && std::isnan(double(to_compute<T>(want))) && std::isnan(double(to_compute<T>(got))));
      if (!same && bad++ < 4)
        FAIL_CHECK("at " << i << ": op(" << double(x) << ", " << double(y) << ") = " << double(to_compute<T>(got))
                         << ", not " << double(to_compute<T>(want)));
    }
    CHECK(bad == 0);
  }
}

}  // namespace

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

TEST_CASE_TEMPLATE_DEFINE("floor_divide, floor_mod, trunc_divide, trunc_mod on every numeric dtype", T, division) {
  if constexpr (is_integer_dtype<T>) {
    // Exact: floor or truncation of the quotient; x / 0 = 0, x mod 0 = 0, MIN / -1 wraps to MIN.
    const double lo = std::max(-1000.0, double(std::numeric_limits<T>::lowest())),
                 hi = std::min(1000.0, double(std::numeric_limits<T>::max()));
    // (trunc_divide shares divide's integer code; trunc_mod is checked on the values below.)
    check_binary<T>([](auto&& a, auto&& b) { return floor_divide(a, b); }, lo, hi, 0);
    check_binary<T>([](auto&& a, auto&& b) { return floor_mod(a, b); }, lo, hi, 0);
    tensor<T, 1> a({4}), b({4});
    const bool is_signed = std::is_signed_v<T>;
    a(0) = T(7), b(0) = T(is_signed ? -2 : 2);
    a(1) = T(is_signed ? -7 : 7), b(1) = T(2);
    a(2) = T(5), b(2) = T(0);
    a(3) = std::numeric_limits<T>::lowest(), b(3) = T(is_signed ? -1 : 1);
    const auto fd = materialize(floor_divide(a, b)), fm = materialize(floor_mod(a, b));
    const auto td = materialize(trunc_divide(a, b)), tm = materialize(trunc_mod(a, b));
    if constexpr (std::is_signed_v<T>) {
      CHECK((fd(0) == -4 && fm(0) == -1 && td(0) == -3 && tm(0) == 1));  // 7 / -2
      CHECK((fd(1) == -4 && fm(1) == 1 && td(1) == -3 && tm(1) == -1));  // -7 / 2
      CHECK((fd(3) == std::numeric_limits<T>::lowest() && fm(3) == 0 && tm(3) == 0));
    }
    CHECK((fd(2) == 0 && fm(2) == 0 && td(2) == 0 && tm(2) == 0));  // by zero
  } else {
    // Floats: TVM's formulas in the compute type: floor(a / b), a - floor(a / b) b (one FMA),
    // trunc(a / b), fmod(a, b) (exact).
    using C = compute_t<T>;
    check_against_model<T>([](auto&& a, auto&& b) { return floor_divide(a, b); },
                           [](C a, C b) { return std::floor(a / b); }, -50, 50);
    check_against_model<T>([](auto&& a, auto&& b) { return floor_mod(a, b); },
                           [](C a, C b) { return std::fma(-std::floor(a / b), b, a); }, -50, 50);
    check_against_model<T>([](auto&& a, auto&& b) { return trunc_divide(a, b); },
                           [](C a, C b) { return std::trunc(a / b); }, -50, 50);
    check_against_model<T>([](auto&& a, auto&& b) { return trunc_mod(a, b); }, [](C a, C b) { return std::fmod(a, b); },
                           -50, 50);
  }
}
TEST_CASE_TEMPLATE_APPLY(division, all_dtypes);

TEST_CASE_TEMPLATE_DEFINE("bitwise_and, bitwise_or, bitwise_xor, bitwise_not on every integer dtype", T, bitwise) {
  const double lo = double(std::numeric_limits<T>::lowest()), hi = double(std::numeric_limits<T>::max());
  // One binary and the unary one over random values and views (the three binary ones share a
  // form); all four on the values below.
  check_binary<T>([](auto&& a, auto&& b) { return bitwise_xor(a, b); }, lo, hi, 0, {}, true, true);
  check_unary<T>([](auto&& a) { return bitwise_not(a); }, lo, hi, 0);
  tensor<T, 1> a({1}), b({1});
  a(0) = T(0x5A), b(0) = T(0x0F);
  CHECK(materialize(bitwise_and(a, b))(0) == T(0x0A));
  CHECK(materialize(bitwise_or(a, b))(0) == T(0x5F));
  CHECK(materialize(bitwise_xor(a, b))(0) == T(0x55));
  CHECK(materialize(bitwise_not(a))(0) == T(~0x5A));
}
TEST_CASE_TEMPLATE_APPLY(bitwise, std::tuple<std::int8_t, std::uint8_t, std::int32_t, std::int64_t>);

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
