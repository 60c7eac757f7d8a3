// The CPU executor: one loop for whole trees, multi-output passes, aliasing without
// annotations, broadcasting into outputs, streaming stores, loop shapes, ranks 0 and empty.
#include <doctest/doctest.h>

#include "support/check.hpp"

using namespace fuse;
using fuse::test::expect_matches;

TEST_CASE("the seed's gate expression, at its shapes and at odd sizes") {
  for (index_t n : {1, 10, 17, 1023, 4097}) {
    CAPTURE(n);
    auto a = test::random_tensor({3, 3 * n}, static_cast<std::uint64_t>(n));
    tensor<float, 2> out({3, n});
    auto s = split<3>(a, 1);
    auto e = sigmoid(s[0]) + tanh(s[1]) * exp(s[2]);
    eval(out, e);
    // sigmoid + tanh*exp can cancel: float32 rounding of terms up to e^3 bounds the error.
    expect_matches(out, reference(e), {1e-6, 20 * 3e-7}, 4, "gate");
  }
}

TEST_CASE("several outputs in one pass: an LSTM cell's h' and c'") {
  for (index_t n : {1, 7, 33, 257}) {
    CAPTURE(n);
    auto gates = test::random_tensor({5, 4 * n}, 20 + static_cast<std::uint64_t>(n));
    auto c = test::random_tensor({5, n}, 21);
    auto g = split<4>(gates, 1);
    auto c_new = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
    auto h_new = sigmoid(g[3]) * tanh(c_new);
    tensor<float, 2> h_out({5, n}), c_out({5, n});
    eval(outputs(h_out, c_out), h_new, c_new);
    expect_matches(h_out, reference(h_new), {1e-6, 4 * 3e-7}, 6, "h");
    expect_matches(c_out, reference(c_new), {1e-6, 4 * 3e-7}, 6, "c");
  }
  tensor<float, 1> a({4}), b({4});
  tensor<float, 2> m({2, 2});
  CHECK_THROWS_WITH_AS(eval(outputs(a, b), a + 1.0f, m + 1.0f), doctest::Contains("does not fit the output"),
                       shape_error);
  CHECK_THROWS_AS(eval(outputs(a, a), b + 1.0f, b * 2.0f), memory_error);  // outputs overlap
}

TEST_CASE("aliasing: in place, through transposes, shifted and reversed views") {
  SUBCASE("x = f(x) in place") {
    auto x = test::random_tensor({37, 19}, 30);
    const auto before = x;
    eval(x, sigmoid(x) * 2.0f + x);
    expect_matches(x, reference(sigmoid(before) * 2.0f + before), {1e-6, 3 * 3e-7}, 2, "in place");
  }
  SUBCASE("x = transpose(x)") {
    auto x = test::random_tensor({33, 33}, 31);
    const auto before = x;
    eval(x, transpose(x));
    for (index_t i = 0; i < 33; ++i)
      for (index_t j = 0; j < 33; ++j) CHECK(x(i, j) == before(j, i));
  }
  SUBCASE("x[1:] = x[:-1] + 1 (overlapping, shifted)") {
    auto x = test::random_tensor({100}, 32);
    const auto before = x;
    eval(strided_slice(x.view(), {1}, {100}), strided_slice(x, {0}, {99}) + 1.0f);
    for (index_t i = 1; i < 100; ++i) CHECK(x(i) == before(i - 1) + 1.0f);
    CHECK(x(0) == before(0));
  }
  SUBCASE("x = reverse(x)") {
    auto x = test::random_tensor({65}, 33);
    const auto before = x;
    eval(x, strided_slice(x, {-1}, {-66}, {-1}));
    for (index_t i = 0; i < 65; ++i) CHECK(x(i) == before(64 - i));
  }
  SUBCASE("multi-output where one output is read by the other expression at the same addresses") {
    auto x = test::random_tensor({50}, 34);
    const auto before = x;
    tensor<float, 1> y({50});
    eval(outputs(x, y), x * 2.0f, x + 1.0f);
    for (index_t i = 0; i < 50; ++i) {
      CHECK(x(i) == before(i) * 2.0f);
      CHECK(y(i) == before(i) + 1.0f);
    }
  }
  SUBCASE("a reduction over the output's own memory") {
    auto x = test::random_tensor({8, 8}, 35);
    const auto before = x;
    eval(x, x - mean(x, 1, keepdims));
    expect_matches(x, reference(before - mean(before, 1, keepdims)), {1e-6, 1e-6}, 4, "centre in place");
  }
}

