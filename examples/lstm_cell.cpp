// Hand-written inference of an LSTM over a sequence, one fused pass per step.
//
//   gates = [x_t, h] W^T + b                      (W: [4H, I+H], PyTorch's gate order i, f, g, o)
//   i, f, g, o = split(gates, 4, axis=1)
//   c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
//   h' = sigmoid(o) * tanh(c')
//
// Each step is ONE fuse::eval with two outputs: the dense, the split, the bias and every gate
// op run as one blocked pass (the product blocks are computed into a cache-sized
// buffer and consumed at once; the [batch, 4H] gates never reach memory). W is packed once
// (fuse::pack) and reused by every step. h and c are updated in place.
//
// The final h is checked against a plain double-precision loop written below; the program
// exits 1 when the error exceeds the tolerance.
//
//   usage: lstm_cell [batch=4] [input=256] [hidden=256] [steps=20] [tolerance]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <tuple>
#include <vector>

#include <fuse/fuse.hpp>

#include "cell_example.hpp"

namespace {

using fuse::index_t;

using example::positive_arg;
using example::sigmoid;

/// The reference: the same T steps in double precision, written out as plain loops.
/// Returns the final h, [batch * hidden] row-major.
std::vector<double> reference_lstm(const fuse::tensor<float, 3>& xs, const fuse::tensor<float, 2>& w,
                                   const fuse::tensor<float, 1>& b, index_t batch, index_t input, index_t hidden,
                                   index_t steps) {
  std::vector<double> h(static_cast<std::size_t>(batch * hidden), 0.0), c(h.size(), 0.0), gates(4 * h.size());
  for (index_t t = 0; t < steps; ++t) {
    for (index_t bi = 0; bi < batch; ++bi)
      for (index_t n = 0; n < 4 * hidden; ++n) {
        double s = b(n);
        for (index_t k = 0; k < input; ++k) s += double(xs(t, bi, k)) * double(w(n, k));
        for (index_t k = 0; k < hidden; ++k) s += h[bi * hidden + k] * double(w(n, input + k));
        gates[bi * 4 * hidden + n] = s;
      }
    for (index_t bi = 0; bi < batch; ++bi)
      for (index_t j = 0; j < hidden; ++j) {
        const double* g = &gates[bi * 4 * hidden];
        const double ig = sigmoid(g[j]), fg = sigmoid(g[hidden + j]);
        const double gg = std::tanh(g[2 * hidden + j]), og = sigmoid(g[3 * hidden + j]);
        double& cc = c[bi * hidden + j];
        cc = fg * cc + ig * gg;
        h[bi * hidden + j] = og * std::tanh(cc);
      }
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  const index_t batch = positive_arg(argc, argv, 1, 4), input = positive_arg(argc, argv, 2, 256);
  const index_t hidden = positive_arg(argc, argv, 3, 256), steps = positive_arg(argc, argv, 4, 20);
  const index_t k = input + hidden;  // the reduction length of the gate product
  // A float32 sum of k products is off by at most about k units of float's last place of the
  // sum of |products|, which is O(1) here; the default leaves room for that.
  const double tol = argc > 5 ? std::atof(argv[5]) : 1e-6 * static_cast<double>(k + 1);

  // ---- the model's parameters and the input sequence ------------------------------------------
  // W holds [W_ih | W_hh] side by side, one row per gate unit (rows i, then f, g, o), so that a
  // single dense over [x_t, h] computes all four gates; b is b_ih + b_hh. PyTorch's init range.
  fuse::tensor<float, 2> w({4 * hidden, k});
  fuse::tensor<float, 1> b({4 * hidden});
  fuse::tensor<float, 3> xs({steps, batch, input});  // x_0 .. x_{T-1}, each [batch, input]
  std::mt19937 gen(42);
  const float range = 1.0f / std::sqrt(static_cast<float>(hidden));
  std::uniform_real_distribution<float> wd(-range, range), xd(-1.0f, 1.0f);
  for (float& v : w) v = wd(gen);
  for (float& v : b) v = wd(gen);
  for (float& v : xs) v = xd(gen);

  // Packed once into the GEMM's panel layout, reused by every step: no per-call repacking or
  // transposing of the 4H x (I+H) weights. Wp owns its memory and must outlive the expressions.
  const auto wp = fuse::pack(w);

  // ---- the state, updated in place ------------------------------------------------------------
  fuse::tensor<float, 2> h({batch, hidden}), c({batch, hidden});  // zero-initialised

  // One step: builds the expression (cheap: no allocation, nothing computed) and evaluates it.
  fuse::eval_statistics counts;  // what the steps' evals did, summed
  const auto step = [&](index_t t) {
    // x_t: a view into the sequence, no copy.
    const auto x_t = fuse::view(xs.data() + t * batch * input, {batch, input});
    // [x_t, h] as one operand of the dense. An expression operand of a contraction is
    // evaluated once, before the pass writes anything: that is what makes updating h in place
    // safe (and it costs one small copy of [batch, I+H] per step).
    auto xh = fuse::concatenate(std::make_tuple(x_t, h.view()), /*axis=*/1);
    // The four gate sections of the product: views, not copies.
    auto g = fuse::split<4>(fuse::bias_add(fuse::dense(xh, wp), b), /*axis=*/1);
    // c' reads c element for element, so writing c in the same pass is an in-place update.
    auto c_next = fuse::sigmoid(g[1]) * c + fuse::sigmoid(g[0]) * fuse::tanh(g[2]);
    auto h_next = fuse::sigmoid(g[3]) * fuse::tanh(c_next);
    // Both outputs in one pass; each element of h' and c' is computed before either is stored.
    counts += fuse::eval(fuse::outputs(h, c), h_next, c_next);
  };
  const auto run_sequence = [&] {
    h.fill(0.0f);
    c.fill(0.0f);
    for (index_t t = 0; t < steps; ++t) step(t);
  };

  // ---- proof that a step is one pass ------------------------------------------------------------
  counts = {};
  run_sequence();
  const fuse::eval_statistics st = counts;
  std::printf("LSTM cell: batch %lld, input %lld, hidden %lld, %lld steps (W: [%lld, %lld], packed)\n",
              static_cast<long long>(batch), static_cast<long long>(input), static_cast<long long>(hidden),
              static_cast<long long>(steps), static_cast<long long>(4 * hidden), static_cast<long long>(k));
  std::printf(
      "  per step: %.0f blocked pass, %.1f blocks, %.1f product blocks, %zu whole "
      "evaluations, %zu passes through temporaries\n",
      double(st.passes) / double(steps), double(st.blocks) / double(steps), double(st.partial_leaves) / double(steps),
      st.whole_leaves, st.through_temporaries);

  // ---- check against the double-precision loop, then time ----------------------------------------
  const auto ref = reference_lstm(xs, w, b, batch, input, hidden, steps);
  return example::check_and_time(h, ref, tol, run_sequence, steps);
}
