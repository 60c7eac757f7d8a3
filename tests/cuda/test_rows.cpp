// Row programs on the CUDA emulator: trees holding reductions over the last axis, softmax,
// log_softmax and layer_norm, each ONE launch of the row kernel (a warp a row up to 1024
// elements, a block a row above), under every thread order, against the double reference and
// against the CPU executor.
#include "cuda/rows_check.hpp"

using namespace fuse;
using namespace fuse::test::rows;
using fuse::test::expect_matches;
using fuse::test::tolerance;

TEST_CASE("cuda emulated rows: softmax and log_softmax, a warp a row and a block a row, float, double, half") {
  for (index_t n : {index_t{1}, index_t{7}, index_t{33}, index_t{383}, index_t{1023}, index_t{1025}, index_t{3001}}) {
    CAPTURE(n);
    auto x = test::random_tensor<float>({3, 4, n}, 100 + static_cast<std::uint64_t>(n), -8, 8);
    check_rows(softmax(x.view()), {1e-6, 1e-7}, 4, "softmax");
    check_rows(log_softmax(x.view()), {1e-6, 1e-6}, 4, "log_softmax");
    // A scaled, masked tree under softmax, a requantize to int8 above it: one kernel.
    // (an attention mask: 0 where a key is kept, -10000 where it is masked; the first is kept)
    auto mask = test::random_tensor<float>({1, 1, n}, 7, 0, 1);
    for (index_t j = 0; j < n; ++j) mask(0, 0, j) = j > 0 && mask(0, 0, j) < 0.3f ? -10000.0f : 0.0f;
    auto scores = softmax(x.view() * 0.125f + mask.view());
    check_rows(scores, {1e-6, 1e-7}, 4, "masked softmax");
    check_rows(cast<std::int8_t>(clip(round(scores * 127.0f), -128.0, 127.0)), {0, 1}, 0, "requantized softmax");
    auto xd = test::random_tensor<double>({2, n}, 200 + static_cast<std::uint64_t>(n), -30, 30);
    check_rows(softmax(xd.view()), {1e-14, 1e-300}, 64, "softmax double");
    auto xh = test::random_tensor<half>({2, n}, 300 + static_cast<std::uint64_t>(n), -4, 4);
    check_rows(softmax(xh.view()), {2e-3, 1e-7}, 1, "softmax half");
  }
}

TEST_CASE("cuda emulated rows: layer_norm, residual + layer_norm, TVM's decomposed layer norm, x - mean") {
  for (index_t n : {index_t{1}, index_t{7}, index_t{64}, index_t{768}, index_t{1025}, index_t{3072}}) {
    CAPTURE(n);
    const auto salt = 400 + static_cast<std::uint64_t>(n);
    auto [x, res, gamma, beta] = random_norm_operands(5, n, salt, 3);
    // layer norm's tolerance: the variance of a row of near-equal values amplifies rounding.
    const tolerance ln{1e-5, 1e-5};
    check_rows(layer_norm(x.view(), gamma.view(), beta.view()), ln, 8, "layer_norm");
    check_rows(layer_norm(x.view() + res.view(), gamma.view(), beta.view(), -1, 1e-12), ln, 8, "residual + layer_norm");
    check_rows(layer_norm(x.view(), gamma.view(), beta.view(), -1, 1e-5, false, false), ln, 8, "no scale, no center");
    // The decomposed form TVM's SimplifyInference writes: mean, variance, add, sqrt, divide,
    // multiply, add.
    auto m = mean(x.view(), -1, keepdims);
    auto d = x.view() - m;
    auto var = mean(d * d, -1, keepdims);
    const auto fused = layer_norm(x.view(), gamma.view(), beta.view());
    check_rows(d / sqrt(var + 1e-5f) * gamma.view() + beta.view(), ln, 8, "decomposed layer norm", "row", &fused);
    check_rows(x.view() - mean(x.view(), -1, keepdims), {1e-6, 1e-6}, 4, "x - mean(x)");
    // A reduction without keepdims, broadcast back by expand_dims.
    check_rows(x.view() / expand_dims(max(abs(x.view()), -1), 1), {1e-6, 1e-7}, 2, "x / max |x|");
  }
}