TEST_CASE("broadcasting into the output, and loop shapes") {
  tensor<float, 3> out({5, 6, 7});
  auto a = test::random_tensor({5, 1, 7}, 40);
  auto b = test::random_tensor({1, 6, 1}, 41);
  eval(out, a * b + 1.0f);
  expect_matches(out, reference(a * b + 1.0f), {1e-6, 9 * 3e-7}, 1, "outer product");
  auto bias = test::random_tensor({7}, 42);
  eval(out, bias);  // a 1-D expression fills every row
  for (index_t i = 0; i < 5; ++i) CHECK(out(i, 3, 6) == bias(6));
  eval(out, scalar_expr<float>{2.5f});
  CHECK(out(4, 5, 6) == 2.5f);
  // negative strides and permuted outputs
  auto m = test::random_tensor({9, 13}, 43);
  tensor<float, 2> t({13, 9});
  eval(transpose(t.view()), strided_slice(m, {-1, -1}, {-10, -14}, {-1, -1}) * 3.0f);
  expect_matches(t, reference(transpose(strided_slice(m, {-1, -1}, {-10, -14}, {-1, -1}) * 3.0f)), {}, 0.5,
                 "reversed into transposed");
}

TEST_CASE("streaming stores: peeling, tails and misaligned outputs give the same numbers") {
  auto a = test::random_tensor({300}, 50);
  for (index_t off : {0, 1, 3, 15}) {
    for (index_t n : {1, 15, 16, 17, 63, 130, 299 - 15}) {
      CAPTURE(off);
      CAPTURE(n);
      tensor<float, 1> buf({300});
      auto dst = strided_slice(buf.view(), {off}, {off + n});
      auto src = strided_slice(a, {0}, {n});
      eval(dst, exp(src) - 1.0f, streaming_stores::on);
      tensor<float, 1> ref({n});
      eval(ref, exp(src) - 1.0f, streaming_stores::off);
      for (index_t i = 0; i < n; ++i) CHECK(buf(off + i) == ref(i));
      for (index_t i = 0; i < off; ++i) CHECK(buf(i) == 0.0f);
      for (index_t i = off + n; i < 300; ++i) CHECK(buf(i) == 0.0f);
    }
  }
}

TEST_CASE("streaming stores with several outputs of different alignments") {
  auto a = test::random_tensor({200}, 51);
  tensor<float, 1> b1({201}), b2({203});
  auto o1 = strided_slice(b1.view(), {1}, {201});  // misaligned by one float
  auto o2 = strided_slice(b2.view(), {3}, {203});  // by three
  eval(outputs(o1, o2), a * 2.0f, a + 1.0f, streaming_stores::on);
  for (index_t i = 0; i < 200; ++i) {
    CHECK(o1(i) == a(i) * 2.0f);
    CHECK(o2(i) == a(i) + 1.0f);
  }
}

TEST_CASE("rank 0, empty tensors, static shapes") {
  tensor<float, 0> s;
  tensor<float, 0> x;
  *x.data() = 0.5f;
  eval(s, exp(x) * 2.0f);
  CHECK(*s.data() == doctest::Approx(2 * std::exp(0.5)).epsilon(1e-6));
  tensor<float, 2> empty({0, 5}), e2({0, 5});
  eval(e2, exp(empty));  // nothing to do, nothing touched
  CHECK(e2.size() == 0);
  tensor<float, fixed<2, 3>> a, b, c;
  for (index_t i = 0; i < 6; ++i) a.data()[i] = static_cast<float>(i), b.data()[i] = 1;
  auto e = a * b + a;
  static_assert(std::is_same_v<decltype(e)::shape_type, shape<2, 3>>);
  eval(c, e);
  CHECK(c(1, 2) == 10.0f);
  tensor<float, fixed<3>> row;
  eval(c, a + row);  // (2,3) + (3) -> (2,3), checked at compile time
}

TEST_CASE("fast math runs in the same binary and stays close") {
  auto a = test::random_tensor({4099}, 60, -8, 8);
  tensor<float, 1> accurate({4099}), fast({4099});
  auto e = sigmoid(a) + tanh(a) * exp(a);
  eval(accurate, e);
  eval(fast, e, fast_math);
  expect_matches(accurate, reference(e), {1e-6, 3000 * 3e-7}, 6, "accurate");  // terms up to e^8
  expect_matches(fast, reference(e), {2e-6, 3000 * 1e-6}, 32, "fast");
}

TEST_CASE("materialize and dtypes through the loop") {
  auto a = test::random_tensor<half>({3, 17}, 70);
  auto r = materialize(exp(a) + half(1.0f));
  static_assert(std::is_same_v<decltype(r), tensor<half, 2>>);
  expect_matches(r, reference(exp(a) + half(1.0f)), {}, 1, "half");
  auto b = test::random_tensor<std::int8_t>({40}, 71, -128, 127);
  auto q = materialize(cast<float>(b) * 0.5f);
  expect_matches(q, reference(cast<float>(b) * 0.5f), {}, 0, "int8 to float");
}
