// Every elementwise op of the op table, on every dtype it accepts, against fuse::reference() on
// fresh random inputs sprinkled with edge values, at sizes that are not multiples of any vector
// width, contiguous and strided.
#include <doctest/doctest.h>

#include "support/check.hpp"

using namespace fuse;
using fuse::test::expect_matches;
using fuse::test::tolerance;

namespace {

using all_dtypes = std::tuple<float, double, half, bfloat16, std::int8_t, std::uint8_t, std::int32_t, std::int64_t>;

/// ULPs a single op may be off in dtype T: float16/bfloat16 results are one rounding of a float
/// computation, so they may land on the other side of a rounding boundary from the reference.
template <class T>
double op_ulps(double float32_ulps) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) return 1;
  else if constexpr (std::is_same_v<T, double>) return 1;
  else return float32_ulps;
}

/// Runs `make(a)` (a unary expression) over 1-D inputs of every odd size, then over a strided
/// 2-D view, comparing with the reference.
template <class T, class Make>
void check_unary(Make make, double lo, double hi, double max_ulps, tolerance tol = {}, bool edges = true) {
  auto g = test::rng(reinterpret_cast<std::uintptr_t>(&make) ^ sizeof(T));
  for (index_t n : test::odd_sizes) {
    CAPTURE(n);
    tensor<T, 1> a({n}), out({n});
    test::fill(a.view(), g, lo, hi);
    if (edges) test::sprinkle_edges(a, g);
    eval(out, make(a));
    expect_matches(out, reference(make(a)), tol, max_ulps, "contiguous");
  }
  // A strided, transposed operand: every other column of a 37x23 matrix, read transposed.
  tensor<T, 2> big({37, 46});
  test::fill(big.view(), g, lo, hi);
  if (edges) test::sprinkle_edges(big, g);
  auto v = transpose(strided_slice(big, {0, 0}, {37, 46}, {1, 2}));
  tensor<T, 2> out({23, 37});
  eval(out, make(v));
  expect_matches(out, reference(make(v)), tol, max_ulps, "strided");
}

