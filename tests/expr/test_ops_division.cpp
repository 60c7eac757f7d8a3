// The floor/trunc division family and the bitwise ops added through the op table alone (issue
// 13), on every dtype they take, contiguous and strided, with edge values, against
// fuse::reference or (where float rounding decides an integer) an exact model. (Split from
// test_ops_more.cpp: together they took 1.2 GB of compiler memory.)
#include <cmath>
#include <cstring>

#include "expr/op_checks.hpp"

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
