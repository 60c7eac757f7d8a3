// The blocked epilogue over batch_matmul (one product per batch a block reads), rank-3 dense, and
// softmax / layer norm over contractions by row blocks of whole rows; every result against the
// double-precision reference, the counters proving the path. A unit of its own (compile memory).
#include <doctest/doctest.h>

#include <cstdint>
#include <tuple>

#include "cpu/epilogue_check.hpp"
#include "support/check.hpp"

using namespace fuse;
using fuse::test::expect_matches;
using fuse::test::tolerance;
using namespace fuse::test::epilogue;

TEST_CASE("batch_matmul in a tree: computed block by block, per batch, never whole") {
  for (auto [b, m, n, k] : {std::tuple<index_t, index_t, index_t, index_t>{3, 5, 6, 8},
                            {1, 1, 1, 1},
                            {2, 7, 17, 65},
                            {4, 300, 70, 9},
                            {2, 33, 385, 64}}) {
    CAPTURE(b);
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    const auto salt = static_cast<std::uint64_t>(b * 1000000 + m * 1000 + n + k);
    auto q = test::random_tensor({b, m, k}, salt, -1, 1);
    auto kt = test::random_tensor({b, n, k}, salt + 1, -1, 1);
    auto mask = test::random_tensor({m, n}, salt + 2, -4, 0);
    for (const index_t budget : {index_t{64}, epilogue_block{}.elements}) {
      block_budget bb(budget);
      // Scaled scores plus an additive mask broadcast over the batch: attention's epilogue.
      const auto e = exp(batch_matmul(q, kt) * 0.125f + mask);
      tensor<float, 3> out({b, m, n});
      stats = eval_blocked(out, e);
      CHECK(stats.whole_leaves == 0);
      CHECK(stats.partial_leaves >= stats.blocks);
      expect_matches(out, reference(e), cell_tol(k), 0, "exp(batch_matmul * s + mask)");
      // Transposed operands (trans_a: A as [B, K, M]; B as [B, K, N]) and a batch of one
      // broadcast against the other's.
      auto qt = test::random_tensor({b, k, m}, salt + 3, -1, 1);
      auto kn = test::random_tensor({1, k, n}, salt + 4, -1, 1);
      const auto et = batch_matmul(qt, kn, true, false) - 1.0f;
      stats = eval_blocked(out, et);
      CHECK(stats.whole_leaves == 0);
      expect_matches(out, reference(et), cell_tol(k), 0, "batch_matmul(trans_a, broadcast batch) - 1");
      // Read transposed: the batch walks the pass's row axis, several batches a block.
      tensor<float, 3> outt({m, b, n});
      const auto tr = transpose(batch_matmul(q, kt), {1, 0, 2}) * 2.0f;
      stats = eval_blocked(outt, tr);
      CHECK(stats.whole_leaves == 0);
      expect_matches(outt, reference(tr), cell_tol(k), 0, "transpose(batch_matmul) * 2");
    }
  }
  // int8 operands, int32 scores: exact, with the int8 requantize of attention's scores.
  auto q8 = test::random_tensor<std::int8_t>({3, 37, 64}, 620, -128, 127);
  auto k8 = test::random_tensor<std::int8_t>({3, 41, 64}, 621, -128, 127);
  for (index_t i = 0; i < 64; ++i) q8.data()[i] = -128, k8.data()[i] = -128;  // the largest products
  const auto s8 = batch_matmul(q8, k8) + 0;
  tensor<std::int32_t, 3> out8({3, 37, 41});
  stats = eval_blocked(out8, s8);
  CHECK(stats.whole_leaves == 0);
  expect_matches(out8, reference(s8), {}, 0, "int8 batch_matmul in a tree");
  const auto r8 = cast<std::int8_t>(clip(right_shift(batch_matmul(q8, k8), 8), -128, 127));
  tensor<std::int8_t, 3> req({3, 37, 41});
  stats = eval_blocked(req, r8);
  CHECK(stats.whole_leaves == 0);
  expect_matches(req, reference(r8), {}, 0, "int8 scores requantized by a shift");
}