/// The same for binary ops, with a broadcast operand in the 2-D case.
template <class T, class Make>
void check_binary(Make make, double lo, double hi, double max_ulps, tolerance tol = {}, bool edges = true) {
  auto g = test::rng(reinterpret_cast<std::uintptr_t>(&make) ^ (sizeof(T) * 7));
  for (index_t n : test::odd_sizes) {
    CAPTURE(n);
    tensor<T, 1> a({n}), b({n}), out({n});
    test::fill(a.view(), g, lo, hi);
    test::fill(b.view(), g, lo, hi);
    if (edges) test::sprinkle_edges(a, g), test::sprinkle_edges(b, g);
    eval(out, make(a, b));
    expect_matches(out, reference(make(a, b)), tol, max_ulps, "contiguous");
  }
  tensor<T, 2> a({19, 33});
  tensor<T, 1> row({33});
  tensor<T, 2> col({19, 1});
  test::fill(a.view(), g, lo, hi);
  test::fill(row.view(), g, lo, hi);
  test::fill(col.view(), g, lo, hi);
  if (edges) test::sprinkle_edges(a, g);
  tensor<T, 2> out({19, 33});
  eval(out, make(a, row));
  expect_matches(out, reference(make(a, row)), tol, max_ulps, "row broadcast");
  eval(out, make(col, a));
  expect_matches(out, reference(make(col, a)), tol, max_ulps, "column broadcast");
  auto t = transpose(strided_slice(a, {18, 0}, {-20, 33}, {-1, 1}));  // reversed rows, transposed
  tensor<T, 2> out_t({33, 19});
  eval(out_t, make(t, t));
  expect_matches(out_t, reference(make(t, t)), tol, max_ulps, "reversed transposed");
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("arithmetic ops on every numeric dtype", T, arithmetic) {
  const double lo = is_integer_dtype<T> ? -1e9 : -50, hi = is_integer_dtype<T> ? 1e9 : 50;
  SUBCASE("add") { check_binary<T>([](auto&& a, auto&& b) { return a + b; }, lo, hi, op_ulps<T>(0.5)); }
  SUBCASE("subtract") { check_binary<T>([](auto&& a, auto&& b) { return a - b; }, lo, hi, op_ulps<T>(0.5)); }
  SUBCASE("multiply") { check_binary<T>([](auto&& a, auto&& b) { return a * b; }, lo, hi, op_ulps<T>(0.5)); }
  SUBCASE("divide") { check_binary<T>([](auto&& a, auto&& b) { return a / b; }, lo, hi, op_ulps<T>(0.5)); }
  SUBCASE("maximum") { check_binary<T>([](auto&& a, auto&& b) { return maximum(a, b); }, lo, hi, 0); }
  SUBCASE("minimum") { check_binary<T>([](auto&& a, auto&& b) { return minimum(a, b); }, lo, hi, 0); }
  SUBCASE("power") {
    if constexpr (is_integer_dtype<T>) check_binary<T>([](auto&& a, auto&& b) { return power(a, b); }, -6, 6, 0, {}, false);
    else check_binary<T>([](auto&& a, auto&& b) { return power(a, b); }, 0, 4, op_ulps<T>(0.5));
  }
  SUBCASE("negative") { check_unary<T>([](auto&& a) { return -a; }, lo, hi, 0); }
  SUBCASE("abs") { check_unary<T>([](auto&& a) { return abs(a); }, lo, hi, 0); }
  SUBCASE("sign") { check_unary<T>([](auto&& a) { return sign(a); }, lo, hi, 0); }
  SUBCASE("nn.relu") { check_unary<T>([](auto&& a) { return relu(a); }, lo, hi, 0); }
  SUBCASE("clip") { check_unary<T>([](auto&& a) { return clip(a, -20.5, 100.25); }, lo, hi, 0); }
  SUBCASE("scalar operands adopt the dtype") {
    // Terms reach ~70 and cancel: allow float32 rounding of the terms, absolutely.
    const tolerance tol = std::is_same_v<T, float> ? tolerance{1e-6, 70 * 3e-7} : tolerance{};
    check_unary<T>([](auto&& a) { return (a + 3) * 2 - maximum(a, 5); }, -30, 30, op_ulps<T>(1), tol);
  }
}
TEST_CASE_TEMPLATE_APPLY(arithmetic, all_dtypes);

TEST_CASE_TEMPLATE_DEFINE("floating ops on every floating dtype", T, floating) {
  // float32 results of the accurate math are within 2 ULP of the correctly rounded value.
  SUBCASE("exp") { check_unary<T>([](auto&& a) { return exp(a); }, -100, 100, op_ulps<T>(2)); }
  SUBCASE("log") { check_unary<T>([](auto&& a) { return log(a); }, 0, 1e6, op_ulps<T>(2)); }
  SUBCASE("tanh") { check_unary<T>([](auto&& a) { return tanh(a); }, -12, 12, op_ulps<T>(2)); }
  SUBCASE("sigmoid") { check_unary<T>([](auto&& a) { return sigmoid(a); }, -110, 30, op_ulps<T>(2)); }
  SUBCASE("erf") { check_unary<T>([](auto&& a) { return erf(a); }, -5, 5, op_ulps<T>(2)); }
  SUBCASE("sqrt") { check_unary<T>([](auto&& a) { return sqrt(a); }, 0, 1e6, op_ulps<T>(0.5)); }
  SUBCASE("rsqrt") { check_unary<T>([](auto&& a) { return rsqrt(a); }, 0, 1e6, op_ulps<T>(2)); }
  // GELU composes several roundings; its tails amplify the rounding of x/sqrt(2) (docs/ops.md).
  SUBCASE("gelu") { check_unary<T>([](auto&& a) { return gelu(a); }, -9, 9, op_ulps<T>(4), {1e-5, 1e-30}); }
  SUBCASE("gelu_tanh") { check_unary<T>([](auto&& a) { return gelu_tanh(a); }, -9, 9, op_ulps<T>(4), {1e-5, 1e-30}); }
  SUBCASE("nn.leaky_relu") { check_unary<T>([](auto&& a) { return leaky_relu(a, 0.1); }, -50, 50, op_ulps<T>(1)); }  // alpha rounds to the dtype
  SUBCASE("round") { check_unary<T>([](auto&& a) { return round(a * 2); }, -40, 40, 0); }
  SUBCASE("floor") { check_unary<T>([](auto&& a) { return floor(a); }, -40, 40, 0); }
  SUBCASE("ceil") { check_unary<T>([](auto&& a) { return ceil(a); }, -40, 40, 0); }
  SUBCASE("trunc") { check_unary<T>([](auto&& a) { return trunc(a); }, -40, 40, 0); }
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
  CHECK(out(4) == -3);    // truncating
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

TEST_CASE_TEMPLATE_DEFINE("comparisons give bool on every dtype", T, comparisons) {
  const double lo = -20, hi = 20;  // small ranges so that equal values occur
  auto g = test::rng(sizeof(T) * 31);
  for (index_t n : test::odd_sizes) {
    CAPTURE(n);
    tensor<T, 1> a({n}), b({n});
    test::fill(a.view(), g, lo, hi);
    test::fill(b.view(), g, lo, hi);
    test::sprinkle_edges(a, g);
    for (index_t i = 0; i < n; i += 3) b(i) = a(i);
    tensor<bool, 1> out({n});
    eval(out, equal(a, b));
    expect_matches(out, reference(equal(a, b)), {}, 0, "equal");
    eval(out, not_equal(a, b));
    expect_matches(out, reference(not_equal(a, b)), {}, 0, "not_equal");
    eval(out, a < b);
    expect_matches(out, reference(a < b), {}, 0, "less");
    eval(out, a <= b);
    expect_matches(out, reference(a <= b), {}, 0, "less_equal");
    eval(out, a > b);
    expect_matches(out, reference(a > b), {}, 0, "greater");
    eval(out, a >= b);
    expect_matches(out, reference(a >= b), {}, 0, "greater_equal");
    tensor<T, 1> w({n});
    eval(w, where(a > b, a, b));
    expect_matches(w, reference(where(a > b, a, b)), {}, 0, "where");
    eval(w, where(a < b, a, 0));
    expect_matches(w, reference(where(a < b, a, 0)), {}, 0, "where with a scalar");
  }
}
TEST_CASE_TEMPLATE_APPLY(comparisons, all_dtypes);

TEST_CASE("logical ops on bool, and NaN != x is true") {
  auto g = test::rng(5);
  for (index_t n : test::odd_sizes) {
    tensor<bool, 1> a({n}), b({n}), out({n});
    test::fill(a.view(), g);
    test::fill(b.view(), g);
    eval(out, logical_and(a, b));
    expect_matches(out, reference(logical_and(a, b)), {}, 0, "and");
    eval(out, a || b);
    expect_matches(out, reference(a || b), {}, 0, "or");
    eval(out, logical_xor(a, b));
    expect_matches(out, reference(logical_xor(a, b)), {}, 0, "xor");
    eval(out, !a);
    expect_matches(out, reference(!a), {}, 0, "not");
    eval(out, equal(a, b));
    expect_matches(out, reference(equal(a, b)), {}, 0, "equal on bool");
  }
  tensor<float, 1> f({1});
  tensor<bool, 1> o({1});
  f(0) = std::numeric_limits<float>::quiet_NaN();
  eval(o, not_equal(f, f));
  CHECK(o(0));
  eval(o, cast<bool>(f));
  CHECK(o(0));
}

namespace {
template <class To, class From>
void check_cast() {
  auto g = test::rng(sizeof(To) * 131 + sizeof(From));
  const double lo = is_floating_dtype<From> ? -400 : -1e12, hi = is_floating_dtype<From> ? 400 : 1e12;
  for (index_t n : test::odd_sizes) {
    tensor<From, 1> a({n});
    tensor<To, 1> out({n});
    test::fill(a.view(), g, lo, hi);
    test::sprinkle_edges(a, g);
    eval(out, cast<To>(a));
    expect_matches(out, reference(cast<To>(a)), {}, 0, "cast");
  }
}
template <class From, class... To>
void check_casts_from(std::tuple<To...>*) {
  (check_cast<To, From>(), ...);
}
}  // namespace

TEST_CASE_TEMPLATE_DEFINE("cast between every pair of dtypes", From, casts) {
  check_casts_from<From>(static_cast<std::tuple<float, double, half, bfloat16, std::int8_t, std::uint8_t, std::int32_t, std::int64_t, bool>*>(nullptr));
}
TEST_CASE_TEMPLATE_APPLY(casts, std::tuple<float, double, half, bfloat16, std::int8_t, std::uint8_t, std::int32_t, std::int64_t, bool>);

TEST_CASE("cast rules at the edges") {
  tensor<float, 1> f({6});
  const float fv[6] = {std::numeric_limits<float>::quiet_NaN(), 1e10f, -1e10f, -128.9f, 127.9f, -0.9f};
  for (int i = 0; i < 6; ++i) f(i) = fv[i];
  tensor<std::int8_t, 1> i8({6});
  eval(i8, cast<std::int8_t>(f));
  CHECK(i8(0) == 0);
  CHECK(i8(1) == 127);
  CHECK(i8(2) == -128);
  CHECK(i8(3) == -128);
  CHECK(i8(4) == 127);
  CHECK(i8(5) == 0);
  tensor<std::int32_t, 1> i32({6});
  eval(i32, cast<std::int32_t>(f));
  CHECK(i32(1) == std::numeric_limits<std::int32_t>::max());
  CHECK(i32(2) == std::numeric_limits<std::int32_t>::min());
  tensor<std::int32_t, 1> w({2});
  tensor<std::int8_t, 1> w8({2});
  w(0) = 300, w(1) = -129;
  eval(w8, cast<std::int8_t>(w));  // wraps, as C and TVM convert integers
  CHECK(w8(0) == 44);
  CHECK(w8(1) == 127);
}

TEST_CASE("the quantization chain of the seed: multiply, round, clip, cast") {
  auto g = test::rng(11);
  tensor<float, 3> x({3, 17, 19});
  test::fill(x.view(), g, -10, 10);
  for (index_t i = 0; i < x.size(); i += 7) x.data()[i] = std::round(x.data()[i] * 16) / 16 + 1.0f / 32;  // exact ties
  tensor<std::int8_t, 3> q({3, 17, 19});
  auto e = cast<std::int8_t>(clip(round(x * 16.0f), -127, 127));
  eval(q, e);
  expect_matches(q, reference(e), {}, 0, "quantize");
}
