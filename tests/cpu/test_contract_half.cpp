// float16 and bfloat16 contractions (nn.dense, nn.matmul, nn.batch_matmul) with a 16-bit result
// (Relay's default out_dtype) or a float32 one (out_dtype="float32"), accumulated in float32:
// sizes that are not multiples of the tile, every transpose, strided and reversed views, packed
// weights, every blocking boundary, edge values (ties, overflow to inf, inf and NaN operands,
// subnormals), and 16-bit contractions inside elementwise trees (the blocked epilogue). Every
// result against fuse::reference, within the bound stated at expect_within_bound.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "cpu/epilogue_check.hpp"
#include "support/check.hpp"

using namespace fuse;
using namespace fuse::test::epilogue;

namespace {

template <class T>
using tag = std::type_identity<T>;

template <class T>
double value_of(T v) {
  return static_cast<double>(to_compute<T>(v));
}

template <class T>
std::string dtype_of() {  // (doctest prints a const char* as an address)
  return dtype_name<T>;
}

/// The exact sums of a contraction op(a, b) (op(tag<O>{}, a, b) builds it with result dtype
/// O): S and sum_k |a_k b_k|, fuse::reference of the float32-result contraction over (a, b) and
/// over (abs(a), abs(b)) (double sums of the 16-bit values, not rounded), and K.
template <class R>
struct exact_sums {
  R s, magnitude;
  double k;
};
template <class N>
double reduction_length(const N& node) {
  if constexpr (requires { node.k; }) return static_cast<double>(node.k);
  else return reduction_length(node.child);  // a view of the contraction
}
template <class Op, class A, class B>
auto exact_sums_of(const Op& op, const A& a, const B& b) {
  const auto node = op(tag<float>{}, a, b);
  return exact_sums<decltype(reference(node))>{reference(node), reference(op(tag<float>{}, abs(a), abs(b))),
                                               reduction_length(node)};
}

/// The accuracy bound, checked element by element for a result `got` of dtype Out whose
/// fuse::reference is `ref`.
///
/// The GEMM widens both 16-bit operands to float (exact), multiplies in float and adds in
/// float32. A product of two halves (11 x 11 significant bits) or of two bfloat16s (8 x 8) is
/// exact in float, except that a bfloat16 product can fall below float's normal range (each
/// rounding there errs by at most 2^-150) or beyond float's range (inf where the exact sum may
/// be finite: no case here goes there; in half it cannot happen). So the float sum S_f of the K products, in whatever
/// order the kernel adds them (K - 1 rounded additions; an FMA is one), satisfies (Higham,
/// Accuracy and Stability of Numerical Algorithms, 2nd ed., section 4.2)
///     |S_f - S| <= gamma(K - 1, 2^-24) * sum_k |a_k b_k| + 2K 2^-150 =: E,
/// gamma(n, u) = n u / (1 - n u), where S is the exact sum. The reference's S is the sum in
/// double of the exact products, off by at most gamma(K - 1, 2^-53) * sum |a_k b_k|, which E
/// also covers. The stored result is S_f rounded once to Out (nearest even), a monotone
/// function, so
///     round_Out(S - E) <= got <= round_Out(S + E),
/// which is what is checked (for a float32 result, round is the identity). With E below half
/// an ulp of Out at S the interval holds at most two neighbouring values: the result is the
/// correctly rounded reference or 1 ulp from it, and exactly it when S is at least E away from
/// a rounding boundary (always when E = 0: K = 1). NaN and infinite sums (NaN or infinite
/// operands) must come out identical, NaN as NaN. And the reference itself must be exactly
/// round_Out(S): the double sum rounded once to the out dtype.
template <class Out, class Got, class Sums, class Ref>
void expect_within_bound(const Got& got, const Sums& sums, const Ref& ref, const char* what) {
  static_assert(std::is_same_v<typename Got::value_type, Out>);
  REQUIRE(got.shape().array() == sums.s.shape().array());
  REQUIRE(ref.shape().array() == sums.s.shape().array());
  const double k = sums.k;
  const auto gamma = [&](double u) { return k <= 1 ? 0.0 : (k - 1) * u / (1 - (k - 1) * u); };
  const double g24 = gamma(0x1p-24), g53 = gamma(0x1p-53);
  index_t bad = 0;
  int shown = 0;
  reference_detail::for_all(got.shape().array(), [&](const index_t* x) {
    index_array<Got::rank> i{};
    for (std::size_t d = 0; d < Got::rank; ++d) i[d] = x[d];
    const double s = sums.s[i], m = sums.magnitude[i], r = ref[i];
    const double g = value_of(got[i]);
    bool ok;
    double lo = s, hi = s;
    const bool ref_ok = std::isnan(s) ? std::isnan(r) : r == reference_detail::round_to<Out>(s);
    if (std::isnan(s)) {
      ok = std::isnan(g);
    } else if (std::isinf(s)) {
      ok = g == s;
    } else {
      const double e = (g24 + g53) * m + 2 * k * 0x1p-150;
      lo = reference_detail::round_to<Out>(s - e);
      hi = reference_detail::round_to<Out>(s + e);
      ok = lo <= g && g <= hi;
    }
    if (!ok || !ref_ok) {
      ++bad;
      if (shown++ < 5)
        FAIL_CHECK(std::string(what) << " (" << dtype_of<Out>() << " result) at " << to_string(i) << ": got " << g
                                     << ", bounds [" << lo << ", " << hi << "], exact sum " << s << ", reference " << r
                                     << std::string(ref_ok ? "" : " (not the exact sum rounded once)"));
    }
  });
  if (bad) FAIL_CHECK(std::string(what) << ": " << bad << " elements outside the bound, of " << got.size());
  CHECK(bad == 0);
}

/// The same, with the sums and the reference of op(a, b) computed here.
template <class Out, class Got, class Op, class A, class B>
void expect_within_bound(const Got& got, const Op& op, const A& a, const B& b, const char* what) {
  expect_within_bound<Out>(got, exact_sums_of(op, a, b), reference(op(tag<Out>{}, a, b)), what);
}

/// op(a, b) evaluated by fuse::eval with both result dtypes, T itself and float, against the
/// bound and the reference.
template <class T, class Op, class A, class B>
void check_both(const Op& op, const A& a, const B& b, const char* what) {
  const auto sums = exact_sums_of(op, a, b);
  expect_within_bound<T>(materialize(op(tag<T>{}, a, b)), sums, reference(op(tag<T>{}, a, b)), what);
  expect_within_bound<float>(materialize(op(tag<float>{}, a, b)), sums, sums.s, what);
}

const auto dense_op = [](auto o, const auto& a, const auto& b) { return dense<typename decltype(o)::type>(a, b); };

/// Values n / 8 with n an integer in [-limit, limit] (limit <= 64: exact in both 16-bit
/// dtypes): every product is a multiple of 2^-6 of magnitude at most 64, so a sum of up to
/// 2^12 of them is exact in float whatever the order, while it generally needs more bits than
/// float16 or bfloat16 hold. Results are then exactly round(S), kernel or blocking
/// notwithstanding: they can be compared bit for bit.
template <class T, std::size_t R>
tensor<T, static_cast<int>(R)> eighths(const index_t (&ext)[R], std::uint64_t salt, int limit = 8) {
  auto t = test::random_tensor<float>(ext, salt, -limit - 0.49, limit + 0.49);
  tensor<T, static_cast<int>(R)> out(t.shape().array());
  for (index_t i = 0; i < t.size(); ++i) out.data()[i] = T(std::round(t.data()[i]) / 8.0f);
  return out;
}

template <class T>
void expect_identical(const T& got, const T& want, const char* what) {
  REQUIRE(got.shape().array() == want.shape().array());
  index_t bad = 0;
  for (index_t i = 0; i < got.size(); ++i) {
    const auto g = got.data()[i], w = want.data()[i];
    if (std::memcmp(&g, &w, sizeof g) != 0) {
      if (bad++ < 5) FAIL_CHECK(std::string(what) << ": element " << i << " is " << g << ", not " << w);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

// ---- dtypes -------------------------------------------------------------------------------------

static_assert(contraction_dtypes_supported<half, half, half>);
static_assert(contraction_dtypes_supported<half, half, float>);
static_assert(contraction_dtypes_supported<bfloat16, bfloat16, bfloat16>);
static_assert(contraction_dtypes_supported<bfloat16, bfloat16, float>);
static_assert(!contraction_dtypes_supported<half, float, float>);  // mixed pairs stay errors
static_assert(!contraction_dtypes_supported<float, half, float>);
static_assert(!contraction_dtypes_supported<half, bfloat16, float>);
static_assert(!contraction_dtypes_supported<half, half, bfloat16>);
static_assert(!contraction_dtypes_supported<bfloat16, bfloat16, half>);
static_assert(!contraction_dtypes_supported<half, half, double>);

TEST_CASE_TEMPLATE("half and bfloat16 dense over sizes that are not multiples of the tile", T, half, bfloat16) {
  // TVM's default out_dtype is the operands' dtype.
  static_assert(
      std::is_same_v<typename decltype(dense(std::declval<tensor<T, 2>&>(), std::declval<tensor<T, 2>&>()))::value_type,
                     T>);
  const index_t sizes[] = {0, 1, 7, 17, 33, 100};
  std::uint64_t salt = 1000;
  for (index_t m : sizes)
    for (index_t n : sizes)
      for (index_t k : sizes) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        // Signed values (cancellation: the bound is loose) and positive ones (no cancellation:
        // E is K 2^-24 |S|, far below a 16-bit ulp, so almost every result must be the
        // correctly rounded sum).
        const bool positive = (m + n + k) % 2 == 1;
        auto x = test::random_tensor<T>({m, k}, ++salt, positive ? 0 : -1, positive ? 2 : 1);
        auto w = test::random_tensor<T>({n, k}, ++salt, positive ? 0 : -1, positive ? 2 : 1);
        check_both<T>(dense_op, x, w, "dense");
      }
}

TEST_CASE_TEMPLATE("half and bfloat16 matmul and batch_matmul: every transpose, strided and reversed views", T, half,
                   bfloat16) {
  const auto matmul_op = [](bool ta, bool tb) {
    return [=](auto o, const auto& a, const auto& b) { return matmul<typename decltype(o)::type>(a, b, ta, tb); };
  };
  const auto batch_op = [](bool ta, bool tb) {
    return [=](auto o, const auto& a, const auto& b) { return batch_matmul<typename decltype(o)::type>(a, b, ta, tb); };
  };
  for (auto [m, n, k] : {std::tuple<index_t, index_t, index_t>{23, 18, 41}, {1, 33, 100}, {100, 7, 17}, {33, 100, 7}}) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    const auto s = static_cast<std::uint64_t>(m * 10000 + n * 100 + k);
    auto a = test::random_tensor<T>({m, k}, s + 1, -1, 1);
    auto b = test::random_tensor<T>({k, n}, s + 2, -1, 1);
    auto at = test::random_tensor<T>({k, m}, s + 3, -1, 1);
    auto bt = test::random_tensor<T>({n, k}, s + 4, -1, 1);
    check_both<T>(matmul_op(false, false), a, b, "matmul");
    check_both<T>(matmul_op(true, false), at, b, "matmul ta");
    check_both<T>(matmul_op(false, true), a, bt, "matmul tb");
    check_both<T>(matmul_op(true, true), at, bt, "matmul ta tb");
    check_both<T>(matmul_op(false, false), transpose(at), b, "matmul of a transpose view");
    // Every other row and a reversed column range: strides the packing reads one by one.
    auto big = test::random_tensor<T>({2 * m, 2 * k + 5}, s + 5, -1, 1);
    auto sa = strided_slice(big, {0, 2 * k + 3}, {2 * m, 3}, {2, -2});  // [m, k]
    REQUIRE(sa.shape()[1] == k);
    check_both<T>(matmul_op(false, false), sa, b, "matmul of a strided, reversed view");
    check_both<T>(dense_op, sa, strided_slice(big, {0, 0}, {2 * n < 2 * m ? 2 * n : 2 * m, k}, {2, 1}),
                  "dense of strided views");
  }
  // dense keeps the leading axes of its data, also when they do not flatten.
  auto x3 = test::random_tensor<T>({3, 5, 33}, 10, -1, 1);
  auto w = test::random_tensor<T>({19, 33}, 11, -1, 1);
  check_both<T>(dense_op, x3, w, "rank-3 data");
  check_both<T>(dense_op, transpose(x3, {1, 0, 2}), w, "leading axes that do not flatten");

  auto q = test::random_tensor<T>({4, 9, 31}, 25, -1, 1);
  auto kk = test::random_tensor<T>({4, 13, 31}, 26, -1, 1);
  auto kt = test::random_tensor<T>({4, 31, 13}, 27, -1, 1);
  auto k1 = test::random_tensor<T>({1, 13, 31}, 28, -1, 1);
  auto qt = test::random_tensor<T>({4, 31, 9}, 29, -1, 1);
  check_both<T>(batch_op(false, true), q, kk, "batch_matmul (default transpose_b)");
  check_both<T>(batch_op(false, false), q, kt, "batch_matmul tb=false");
  check_both<T>(batch_op(true, true), qt, kk, "batch_matmul ta tb");
  check_both<T>(batch_op(false, true), q, k1, "batch_matmul broadcasting a batch of 1");
  check_both<T>(batch_op(false, true), k1, q, "batch of 1 on the left");
  auto big_q = test::random_tensor<T>({2, 40, 100}, 30, -1, 1);  // the blocked kernel per batch
  auto big_k = test::random_tensor<T>({2, 33, 100}, 31, -1, 1);
  check_both<T>(batch_op(false, true), big_q, big_k, "batch_matmul 2 x 40 x 33 x 100");
  static_assert(std::is_same_v<typename decltype(batch_matmul(q, kk))::value_type, T>);
}

TEST_CASE_TEMPLATE("half and bfloat16 products across the GEMM's blocks: long K, many rows, wide N", T, half,
                   bfloat16) {
  // K = 1100: two reduction blocks, whose float partial sums must not be rounded to 16 bits in
  // between; 100 rows: two row blocks of the rounded store; N = 3850 with K = 1100 and N = 4100
  // with K = 3: two column blocks of the float packing of B (3808 + 42 and 4096 + 4 columns),
  // checked on the columns around the boundary (the reference is a triple loop).
  for (auto [m, n, k, c0] : {std::tuple<index_t, index_t, index_t, index_t>{37, 50, 1100, 0},
                             {100, 40, 100, 0},
                             {5, 3850, 1100, 3700},
                             {6, 4100, 3, 0},
                             {2, 70, 1100, 0}}) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    const auto s = static_cast<std::uint64_t>(m * 7 + n * 3 + k);
    auto x = test::random_tensor<T>({m, k}, s, 0, 1);
    auto w = test::random_tensor<T>({n, k}, s + 1, -1, 1);
    const auto wp = pack(w);
    const index_t cols = n - c0;
    // Columns [c0, n) of op(a, b), and of a result.
    const auto op = [&](auto o, const auto& a, const auto& b) {
      return strided_slice(dense<typename decltype(o)::type>(a, b), {0, c0}, {m, n});
    };
    const auto part = [&](const auto& r) { return materialize(strided_slice(r, {0, c0}, {m, n})); };
    const auto sums = exact_sums_of(op, x, w);
    const auto ref = reference(op(tag<T>{}, x, w));
    REQUIRE(ref.shape()[1] == cols);
    expect_within_bound<T>(part(materialize(dense(x, w))), sums, ref, "dense");
    expect_within_bound<float>(part(materialize(dense<float>(x, w))), sums, sums.s, "dense<float>");
    expect_within_bound<T>(part(materialize(dense(x, wp))), sums, ref, "dense over packed weights");
    expect_within_bound<float>(part(materialize(dense<float>(x, wp))), sums, sums.s,
                               "dense<float> over packed weights");
  }
}

TEST_CASE_TEMPLATE("packed half and bfloat16 weights", T, half, bfloat16) {
  static_assert(std::is_same_v<decltype(pack(std::declval<tensor<T, 2>&>())), packed_weights<T>>);
  const index_t sizes[] = {1, 4, 7, 17, 33, 100};
  std::uint64_t salt = 5000;
  for (index_t m : sizes)
    for (index_t n : {index_t{1}, index_t{17}, index_t{100}})
      for (index_t k : {index_t{1}, index_t{17}, index_t{100}}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        auto x = test::random_tensor<T>({m, k}, ++salt, -1, 1);
        auto w = test::random_tensor<T>({n, k}, ++salt, -1, 1);
        const auto wp = pack(w);
        // The packing holds W itself, widened exactly.
        for (index_t j = 0; j < n; ++j)
          for (index_t kk = 0; kk < k; ++kk) REQUIRE(value_of(wp.view().element(j, kk)) == value_of(w(j, kk)));
        const auto sums = exact_sums_of(dense_op, x, w);
        const auto ref = reference(dense(x, w));
        expect_within_bound<T>(materialize(dense(x, wp)), sums, ref, "dense(x, pack(w))");
        expect_within_bound<float>(materialize(dense<float>(x, wp)), sums, sums.s, "dense<float>(x, pack(w))");
        expect_within_bound<T>(materialize(matmul<false, true>(x, wp)), sums, ref, "matmul<false, true>(x, pack(w))");
      }
  // Packings of a transposed view and of an expression.
  auto wt = test::random_tensor<T>({40, 30}, 6000, -1, 1);  // W^T: [K, N]
  auto x = test::random_tensor<T>({9, 40}, 6001, -1, 1);
  const auto wtp = pack(transpose(wt));
  expect_within_bound<T>(materialize(dense(x, wtp)), dense_op, x, transpose(wt), "packed transposed view");
  const auto wep = pack(transpose(wt) * T(2.0f));
  auto we = materialize(transpose(wt) * T(2.0f));
  expect_within_bound<T>(materialize(dense(x, wep)), dense_op, x, we, "packed expression");
}

TEST_CASE_TEMPLATE("half and bfloat16 outputs through views and over their own operand", T, half, bfloat16) {
  auto a = test::random_tensor<T>({23, 41}, 92, -1, 1);
  auto b = test::random_tensor<T>({41, 18}, 93, -1, 1);
  const auto mm = [](auto o, const auto& x, const auto& y) { return matmul<typename decltype(o)::type>(x, y); };
  tensor<T, 2> out_t({18, 23});
  eval_blocked(transpose(out_t), matmul(a, b));  // a column stride: the rounded store is strided
  expect_within_bound<T>(materialize(transpose(out_t)), mm, a, b, "output through a transpose");
  // x = x * w in place: the executor computes into a temporary first.
  auto sq = test::random_tensor<T>({30, 30}, 94, -1, 1);
  auto w2 = test::random_tensor<T>({30, 30}, 95, -1, 1);
  auto copy = materialize(sq * T(1.0f));
  eval_blocked(sq, matmul(sq, w2));
  expect_within_bound<T>(sq, mm, copy, w2, "in-place matmul");
}

TEST_CASE("half and bfloat16 exact sums round once, to nearest even, in every kernel") {
  // Row r of X has the terms of case r, W's column j = 0 is the multiplier (1 unless noted),
  // zeros elsewhere: every float sum is exact, so the result must be the exact sum rounded
  // once (E = 0 in the bound): ties to even, overflow to inf, subnormal results.
  struct exact_case {
    double a0, b0, a1, b1;
    double half_result, bf16_result;
  };
  constexpr double inf = std::numeric_limits<double>::infinity();
  const exact_case cases[] = {
      {2048, 1, 1, 1, 2048, 2048},                       // 2049: a tie in half, goes to even 2048
      {2048, 1, 3, 1, 2052, 2048},                       // 2051: above the tie in half; 2051 -> 2048 in bfloat16
      {1 + 0x1p-10, 1.5, 0, 0, 1.5 + 0x1p-9, 1.5},       // 1.5 + 2^-10 + 2^-11: a tie in half, to even
                                                         // (1 + 2^-10 is 1 in bfloat16)
      {65504, 1, 15, 1, 65504, 65536},                   // 65519: below half's overflow threshold
      {65504, 1, 16, 1, inf, 65536},                     // 65520: the tie at half's largest finite: inf
      {-65504, 1, -16, 1, -inf, -65536},                 // and negative
      {256, 1, 1, 1, 257, 256},                          // 257: a tie in bfloat16, to even
      {3 * 0x1p-24, 0.5, 0, 0, 0x1p-23, 1.5 * 0x1p-24},  // 1.5 * 2^-24: half's subnormal tie, to even (2)
      {5 * 0x1p-24, 1, 7 * 0x1p-24, 1, 12 * 0x1p-24, 12 * 0x1p-24},  // subnormal halves summed exactly
      {5 * 0x1p-24, 0.5, 0, 0, 2 * 0x1p-24, 2.5 * 0x1p-24},          // 2.5 * 2^-24: to even (2)
  };
  constexpr index_t rows = sizeof(cases) / sizeof(cases[0]);
  // X's row r holds case r's terms at columns 0 and k - 1, W's column j those of case j % rows,
  // zeros elsewhere: element (r, r) is case r's sum.
  const auto run = [&]<class T>(tag<T>, index_t m_pad, index_t n, index_t k, bool packed) {
    const std::string dtype = dtype_of<T>();
    CAPTURE(dtype);
    CAPTURE(m_pad);
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(packed);
    tensor<T, 2> x({rows + m_pad, k}), w({n, k});
    for (index_t i = 0; i < x.size(); ++i) x.data()[i] = T(0.0f);
    for (index_t i = 0; i < w.size(); ++i) w.data()[i] = T(0.0f);
    for (index_t r = 0; r < rows; ++r) {
      x(r, 0) = T(cases[r].a0);
      x(r, k - 1) = T(cases[r].a1);
    }
    for (index_t j = 0; j < n; ++j) {
      w(j, 0) = T(cases[j % rows].b0);
      w(j, k - 1) = T(cases[j % rows].b1);
    }
    tensor<T, 2> got({rows + m_pad, n});
    if (packed) {
      const auto wp = pack(w);
      eval_blocked(got, dense(x, wp));
    } else {
      eval_blocked(got, dense(x, w));
    }
    const auto ref = reference(dense(x, w));
    for (index_t r = 0; r < rows; ++r) {
      CAPTURE(r);
      const double want = std::is_same_v<T, half> ? cases[r].half_result : cases[r].bf16_result;
      CHECK(value_of(got(r, r)) == want);
      CHECK(ref(r, r) == want);  // the reference agrees
    }
    expect_within_bound<T>(got, exact_sums_of(dense_op, x, w), ref, "exact sums");
  };
  for (bool packed : {false, true}) {
    run(tag<half>{}, 0, rows, 2, packed);   // the direct form (dot products)
    run(tag<half>{}, 30, 100, 40, packed);  // the packed, blocked kernel
    run(tag<bfloat16>{}, 0, rows, 2, packed);
    run(tag<bfloat16>{}, 30, 100, 40, packed);
  }
  // bfloat16's overflow: its largest finite value plus half an ulp (exact in float) is a tie
  // that goes to the even neighbour, 2^128: inf. In float32 the sum is finite.
  tensor<bfloat16, 2> x({1, 2}), w({1, 2});
  x(0, 0) = std::numeric_limits<bfloat16>::max();
  x(0, 1) = bfloat16(0x1p119f);
  w(0, 0) = w(0, 1) = bfloat16(1.0f);
  CHECK(std::isinf(value_of(materialize(dense(x, w))(0, 0))));
  CHECK(materialize(dense<float>(x, w))(0, 0) == static_cast<float>(std::numeric_limits<bfloat16>::max()) + 0x1p119f);
  expect_within_bound<bfloat16>(materialize(dense(x, w)), dense_op, x, w, "bfloat16 overflow");
}

TEST_CASE_TEMPLATE("half and bfloat16 edge values: inf, NaN, sums that overflow, subnormals", T, half, bfloat16) {
  using L = std::numeric_limits<T>;
  index_t nans = 0, infs = 0;  // infinite and NaN sums seen
  for (auto [m, n, k] : {std::tuple<index_t, index_t, index_t>{1, 33, 17}, {17, 33, 100}, {7, 7, 7}}) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    const auto s = static_cast<std::uint64_t>(m * 10000 + n * 100 + k);
    // inf, -inf and NaN sprinkled into both operands: the sums are inf, -inf or NaN exactly
    // where the reference's are.
    auto x = test::random_tensor<T>({m, k}, s, -1, 1);
    auto w = test::random_tensor<T>({n, k}, s + 1, -1, 1);
    auto g = test::rng(s + 2);
    const T specials[] = {L::infinity(), T(-static_cast<float>(L::infinity())), L::quiet_NaN()};
    for (index_t i = 0; i < x.size(); i += 5 + static_cast<index_t>(g() % 40)) x.data()[i] = specials[g() % 3];
    for (index_t i = 0; i < w.size(); i += 5 + static_cast<index_t>(g() % 90)) w.data()[i] = specials[g() % 3];
    check_both<T>(dense_op, x, w, "inf and NaN operands");
    const auto wp = pack(w);
    expect_within_bound<T>(materialize(dense(x, wp)), dense_op, x, w, "inf and NaN operands, packed");
    const auto r = reference(dense(x, w));
    for (index_t i = 0; i < r.size(); ++i) {
      nans += std::isnan(r.data()[i]);
      infs += std::isinf(r.data()[i]);
    }

    // Large terms: in half, sums beyond 65504 must round to inf (as the reference says) while
    // the float32 result keeps them.
    const double big = std::is_same_v<T, half> ? 30000 : 1e35;  // bfloat16: sums within float's range
    auto xb = test::random_tensor<T>({m, k}, s + 3, big, 2 * big);
    auto wb = test::random_tensor<T>({n, k}, s + 4, 0.5, 2);
    check_both<T>(dense_op, xb, wb, "sums that overflow");
    if constexpr (std::is_same_v<T, half>) {
      if (k >= 7) CHECK(std::isinf(value_of(materialize(dense(xb, wb))(0, 0))));
    }

    // Subnormal operands: in half, values below 2^-14 (results mostly subnormal too); in
    // bfloat16, values below 2^-126 times large ones (normal products).
    const double tiny = std::is_same_v<T, half> ? 0x1p-14 : 0x1p-126;
    auto xs = test::random_tensor<T>({m, k}, s + 5, -0.99 * tiny, 0.99 * tiny);
    auto ws = std::is_same_v<T, half> ? test::random_tensor<T>({n, k}, s + 6, -1, 1)
                                      : test::random_tensor<T>({n, k}, s + 6, -0x1p100, 0x1p100);
    index_t subnormals = 0;
    for (index_t i = 0; i < xs.size(); ++i) subnormals += std::fabs(value_of(xs.data()[i])) < tiny;
    CHECK(subnormals == xs.size());
    check_both<T>(dense_op, xs, ws, "subnormal operands");
    const auto wsp = pack(ws);
    expect_within_bound<float>(materialize(dense<float>(xs, wsp)), dense_op, xs, ws, "subnormal operands, packed");
  }
  CHECK(nans > 0);  // the cases exercise both
  CHECK(infs > 0);
}

