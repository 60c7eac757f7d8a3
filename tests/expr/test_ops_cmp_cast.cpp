// Comparisons, logical ops and where on the floating dtypes and bool, and the cast rules at the
// edges; casts from these dtypes to every dtype in test_ops_cast.cpp (together they took 1.1 GB
// of compiler memory), the integer dtypes' in test_ops_cmp_cast_int.cpp.
#include "expr/cmp_cast_cases.hpp"

TEST_CASE_TEMPLATE_APPLY(comparisons, floating_dtypes);

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
