// Contractions (nn.dense, nn.matmul, nn.batch_matmul, nn.bias_add) against the double / exact
// integer reference: sizes that are not multiples of the tile, transposed and strided operands,
// expression operands, batch broadcasting, int8 exactness at saturation, aliasing, errors, and
// contractions inside larger trees.
#include <doctest/doctest.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "support/check.hpp"

using namespace fuse;
using fuse::test::expect_matches;
using fuse::test::tolerance;

using fuse::test::gemm_tol;

namespace {

template <class E>
void check(const E& e, tolerance tol, const char* what, double ulps = 0) {
  test::expect_matches_reference(e, tol, ulps, what);
}

}  // namespace

TEST_CASE("dense over sizes that are not multiples of the tile") {
  const index_t sizes[] = {1, 2, 7, 17, 64, 100, 257};
  std::uint64_t salt = 100;
  for (index_t m : sizes)
    for (index_t n : sizes)
      for (index_t k : sizes) {
        if (m * n * k > 400000) continue;  // the reference is a triple loop
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        auto x = test::random_tensor({m, k}, ++salt, -1, 1);
        auto w = test::random_tensor({n, k}, ++salt, -1, 1);
        check(dense(x, w), gemm_tol(k), "dense");
      }
}

TEST_CASE("long reductions and large tiles cross every blocking boundary") {
  // K > KC (384 for float) and N > NC splits, M not a multiple of MR.
  auto x = test::random_tensor({37, 1000}, 1, -1, 1);
  auto w = test::random_tensor({1100, 1000}, 2, -1, 1);
  check(dense(x, w), gemm_tol(1000), "dense 37x1100x1000");
  auto xd = test::random_tensor<double>({13, 800}, 3, -1, 1);
  auto wd = test::random_tensor<double>({45, 800}, 4, -1, 1);
  check(dense(xd, wd), {1e-13, 1e-13}, "dense float64");
}

TEST_CASE("dense keeps the leading axes of its data, also when they do not flatten") {
  auto x = test::random_tensor({3, 5, 33}, 10, -1, 1);
  auto w = test::random_tensor({19, 33}, 11, -1, 1);
  check(dense(x, w), gemm_tol(33), "rank-3 data");
  // transpose(x) is [5, 3, 33] whose leading axes do not flatten to one stride
  check(dense(transpose(x, {1, 0, 2}), w), gemm_tol(33), "leading axes that do not flatten");
  auto v = test::random_tensor({33}, 12, -1, 1);
  check(dense(v, w), gemm_tol(33), "rank-1 data");
}

TEST_CASE("matmul and batch_matmul with every transpose, strided and expression operands") {
  auto a = test::random_tensor({23, 41}, 20, -1, 1);
  auto b = test::random_tensor({41, 18}, 21, -1, 1);
  auto at = test::random_tensor({41, 23}, 22, -1, 1);
  auto bt = test::random_tensor({18, 41}, 23, -1, 1);
  check(matmul(a, b), gemm_tol(41), "matmul");
  check(matmul(at, b, true, false), gemm_tol(41), "matmul ta");
  check(matmul(a, bt, false, true), gemm_tol(41), "matmul tb");
  check(matmul<true, true>(at, bt), gemm_tol(41), "matmul ta tb (static flags)");
  check(matmul(transpose(at), b), gemm_tol(41), "matmul of a transpose view");
  // Strided views: every other row and a reversed column range.
  auto big = test::random_tensor({46, 90}, 24, -1, 1);
  auto sa = strided_slice(big, {0, 89}, {46, 7}, {2, -2});  // [23, 41], negative column stride
  check(matmul(sa, b), gemm_tol(41), "matmul of a strided, reversed view");
  // An expression operand is evaluated first, then contracted.
  check(matmul(tanh(a) * 2.0f, b), gemm_tol(41), "matmul of an expression");

  auto q = test::random_tensor({4, 9, 31}, 25, -1, 1);
  auto k = test::random_tensor({4, 13, 31}, 26, -1, 1);
  auto kt = test::random_tensor({4, 31, 13}, 27, -1, 1);
  auto k1 = test::random_tensor({1, 13, 31}, 28, -1, 1);
  auto qt = test::random_tensor({4, 31, 9}, 29, -1, 1);
  check(batch_matmul(q, k), gemm_tol(31), "batch_matmul (default transpose_b)");
  check(batch_matmul(q, kt, false, false), gemm_tol(31), "batch_matmul tb=false");
  check(batch_matmul<true, true>(qt, k), gemm_tol(31), "batch_matmul ta tb");
  check(batch_matmul(q, k1), gemm_tol(31), "batch_matmul broadcasting a batch of 1");
  check(batch_matmul(k1, q), gemm_tol(31), "batch of 1 on the left");
  check(batch_matmul(transpose(q, {0, 2, 1}), k, true, true), gemm_tol(31), "batch_matmul of a transpose view");
}