TEST_CASE("softmax and layer norm over contractions: row blocks of whole rows, the product never whole") {
  for (auto [m, k, n] : {std::tuple<index_t, index_t, index_t>{1, 8, 17}, {7, 13, 300}, {300, 40, 65}}) {
    CAPTURE(m);
    CAPTURE(n);
    const auto salt = static_cast<std::uint64_t>(m * 1000 + n);
    auto x = test::random_tensor({m, k}, salt, -1, 1);
    auto w = test::random_tensor({n, k}, salt + 1, -1, 1);
    auto bias = test::random_tensor({n}, salt + 2, -1, 1);
    auto r = test::random_tensor({m, n}, salt + 3, -1, 1);
    auto gamma = test::random_tensor({n}, salt + 4, 0.5, 1.5);
    auto beta = test::random_tensor({n}, salt + 5, -1, 1);
    const auto wp = pack(w);
    for (const index_t budget : {index_t{64}, epilogue_block{}.elements}) {
      block_budget bb(budget);
      tensor<float, 2> out({m, n});
      // BERT's output projection: dense + bias + residual + layer norm, one pass.
      const auto ln = layer_norm(bias_add(dense(x, w), bias, -1) + r, gamma, beta, -1, 1e-5);
      stats = eval_blocked(out, ln);
      CHECK(stats.whole_leaves == 0);
      CHECK(stats.partial_leaves > 0);
      expect_matches(out, reference(ln), {1e-5, 1e-5}, 0, "layer_norm(dense + bias + r)");
      const auto lnp = layer_norm(dense(tanh(x), wp) + r, gamma, beta);
      stats = eval_blocked(out, lnp);
      CHECK(stats.whole_leaves == 0);
      CHECK(stats.partial_leaves > 0);
      expect_matches(out, reference(lnp), {1e-5, 1e-5}, 0, "layer_norm(dense(tanh(x), packed W) + r)");
      const auto sm = softmax(dense(x, w) * 0.25f);
      stats = eval_blocked(out, sm);
      CHECK(stats.whole_leaves == 0);
      CHECK(stats.partial_leaves > 0);
      expect_matches(out, reference(sm), {1e-6, 1e-7}, 0, "softmax(dense / 4)");
      const auto lsm = log_softmax(dense(x, w) + r);
      stats = eval_blocked(out, lsm);
      CHECK(stats.whole_leaves == 0);
      CHECK(stats.partial_leaves > 0);
      expect_matches(out, reference(lsm), {1e-5, 1e-6}, 0, "log_softmax(dense + r)");
    }
  }
  // Attention's scores: softmax(Q K^T * s + mask) over [B, M, N], by blocks of one head's rows.
  auto q = test::random_tensor({3, 37, 16}, 640, -1, 1);
  auto kk = test::random_tensor({3, 41, 16}, 641, -1, 1);
  auto mask = test::random_tensor({37, 41}, 642, -8, 0);
  {
    block_budget bb(41 * 10);
    const auto sm = softmax(batch_matmul(q, kk) * 0.25f + mask);
    tensor<float, 3> p({3, 37, 41});
    stats = eval_blocked(p, sm);
    CHECK(stats.whole_leaves == 0);
    CHECK(stats.partial_leaves >= 12);  // 3 heads x 4 row blocks (10, 10, 10, 7)
    expect_matches(p, reference(sm), {1e-6, 1e-7}, 0, "softmax(batch_matmul * s + mask)");
  }
  // Where it does not apply, the input is evaluated whole first: along another axis; into an
  // output the input reads (x = layer_norm(dense(x, W))).
  auto x = test::random_tensor({20, 20}, 650, -1, 1);
  auto w = test::random_tensor({20, 20}, 651, -1, 1);
  tensor<float, 2> out({20, 20});
  const auto s0 = softmax(dense(x, w), 0);
  stats = eval_blocked(out, s0);
  CHECK(stats.whole_leaves == 0);  // (the whole product is the softmax's own operand here)
  CHECK(stats.partial_leaves == 0);
  expect_matches(out, reference(s0), {1e-6, 1e-7}, 0, "softmax(dense, axis 0)");
  auto g = test::random_tensor({20}, 652, 0.5, 1.5);
  auto b = test::random_tensor({20}, 653, -1, 1);
  const auto want = reference(layer_norm(dense(x, w), g, b));
  stats = eval_blocked(x, layer_norm(dense(x, w), g, b));
  CHECK(stats.partial_leaves == 0);
  expect_matches(x, want, {1e-5, 1e-5}, 0, "x = layer_norm(dense(x, W)) in place");
  // The product under a reshape (rows [6 * 7] as [6, 7]), which blocks do not follow: evaluated
  // whole once, not once per row block (it was: a whole product per block of 2 rows here).
  {
    block_budget bb(2 * 20);
    auto x42 = test::random_tensor({42, 20}, 654, -1, 1);
    auto r3 = test::random_tensor({6, 7, 20}, 655, -1, 1);
    const auto lnr = layer_norm(reshape(dense(x42, w), {6, 7, 20}) + r3, g, b);
    tensor<float, 3> out3({6, 7, 20});
    stats = eval_blocked(out3, lnr);
    CHECK(stats.whole_leaves <= 1);
    expect_matches(out3, reference(lnr), {1e-5, 1e-5}, 0, "layer_norm(reshape(dense) + r)");
  }
}

