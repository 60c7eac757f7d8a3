// Shared by the op tests (test_ops_*.cpp): run an op over fresh random inputs sprinkled with
// edge values, at sizes that are not multiples of any vector width, contiguous, strided and
// broadcast, and compare with fuse::reference().
#pragma once

#include <doctest/doctest.h>

#include "support/check.hpp"

namespace fuse::test::ops {

using floating_dtypes = std::tuple<float, double, half, bfloat16>;
using integer_dtypes = std::tuple<std::int8_t, std::uint8_t, std::int32_t, std::int64_t>;
using all_dtypes = std::tuple<float, double, half, bfloat16, std::int8_t, std::uint8_t, std::int32_t, std::int64_t>;

/// ULPs a single op may be off in dtype T: float16/bfloat16 results are one rounding of a float
/// computation, so they may land on the other side of a rounding boundary from the reference.
template <class T>
double op_ulps(double float32_ulps) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) return 1;
  else if constexpr (std::is_same_v<T, double>) return 1;
  else return float32_ulps;
}

/// Every case below hands the op rank-2 views of the same type (one row for the contiguous
/// sizes, strided, transposed and broadcast views otherwise), so that each op is compiled once
/// per dtype and not once per layout: the op tests are what the test build spends most on. The
/// layouts themselves (rank-1 leaves, views as nodes) are tested in test_views.cpp.
template <class T>
using op_view = tensor_view<T, 2>;

/// Runs `make(a)` (a unary expression) over one row of every odd size, then over a strided,
/// transposed view, comparing with the reference.
template <class T, class Make>
void check_unary(Make make, double lo, double hi, double max_ulps, tolerance tol = {}, bool edges = true) {
  auto g = test::rng(reinterpret_cast<std::uintptr_t>(&make) ^ sizeof(T));
  for (index_t n : test::odd_sizes) {
    CAPTURE(n);
    tensor<T, 2> a({1, n}), out({1, n});
    test::fill(a.view(), g, lo, hi);
    if (edges) test::sprinkle_edges(a, g);
    const op_view<T> av = a.view();
    eval(out, make(av));
    expect_matches(out, reference(make(av)), tol, max_ulps, "contiguous");
  }
  // A strided, transposed operand: every other column of a 37x23 matrix, read transposed.
  tensor<T, 2> big({37, 46});
  test::fill(big.view(), g, lo, hi);
  if (edges) test::sprinkle_edges(big, g);
  const op_view<T> v = transpose(strided_slice(big.view(), {0, 0}, {37, 46}, {1, 2}));
  tensor<T, 2> out({23, 37});
  eval(out, make(v));
  expect_matches(out, reference(make(v)), tol, max_ulps, "strided");
}

/// The same for binary ops, over a reversed, transposed 2-D view and, with `broadcasts`, with
/// a broadcast row and a broadcast column (the loads are per dtype, not per op: the op tests
/// ask for broadcasts on a few ops, which keeps the test build short).
template <class T, class Make>
void check_binary(Make make, double lo, double hi, double max_ulps, tolerance tol = {}, bool edges = true,
                  bool broadcasts = false) {
  auto g = test::rng(reinterpret_cast<std::uintptr_t>(&make) ^ (sizeof(T) * 7));
  for (index_t n : test::odd_sizes) {
    CAPTURE(n);
    tensor<T, 2> a({1, n}), b({1, n}), out({1, n});
    test::fill(a.view(), g, lo, hi);
    test::fill(b.view(), g, lo, hi);
    if (edges) test::sprinkle_edges(a, g), test::sprinkle_edges(b, g);
    const op_view<T> av = a.view(), bv = b.view();
    eval(out, make(av, bv));
    expect_matches(out, reference(make(av, bv)), tol, max_ulps, "contiguous");
  }
  tensor<T, 2> a({19, 33});
  tensor<T, 2> row({1, 33});
  tensor<T, 2> col({19, 1});
  test::fill(a.view(), g, lo, hi);
  test::fill(row.view(), g, lo, hi);
  test::fill(col.view(), g, lo, hi);
  if (edges) test::sprinkle_edges(a, g);
  const op_view<T> av = a.view(), rowv = row.view(), colv = col.view();
  if (broadcasts) {
    tensor<T, 2> out({19, 33});
    eval(out, make(av, rowv));
    expect_matches(out, reference(make(av, rowv)), tol, max_ulps, "row broadcast");
    eval(out, make(colv, av));
    expect_matches(out, reference(make(colv, av)), tol, max_ulps, "column broadcast");
  }
  const op_view<T> t = transpose(strided_slice(av, {18, 0}, {-20, 33}, {-1, 1}));  // reversed rows, transposed
  tensor<T, 2> out_t({33, 19});
  eval(out_t, make(t, t));
  expect_matches(out_t, reference(make(t, t)), tol, max_ulps, "reversed transposed");
}

}  // namespace fuse::test::ops

// Every op test file works in these names; they are declared here once (a test-only header) so
// that the files and the shared case headers do not repeat them.
using namespace fuse;
using namespace fuse::test::ops;
using fuse::test::expect_matches;
using fuse::test::tolerance;
