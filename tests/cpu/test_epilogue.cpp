// Contractions fused with their elementwise consumers (fuse/cpu/epilogue.hpp): LSTM and GRU
// cells (several gate blocks, two GEMMs with different K, two outputs), trees over many blocks
// with partial tail blocks, in-place updates of the cell state, outputs that a later block would
// read, and the trees that fall back to evaluating the contraction whole. Every result against
// the double-precision reference; the counters prove which path ran.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "cpu/epilogue_check.hpp"
#include "support/check.hpp"

using namespace fuse;
using fuse::test::expect_matches;
using fuse::test::tolerance;
using namespace fuse::test::epilogue;

namespace {

struct lstm_weights {
  index_t batch, input, hidden;
  tensor<float, 2> x, h, c, w;
  tensor<float, 1> b;
  lstm_weights(index_t bt, index_t in, index_t hd, std::uint64_t salt)
      : batch(bt),
        input(in),
        hidden(hd),
        x(test::random_tensor({bt, in}, salt, -1, 1)),
        h(test::random_tensor({bt, hd}, salt + 1, -1, 1)),
        c(test::random_tensor({bt, hd}, salt + 2, -2, 2)),
        w(test::random_tensor({4 * hd, in + hd}, salt + 3, -0.5, 0.5)),
        b(test::random_tensor({4 * hd}, salt + 4, -0.5, 0.5)) {}
};

/// One LSTM step as fuse expressions: gates = [x, h] W^T + b; i, f, g, o = split 4;
/// c' = sigmoid(f) c + sigmoid(i) tanh(g); h' = sigmoid(o) tanh(c').
auto lstm_exprs(const lstm_weights& p) {
  auto gates =
      split<4>(bias_add(dense(concatenate(std::make_tuple(p.x.view(), p.h.view()), 1), p.w.view()), p.b.view()), 1);
  auto c_next = sigmoid(gates[1]) * p.c.view() + sigmoid(gates[0]) * tanh(gates[2]);
  auto h_next = sigmoid(gates[3]) * tanh(c_next);
  return std::make_pair(h_next, c_next);
}

}  // namespace

TEST_CASE("an LSTM cell is one blocked pass: four gate blocks, two outputs") {
  for (auto [bt, in, hd] :
       {std::tuple<index_t, index_t, index_t>{1, 7, 17}, {7, 33, 100}, {64, 64, 64}, {300, 9, 70}, {3, 1, 1}}) {
    CAPTURE(bt);
    CAPTURE(in);
    CAPTURE(hd);
    for (index_t budget : {index_t{32768}, index_t{40}}) {
      CAPTURE(budget);
      block_budget bb(budget);
      lstm_weights p(bt, in, hd, 200 + static_cast<std::uint64_t>(bt + in + hd));
      auto [he, ce] = lstm_exprs(p);
      tensor<float, 2> hn({bt, hd}), cn({bt, hd});
      stats = eval_blocked(outputs(hn, cn), he, ce);
      CHECK(stats.passes == 1);
      CHECK(stats.whole_leaves == 0);
      // One product per gate block, or one for all four when the gates are narrow enough to
      // be computed as one (the whole width of W for these rows).
      CHECK(stats.partial_leaves >= stats.blocks);
      CHECK(stats.partial_leaves <= 4 * stats.blocks);
      CHECK(stats.through_temporaries == 0);
      expect_matches(cn, reference(ce), cell_tol(in + hd), 0, "LSTM c'");
      expect_matches(hn, reference(he), cell_tol(in + hd), 0, "LSTM h'");
    }
  }
}

TEST_CASE("an LSTM step updates h and c in place") {
  block_budget bb(40);  // 33 x 2 blocks: later blocks read h after earlier ones wrote it
  lstm_weights p(33, 20, 45, 300);
  auto [he, ce] = lstm_exprs(p);
  const auto h_ref = reference(he);
  const auto c_ref = reference(ce);
  stats = eval_blocked(outputs(p.h, p.c), he, ce);  // h feeds the GEMM (through the concatenation), c the gates
  CHECK(stats.through_temporaries == 0);
  expect_matches(p.c, c_ref, cell_tol(65), 0, "in-place c'");
  expect_matches(p.h, h_ref, cell_tol(65), 0, "in-place h'");
}