TEST_CASE("dense over rank-3 activations in a tree: rows flattened over the leading axes, by blocks") {
  for (auto [b, s, k, n] : {std::tuple<index_t, index_t, index_t, index_t>{2, 7, 13, 17}, {3, 300, 40, 33}}) {
    CAPTURE(s);
    auto x = test::random_tensor({b, s, k}, 630 + static_cast<std::uint64_t>(s), -1, 1);
    auto w = test::random_tensor({n, k}, 631, -1, 1);
    auto bias = test::random_tensor({n}, 632, -1, 1);
    auto r = test::random_tensor({b, s, n}, 633, -1, 1);
    block_budget bb(256);
    // BERT's output projection with its residual: dense(x, W) + bias + r over [B, S, N].
    const auto e = bias_add(dense(x, w), bias, -1) + r;
    tensor<float, 3> out({b, s, n});
    stats = eval_blocked(out, e);
    CHECK(stats.whole_leaves == 0);
    CHECK(stats.partial_leaves >= stats.blocks);
    expect_matches(out, reference(e), cell_tol(k), 0, "dense(x3, W) + bias + r");
    // An expression operand of rank 3: evaluated whole, then read by blocks.
    const auto ex = dense(tanh(x), w) * 0.5f;
    stats = eval_blocked(out, ex);
    CHECK(stats.whole_leaves == 0);
    expect_matches(out, reference(ex), cell_tol(k), 0, "dense(tanh(x3), W) / 2");
  }
}

