// Row programs on the CUDA emulator, reductions over several axes inside trees (each a block of
// sub-rows along borrowed coordinates): instance norm, axes apart, every axis, int8, empty
// blocks; a unit of its own (each tree is another row program type: compile memory).
#include "cuda/rows_check.hpp"

using namespace fuse;
using namespace fuse::test::rows;
using fuse::test::expect_matches;
using fuse::test::tolerance;

TEST_CASE("cuda emulated rows: reductions over several axes inside trees walk blocks of sub-rows") {
  for (index_t n : {index_t{1}, index_t{7}, index_t{17}, index_t{40}}) {
    CAPTURE(n);
    const auto salt = 1500 + static_cast<std::uint64_t>(n);
    // Instance norm as exporters decompose it: statistics over the last two axes of NCHW, the
    // variance reading the mean (a block reduction inside another's block).
    auto x = test::random_tensor<float>({2, 3, n, 9}, salt, -4, 4);
    check_rows(x.view() - mean(x.view(), {2, 3}, keepdims), {1e-6, 1e-6}, 4, "x - mean over H, W");
    auto d = x.view() - mean(x.view(), {2, 3}, keepdims);
    check_rows(d / sqrt(mean(d * d, {2, 3}, keepdims) + 1e-5f), {1e-5, 1e-5}, 16, "instance norm, decomposed");
    // Axes apart (0 and 2), the kept one last: the iteration walks another axis last.
    auto y = test::random_tensor<double>({5, n, 6}, salt + 1, -9, 9);
    check_rows(y.view() - max(y.view(), {0, 2}, keepdims), {0, 0}, 0, "y - max over axes 0 and 2");
    check_rows(y.view() * sum(y.view(), {0, 1}, keepdims), {1e-12, 1e-12}, 64, "y * sum over axes 0 and 1");
    // Every axis, and three of four without keepdims broadcast back along the kept one.
    check_rows(exp(y.view() - max(y.view(), {0, 1, 2}, keepdims)), {1e-12, 1e-15}, 8, "exp(y - max over all)");
    auto z = test::random_tensor<float>({6, 3, n, 5}, salt + 2, -2, 2);
    check_rows(z.view() + prod(z.view() * 0.5f + 1.0f, {1, 2, 3}, keepdims), {1e-5, 1e-6}, 64, "z + prod over 3 axes");
    auto w = test::random_tensor<float>({6, 4, 3, n}, salt + 3, -2, 2);
    check_rows(transpose(w.view(), {3, 2, 1, 0}) - mean(z.view(), {1, 2, 3}), {1e-6, 1e-6}, 8,
               "no keepdims, kept axis along the output's last, rank 4");
    // int8 sums wrap as the CPU's do; a block whose extent is 0 along one axis reduces nothing.
    auto q = test::random_tensor<std::int8_t>({3, n, 4}, salt + 4, -128, 127);
    const auto got = run_rows<std::int8_t>(q.view() + sum(q.view(), {1, 2}, keepdims));
    tensor<std::int8_t, 3> want({3, n, 4});
    eval(want, q.view() + sum(q.view(), {1, 2}, keepdims));
    CHECK(same_bits(got, want));
  }
  // Empty blocks: a sum of nothing is 0, a mean of nothing NaN, as on the CPU.
  auto e = test::random_tensor<float>({3, 0, 4}, 1600);
  auto r = test::random_tensor<float>({3, 5, 4}, 1601);
  for (const bool take_mean : {false, true}) {
    tensor<float, 3> out({3, 5, 4}), cpu({3, 5, 4});
    if (take_mean) {
      cuda::eval(out, r.view() + mean(e.view(), {0, 1}, keepdims), cuda::emulated);
      eval(cpu, r.view() + mean(e.view(), {0, 1}, keepdims));
      CHECK(std::isnan(out.data()[0]));
    } else {
      cuda::eval(out, r.view() + sum(e.view(), {0, 1}, keepdims), cuda::emulated);
      eval(cpu, r.view() + sum(e.view(), {0, 1}, keepdims));
      CHECK(same_bits(out, r));
    }
    CHECK(same_bits(out, cpu));
  }
}