TEST_CASE("a GRU cell: two GEMMs with different K and six gate blocks, h updated in place") {
  for (auto [bt, in, hd] : {std::tuple<index_t, index_t, index_t>{1, 24, 16}, {17, 7, 100}, {260, 5, 90}}) {
    CAPTURE(bt);
    auto x = test::random_tensor({bt, in}, 400, -1, 1);
    auto h = test::random_tensor({bt, hd}, 401, -1, 1);
    auto wi = test::random_tensor({3 * hd, in}, 402, -0.5, 0.5);
    auto wh = test::random_tensor({3 * hd, hd}, 403, -0.5, 0.5);
    auto bi = test::random_tensor({3 * hd}, 404, -0.5, 0.5);
    auto bh = test::random_tensor({3 * hd}, 405, -0.5, 0.5);
    auto gi = split<3>(bias_add(dense(x, wi), bi), 1);
    auto gh = split<3>(bias_add(dense(h, wh), bh), 1);
    const auto r = sigmoid(gi[0] + gh[0]);
    const auto z = sigmoid(gi[1] + gh[1]);
    const auto n = tanh(gi[2] + r * gh[2]);
    const auto he = (1.0f - z) * n + z * h;
    const auto ref = reference(he);
    tensor<float, 2> out({bt, hd});
    stats = eval_blocked(out, he);
    CHECK(stats.partial_leaves >= 2);  // two GEMMs (their sections maybe at once)
    CHECK(stats.whole_leaves == 0);
    expect_matches(out, ref, cell_tol(in + hd), 0, "GRU h'");
    block_budget bb(48);          // several column blocks per row: later ones read all of h's row
    stats = eval_blocked(h, he);  // h is read in place by the second GEMM: it is copied before any block writes
    CHECK(stats.blocks == static_cast<std::size_t>(bt * ((hd + 47) / 48)));
    CHECK(stats.through_temporaries == 0);
    expect_matches(h, ref, cell_tol(in + hd), 0, "GRU h' in place");
  }
}

TEST_CASE("trees over many blocks, partial tail blocks, transposed and broadcast contraction leaves") {
  // 260 x 300 outputs: two row blocks (256 + 4) by two column blocks (256 + 44).
  block_budget bb(65536);
  auto x = test::random_tensor({260, 9}, 500, -1, 1);
  auto w = test::random_tensor({600, 9}, 501, -1, 1);
  auto y = test::random_tensor({260, 300}, 502, -1, 1);
  auto s = split<2>(dense(x, w), 1);
  const auto e = sigmoid(s[0]) * y + exp(s[1] * 0.25f);
  tensor<float, 2> out({260, 300});
  stats = eval_blocked(out, e);
  CHECK(stats.blocks == 4);
  // Two products per block, but one in the 4-row tail block of 256 columns, where all 600
  // columns of the contraction fit the budget and serve both sections.
  CHECK(stats.partial_leaves == 7);
  expect_matches(out, reference(e), cell_tol(9), 0, "split gates over 4 blocks");

  // The contraction read through a transpose, and a one-row contraction broadcast down the rows.
  auto a = test::random_tensor({70, 13}, 503, -1, 1);
  auto bw = test::random_tensor({50, 13}, 504, -1, 1);
  auto x1 = test::random_tensor({1, 13}, 505, -1, 1);
  auto y2 = test::random_tensor({50, 70}, 506, -1, 1);
  const auto e2 = tanh(transpose(dense(a, bw))) + dense(x1, a) * y2;
  tensor<float, 2> out2({50, 70});
  stats = eval_blocked(out2, e2);
  CHECK(stats.whole_leaves == 0);
  expect_matches(out2, reference(e2), cell_tol(13), 0, "transposed and broadcast contraction leaves");
}