TEST_CASE("attention chained: batch_matmul(softmax(scores), v) reads the probabilities by row blocks, never whole") {
  // softmax(Q K^T * s + mask) is A of the product with V: a block of its rows is evaluated when
  // the product reads it (the slice pushed below the softmax: only those rows' scores), so
  // neither the scores nor the probabilities exist whole. Heads 3, odd sequence lengths.
  for (auto [s, t, d] : {std::tuple<index_t, index_t, index_t>{1, 1, 1}, {37, 41, 16}, {65, 7, 63}}) {
    CAPTURE(s);
    CAPTURE(t);
    const auto salt = static_cast<std::uint64_t>(s * 100 + t);
    auto q = test::random_tensor({3, s, d}, salt, -1, 1);
    auto kk = test::random_tensor({3, t, d}, salt + 1, -1, 1);
    auto v = test::random_tensor({3, d, t}, salt + 2, -1, 1);  // [B, N, K]: batch_matmul's B
    auto mask = test::random_tensor({s, t}, salt + 3, -8, 0);
    const auto probs = softmax(batch_matmul(q, kk) * 0.125f + mask);
    const auto att = batch_matmul(probs, v);
    for (const index_t budget : {index_t{64}, epilogue_block{}.elements}) {
      block_budget bb(budget);
      tensor<float, 3> out({3, s, d});
      stats = eval_blocked(out, att);
      CHECK(stats.whole_leaves == 0);
      CHECK(stats.prologue_row_blocks >= 3);  // at least a block of rows a head
      CHECK(stats.partial_leaves >= 3);       // the scores' products by blocks
      expect_matches(out, reference(att), {1e-5, 1e-5}, 0, "batch_matmul(softmax(q k^T s + mask), v)");
      // int8 probabilities (a requantize above the softmax) into an int32 product: integers
      // exact except where a float rounding tie flips one (the reference rounds in double).
      auto v8 = test::random_tensor<std::int8_t>({3, d, t}, salt + 4, -128, 127);
      const auto att8 = batch_matmul(cast<std::int8_t>(clip(round(probs * 127.0f), -128.0, 127.0)), v8);
      tensor<std::int32_t, 3> out8({3, s, d});
      stats = eval_blocked(out8, att8);
      CHECK(stats.prologue_row_blocks >= 3);
      CHECK(stats.whole_leaves == 0);
      expect_matches(out8, reference(att8), {0, 0}, 0, "batch_matmul(requantize(softmax), v8)");
    }
  }
  // As TVM's PyTorch import writes it: the scores reshaped to [1, heads, S, T], the 4-d softmax
  // over a broadcast mask, broadcast_to the same shape and reshaped back for the product; Q, K
  // and V expressions (a bias added to a projection's sections). The slice of a block passes the
  // reshapes and the broadcast (view_pushdown.hpp), and is pushed into the scores' product
  // (whose K, an expression, is then evaluated for one head, never all).
  for (auto [s, t, d] : {std::tuple<index_t, index_t, index_t>{1, 1, 1}, {37, 41, 16}, {65, 7, 63}}) {
    CAPTURE(s);
    CAPTURE(t);
    const auto salt = static_cast<std::uint64_t>(s * 1000 + t);
    auto q = test::random_tensor({3, s, d}, salt, -1, 1);
    auto kt = test::random_tensor({3, d, t}, salt + 1, -1, 1);  // K^T: [B, K, N]
    auto v = test::random_tensor({3, t, d}, salt + 2, -1, 1);
    auto bias = test::random_tensor({d}, salt + 3, -1, 1);
    auto bias_t = test::random_tensor({t}, salt + 4, -1, 1);
    auto mask = test::random_tensor({1, 1, 1, t}, salt + 5, -8, 0);
    const auto scores = batch_matmul(q + bias, kt + bias_t, false, false);
    const auto probs4 = softmax(reshape(reshape(scores, {1, 3, s, t}), {1, 3, s, t}) / 8.0f + mask, 3);
    const auto att = batch_matmul(reshape(broadcast_to(probs4, {1, 3, s, t}), {3, s, t}), v + bias, false, false);
    for (const index_t budget : {index_t{64}, epilogue_block{}.elements}) {
      block_budget bb(budget);
      tensor<float, 3> out({3, s, d});
      stats = eval_blocked(out, att);
      CHECK(stats.prologue_row_blocks >= 3);  // at least a block of rows a head
      CHECK(stats.whole_leaves == 0);
      expect_matches(out, reference(att), {1e-5, 1e-5}, 0, "batch_matmul(reshape(softmax4(reshape(q k^T))), v)");
    }
    // A strided block of rows (every other query) and a block of both heads and rows.
    tensor<float, 3> every_other({3, (s + 1) / 2, t});
    const auto probs3 = reshape(broadcast_to(probs4, {1, 3, s, t}), {3, s, t});
    eval_blocked(every_other, strided_slice(probs3, {0, 0, 0}, {3, s, t}, {1, 2, 1}));
    expect_matches(every_other, reference(strided_slice(probs3, {0, 0, 0}, {3, s, t}, {1, 2, 1})), {1e-6, 1e-7}, 0,
                   "every other row");
    tensor<float, 3> two({2, s, t});
    eval_blocked(two, strided_slice(probs3, {1, 0, 0}, {3, s, t}));
    expect_matches(two, reference(strided_slice(probs3, {1, 0, 0}, {3, s, t})), {1e-6, 1e-7}, 0, "heads 1 and 2");
  }
  // A slice of the probabilities (one head) computes that head's scores only.
  auto q = test::random_tensor({4, 30, 8}, 700, -1, 1);
  auto kk = test::random_tensor({4, 30, 8}, 701, -1, 1);
  const auto probs = softmax(batch_matmul(q, kk) * 0.5f);
  tensor<float, 3> head({1, 30, 30});
  {
    block_budget bb(30 * 30);
    tensor<float, 3> all({4, 30, 30});
    const auto whole = eval_blocked(all, probs);
    stats = eval_blocked(head, strided_slice(probs, {2, 0, 0}, {3, 30, 30}));
    CHECK(stats.partial_leaves * 4 == whole.partial_leaves);  // one head's blocks, not four heads'
    CHECK(stats.partial_leaves > 0);
    CHECK(stats.whole_leaves == 0);
    expect_matches(head, reference(strided_slice(probs, {2, 0, 0}, {3, 30, 30})), {1e-6, 1e-7}, 0, "one head");
    // A slice that cuts the softmax's axis is evaluated as it was: the softmax whole first.
    tensor<float, 3> cut({4, 30, 10});
    eval_blocked(cut, strided_slice(probs, {0, 0, 0}, {4, 30, 10}));
    expect_matches(cut, reference(strided_slice(probs, {0, 0, 0}, {4, 30, 10})), {1e-6, 1e-7}, 0, "columns cut");
  }
}
