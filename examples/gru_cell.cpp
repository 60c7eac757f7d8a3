// Hand-written inference of a GRU over a sequence, one fused pass per step (PyTorch's
// convention, gate order r, z, n):
//
//   gi = x_t W_ih^T + b_ih          W_ih: [3H, I]
//   gh = h   W_hh^T + b_hh          W_hh: [3H, H]
//   r  = sigmoid(gi_r + gh_r)
//   z  = sigmoid(gi_z + gh_z)
//   n  = tanh(gi_n + r * gh_n)
//   h' = (1 - z) * n + z * h
//
// Each step is ONE fuse::eval: two products with different reduction lengths (I and H) and the
// six gate sections they are split into are computed block by block and consumed at once by the
// gate expression; neither [batch, 3H] product reaches memory. Both weights are packed once and
// reused by every step, and h is updated in place.
//
// The final h is checked against a plain double-precision loop written below; the program
// exits 1 when the error exceeds the tolerance.
//
//   usage: gru_cell [batch=4] [input=256] [hidden=256] [steps=20] [tolerance]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <fuse/fuse.hpp>

#include "cell_example.hpp"

namespace {

using fuse::index_t;

using example::positive_arg;
using example::sigmoid;

/// The reference: the same T steps in double precision, written out as plain loops.
/// Returns the final h, [batch * hidden] row-major.
std::vector<double> reference_gru(const fuse::tensor<float, 3>& xs, const fuse::tensor<float, 2>& w_ih,
                                  const fuse::tensor<float, 2>& w_hh, const fuse::tensor<float, 1>& b_ih,
                                  const fuse::tensor<float, 1>& b_hh, index_t batch, index_t input, index_t hidden,
                                  index_t steps) {
  const auto H = static_cast<std::size_t>(hidden);
  std::vector<double> h(static_cast<std::size_t>(batch) * H, 0.0), gi(3 * H), gh(3 * H);
  for (index_t t = 0; t < steps; ++t) {
    std::vector<double> h_next(h.size());
    for (index_t bi = 0; bi < batch; ++bi) {
      for (index_t n = 0; n < 3 * hidden; ++n) {
        double si = b_ih(n), sh = b_hh(n);
        for (index_t k = 0; k < input; ++k) si += double(xs(t, bi, k)) * double(w_ih(n, k));
        for (index_t k = 0; k < hidden; ++k) sh += h[bi * H + k] * double(w_hh(n, k));
        gi[n] = si;
        gh[n] = sh;
      }
      for (std::size_t j = 0; j < H; ++j) {
        const double r = sigmoid(gi[j] + gh[j]);
        const double z = sigmoid(gi[H + j] + gh[H + j]);
        const double n = std::tanh(gi[2 * H + j] + r * gh[2 * H + j]);
        h_next[bi * H + j] = (1.0 - z) * n + z * h[bi * H + j];
      }
    }
    h = h_next;
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  const index_t batch = positive_arg(argc, argv, 1, 4), input = positive_arg(argc, argv, 2, 256);
  const index_t hidden = positive_arg(argc, argv, 3, 256), steps = positive_arg(argc, argv, 4, 20);
  // A float32 sum of k products is off by at most about k units of float's last place of the
  // sum of |products|, which is O(1) here; the default leaves room for that.
  const double tol = argc > 5 ? std::atof(argv[5]) : 1e-6 * static_cast<double>(std::max(input, hidden) + 1);

  // ---- the model's parameters and the input sequence ------------------------------------------
  // PyTorch's layout (rows r, then z, n) and init range.
  fuse::tensor<float, 2> w_ih({3 * hidden, input}), w_hh({3 * hidden, hidden});
  fuse::tensor<float, 1> b_ih({3 * hidden}), b_hh({3 * hidden});
  fuse::tensor<float, 3> xs({steps, batch, input});  // x_0 .. x_{T-1}, each [batch, input]
  std::mt19937 gen(42);
  const float range = 1.0f / std::sqrt(static_cast<float>(hidden));
  std::uniform_real_distribution<float> wd(-range, range), xd(-1.0f, 1.0f);
  for (auto* t : {&w_ih, &w_hh})
    for (float& v : *t) v = wd(gen);
  for (auto* t : {&b_ih, &b_hh})
    for (float& v : *t) v = wd(gen);
  for (float& v : xs) v = xd(gen);

  // Both weights packed once into the GEMM's panel layout and reused by every step. They own
  // their memory and must outlive the expressions that read them.
  const auto w_ih_p = fuse::pack(w_ih);
  const auto w_hh_p = fuse::pack(w_hh);

  // ---- the state, updated in place ------------------------------------------------------------
  fuse::tensor<float, 2> h({batch, hidden});  // zero-initialised

  fuse::eval_statistics counts;  // what the steps' evals did, summed
  const auto step = [&](index_t t) {
    // x_t: a view into the sequence, no copy.
    const auto x_t = fuse::view(xs.data() + t * batch * input, {batch, input});
    // The two products, each split into its three gate sections (views, not copies). h is
    // read in place by the second product; since h is also the output, the pass copies it
    // once before the first block writes (later blocks still need the old h).
    auto gi = fuse::split<3>(fuse::bias_add(fuse::dense(x_t, w_ih_p), b_ih), /*axis=*/1);
    auto gh = fuse::split<3>(fuse::bias_add(fuse::dense(h, w_hh_p), b_hh), /*axis=*/1);
    // The gates: plain elementwise expressions over the six sections.
    auto r = fuse::sigmoid(gi[0] + gh[0]);
    auto z = fuse::sigmoid(gi[1] + gh[1]);
    auto n = fuse::tanh(gi[2] + r * gh[2]);
    // h' reads h element for element (z * h): writing h in the same pass is in place.
    counts += fuse::eval(h, (1.0f - z) * n + z * h);
  };
  const auto run_sequence = [&] {
    h.fill(0.0f);
    for (index_t t = 0; t < steps; ++t) step(t);
  };

  // ---- proof that a step is one pass ------------------------------------------------------------
  counts = {};
  run_sequence();
  const fuse::eval_statistics st = counts;
  std::printf(
      "GRU cell: batch %lld, input %lld, hidden %lld, %lld steps "
      "(W_ih: [%lld, %lld], W_hh: [%lld, %lld], packed)\n",
      static_cast<long long>(batch), static_cast<long long>(input), static_cast<long long>(hidden),
      static_cast<long long>(steps), static_cast<long long>(3 * hidden), static_cast<long long>(input),
      static_cast<long long>(3 * hidden), static_cast<long long>(hidden));
  std::printf(
      "  per step: %.0f blocked pass, %.1f blocks, %.1f product blocks, %zu whole "
      "evaluations, %zu passes through temporaries\n",
      double(st.passes) / double(steps), double(st.blocks) / double(steps), double(st.partial_leaves) / double(steps),
      st.whole_leaves, st.through_temporaries);

  // ---- check against the double-precision loop, then time ----------------------------------------
  const auto ref = reference_gru(xs, w_ih, w_hh, b_ih, b_hh, batch, input, hidden, steps);
  return example::check_and_time(h, ref, tol, run_sequence, steps);
}