TEST_CASE("contraction leaves that a block cannot serve are evaluated whole, once") {
  auto x = test::random_tensor({12, 7}, 600, -1, 1);
  auto w = test::random_tensor({20, 7}, 601, -1, 1);
  auto y = test::random_tensor({10, 24}, 602, -1, 1);
  // A reshape of the result, and a strided slice with step 2 of its columns.
  const auto e = reshape<10, 24>(dense(x, w)) * y;
  tensor<float, 2> out({10, 24});
  stats = eval_blocked(out, e);
  CHECK(stats.whole_leaves == 1);
  expect_matches(out, reference(e), cell_tol(7), 0, "reshape of a contraction");
  const auto e2 = strided_slice(dense(x, w), {0, 0}, {12, 20}, {1, 2}) + 1.0f;
  tensor<float, 2> out2({12, 10});
  stats = eval_blocked(out2, e2);
  CHECK(stats.whole_leaves == 1);
  expect_matches(out2, reference(e2), cell_tol(7), 0, "strided slice of a contraction");
}

TEST_CASE("an output that later blocks read elsewhere goes through temporaries") {
  // out = e, with e reading out: checked against the reference taken before; returns the
  // counters of the pass.
  const auto update = [](auto& out, const auto& e, const char* what) {
    const auto ref = reference(e);
    stats = eval_blocked(out, e);
    expect_matches(out, ref, cell_tol(11), 0, what);
    return stats;
  };
  auto x = test::random_tensor({300, 11}, 700, -1, 1);
  auto w = test::random_tensor({300, 11}, 701, -1, 1);
  auto sq = test::random_tensor({300, 300}, 702, -1, 1);
  CHECK(update(sq, transpose(sq) + dense(x, w), "out = transpose(out) + dense").through_temporaries == 1);
  // The same through a view of an expression: the index map above the leaf decides.
  CHECK(update(sq, transpose(sq * 2.0f) + dense(x, w), "out = transpose(2 out) + dense").through_temporaries == 1);
  // Reading the output element for element is an in-place update, not a hazard.
  CHECK(update(sq, sq * 0.5f + dense(x, w), "out = out / 2 + dense").through_temporaries == 0);
  // One block is one pass: its own aliasing plan takes the temporary.
  auto xs = test::random_tensor({9, 11}, 703, -1, 1);
  auto ws = test::random_tensor({9, 11}, 704, -1, 1);
  auto small = test::random_tensor({9, 9}, 705, -1, 1);
  CHECK(update(small, transpose(small * 2.0f) + dense(xs, ws), "one block: out = transpose(2 out) + dense").blocks ==
        1);
}

TEST_CASE("int8 contractions in a tree stay exact") {
  auto x = test::random_tensor<std::int8_t>({37, 50}, 800, -128, 127);
  auto w = test::random_tensor<std::int8_t>({70, 50}, 801, -128, 127);
  for (index_t i = 0; i < 50; ++i) x.data()[i] = -128, w.data()[i] = -128;  // the largest products
  const auto e = cast<float>(dense(x, w)) * 0.5f;
  tensor<float, 2> out({37, 70});
  stats = eval_blocked(out, e);
  CHECK(stats.partial_leaves >= 1);
  expect_matches(out, reference(e), {0, 0}, 0, "int8 dense in a tree");
}

TEST_CASE("horizontal fusion: Q, K and V projections of one X in one pass, X's rows packed once per block") {
  for (auto [m, k, n] : {std::tuple<index_t, index_t, index_t>{300, 70, 96}, {5, 40, 33}, {64, 256, 200}}) {
    CAPTURE(m);
    auto x = test::random_tensor({m, k}, 600, -1, 1);
    auto wq = test::random_tensor({n, k}, 601, -1, 1);
    auto wk = test::random_tensor({n, k}, 602, -1, 1);
    auto wv = test::random_tensor({n, k}, 603, -1, 1);
    auto bq = test::random_tensor({n}, 604, -1, 1);
    const auto wvp = pack(wv);  // packed and unpacked weights mix
    const auto qe = bias_add(dense(x, wq), bq) * 0.125f;
    const auto ke = dense(x, wk);
    const auto ve = dense(x, wvp);
    tensor<float, 2> q({m, n}), kk({m, n}), v({m, n});
    stats = eval_blocked(outputs(q, kk, v), qe, ke, ve);
    CHECK(stats.passes == 1);
    CHECK(stats.partial_leaves == 3 * stats.blocks);
    // One packing of X's rows per block that is big enough to pack (not the direct form).
    if (m > 4 && m * n * k > 32768) CHECK(stats.row_packings == stats.blocks);
    expect_matches(q, reference(qe), cell_tol(k), 0, "Q");
    expect_matches(kk, reference(ke), cell_tol(k), 0, "K");
    expect_matches(v, reference(ve), cell_tol(k), 0, "V");
  }
}