TEST_CASE_TEMPLATE("a half or bfloat16 dense inside an elementwise tree reads the product rounded to its dtype", T,
                   half, bfloat16) {
  // The seed's cell, in T. With sums exact in float (eighths), the product is exactly
  // round_T(S) whatever the kernel, so the fused pass must give bit for bit what op-by-op
  // execution gives: the dense materialised in T, then the gates over it.
  auto x = eighths<T>({1, 10}, 1);
  auto w = eighths<T>({30, 10}, 2);
  const auto wp = pack(w);
  const auto product = materialize(dense(x, w));
  auto so = split<3>(product.view(), 1);
  const auto op_by_op = materialize(sigmoid(so[0]) + tanh(so[1]) * exp(so[2]));
  for (int packed = 0; packed < 2; ++packed) {
    CAPTURE(packed);
    tensor<T, 2> out({1, 10});
    if (packed) {
      auto s = split<3>(dense(x, wp), 1);
      stats = eval_blocked(out, sigmoid(s[0]) + tanh(s[1]) * exp(s[2]));
    } else {
      auto s = split<3>(dense(x, w), 1);
      const auto e = sigmoid(s[0]) + tanh(s[1]) * exp(s[2]);
      stats = eval_blocked(out, e);
      test::expect_matches(out, reference(e), {}, 2, "seed cell against the reference");
    }
    CHECK(stats.passes == 1);
    CHECK(stats.whole_leaves == 0);
    CHECK(stats.partial_leaves == 1);
    expect_identical(out, op_by_op, "seed cell against op-by-op execution");
  }

  // Two contractions of one X, a bias and two outputs: one block, and many (a small block
  // budget: one row by 40 columns each, the direct form of the GEMM).
  auto x2 = eighths<T>({33, 17}, 3);
  auto wa = eighths<T>({100, 17}, 4);
  auto wb = eighths<T>({50, 17}, 5);
  auto bias = eighths<T>({50}, 6);
  const auto wap = pack(wa);
  const auto pa = materialize(dense(x2, wa));
  const auto pb = materialize(dense(x2, wb));
  auto sa = split<2>(pa.view(), 1);
  const auto gb_ = materialize(bias_add(pb.view(), bias.view()));
  const auto want1 = materialize(sigmoid(sa[0]) * tanh(gb_.view()));
  const auto want2 = materialize(sa[1] - gb_.view());
  for (index_t budget : {index_t{32768}, index_t{40}}) {
    CAPTURE(budget);
    block_budget bb(budget);
    auto ga = split<2>(dense(x2, wap), 1);
    auto gb = bias_add(dense(x2, wb), bias);
    tensor<T, 2> o1({33, 50}), o2({33, 50});
    stats = eval_blocked(outputs(o1, o2), sigmoid(ga[0]) * tanh(gb), ga[1] - gb);
    CHECK(stats.passes == 1);
    CHECK(stats.blocks == (budget == 40 ? 66 : 1));
    CHECK(stats.whole_leaves == 0);
    CHECK(stats.partial_leaves >= 2 * stats.blocks);
    expect_identical(o1, want1, "two contractions, two outputs");
    expect_identical(o2, want2, "two contractions, two outputs (the second)");
  }

  // 200 rows in one block: A's rows packed once for both sections (shared rows) and more rows
  // than one row block of the rounded store.
  auto x4 = eighths<T>({200, 40}, 9);
  auto w4 = eighths<T>({64, 40}, 10);
  {
    auto s4 = split<2>(dense(x4, w4), 1);
    tensor<T, 2> o4({200, 32});
    stats = eval_blocked(o4, sigmoid(s4[0]) * s4[1]);
    CHECK(stats.blocks == 1);
    // (Where the CPU has vdpbf16ps, bfloat16 products run the pair kernel, which packs A's rows
    // in pairs for each product: no shared float rows.)
    CHECK(stats.row_packings == (std::is_same_v<T, bfloat16> && cpu::gemm::has_dpbf16 ? 0 : 1));
    const auto p4 = materialize(dense(x4, w4));
    auto q4 = split<2>(p4.view(), 1);
    expect_identical(o4, materialize(sigmoid(q4[0]) * q4[1]), "200 rows, shared packed rows");
  }

  // A batch_matmul in a tree is computed by blocks (one product per batch), in T, then read by
  // the tree: the same bits as evaluated whole.
  auto q = eighths<T>({3, 9, 20}, 11);
  auto kb = eighths<T>({3, 13, 20}, 12);
  {
    tensor<T, 3> o({3, 9, 13});
    stats = eval_blocked(o, tanh(batch_matmul(q, kb)) * T(0.5f));
    CHECK(stats.whole_leaves == 0);
    CHECK(stats.partial_leaves == 3);
    const auto p = materialize(batch_matmul(q, kb));
    expect_identical(o, materialize(tanh(p.view()) * T(0.5f)), "batch_matmul in a tree");
  }

  // What the tree reads is the product rounded to T, not the float sum: T's rounding error,
  // read back in float32 beside the float32-result product of the same operands, is exactly
  // round_T(S) - S, which is not zero for many of these sums.
  auto x3 = eighths<T>({7, 33}, 7, 64);
  auto w3 = eighths<T>({20, 33}, 8, 64);
  const auto err = cast<float>(dense(x3, w3)) - dense<float>(x3, w3);
  tensor<float, 2> got({7, 20});
  stats = eval_blocked(got, err);
  CHECK(stats.passes == 1);
  test::expect_matches(got, reference(err), {}, 0, "rounding error read by the tree");
  index_t nonzero = 0;
  for (index_t i = 0; i < got.size(); ++i) nonzero += got.data()[i] != 0.0f;
  CHECK(nonzero > got.size() / 4);  // about half of them in float16, most in bfloat16
}

TEST_CASE_TEMPLATE("a float32-result dense of half or bfloat16 operands inside a tree", T, half, bfloat16) {
  // Relay's out_dtype="float32" then float gates: random values, against the reference with a
  // float32 GEMM's tolerance (sigmoid and tanh are 1-Lipschitz, exp of values near 0 ~e).
  auto x = test::random_tensor<T>({9, 40}, 50, -1, 1);
  auto w = test::random_tensor<T>({60, 40}, 51, -0.25, 0.25);
  const auto wp = pack(w);
  auto s = split<3>(dense<float>(x, wp), 1);
  const auto e = sigmoid(s[0]) + tanh(s[1]) * exp(s[2]);
  tensor<float, 2> out({9, 20});
  stats = eval_blocked(out, e);
  CHECK(stats.passes == 1);
  CHECK(stats.whole_leaves == 0);
  test::expect_matches(out, reference(e), {2e-6, 40 * 4 * 0x1p-24}, 0, "float32 gates over a 16-bit dense");
}
