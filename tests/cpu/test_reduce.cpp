// Reductions (sum, mean, max, min, prod), softmax, log_softmax and layer_norm: every axis
// layout, keepdims and exclude, fused input expressions, dtypes, edges, long-row accuracy,
// and reductions used inside larger trees.
#include <doctest/doctest.h>

#include "support/check.hpp"

using namespace fuse;
using fuse::test::expect_matches;
using fuse::test::tolerance;

namespace {

template <class E>
void check(const E& e, tolerance tol, double ulps, const char* what) {
  test::expect_matches_reference(e, tol, ulps, what);
}

template <class T>
void reductions_of(std::uint64_t salt) {
  const double lo = is_integer_dtype<T> ? -100 : -2, hi = is_integer_dtype<T> ? 100 : 2;
  const tolerance tol = is_floating_dtype<T> ? tolerance{1e-6, 1e-6} : tolerance{};
  const double u = std::is_same_v<T, half> || std::is_same_v<T, bfloat16> ? 1 : 2;
  for (index_t n : {1, 7, 17, 1023}) {
    CAPTURE(n);
    auto a = test::random_tensor<T>({3, n, 5}, salt + static_cast<std::uint64_t>(n), lo, hi);
    check(sum(a, 1), tol, u, "sum axis 1");
    check(sum(a, -1), tol, u, "sum last axis");
    check(mean(a, {0, 2}), tol, u, "mean axes 0,2");
    check(max(a, 1, keepdims), tol, 0, "max keepdims");
    check(min(a, {1}, exclude), tol, 0, "min exclude");
    check(sum(a), tol, u, "sum all");
    check(max(a, keepdims), tol, 0, "max all keepdims");
    if constexpr (is_floating_dtype<T>) check(prod(a * T(0.5) + T(1), 0), {1e-5, 1e-6}, 4, "prod");
    else check(prod(a, 0), tol, 0, "prod");
  }
}
}  // namespace

TEST_CASE("reductions over every axis layout and dtype") {
  reductions_of<float>(1);
  reductions_of<double>(2);
  reductions_of<half>(3);
  reductions_of<std::int8_t>(4);
  reductions_of<std::uint8_t>(5);
  reductions_of<std::int32_t>(6);
  reductions_of<std::int64_t>(7);
}

TEST_CASE("reductions fuse their input expression, also over strided views") {
  auto a = test::random_tensor({9, 33}, 10);
  auto b = test::random_tensor({33}, 11);
  check(sum(exp(a) * b, 1), {1e-6, 33 * 20 * 3e-7}, 4, "sum of a product");  // terms cancel
  check(max(transpose(a) * 2.0f, 1), {}, 0, "max of a transposed view");
  check(mean(strided_slice(a, {8, 0}, {-10, 33}, {-2, 3}), 0), {1e-6, 1e-6}, 2, "mean of a reversed strided slice");
}

TEST_CASE("reduction edges: NaN, empty axes, integer wrapping") {
  tensor<float, 2> a({2, 4});
  for (index_t i = 0; i < 8; ++i) a.data()[i] = static_cast<float>(i);
  a(0, 2) = std::numeric_limits<float>::quiet_NaN();
  auto mx = materialize(max(a, 1));
  CHECK(std::isnan(mx(0)));
  CHECK(mx(1) == 7.0f);
  auto mn = materialize(min(a, 1));
  CHECK(std::isnan(mn(0)));
  tensor<float, 2> empty({3, 0});
  auto s = materialize(sum(empty, 1));
  auto p = materialize(prod(empty, 1));
  auto m = materialize(max(empty, 1));
  auto me = materialize(mean(empty, 1));
  CHECK(s(1) == 0.0f);
  CHECK(p(1) == 1.0f);
  CHECK(m(1) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(me(1)));
  tensor<std::int8_t, 1> i8({3});
  i8(0) = 100, i8(1) = 100, i8(2) = 100;
  auto si = materialize(sum(i8));
  CHECK(*si.data() == 44);  // 300 wraps in int8, as Relay's int8 sum does
  auto mi = materialize(mean(i8));
  CHECK(*mi.data() == 14);  // the wrapped sum divided, truncating
  // An empty integer max/min is the dtype's lowest/highest (int8's max once read 0: the
  // identity of its int32 compute type, wrapped).
  tensor<std::int8_t, 2> empty8({2, 0});
  CHECK(materialize(max(empty8, 1))(1) == -128);
  CHECK(materialize(min(empty8, 1))(1) == 127);
  tensor<std::uint8_t, 2> emptyu8({2, 0});
  CHECK(materialize(max(emptyu8, 1))(0) == 0);
  CHECK(materialize(min(emptyu8, 1))(0) == 255);
}