TEST_CASE("a contraction and a reduction in one tree: the reduction evaluated whole, the contraction by blocks") {
  block_budget bb(64);
  auto x = test::random_tensor({9, 13}, 700, -1, 1);
  auto w = test::random_tensor({20, 13}, 701, -1, 1);
  auto y = test::random_tensor({9, 20}, 702, -1, 1);
  const auto e = dense(x, w) + mean(y, -1, keepdims) * 2.0f;
  tensor<float, 2> out({9, 20});
  stats = eval_blocked(out, e);
  CHECK(stats.whole_leaves == 1);
  CHECK(stats.partial_leaves == stats.blocks);
  expect_matches(out, reference(e), cell_tol(13), 0, "dense + mean");
}

TEST_CASE("the seed's cell: one product for all three sections of a narrow contraction") {
  auto x = test::random_tensor({1, 10}, 800, -1, 1);
  auto w = test::random_tensor({30, 10}, 801, -1, 1);
  const auto wp = pack(w);
  for (int packed = 0; packed < 2; ++packed) {
    CAPTURE(packed);
    tensor<float, 2> out({1, 10});
    if (packed) {
      auto s = split<3>(dense(x, wp), 1);
      const auto e = sigmoid(s[0]) + tanh(s[1]) * exp(s[2]);
      stats = eval_blocked(out, e);
      expect_matches(out, reference(e), cell_tol(10), 0, "seed cell, packed W");
    } else {
      auto s = split<3>(dense(x, w), 1);
      const auto e = sigmoid(s[0]) + tanh(s[1]) * exp(s[2]);
      stats = eval_blocked(out, e);
      expect_matches(out, reference(e), cell_tol(10), 0, "seed cell");
    }
    CHECK(stats.blocks == 1);
    CHECK(stats.partial_leaves == 1);
  }
  // A wide contraction read through one narrow section is not computed whole.
  auto wide = test::random_tensor({400, 10}, 802, -1, 1);
  auto s = split<40>(dense(x, wide), 1);
  const auto e = exp(s[3]);
  tensor<float, 2> out({1, 10});
  stats = eval_blocked(out, e);
  CHECK(stats.partial_leaves == 1);
  expect_matches(out, reference(e), cell_tol(10), 0, "one section of forty");
}