TEST_CASE("cuda emulated rows: reductions at the root over trees with row nodes; several outputs; in place") {
  auto x = test::random_tensor<float>({6, 300}, 11, -5, 5);
  // The variance at the root: one row_reduce launch holding the mean's phase.
  auto d = x.view() - mean(x.view(), -1, keepdims);
  check_rows(mean(d * d, -1), {1e-6, 1e-6}, 8, "variance", "row_reduce");
  check_rows(sum(softmax(x.view()), -1, keepdims), {1e-6, 1e-6}, 8, "sum of softmax", "row_reduce");
  check_rows(max(x.view() - max(x.view(), -1, keepdims), -1), {}, 0, "max of x - max", "row_reduce");

  // Two outputs in one kernel, each with its own row nodes.
  auto gamma = test::random_tensor<float>({300}, 12, 0.5, 1.5);
  auto beta = test::random_tensor<float>({300}, 13, -1, 1);
  tensor<float, 2> a({6, 300}), b({6, 300});
  cuda::launch_log log;
  cuda::eval(outputs(a, b), softmax(x.view()), layer_norm(x.view(), gamma.view(), beta.view()), cuda::emulated,
             cuda::log_to(log));
  CHECK(log.size() == 1);
  expect_matches(a, reference(softmax(x.view())), {1e-6, 1e-7}, 4, "softmax of two outputs");
  expect_matches(b, reference(layer_norm(x.view(), gamma.view(), beta.view())), {1e-5, 1e-5}, 8,
                 "layer_norm of two outputs");

  // In place: a group reads its whole row before writing it.
  tensor<float, 2> y = x;
  cuda::eval(y, softmax(y.view()), cuda::emulated(cuda::schedule::shuffled));
  expect_matches(y, reference(softmax(x.view())), {1e-6, 1e-7}, 4, "softmax in place");

  // A rank-0 output of a tree with a reduction inside: one row of one element.
  auto v = test::random_tensor<float>({77}, 14, -1, 1);
  tensor<float, 0> s;
  cuda::eval(s, sum(v.view()) * 2.0f + 1.0f, cuda::emulated);
  expect_matches(s, reference(sum(v.view()) * 2.0f + 1.0f), {1e-6, 1e-6}, 2, "rank 0");
}

TEST_CASE("cuda emulated rows: a warp a row up to 1024 elements, a block a row above; empty rows") {
  auto small = test::random_tensor<float>({4, 1024}, 21);
  auto large = test::random_tensor<float>({4, 1025}, 22);
  auto one = test::random_tensor<float>({3, 1}, 23);
  cuda::launch_log log;
  tensor<float, 2> o1({4, 1024}), o2({4, 1025});
  cuda::eval(o1, softmax(small.view()), cuda::emulated, cuda::log_to(log));
  cuda::eval(o2, softmax(large.view()), cuda::emulated, cuda::log_to(log));
  REQUIRE(log.size() == 2);
  CHECK(log.launches[0].config.grid.x == 1);  // 4 rows, 8 warps a block: one block
  CHECK(log.launches[1].config.grid.x == 4);  // a block a row
  check_rows(softmax(one.view()), {}, 0, "rows of one element");
  // A phase's row longer than the output's: sum over 3000 elements broadcast into 10.
  auto wide = test::random_tensor<float>({4, 3000}, 24, -1, 1);
  auto narrow = test::random_tensor<float>({4, 10}, 25, -1, 1);
  check_rows(narrow.view() + sum(wide.view(), -1, keepdims), {1e-6, 1e-6}, 4, "long phase, short output");
  // Empty: no rows (no launch); rows of no element (sum over them: 0, written).
  tensor<float, 2> none({0, 5});
  check_rows(softmax(none.view()), {}, 0, "no rows");
  tensor<float, 2> empty_rows({3, 0});
  tensor<float, 2> r({3, 4});
  auto q = test::random_tensor<float>({3, 4}, 26);
  cuda::eval(r, q.view() + sum(empty_rows.view(), -1, keepdims), cuda::emulated);
  expect_matches(r, q, {}, 0, "plus an empty sum");
}