TEST_CASE("expression operands are evaluated in the layout their leaves read, batch by batch where only that folds") {
  // Attention's heads: x [B, S, H * D] read as [B * H, S, D] through reshape(transpose(reshape)):
  // the batch axis merges B and H, which are not adjacent in memory, so the operand folds into
  // strides one batch at a time. V^T (transpose_b) is written in V's order, along D.
  // (a batch of at least 1024 elements is evaluated alone: S x D = 65 x 17)
  for (const auto& [s, D] : std::initializer_list<std::pair<index_t, index_t>>{{1, 5}, {7, 5}, {65, 17}}) {
    CAPTURE(s);
    CAPTURE(D);
    const index_t B = 2, H = 3;
    auto x = test::random_tensor({B, s, H * D}, 300 + static_cast<std::uint64_t>(s), -4, 4);
    auto heads = reshape(transpose(reshape(x, {B, s, H, D}), {0, 2, 1, 3}), {B * H, s, D});
    auto quant = [](const auto& e) { return cast<std::int8_t>(clip(round(e * 16.0f), -127, 127)); };
    auto p = test::random_tensor<std::int8_t>({B * H, 9, s}, 310 + static_cast<std::uint64_t>(s), -128, 127);
    check(batch_matmul(p, quant(transpose(heads, {0, 2, 1})), false, true), {}, "int8 P x V, V^T quantized");
    check(batch_matmul(p, quant(heads), false, false), {}, "int8 P x V");
    auto q = test::random_tensor({B * H, 4, D}, 320 + static_cast<std::uint64_t>(s), -1, 1);
    check(batch_matmul(q, heads * 0.5f), gemm_tol(D), "float Q x K^T, K an expression of the heads");
    check(batch_matmul(heads * 0.5f, transpose(heads, {0, 2, 1}) + 1.0f, false, false), gemm_tol(D),
          "both operands expressions of the heads");
  }
  // Rank 2: an operand whose leaves run down its columns is stored column by column; a dense's
  // rank-3 data keeps its rows row-major (they flatten into one axis of rows).
  auto y = test::random_tensor({13, 21}, 330, -1, 1);
  auto w = test::random_tensor({11, 13}, 331, -1, 1);
  check(dense(transpose(y) * 2.0f, w), gemm_tol(13), "dense of a transpose expression");
  check(matmul(w, transpose(w) * 1.0f + y(0, 0)), gemm_tol(13), "matmul with B an expression read by columns");
  auto z = test::random_tensor({3, 13, 7}, 332, -1, 1);
  check(dense(transpose(z, {0, 2, 1}) * 1.0f, w), gemm_tol(13), "dense of rank-3 data read by columns");
}

TEST_CASE("int8 and uint8 contractions are exact, including saturated inputs") {
  for (index_t kk : {1, 7, 64, 257, 1000}) {
    CAPTURE(kk);
    auto x = test::random_tensor<std::int8_t>({9, kk}, 40 + static_cast<std::uint64_t>(kk), -128, 127);
    auto w = test::random_tensor<std::int8_t>({21, kk}, 50 + static_cast<std::uint64_t>(kk), -128, 127);
    x(0, 0) = -128, w(0, 0) = -128;
    check(dense(x, w), {}, "int8 dense");
    auto u = test::random_tensor<std::uint8_t>({9, kk}, 60 + static_cast<std::uint64_t>(kk), 0, 255);
    check(dense(u, w), {}, "uint8 x int8 dense");
  }
  // Every product at its extreme: -128 * -128 summed 1000 times and 127 * -128.
  tensor<std::int8_t, 2> lo({3, 1000}), hi({5, 1000});
  for (index_t i = 0; i < 3000; ++i) lo.data()[i] = -128;
  for (index_t i = 0; i < 5000; ++i) hi.data()[i] = 127;
  auto r = materialize(dense(lo, hi));
  CHECK(r(0, 0) == -128 * 127 * 1000);
  auto r2 = materialize(dense(lo, lo));
  CHECK(r2(2, 2) == 128 * 128 * 1000);
  auto qa = test::random_tensor<std::int8_t>({2, 5, 40}, 70, -128, 127);
  auto qb = test::random_tensor<std::int8_t>({2, 6, 40}, 71, -128, 127);
  check(batch_matmul(qa, qb), {}, "int8 batch_matmul");
}

