// right_shift and left_shift on the integer dtypes against the reference and by hand (apart from
// test_ops_arith_int.cpp: together they took 1.1 GB of compiler memory).
#include "expr/op_checks.hpp"

// Shifts: the value over its whole range (edges sprinkled), the amount over [-3, bits + 3] so
// that every in-range amount and the out-of-range ones on both sides occur; a scalar amount, a
// broadcast column of amounts and a reversed transposed view. Checked against hand-written
// values too, so that the reference cannot share a mistake with the op.
TEST_CASE_TEMPLATE_DEFINE("right_shift and left_shift on every integer dtype", T, shifts) {
  auto g = fuse::test::rng(sizeof(T) * 31 + 5);
  const double bits = 8.0 * sizeof(T);
  const double lo = static_cast<double>(std::numeric_limits<T>::lowest()),
               hi = static_cast<double>(std::numeric_limits<T>::max());
  for (index_t n : fuse::test::odd_sizes) {
    CAPTURE(n);
    tensor<T, 1> a({n}), b({n}), out({n});
    fuse::test::fill(a.view(), g, lo, hi);
    fuse::test::sprinkle_edges(a, g);
    fuse::test::fill(b.view(), g, std::is_signed_v<T> ? -3 : 0, bits + 3);
    eval(out, right_shift(a, b));
    expect_matches(out, reference(right_shift(a, b)), {}, 0, "right_shift");
    eval(out, left_shift(a, b));
    expect_matches(out, reference(left_shift(a, b)), {}, 0, "left_shift");
    eval(out, right_shift(a, T(3)) + left_shift(a, T(1)));
    expect_matches(out, reference(right_shift(a, T(3)) + left_shift(a, T(1))), {}, 0, "scalar amounts");
  }
  tensor<T, 2> a({19, 33}), col({19, 1}), out({19, 33});
  fuse::test::fill(a.view(), g, lo, hi);
  fuse::test::fill(col.view(), g, 0, bits - 1);
  eval(out, right_shift(a, col));
  expect_matches(out, reference(right_shift(a, col)), {}, 0, "column of amounts");
  auto t = transpose(strided_slice(a, {18, 0}, {-20, 33}, {-1, 1}));
  tensor<T, 2> out_t({33, 19});
  eval(out_t, left_shift(t, right_shift(t, T(bits - 1))));
  expect_matches(out_t, reference(left_shift(t, right_shift(t, T(bits - 1)))), {}, 0, "reversed transposed");

  // By hand: arithmetic right shifts floor, amounts out of range shift every bit out.
  tensor<T, 1> x({6}), s({6}), r({6});
  const T neg = std::is_signed_v<T> ? T(-7) : T(249);
  const T xs[6] = {neg, neg, T(7), neg, T(1), T(std::numeric_limits<T>::max())};
  const T ss[6] = {T(1), T(bits - 1), T(bits), T(bits + 1), T(0), T(std::is_signed_v<T> ? -1 : bits + 2)};
  for (int k = 0; k < 6; ++k) x.data()[k] = xs[k], s.data()[k] = ss[k];
  eval(r, right_shift(x, s));
  const T neg_fill = std::is_signed_v<T> ? T(-1) : T(0);
  const T want_r[6] = {std::is_signed_v<T> ? T(-4) : T(124), std::is_signed_v<T> ? T(-1) : T(1), T(0), neg_fill, T(1),
                       std::is_signed_v<T> ? T(0) : T(0)};
  for (int k = 0; k < 6; ++k) CHECK_MESSAGE(r.data()[k] == want_r[k], "right_shift element " << k);
  eval(r, left_shift(x, s));
  const T want_l[6] = {
      static_cast<T>(static_cast<std::make_unsigned_t<T>>(neg) << 1),
      static_cast<T>(std::is_signed_v<T> || (neg & 1) ? std::numeric_limits<std::make_unsigned_t<T>>::max() / 2 + 1
                                                      : 0),
      T(0),
      T(0),
      T(1),
      T(0)};
  for (int k = 0; k < 6; ++k) CHECK_MESSAGE(r.data()[k] == want_l[k], "left_shift element " << k);
}
TEST_CASE_TEMPLATE_APPLY(shifts, std::tuple<std::int8_t, std::uint8_t, std::int32_t, std::int64_t>);