TEST_CASE("cuda emulated rows: a row node met twice is computed once (TVM's decomposed layer norm)") {
  auto x = test::random_tensor<float>({5, 96}, 801, -3, 3);
  auto gamma = test::random_tensor<float>({96}, 802, 0.5, 1.5);
  auto beta = test::random_tensor<float>({96}, 803, -1, 1);
  // The passes over each row a launch made (phases computed, then the output).
  auto passes = [](const auto& e) {
    tensor<float, 2> out(e.shape().array());
    cuda::launch_log log;
    cuda::eval(out, e, cuda::emulated, cuda::log_to(log));
    REQUIRE(log.size() == 1);
    return log.launches[0].row_passes;
  };
  const auto m = mean(x.view(), -1, keepdims);
  const auto d = x.view() - m;
  const auto decomposed = d / sqrt(mean(d * d, -1, keepdims) + 1e-5f) * gamma.view() + beta.view();
  CHECK(passes(decomposed) == 3);  // mean, variance, output: mean(x), met twice, computed once
  CHECK(passes(layer_norm(x.view(), gamma.view(), beta.view())) == 3);
  CHECK(passes(softmax(x.view()) + softmax(x.view())) == 3);
  CHECK(passes(x.view() - m) == 2);
  // Equal nodes over other data, or other rows, are not one: both computed.
  auto y = test::random_tensor<float>({5, 96}, 804, -3, 3);
  CHECK(passes(softmax(x.view()) + softmax(y.view())) == 5);
  CHECK(passes(x.view() - mean(x.view(), -1, keepdims) + mean(x.view() * 2.0f, -1, keepdims)) == 3);
  const auto fused = layer_norm(x.view(), gamma.view(), beta.view());
  check_rows(decomposed, {1e-5, 1e-5}, 8, "decomposed layer norm, its mean once", "row", &fused);
  check_rows(softmax(x.view()) * 0.5f + softmax(x.view()) * 0.5f, {1e-6, 1e-7}, 4, "a softmax twice");
}