TEST_CASE("long rows keep their accuracy (double accumulation)") {
  const index_t n = 1 << 20;
  tensor<float, 1> a({n});
  auto g = test::rng(12);
  test::fill(a.view(), g, 0, 1);
  a(0) = 1e7f;  // a large first element swamps a float accumulator
  auto s = materialize(sum(a));
  const double ref = reference(sum(a))[index_array<0>{}];
  CHECK(std::fabs(*s.data() - ref) <= 0.5 * std::ldexp(1.0, std::ilogb(ref) - 23));
}

TEST_CASE("softmax and log_softmax along any axis") {
  for (index_t n : {1, 7, 17, 384, 1025}) {
    CAPTURE(n);
    auto a = test::random_tensor({4, n}, 20 + static_cast<std::uint64_t>(n), -30, 30);
    check(softmax(a), {1e-6, 1e-30}, 4, "softmax last axis");
    check(log_softmax(a), {1e-6, 1e-6}, 4, "log_softmax last axis");
    check(softmax(a * 0.125f - 1.0f, 0), {1e-6, 1e-30}, 4, "softmax of an expression, axis 0");
  }
  auto b = test::random_tensor({3, 5, 6}, 30);
  check(softmax(b, 1), {1e-6, 1e-30}, 4, "middle axis");
  // max subtraction: huge logits do not overflow; -inf logits give exact zeros
  tensor<float, 2> big({1, 3});
  big(0, 0) = 1000, big(0, 1) = 999, big(0, 2) = -std::numeric_limits<float>::infinity();
  auto sm = materialize(softmax(big));
  CHECK(sm(0, 0) == doctest::Approx(1 / (1 + std::exp(-1.0))).epsilon(1e-6));
  CHECK(sm(0, 2) == 0.0f);
  // in place, the way attention scores are normalised
  auto c = test::random_tensor({6, 40}, 31);
  const auto before = c;
  eval(c, softmax(c));
  expect_matches(c, reference(softmax(before)), {1e-6, 1e-30}, 4, "in place");
  auto h = test::random_tensor<half>({3, 50}, 32);
  check(softmax(h), {}, 1, "half");
}

TEST_CASE("layer_norm matches nn.layer_norm") {
  for (index_t n : {1, 7, 768, 1023}) {
    CAPTURE(n);
    auto x = test::random_tensor({5, n}, 40 + static_cast<std::uint64_t>(n), -4, 6);
    auto g = test::random_tensor({n}, 41);
    auto b = test::random_tensor({n}, 42);
    check(layer_norm(x, g, b), {1e-5, 1e-6}, 8, "default");
    check(layer_norm(x * 2.0f + 1.0f, g, b, -1, 1e-3, false, true), {1e-5, 1e-6}, 8, "no center");
    check(layer_norm(x, g, b, 1, 1e-12, true, false), {1e-5, 1e-6}, 8, "no scale");
  }
  auto x = test::random_tensor({6, 4, 3}, 43);
  auto g = test::random_tensor({4}, 44);
  auto b = test::random_tensor({4}, 45);
  check(layer_norm(x, g, b, 1), {1e-5, 1e-6}, 8, "axis 1");
  CHECK_THROWS_WITH_AS(layer_norm(x, g, b, 2), doctest::Contains("must have the extent of axis 2"), shape_error);
}

TEST_CASE("reductions inside larger trees") {
  auto x = test::random_tensor({7, 29}, 50);
  check(x - mean(x, 1, keepdims), {1e-6, 1e-6}, 4, "centre");
  check(exp(x - max(x, -1, keepdims)) / sum(exp(x - max(x, -1, keepdims)), -1, keepdims), {1e-6, 1e-30}, 8,
        "hand-written softmax");
  // the decomposed layer norm of exported Relay programs (corpus 04)
  auto d = x - mean(x, -1, keepdims);
  auto ln = d / sqrt(mean(power(d, 2.0f), -1, keepdims) + 1e-5f);
  check(ln, {1e-5, 1e-6}, 8, "decomposed layer norm");
}
