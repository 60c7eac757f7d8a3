// Packed weights (fuse::pack): dense and matmul over prepacked panels against the double
// reference on shapes that are not multiples of the panel or the reduction block, packings of
// strided views and of expressions, fused cells reading sections of the packed weights that
// start inside a panel, and the errors for the uses a packing cannot serve. int8 and uint8
// weights (packed for the int8 GEMM) with int8 and uint8 data, exact, for whichever instruction
// set the test was compiled for (it is also built for other -march levels and the portable
// path), and gemm_int8_prepacked called directly from every column.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "support/check.hpp"

using namespace fuse;
using fuse::test::expect_matches;
using fuse::test::gemm_tol;
using fuse::test::tolerance;

TEST_CASE("dense over packed weights matches the unpacked product on every tile boundary") {
  const index_t sizes[] = {1, 2, 7, 17, 64, 100, 257};
  std::uint64_t salt = 900;
  for (index_t m : sizes)
    for (index_t n : sizes)
      for (index_t k : sizes) {
        if (m * n * k > 400000) continue;
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        auto x = test::random_tensor({m, k}, ++salt, -1, 1);
        auto w = test::random_tensor({n, k}, ++salt, -1, 1);
        const auto wp = pack(w);
        CHECK(wp.shape() == w.shape());
        // The packing holds W itself.
        for (index_t j = 0; j < n; j += 5)
          for (index_t kk = 0; kk < k; kk += 3) REQUIRE(wp.view().element(j, kk) == w(j, kk));
        test::expect_matches_reference(dense(x, wp), gemm_tol(k), 0, "dense(x, pack(w))");
      }
}

TEST_CASE("packed weights across several reduction blocks and column blocks, double too") {
  auto x = test::random_tensor({37, 1100}, 1, -1, 1);    // K = 1100: three reduction blocks
  auto w = test::random_tensor({4200, 1100}, 2, -1, 1);  // N > one column block of the GEMM
  const auto wp = pack(w);
  tensor<float, 2> got({37, 4200});
  eval(got, dense(x, wp));
  expect_matches(got, reference(dense(x, w)), gemm_tol(1100), 0, "37x4200x1100 packed");
  // Few rows (the direct form) across the three reduction blocks, from a column inside a panel.
  for (index_t m : {index_t{1}, index_t{3}}) {
    CAPTURE(m);
    auto xm = test::random_tensor({m, 1100}, 5, -1, 1);
    auto sec = split<3>(dense(xm, wp), 1);  // sections start at columns 1400 and 2800
    test::expect_matches_reference(sec[1] * 1.0f, gemm_tol(1100), 0, "few rows x 3 reduction blocks");
  }
  auto xd = test::random_tensor<double>({13, 800}, 3, -1, 1);
  auto wd = test::random_tensor<double>({45, 800}, 4, -1, 1);
  const auto wdp = pack(wd);
  test::expect_matches_reference(dense(xd, wdp), {1e-13, 1e-13}, 0, "float64 packed");
}

TEST_CASE("packing strided views and expressions; matmul with transpose_b reads the packing") {
  auto big = test::random_tensor({40, 70}, 10, -1, 1);
  // Every other row and a column window: a strided view; transpose of a [K, N] matrix: an
  // expression evaluated once.
  auto rows = strided_slice(big.view(), {0, 5}, {40, 65}, {2, 1});
  const auto p1 = pack(rows);
  auto kn = test::random_tensor({60, 23}, 11, -1, 1);
  const auto p2 = pack(transpose(kn));
  auto x = test::random_tensor({9, 60}, 12, -1, 1);
  test::expect_matches_reference(dense(x, p1), gemm_tol(60), 0, "pack(strided view)");
  test::expect_matches_reference(dense(x, p2), gemm_tol(60), 0, "pack(transpose(kn))");
  // Tensor views packed in place: every other row (rows strided, k contiguous), and a
  // column-major matrix (k strided).
  const tensor_view<const float, 2> every_other(big.data() + 5, dynamic_shape<2>({20, 60}), {140, 1});
  const auto p3 = pack(every_other);
  const tensor_view<const float, 2> col_major(big.data(), dynamic_shape<2>({23, 60}), {1, 40});
  const auto p4 = pack(col_major);
  test::expect_matches_reference(dense(x, p3), gemm_tol(60), 0, "pack(view with row stride 140)");
  test::expect_matches_reference(dense(x, p4), gemm_tol(60), 0, "pack(column-major view)");
  // An expression that is no view: evaluated once into a tensor, then packed.
  const auto p5 = pack(transpose(kn) * 2.0f + 1.0f);
  test::expect_matches_reference(dense(x, p5), gemm_tol(60), 0, "pack(expression)");
  test::expect_matches_reference(matmul(x, p2, false, true), gemm_tol(60), 0, "matmul over packed, transpose_b");
  test::expect_matches_reference(matmul<false, true>(x, p2), gemm_tol(60), 0, "matmul<false, true>");
  CHECK_THROWS_AS(matmul(x, p2), shape_error);
  auto short_k = test::random_tensor({9, 59}, 13, -1, 1);
  CHECK_THROWS_AS(dense(short_k, p2), shape_error);
}