TEST_CASE("cuda emulated rows: reductions at the root over any axes: blocks of sub-rows, columns a thread each") {
  for (index_t n : {index_t{1}, index_t{7}, index_t{33}, index_t{300}}) {
    CAPTURE(n);
    auto x = test::random_tensor<float>({3, 5, n}, 500 + static_cast<std::uint64_t>(n), -2, 2);
    const tolerance t{1e-6, 1e-6};
    // The last axis kept: a column reduction, a thread an output.
    check_rows(sum(x.view(), 0), t, 2, "sum over the first axis", "row_reduce");
    check_rows(mean(x.view(), {0, 1}, keepdims), t, 2, "mean over the first two, keepdims", "row_reduce");
    check_rows(max(x.view(), 1), {}, 0, "max over the middle axis", "row_reduce");
    // The last axis among the reduced ones: a group walks the block's sub-rows.
    check_rows(sum(x.view(), {0, 2}), t, 2, "sum over the first and last", "row_reduce");
    check_rows(min(x.view(), {1}, exclude), {}, 0, "min over all but the middle", "row_reduce");
    check_rows(prod(x.view() * 0.25f + 1.0f, {0, 2}, keepdims), {1e-5, 1e-6}, 4, "prod keepdims", "row_reduce");
    check_rows(mean(x.view()), t, 2, "mean over every axis", "row_reduce");
    // Over a transposed, strided view and a fused tree.
    auto y = transpose(strided_slice(x.view(), {0, 0, 0}, {3, 5, n}, {1, 2, 1}), {2, 0, 1});
    check_rows(sum(exp(y), {1, 2}), t, 2, "sum of exp over a transposed view", "row_reduce");
    auto xi = test::random_tensor<std::int8_t>({4, 6, n}, 600 + static_cast<std::uint64_t>(n), -100, 100);
    check_rows(sum(xi.view(), 1), {}, 0, "int8 sum over the middle (wraps)", "row_reduce");
    check_rows(max(xi.view(), {0, 2}), {}, 0, "int8 max", "row_reduce");
  }
  // Rank 4: NCHW's global average pool (a block of 17 x 19 a warp), and a block over 1024 (a
  // block of threads an output).
  auto img = test::random_tensor<float>({2, 3, 17, 19}, 700, -1, 1);
  check_rows(mean(img.view(), {2, 3}, keepdims), {1e-6, 1e-6}, 2, "global average pool", "row_reduce");
  auto big = test::random_tensor<float>({2, 40, 3, 30}, 701, -1, 1);
  check_rows(sum(big.view(), {1, 3}), {1e-6, 1e-6}, 2, "a block of 1200", "row_reduce");
  // Empty reduced axes: the identity.
  tensor<float, 3> hollow({3, 0, 4});
  check_rows(sum(hollow.view(), {0, 1}), {}, 0, "over an empty axis", "row_reduce");
  check_rows(max(hollow.view(), 1), {}, 0, "max over an empty axis", "row_reduce");
  // Row nodes under a reduction over other axes: one kernel where they stay fixed along the axes
  // it walks (the variance of each column of a block about the block's mean).
  for (index_t n : {index_t{1}, index_t{9}, index_t{40}}) {
    auto v = test::random_tensor<float>({3, 5, n}, 710 + static_cast<std::uint64_t>(n), -2, 2);
    const auto d = v.view() - mean(v.view(), {0, 1}, keepdims);
    check_rows(sum(d * d, {0, 1}), {1e-5, 1e-6}, 16, "sum of squares about the block mean", "row_reduce");
    check_rows(max(v.view() - mean(v.view(), {0, 2}, keepdims), {0, 2}), {1e-6, 1e-6}, 4,
               "max of x less its block's mean", "row_reduce");
  }
  // Not where they move along those axes: each element's block would need other values of them.
  auto z = test::random_tensor<float>({6, 40}, 702);
  tensor<float, 1> cols({40});
  CHECK_THROWS_WITH_AS(cuda::eval(cols, sum(softmax(z.view()), 0), cuda::emulated),
                       doctest::Contains("rows across the reduced axis"), error);
  auto w = test::random_tensor<float>({3, 5, 7}, 703);
  tensor<float, 1> w7({7});
  CHECK_THROWS_WITH_AS(cuda::eval(w7, sum(w.view() - mean(w.view(), 1, keepdims), {0, 1}), cuda::emulated),
                       doctest::Contains("move along the axes that reduction walks"), error);
}

TEST_CASE("cuda emulated rows: NaN, infinities and huge values give what the CPU executor gives") {
  tensor<float, 2> x({6, 40});
  auto g = test::rng(31);
  test::fill(x.view(), g, -3, 3);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  x(0, 3) = nan;                                      // a NaN row: all NaN
  x(1, 5) = inf;                                      // +inf: NaN where x = inf (inf - inf)
  for (index_t j = 0; j < 40; ++j) x(2, j) = -inf;    // all -inf
  x(3, 7) = -inf;                                     // one -inf: probability 0
  x(4, 0) = 3e38f, x(4, 1) = -3e38f;                  // huge
  for (index_t j = 0; j < 40; ++j) x(5, j) = 1e-40f;  // subnormal, equal
  auto gamma = test::random_tensor<float>({40}, 32, 0.5, 1.5);
  auto beta = test::random_tensor<float>({40}, 33, -1, 1);
  auto sm = softmax(x.view());
  auto lsm = log_softmax(x.view());
  auto ln = layer_norm(x.view(), gamma.view(), beta.view());
  tensor<float, 2> cpu({6, 40});
  fuse::eval(cpu, sm);
  // The CPU and the GPU sum in different orders: equal where a value is special, close elsewhere.
  expect_matches(run_rows<float>(sm), cpu, {1e-6, 1e-7}, 4, "softmax edges vs CPU");
  fuse::eval(cpu, lsm);
  expect_matches(run_rows<float>(lsm), cpu, {1e-6, 1e-6}, 4, "log_softmax edges vs CPU");
  fuse::eval(cpu, ln);
  expect_matches(run_rows<float>(ln), cpu, {1e-5, 1e-5}, 8, "layer_norm edges vs CPU");
  CHECK(std::isnan(run_rows<float>(sm)(0, 0)));
  CHECK(run_rows<float>(sm)(3, 7) == 0.0f);
}