TEST_CASE("cuda emulated rows: row nodes read through a reshape (group norm) run inside it, one launch") {
  for (index_t n : {index_t{1}, index_t{7}, index_t{17}}) {
    CAPTURE(n);
    const auto salt = 1700 + static_cast<std::uint64_t>(n);
    // Group norm as TVM's SimplifyInference writes it: NCHW reshaped to [N, G, C/G, H, W],
    // normalised over the last three axes, reshaped back, then scaled and shifted per channel.
    auto x = test::random_tensor<float>({2, 6, n, 5}, salt, -4, 4);
    auto gamma = test::random_tensor<float>({6, 1, 1}, salt + 1, 0.5, 1.5);
    auto beta = test::random_tensor<float>({6, 1, 1}, salt + 2, -1, 1);
    auto xr = reshape(x.view(), {2, 3, 2, n, 5});
    auto d = xr - mean(xr, {2, 3, 4}, keepdims);
    auto normalised = d / sqrt(mean(d * d, {2, 3, 4}, keepdims) + 1e-5f);
    check_rows(reshape(normalised, {2, 6, n, 5}) * gamma.view() + beta.view(), {1e-5, 1e-5}, 16, "group norm");
    check_rows(beta.view() + reshape(normalised, {2, 6, n, 5}), {1e-5, 1e-5}, 16, "the reshape second, beta first");
    // At the root: a softmax over each sample's every element; a reduction kept in its rank.
    check_rows(reshape(softmax(reshape(x.view(), {2, 30 * n}), -1), {2, 6, n, 5}), {1e-6, 1e-9}, 8,
               "softmax of a sample, reshaped back");
    check_rows(reshape(mean(xr, {2, 3, 4}, keepdims), {2, 3}), {1e-6, 1e-6}, 8, "a group's mean", "row_reduce");
    // A strided output whose axes still split as the reshape does: written in place of the view.
    tensor<float, 4> backing({5, n, 6, 2});
    auto out = transpose(backing.view(), {3, 2, 1, 0});
    cuda::eval(out, reshape(normalised, {2, 6, n, 5}) * gamma.view() + beta.view(), cuda::emulated);
    tensor<float, 4> same({2, 6, n, 5});
    cuda::eval(same, reshape(normalised, {2, 6, n, 5}) * gamma.view() + beta.view(), cuda::emulated);
    tensor<float, 4> got({2, 6, n, 5});
    eval(got, out);
    CHECK(same_bits(got, same));
    // What it does not take, by name: an output whose axes do not merge as the reshape's do,
    // reshapes of two inner shapes, a reshape broadcast to the output.
    CHECK_THROWS_AS(cuda::eval(out, reshape(softmax(reshape(x.view(), {2, 30 * n}), -1), {2, 6, n, 5}), cuda::emulated),
                    shape_error);
    CHECK_THROWS_AS(cuda::eval(same,
                               reshape(normalised, {2, 6, n, 5}) +
                                   reshape(softmax(reshape(x.view(), {2, 3, 2, 5, n}), -1), {2, 6, n, 5}),
                               cuda::emulated),
                    shape_error);
    auto x3 = reshape(x.view(), {2, 6, 5 * n});
    CHECK_THROWS_AS(cuda::eval(same, x.view() - reshape(mean(x3, -1, keepdims), {2, 6, 1, 1}), cuda::emulated),
                    shape_error);
  }
}

TEST_CASE("cuda emulated rows: a group of threads owns a group norm's whole group, in teams of a warp") {
  // Every phase walks the same block (a group's channels and pixels), so a group of threads owns
  // the block: its values computed once, every sub-row written. (Each output row computing the
  // whole group's statistics again ran a [2, 320, 64, 64] group norm 5.6x slower than three
  // kernels on an H100.) Blocks above 1024 elements are a block of threads', whose warps take the
  // short sub-rows in turn.
  for (const index_t n : {index_t{3}, index_t{33}}) {
    for (const index_t side : {index_t{5}, index_t{40}}) {
      CAPTURE(n);
      CAPTURE(side);
      const auto salt = 1800 + static_cast<std::uint64_t>(n * side);
      auto x = test::random_tensor<float>({2, 6, side, n}, salt, -4, 4);
      auto gamma = test::random_tensor<float>({6, 1, 1}, salt + 1, 0.5, 1.5);
      auto beta = test::random_tensor<float>({6, 1, 1}, salt + 2, -1, 1);
      auto xr = reshape(x.view(), {2, 3, 2, side, n});
      auto d = xr - mean(xr, {2, 3, 4}, keepdims);
      const auto group_norm =
          reshape(d / sqrt(mean(d * d, {2, 3, 4}, keepdims) + 1e-5f), {2, 6, side, n}) * gamma.view() + beta.view();
      // Against the tree's own double reference (its statistics computed once a group: the
      // reference's memo).
      check_rows(group_norm, {1e-5, 1e-5}, 16, "group norm");
      const index_t block = 2 * side * n;
      const auto threads = block > cuda::warp_row_limit ? cuda::row_long_threads : cuda::warp_size;
      tensor<float, 4> out({2, 6, side, n});
      cuda::launch_log log;
      cuda::eval(out, group_norm, cuda::emulated, cuda::log_to(log));
      REQUIRE(log.size() == 1);
      CHECK(log.launches[0].rows == 6);  // one a group
      CHECK(log.launches[0].config.block.x == (threads > cuda::row_block_threads ? threads : cuda::row_block_threads));
      // A group's mean at the root: the same block, the same teams.
      check_rows(reshape(mean(xr, {2, 3, 4}, keepdims), {2, 3}), {1e-6, 1e-6}, 8, "a group's mean", "row_reduce");
      // A phase that walks only the last axis keeps rows apart: every row of the output its own.
      const auto apart = x.view() - mean(x.view(), {1, 3}, keepdims) + softmax(x.view());
      check_rows(apart, {1e-6, 1e-6}, 8, "a block's mean beside a softmax");
      tensor<float, 4> rows_out({2, 6, side, n});
      cuda::launch_log rows_log;
      cuda::eval(rows_out, apart, cuda::emulated, cuda::log_to(rows_log));
      REQUIRE(rows_log.size() == 1);
      CHECK(rows_log.launches[0].rows == 2 * 6 * side);
    }
  }
}