TEST_CASE("fused cells over packed weights: sections at panel boundaries and inside panels") {
  // hidden 64: gate sections start at multiples of 64 (panel boundaries); hidden 10 (the seed's
  // shape) and 45: sections start inside panels.
  // Batch 1 and 3 take the direct few-row form, batch 5 the blocked GEMM.
  for (index_t bt : {index_t{1}, index_t{3}, index_t{5}})
    for (index_t hd : {index_t{64}, index_t{10}, index_t{45}}) {
      CAPTURE(bt);
      CAPTURE(hd);
      const index_t in = 33;
      auto x = test::random_tensor({bt, in}, 20, -1, 1);
      auto h = test::random_tensor({bt, hd}, 21, -1, 1);
      auto c = test::random_tensor({bt, hd}, 22, -2, 2);
      auto w = test::random_tensor({4 * hd, in + hd}, 23, -0.5, 0.5);
      auto b = test::random_tensor({4 * hd}, 24, -0.5, 0.5);
      const auto wp = pack(w);
      auto xh = concatenate(std::make_tuple(x.view(), h.view()), 1);
      auto g = split<4>(bias_add(dense(xh, wp), b), 1);
      auto c_next = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
      auto h_next = sigmoid(g[3]) * tanh(c_next);
      tensor<float, 2> hn({bt, hd}), cn({bt, hd});
      const eval_statistics st = eval(outputs(hn, cn), h_next, c_next);
      CHECK(st.passes == 1);
      CHECK(st.whole_leaves == 0);
      const tolerance tol{2e-6, 6e-7 * static_cast<double>(in + hd + 1)};
      expect_matches(cn, reference(c_next), tol, 0, "packed LSTM c'");
      expect_matches(hn, reference(h_next), tol, 0, "packed LSTM h'");
    }
}

// ---- int8 / uint8 weights -------------------------------------------------------------------