TEST_CASE("prologue by rows: expression operands evaluated block by block, whole when the pass writes their inputs") {
  // 300 rows: two row blocks of the pass (256 + 44); the concatenation [x, h] is evaluated for
  // each row block when the block reads it, never as a [300, 60] tensor.
  auto x = test::random_tensor({300, 25}, 900, -1, 1);
  auto h = test::random_tensor({300, 35}, 901, -1, 1);
  auto w = test::random_tensor({40, 60}, 902, -0.5, 0.5);
  auto xh = concatenate(std::make_tuple(x.view(), h.view()), 1);
  auto g = split<2>(dense(xh, w), 1);
  const auto e = sigmoid(g[0]) * tanh(g[1]);
  tensor<float, 2> out({300, 20});
  stats = eval_blocked(out, e);
  CHECK(stats.blocks == 2);
  CHECK(stats.prologue_row_blocks == 2);
  expect_matches(out, reference(e), cell_tol(60), 0, "dense(concatenate(x, h), w) by rows");

  // A quantize chain as the operand of an int8 contraction: exact, by rows.
  auto xf = test::random_tensor({300, 48}, 903, -3, 3);
  // x * 60 is rounded to float in the pass and kept in double by the reference: keep it clear of
  // the .5 ties, where that last-bit difference alone would flip round() (a fresh seed found one).
  for (auto& v : xf) {
    const double t = double(v) * 60.0, f = t - std::floor(t);
    if (std::abs(f - 0.5) < 0.01) v = float((std::floor(t) + 0.25) / 60.0);
  }
  auto w8 = test::random_tensor<std::int8_t>({33, 48}, 904, -128, 127);
  const auto q = cast<std::int8_t>(clip(round(xf * 60.0f), -128, 127));  // saturates at both ends
  const auto e8 = dense(q, w8) + 0;
  tensor<std::int32_t, 2> out8({300, 33});
  stats = eval_blocked(out8, e8);
  CHECK(stats.prologue_row_blocks == stats.blocks);
  expect_matches(out8, reference(e8), {}, 0, "dense(cast<int8>(clip(round(x * s))), w8) by rows");

  // batch_matmul's quantized A (attention's Q: heads of a float projection, rounded to int8):
  // evaluated per batch and row block as the blocks read it.
  auto xq = test::random_tensor({37, 3, 64}, 908, -2, 2);
  for (auto& v : xq) {
    const double t = double(v) * 60.0, f = t - std::floor(t);
    if (std::abs(f - 0.5) < 0.01) v = float((std::floor(t) + 0.25) / 60.0);
  }
  auto k8 = test::random_tensor<std::int8_t>({3, 41, 64}, 909, -128, 127);
  const auto qh = cast<std::int8_t>(clip(round(transpose(xq.view(), {1, 0, 2}) * 60.0f), -128, 127));
  for (const index_t budget : {index_t{64 * 20}, epilogue_block{}.elements}) {
    block_budget bq(budget);
    const auto eq = batch_matmul(qh, k8) + 0;
    tensor<std::int32_t, 3> outq({3, 37, 41});
    stats = eval_blocked(outq, eq);
    CHECK(stats.whole_leaves == 0);
    CHECK(stats.prologue_row_blocks > 0);
    CHECK(stats.prologue_row_blocks <= stats.blocks);
    expect_matches(outq, reference(eq), {}, 0, "batch_matmul(int8 heads of x, k8) by rows");
  }

  // The pass writes what the operand reads (h updated in place): evaluated whole, first.
  block_budget bb(64);
  auto h2 = test::random_tensor({30, 35}, 905, -1, 1);
  auto x2 = test::random_tensor({30, 25}, 906, -1, 1);
  auto w2 = test::random_tensor({35, 60}, 907, -0.5, 0.5);
  const auto upd = tanh(dense(concatenate(std::make_tuple(x2.view(), h2.view()), 1), w2));
  const auto want = reference(upd);
  stats = eval_blocked(h2, upd);
  CHECK(stats.blocks > 1);
  CHECK(stats.prologue_row_blocks == 0);
  expect_matches(h2, want, cell_tol(60), 0, "in-place h, operand evaluated whole");
}

TEST_CASE("empty extents with packed and unpacked weights: zeros, no reads") {
  for (auto [m, n, k] : {std::tuple<index_t, index_t, index_t>{3, 5, 0}, {0, 5, 7}, {3, 0, 7}, {0, 0, 0}, {1, 33, 0}}) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    auto x = test::random_tensor({m, k}, 950, -1, 1);
    auto w = test::random_tensor({n, k}, 951, -1, 1);
    const auto wp = pack(w);
    tensor<float, 2> a({m, n}), b({m, n});
    for (auto& v : a) v = 42;
    eval_blocked(a, dense(x, wp));
    eval_blocked(b, dense(x, w) * 2.0f + 1.0f);
    for (index_t i = 0; i < a.size(); ++i) REQUIRE(a.data()[i] == 0.0f);
    for (index_t i = 0; i < b.size(); ++i) REQUIRE(b.data()[i] == 1.0f);
  }
}
