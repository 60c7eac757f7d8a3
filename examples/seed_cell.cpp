// The snippet of TVM issue #2890 ("Make Fusor to handle split gracefully"), at its exact shapes:
//
//   rnn_dim = 10
//   X = relay.var("X", shape=(1, rnn_dim))
//   W = relay.var("y", shape=(3 * rnn_dim, rnn_dim))
//   matmul = relay.nn.dense(X, W)
//   splitted = relay.split(matmul, indices_or_sections=3, axis=1)
//   out = relay.sigmoid(splitted[0]) + relay.tanh(splitted[1]) * relay.exp(splitted[2])
//
// TVM's FuseOps made three functions of it (dense; split; the gates). Here it is ONE
// fuse::eval: the product is computed block by block into a small buffer and the gate
// expression runs over that buffer at once (fuse/cpu/epilogue.hpp); the [1, 30] product is
// never written to memory as a tensor of its own. The fuse::eval_statistics that eval returns show it: one
// pass, one block, one product block (the 30 columns of this row at once, which the three
// split sections read), nothing evaluated whole.
//
// Run twice: with W as it is, and with W packed once (fuse::pack) as constant weights are in
// inference. Each result is checked against fuse::reference (the double-precision evaluation of
// the same expression); the program exits 1 when an error exceeds the tolerance.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include <fuse/fuse.hpp>
#include <fuse/reference.hpp>

namespace {

constexpr fuse::index_t rnn_dim = 10;

/// Evaluates `expr` into `out` with the counters reset, prints the result beside the reference
/// and the counters, and returns whether the error is within tolerance.
template <class Out, class Expr>
bool run(const char* title, Out& out, const Expr& expr) {
  // The whole cell: dense + split + sigmoid/tanh/exp + multiply/add.
  const fuse::eval_statistics st = fuse::eval(out, expr);

  const auto ref = fuse::reference(expr);  // fuse::tensor<double, 2>, same shape
  std::printf("%s\n", title);
  double max_err = 0;
  for (fuse::index_t j = 0; j < rnn_dim; ++j) {
    const double err = std::fabs(double(out(0, j)) - ref(0, j));
    max_err = std::max(max_err, err);
    std::printf("  out[0, %lld] = %+.7f   reference %+.9f   error %.1e\n", static_cast<long long>(j), double(out(0, j)),
                ref(0, j), err);
  }
  std::printf(
      "  eval_statistics: %zu pass, %zu block, %zu product blocks (all three gates at once), %zu evaluated whole, "
      "%zu through temporaries\n",
      st.passes, st.blocks, st.partial_leaves, st.whole_leaves, st.through_temporaries);
  // float32: a dot product of 10 terms and three transcendentals within a few ULP; |out| < 10
  // here, so 1e-5 absolute is a few ULP of the largest terms.
  const double tol = 1e-5;
  // One pass over one block; the three 10-column gates of the 30-column product are computed
  // by one product of all 30 columns for this row, which each gate reads its part of.
  const bool one_pass = st.passes == 1 && st.blocks == 1 && st.whole_leaves == 0 && st.partial_leaves == 1;
  std::printf("  max abs error %.2e (tolerance %.0e); %s\n\n", max_err, tol,
              one_pass ? "ONE pass: dense, split and gates fused" : "NOT one pass");
  return max_err <= tol && one_pass;
}

}  // namespace

int main() {
  // Static shapes, as in the Relay program: a K mismatch between X and W would not compile.
  fuse::tensor<float, fuse::fixed<1, rnn_dim>> X;
  fuse::tensor<float, fuse::fixed<3 * rnn_dim, rnn_dim>> W;
  fuse::tensor<float, fuse::fixed<1, rnn_dim>> out;
  std::mt19937 gen(2890);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float& v : X) v = d(gen);
  for (float& v : W) v = d(gen);

  // The expression, spelled as the issue spells it. Nothing is computed here.
  auto splitted = fuse::split<3>(fuse::dense(X, W), /*axis=*/1);  // three [1, 10] views of the product
  auto cell = fuse::sigmoid(splitted[0]) + fuse::tanh(splitted[1]) * fuse::exp(splitted[2]);

  std::printf(
      "TVM #2890's cell: X (1, %lld), W (%lld, %lld); out = sigmoid(s0) + tanh(s1) * exp(s2), "
      "s = split(dense(X, W), 3, axis=1)\n\n",
      static_cast<long long>(rnn_dim), static_cast<long long>(3 * rnn_dim), static_cast<long long>(rnn_dim));
  bool ok = run("fuse::eval(out, cell), W as it is:", out, cell);

  // Constant weights: packed once into the GEMM's panel layout and read in place by every call.
  // Wp owns its memory; the expression only views it.
  const auto Wp = fuse::pack(W);
  auto splitted_p = fuse::split<3>(fuse::dense(X, Wp), /*axis=*/1);
  auto cell_p = fuse::sigmoid(splitted_p[0]) + fuse::tanh(splitted_p[1]) * fuse::exp(splitted_p[2]);
  ok = run("fuse::eval(out, cell) with W packed once (fuse::pack):", out, cell_p) && ok;

  std::printf(ok ? "OK\n" : "FAILED\n");
  return ok ? 0 : 1;
}