namespace {

namespace gemm = fuse::cpu::gemm;

template <class T>
constexpr double lowest_of = static_cast<double>(std::numeric_limits<T>::lowest());
template <class T>
constexpr double max_of = static_cast<double>(std::numeric_limits<T>::max());

/// Random 8-bit values over T's whole range, with a few rows saturated (every value at T's
/// lowest, then at T's max) when there are rows enough.
template <class T>
tensor<T, 2> random_8bit(index_t rows, index_t cols, std::uint64_t salt) {
  auto t = test::random_tensor<T>({rows, cols}, salt, lowest_of<T>, max_of<T>);
  if (rows >= 3)
    for (index_t j = 0; j < cols; ++j) {
      t(0, j) = std::numeric_limits<T>::lowest();
      t(rows - 1, j) = std::numeric_limits<T>::max();
    }
  return t;
}

template <class TW>
void expect_packing_holds(const packed_weights<TW>& wp, const tensor<TW, 2>& w) {
  const index_t n = w.shape()[0], k = w.shape()[1];
  index_t bad = 0;
  for (index_t j = 0; j < n; ++j)
    for (index_t kk = 0; kk < k; ++kk) bad += wp.view().element(j, kk) != w(j, kk);
  CHECK(bad == 0);
}

template <class TX, class TW>
void packed_8bit_sizes(std::uint64_t salt) {
  const index_t sizes[] = {1, 2, 7, 17, 64, 100, 257};
  for (index_t m : sizes)
    for (index_t n : sizes)
      for (index_t k : sizes) {
        if (m * n * k > 300000) continue;  // the reference is a triple loop
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        const auto x = random_8bit<TX>(m, k, ++salt);
        const auto w = random_8bit<TW>(n, k, ++salt);
        const auto wp = pack(w);
        CHECK(wp.shape() == w.shape());
        expect_packing_holds(wp, w);
        test::expect_matches_reference(dense(x, wp), {}, 0, "dense(x8, pack(w8))");
      }
}

/// gemm_int8_prepacked from column j0 of a packing of B (k x n_all) against gemm_int8 over the
/// same columns unpacked, bit for bit, into a strided C whose gaps must stay untouched.
template <class TA, class TB>
void check_prepacked(index_t m, index_t n_all, index_t k, index_t j0, index_t n, std::uint64_t salt) {
  const auto a = random_8bit<TA>(m, k, salt);
  const auto w = random_8bit<TB>(n_all, k, salt + 1);  // [N, K]: B(kk, j) = w(j, kk)
  std::vector<unsigned char> storage(static_cast<std::size_t>(gemm::packed_int8_b_bytes<TB>(k, n_all)) + 64);
  auto* dst = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) / 64 * 64);
  const auto bp = gemm::pack_int8_b_ahead<TB>(dst, gemm::strided<TB>{w.data(), 1, k}, k, n_all);
  const index_t rs = 2 * n + 1, cs = 2;
  constexpr std::int32_t sentinel = 0x5A5A5A5A;
  std::vector<std::int32_t> got(static_cast<std::size_t>(m * rs), sentinel), want(got.size(), sentinel);
  gemm::gemm_int8_prepacked<TA, TB>(m, n, k, gemm::strided<TA>{a.data(), k, 1}, bp, j0, got.data(), rs, cs);
  gemm::gemm_int8<TA, TB>(m, n, k, gemm::strided<TA>{a.data(), k, 1}, gemm::strided<TB>{w.data() + j0 * k, 1, k},
                          want.data(), rs, cs);
  index_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
  INFO(std::string(gemm::gemm_int8_isa) << " m=" << m << " n=" << n << " of " << n_all << " from " << j0 << " k=" << k);
  CHECK(bad == 0);
}

template <class TA, class TB>
void prepacked_columns(std::uint64_t salt) {
  for (index_t k : {index_t{1}, index_t{6}, index_t{97}, index_t{1030}, index_t{2103}})
    for (index_t m : {index_t{1}, index_t{2}, index_t{5}, index_t{13}, index_t{30}})
      for (index_t j0 : {index_t{0}, index_t{1}, index_t{5}, index_t{8}, index_t{15}, index_t{16}, index_t{31},
                         index_t{33}, index_t{47}, index_t{70}})
        for (index_t n : {index_t{1}, index_t{3}, index_t{17}, index_t{40}}) {
          if (m * k > 20000 && n > 3 && j0 % 5 != 0) continue;
          check_prepacked<TA, TB>(m, 111, k, j0, n, ++salt);
        }
}

