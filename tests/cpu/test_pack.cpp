// Packed weights (fuse::pack): dense and matmul over prepacked panels against the double
// reference on shapes that are not multiples of the panel or the reduction block, packings of
// strided views and of expressions, fused cells reading sections of the packed weights that
// start inside a panel, and the errors for the uses a packing cannot serve.
#include <doctest/doctest.h>

#include <string>

#include "support/check.hpp"

using namespace fuse;
using fuse::test::expect_matches;
using fuse::test::tolerance;

namespace {

tolerance gemm_tol(index_t k) { return {1e-6, 4e-7 * static_cast<double>(k + 1)}; }

}  // namespace

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
  auto x = test::random_tensor({37, 1100}, 1, -1, 1);  // K = 1100: three reduction blocks
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
    cpu::epilogue_stats = {};
    eval(outputs(hn, cn), h_next, c_next);
    CHECK(cpu::epilogue_stats.passes == 1);
    CHECK(cpu::epilogue_stats.whole_leaves == 0);
    const tolerance tol{2e-6, 6e-7 * static_cast<double>(in + hd + 1)};
    expect_matches(cn, reference(c_next), tol, 0, "packed LSTM c'");
    expect_matches(hn, reference(h_next), tol, 0, "packed LSTM h'");
  }
}