TEST_CASE("cuda emulated rows: softmax, log_softmax and layer_norm at the root along any axis; strided outputs") {
  for (index_t n : {index_t{1}, index_t{7}, index_t{40}, index_t{1100}}) {
    CAPTURE(n);
    const auto salt = 900 + static_cast<std::uint64_t>(n);
    auto x = test::random_tensor<float>({3, n, 5}, salt, -6, 6);
    check_rows(softmax(x.view(), 1), {1e-6, 1e-7}, 4, "softmax along the middle axis");
    check_rows(softmax(x.view() * 0.5f + 1.0f, 0), {1e-6, 1e-7}, 4, "softmax of a tree along the first axis");
    check_rows(log_softmax(x.view(), -2), {1e-6, 1e-6}, 4, "log_softmax along axis -2");
    auto gamma = test::random_tensor<float>({n}, salt + 1, 0.5, 1.5);
    auto beta = test::random_tensor<float>({n}, salt + 2, -1, 1);
    check_rows(layer_norm(x.view(), gamma.view(), beta.view(), 1), {1e-5, 1e-5}, 8, "layer_norm along axis 1");
    // Into a strided (transposed) output: the same values.
    auto xt = test::random_tensor<double>({n, 4}, salt + 3, -20, 20);
    tensor<double, 2> back({4, n});
    cuda::launch_log log;
    cuda::eval(transpose(back.view(), {1, 0}), softmax(xt.view(), 0), cuda::emulated(cuda::schedule::shuffled),
               cuda::log_to(log));
    CHECK(log.size() == 1);
    expect_matches(back, reference(transpose(softmax(xt.view(), 0), {1, 0})), {1e-14, 1e-300}, 64,
                   "softmax along axis 0 into a transposed output");
  }
}

TEST_CASE("cuda emulated rows: row nodes along any axis inside trees, the iteration's last axis another one") {
  for (index_t n : {index_t{1}, index_t{7}, index_t{300}, index_t{1500}}) {
    CAPTURE(n);
    const auto salt = 1300 + static_cast<std::uint64_t>(n);
    auto x = test::random_tensor<float>({n, 37}, salt, -4, 4);
    // Column statistics: a thread a column once there are columns enough, else a group.
    check_rows(x.view() - mean(x.view(), 0, keepdims), {1e-6, 1e-6}, 4, "x - mean(x, 0)");
    check_rows(x.view() / max(abs(x.view()), 0), {1e-6, 1e-7}, 2, "x / max |x| over axis 0, broadcast");
    check_rows(softmax(x.view(), 0) * 2.0f + 1.0f, {1e-6, 1e-7}, 4, "softmax along axis 0 in a tree");
    auto g = test::random_tensor<float>({n}, salt + 1, 0.5, 1.5);
    auto b = test::random_tensor<float>({n}, salt + 2, -1, 1);
    check_rows(exp(layer_norm(x.view(), g.view(), b.view(), 0) * 0.5f), {1e-5, 1e-5}, 8, "layer_norm along axis 0");
    // The middle axis of rank 3, and a transposed softmax (its rows along the output's first axis).
    auto y = test::random_tensor<double>({3, n, 5}, salt + 3, -9, 9);
    check_rows(y.view() - sum(y.view(), 1, keepdims) / static_cast<double>(n), {1e-13, 1e-13}, 64, "y - mean(y, 1)");
    auto t = test::random_tensor<float>({37, n}, salt + 4, -4, 4);
    check_rows(transpose(softmax(t.view())) + x.view(), {1e-6, 1e-7}, 4, "transpose(softmax(t)) + x");
    // Several outputs, one of them without row nodes, into a strided output.
    tensor<float, 2> a({n, 37});
    tensor<float, 2> wide({n, 74});
    auto half_of = strided_slice(wide.view(), {0, 0}, {n, 74}, {1, 2});
    cuda::launch_log log;
    cuda::eval(outputs(a, half_of), x.view() - mean(x.view(), 0, keepdims), x.view() * 2.0f,
               cuda::emulated(cuda::schedule::shuffled), cuda::log_to(log));
    CHECK(log.size() == 1);
    expect_matches(a, reference(x.view() - mean(x.view(), 0, keepdims)), {1e-6, 1e-6}, 4, "first output");
    expect_matches(materialize(half_of), reference(x.view() * 2.0f), {0, 0}, 0, "second output");
  }
  // Columns enough (1100) for a thread a column.
  for (index_t n : {index_t{7}, index_t{64}}) {
    auto x = test::random_tensor<float>({n, 1100}, 1400 + static_cast<std::uint64_t>(n), -4, 4);
    check_rows(x.view() - mean(x.view(), 0, keepdims), {1e-6, 1e-6}, 4, "x - mean(x, 0), 1100 columns");
    check_rows(log_softmax(x.view(), 0), {1e-6, 1e-6}, 4, "log_softmax along axis 0, 1100 columns");
  }
}