/// A batch of x [bt, K] times the three sections of dense(x, pack(w)) (hd columns each) in one
/// fused pass: sections start inside panels, so the blocked epilogue reads the packing from
/// columns that are not panel boundaries.
template <class TX, class TW>
void packed_8bit_sections(std::uint64_t salt) {
  for (index_t k : {index_t{33}, index_t{2500}})
    for (index_t hd : {index_t{10}, index_t{45}})
      for (index_t bt = 1; bt <= 5; ++bt) {
        CAPTURE(k);
        CAPTURE(hd);
        CAPTURE(bt);
        const auto x = random_8bit<TX>(bt, k, ++salt);
        const auto w = random_8bit<TW>(3 * hd, k, ++salt);
        const auto wp = pack(w);
        const auto s = split<3>(dense(x, wp), 1);
        const auto e0 = s[0] + 0, e1 = s[1] + 0, e2 = s[2] * 3 + s[1];
        tensor<std::int32_t, 2> o0({bt, hd}), o1({bt, hd}), o2({bt, hd});
        const eval_statistics st = eval(outputs(o0, o1, o2), e0, e1, e2);
        CHECK(st.passes == 1);
        CHECK(st.partial_leaves >= 1);
        expect_matches(o0, reference(e0), {}, 0, "section 0 + 0");
        expect_matches(o1, reference(e1), {}, 0, "section 1 + 0");
        expect_matches(o2, reference(e2), {}, 0, "section 2 * 3 + section 1");
        // One section alone, and blocks narrower than the product (columns cut inside panels).
        test::expect_matches_reference(s[1] + 0, {}, 0, "split<3>(dense(x, pack(w8)), 1)[1] + 0");
        tensor<std::int32_t, 2> small_blocks({bt, hd});
        CHECK(eval(small_blocks, s[2] + s[1], epilogue_block{64}).blocks == static_cast<std::size_t>(bt));
        expect_matches(small_blocks, reference(s[2] + s[1]), {}, 0, "sections in small blocks");
      }
}

}  // namespace

TEST_CASE("int8 and uint8 packed weights: the int8 kernel it was compiled for") {
  MESSAGE("gemm_int8 kernel: " << std::string(gemm::gemm_int8_isa));
}

TEST_CASE("int8 and uint8 packed weights with int8 and uint8 data are exact on every tile boundary") {
  packed_8bit_sizes<std::int8_t, std::int8_t>(2000);
  packed_8bit_sizes<std::uint8_t, std::int8_t>(3000);
  packed_8bit_sizes<std::int8_t, std::uint8_t>(4000);
  packed_8bit_sizes<std::uint8_t, std::uint8_t>(5000);
}

TEST_CASE("gemm_int8_prepacked from any column (inside a panel or not) equals gemm_int8") {
  prepacked_columns<std::int8_t, std::int8_t>(6000);
  prepacked_columns<std::uint8_t, std::int8_t>(7000);
  prepacked_columns<std::int8_t, std::uint8_t>(8000);
  prepacked_columns<std::uint8_t, std::uint8_t>(9000);
}

TEST_CASE("int8 packed weights across reduction blocks, at saturation, and sums that wrap") {
  // K = 2103: three reduction blocks of the VNNI kernel, five of the vpmaddwd ones, and not a
  // multiple of the 4-wide (2-wide) k groups; N = 70: a partial panel and an NC block of SSE2.
  for (index_t m : {index_t{1}, index_t{3}, index_t{13}, index_t{37}}) {
    CAPTURE(m);
    const auto xs = random_8bit<std::int8_t>(m, 2103, 50 + static_cast<std::uint64_t>(m));
    const auto xu = random_8bit<std::uint8_t>(m, 2103, 60 + static_cast<std::uint64_t>(m));
    const auto ws = random_8bit<std::int8_t>(70, 2103, 70);
    const auto wu = random_8bit<std::uint8_t>(70, 2103, 71);
    const auto wsp = pack(ws);
    const auto wup = pack(wu);
    test::expect_matches_reference(dense(xs, wsp), {}, 0, "int8 x int8, K = 2103");
    test::expect_matches_reference(dense(xu, wsp), {}, 0, "uint8 x int8, K = 2103");
    test::expect_matches_reference(dense(xs, wup), {}, 0, "int8 x uint8, K = 2103");
    test::expect_matches_reference(dense(xu, wup), {}, 0, "uint8 x uint8, K = 2103");
    test::expect_matches_reference(matmul(xu, wsp, false, true), {}, 0, "matmul<false, true> over packed int8");
  }
  // Every product at an extreme of both types: with K = 140000 every sum but the last leaves
  // int32 and must come back modulo 2^32, as TVM's int32 arithmetic wraps.
  constexpr index_t K = 140000;
  const auto constant = [](auto v, index_t rows) {
    tensor<decltype(v), 2> t({rows, K});
    for (index_t i = 0; i < t.size(); ++i) t.data()[i] = v;
    return t;
  };
  const auto lo8 = constant(std::int8_t{-128}, 3), hi8 = constant(std::int8_t{127}, 5);
  const auto hiu = constant(std::uint8_t{255}, 4), zu = constant(std::uint8_t{0}, 2);
  const auto plo8 = pack(lo8), phi8 = pack(hi8);
  const auto phiu = pack(hiu), pzu = pack(zu);
  test::expect_matches_reference(dense(lo8, plo8), {}, 0, "-128 * -128 * 140000 (wraps)");
  test::expect_matches_reference(dense(lo8, phi8), {}, 0, "-128 * 127 * 140000 (wraps)");
  test::expect_matches_reference(dense(hiu, phiu), {}, 0, "255 * 255 * 140000 (wraps)");
  test::expect_matches_reference(dense(hiu, plo8), {}, 0, "255 * -128 * 140000 (wraps)");
  test::expect_matches_reference(dense(lo8, phiu), {}, 0, "-128 * 255 * 140000 (wraps)");
  test::expect_matches_reference(dense(hiu, pzu), {}, 0, "255 * 0");
  auto r = materialize(dense(lo8, plo8));
  CHECK(r(2, 2) == static_cast<std::int32_t>(static_cast<std::uint32_t>(std::int64_t{128 * 128} * K)));
}

