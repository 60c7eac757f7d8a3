// The comparison and cast test cases, applied to the floating dtypes (and bool) in
// test_ops_cmp_cast.cpp and to the integer ones in test_ops_cmp_cast_int.cpp: one translation
// unit for all of them took 1.3 GB of compiler memory.
#pragma once

#include "expr/op_checks.hpp"

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
  check_casts_from<From>(static_cast<std::tuple<float, double, half, bfloat16, std::int8_t, std::uint8_t, std::int32_t,
                                                std::int64_t, bool>*>(nullptr));
}