TEST_CASE("cuda emulated rows: what does not run is an error") {
  auto x = test::random_tensor<float>({6, 40}, 41);
  tensor<float, 2> out({6, 40}), t({40, 6});
  // Row nodes whose rows lie along different axes of the output: no order of the iteration
  // keeps both apart.
  CHECK_THROWS_WITH_AS(
      cuda::eval(out, mean(x.view(), 0, keepdims) + mean(x.view(), 1, keepdims) * x.view(), cuda::emulated),
      doctest::Contains("no order of the iteration"), error);
  CHECK_THROWS_WITH_AS(cuda::eval(out, softmax(x.view(), 0) * softmax(x.view(), 1), cuda::emulated),
                       doctest::Contains("no order of the iteration"), error);
  // A reduction over three axes into a rank-2 output whose kept axis takes one of its two
  // coordinates: none is left for its sub-rows.
  tensor<float, 4> y4({5, 2, 3, 40});
  tensor<float, 2> out2({6, 5});
  CHECK_THROWS_WITH_AS(
      cuda::eval(out2, test::random_tensor<float>({6, 5}, 42).view() + mean(y4.view(), {1, 2, 3}), cuda::emulated),
      doctest::Contains("needs as many output axes"), error);
  // A softmax, inside a reduction over two axes, whose rows move along one of them.
  tensor<float, 3> y3({2, 6, 40});
  CHECK_THROWS_WITH_AS(cuda::eval(y3, y3.view() - mean(softmax(y3.view(), 2), {1, 2}, keepdims), cuda::emulated),
                       doctest::Contains("inside a reduction over several axes"), error);
  // A root reduction of a tree whose row node's rows run across its reduced axis.
  tensor<float, 1> r6({6});
  CHECK_THROWS_WITH_AS(cuda::eval(r6, sum(transpose(softmax(t.view())), -1), cuda::emulated),
                       doctest::Contains("rows across the reduced axis"), error);
  // More than 8 values a row: five softmaxes.
  auto s = softmax(x.view());
  CHECK_THROWS_WITH_AS(
      cuda::eval(out, softmax(x.view() + 1.0f) + softmax(x.view() + 2.0f) + s + softmax(s) + softmax(s * 2.0f),
                 cuda::emulated),
      doctest::Contains("more than 8 values"), error);
  // An output that another group's row reads: rows 0..4 = softmax of rows 1..5 of the same memory.
  tensor<float, 2> y = x;
  CHECK_THROWS_AS(cuda::eval(strided_slice(y.view(), {0, 0}, {5, 40}, {1, 1}),
                             softmax(strided_slice(y.view(), {1, 0}, {6, 40}, {1, 1})), cuda::emulated),
                  memory_error);
  // The root reduction's output inside what it reads.
  tensor<float, 2> z({6, 40});
  CHECK_THROWS_AS(
      cuda::eval(strided_slice(z.view(), {0, 0}, {6, 1}, {1, 1}), sum(z.view(), -1, keepdims), cuda::emulated),
      memory_error);
}