TEST_CASE("packing int8 views and expressions") {
  auto big = test::random_tensor<std::int8_t>({40, 70}, 30, -128, 127);
  auto x = random_8bit<std::uint8_t>(9, 60, 31);
  // Every other row and a column window; a column-major view (k strided); a transpose of a
  // [K, N] matrix and an arithmetic expression (both evaluated once, then packed).
  const auto p1 = pack(strided_slice(big.view(), {0, 5}, {40, 65}, {2, 1}));
  const tensor_view<const std::int8_t, 2> col_major(big.data(), dynamic_shape<2>({23, 60}), {1, 40});
  const auto p2 = pack(col_major);
  auto kn = test::random_tensor<std::int8_t>({60, 23}, 32, -128, 127);
  const auto p3 = pack(transpose(kn));
  auto ku = test::random_tensor<std::uint8_t>({60, 23}, 33, 0, 127);
  const auto p4 = pack(transpose(ku) * std::uint8_t{2} + std::uint8_t{1});
  test::expect_matches_reference(dense(x, p1), {}, 0, "pack(strided int8 view)");
  test::expect_matches_reference(dense(x, p2), {}, 0, "pack(column-major int8 view)");
  test::expect_matches_reference(dense(x, p3), {}, 0, "pack(transpose(kn)), int8");
  test::expect_matches_reference(dense(x, p4), {}, 0, "pack(uint8 expression)");
  test::expect_matches_reference(matmul<false, true>(x, p4), {}, 0, "matmul<false, true> over packed uint8");
  for (index_t j = 0; j < 23; ++j)
    for (index_t kk = 0; kk < 60; ++kk) REQUIRE(p3.view().element(j, kk) == kn(kk, j));
  CHECK_THROWS_AS(matmul(x, p3), shape_error);
  // Empty extents: an empty packing; K = 0 gives zeros.
  for (auto [m, n, k] : {std::tuple<index_t, index_t, index_t>{3, 5, 0}, {0, 5, 7}, {3, 0, 7}, {1, 33, 0}}) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    const auto xe = random_8bit<std::int8_t>(m, k, 34);
    const auto we = random_8bit<std::int8_t>(n, k, 35);
    const auto pe = pack(we);
    tensor<std::int32_t, 2> out({m, n});
    for (index_t i = 0; i < out.size(); ++i) out.data()[i] = 42;
    eval(out, dense(xe, pe));
    for (index_t i = 0; i < out.size(); ++i) REQUIRE(out.data()[i] == 0);
  }
}

TEST_CASE("int8 packed weights in fused trees: split sections inside panels, batch 1 to 5") {
  packed_8bit_sections<std::int8_t, std::int8_t>(10000);
  packed_8bit_sections<std::uint8_t, std::int8_t>(11000);
  packed_8bit_sections<std::int8_t, std::uint8_t>(12000);
  packed_8bit_sections<std::uint8_t, std::uint8_t>(13000);
}