TEST_CASE("empty extents, bias_add on every axis, and outputs that alias an operand") {
  tensor<float, 2> x0({0, 5}), w({4, 5});
  CHECK(materialize(dense(x0, w)).size() == 0);
  tensor<float, 2> xk({3, 0}), wk({4, 0});
  auto z = materialize(dense(xk, wk));
  for (index_t i = 0; i < z.size(); ++i) CHECK(z.data()[i] == 0.0f);

  auto x = test::random_tensor({6, 7, 8}, 80, -1, 1);
  for (index_t axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    const index_t ext = x.shape()[static_cast<std::size_t>(axis < 0 ? axis + 3 : axis)];
    auto bias = test::random_tensor({ext}, 81 + static_cast<std::uint64_t>(axis + 1), -1, 1);
    check(bias_add(x, bias, axis), {}, "bias_add", 0.5);
  }

  // x = x * w in place (square): the executor computes into a temporary first.
  auto sq = test::random_tensor({30, 30}, 90, -1, 1);
  auto w2 = test::random_tensor({30, 30}, 91, -1, 1);
  tensor<float, 2> copy({30, 30});
  eval(copy, sq);
  auto expect = reference(matmul(copy, w2));
  eval(sq, matmul(sq, w2));
  expect_matches(sq, expect, gemm_tol(30), 0, "in-place matmul");
  // Output through a transposed view.
  tensor<float, 2> outT({18, 23});
  auto a = test::random_tensor({23, 41}, 92, -1, 1);
  auto b = test::random_tensor({41, 18}, 93, -1, 1);
  eval(transpose(outT), matmul(a, b));
  expect_matches(outT, reference(transpose(matmul(a, b))), gemm_tol(41), 0, "output through a transpose");
}

TEST_CASE("contractions inside larger trees: the seed's dense -> split -> gates") {
  auto x = test::random_tensor({1, 10}, 95, -1, 1);
  auto w = test::random_tensor({30, 10}, 96, -1, 1);
  auto s = split<3>(dense(x, w), 1);
  tensor<float, 2> out({1, 10});
  const auto e = sigmoid(s[0]) + tanh(s[1]) * exp(s[2]);
  eval(out, e);
  expect_matches(out, reference(e), {1e-6, 2e-6}, 0, "seed 000 cell");
  // A GRU-like tree of two contractions with different K and a bias on axis 1.
  auto h = test::random_tensor({5, 16}, 97, -1, 1);
  auto xi = test::random_tensor({5, 24}, 98, -1, 1);
  auto wi = test::random_tensor({48, 24}, 99, -1, 1);
  auto wh = test::random_tensor({48, 16}, 100, -1, 1);
  auto bi = test::random_tensor({48}, 101, -1, 1);
  auto gi = split<3>(bias_add(dense(xi, wi), bi), 1);
  auto gh = split<3>(dense(h, wh), 1);
  const auto r = sigmoid(gi[0] + gh[0]);
  const auto zg = sigmoid(gi[1] + gh[1]);
  const auto nn = tanh(gi[2] + r * gh[2]);
  tensor<float, 2> hn({5, 16});
  const auto he = (1.0f - zg) * nn + zg * h;
  eval(hn, he);
  expect_matches(hn, reference(he), {1e-5, 1e-5}, 0, "GRU step");
}

TEST_CASE("contraction shape errors name the op and both shapes") {
  tensor<float, 2> x({2, 10}), w({30, 12});
  try {
    (void)dense(x, w);
    FAIL("no error");
  } catch (const shape_error& e) {
    const std::string m = e.what();
    CHECK(m.find("nn.dense") != std::string::npos);
    CHECK(m.find("(2, 10)") != std::string::npos);
    CHECK(m.find("(30, 12)") != std::string::npos);
  }
  tensor<float, 3> a({3, 4, 5}), b({2, 6, 5});
  CHECK_THROWS_WITH_AS((void)batch_matmul(a, b), doctest::Contains("neither is 1"), shape_error);
  tensor<float, 3> a3({3, 4, 5});
  tensor<float, 2> w2({6, 5});
  CHECK_THROWS_AS((void)matmul(a3, w2, true, true), shape_error);  // transposed data of rank 3
  tensor<float, 1> bias({5});
  CHECK_THROWS_WITH_AS((void)bias_add(a3, bias, 1), doctest::Contains("nn.bias_add"), shape_error);
  CHECK_THROWS_AS((void)bias_add(a3, bias, 3), shape_error);
}
