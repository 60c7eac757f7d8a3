// The seed's gate computation, as TVM issue #2890 writes it:
//
//   splitted = split(x, 3, axis=1)
//   out = sigmoid(splitted[0]) + tanh(splitted[1]) * exp(splitted[2])
//
// evaluated by fuse as ONE loop (no temporaries, each input element read once), checked
// against the double-precision reference, and timed against op-by-op execution (one pass and
// one temporary per op, as runtimes without fusion run it).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include <fuse/fuse.hpp>
#include <fuse/reference.hpp>

namespace {

template <class F>
double best_ms(F&& f, int reps) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

/// Largest error of `out` against the double-precision reference, in units of float's last
/// place at the size of the terms: tanh*exp may cancel sigmoid, and then the float rounding of
/// the terms, not of the result, is what any float evaluation can promise.
template <class Out, class Ref, class Terms>
void report_error(const Out& out, const Ref& ref, const Terms& terms, fuse::index_t rows, fuse::index_t cols) {
  double worst_ulp = 0, worst_abs = 0;
  for (fuse::index_t i = 0; i < rows; ++i)
    for (fuse::index_t j = 0; j < cols; ++j) {
      const double r = ref(i, j), g = out(i, j);
      const double scale = std::max(std::fabs(r), terms(i, j));
      const double ulp = std::ldexp(1.0, std::max(std::ilogb(scale), -126) - 23);
      worst_ulp = std::max(worst_ulp, std::fabs(g - r) / ulp);
      worst_abs = std::max(worst_abs, std::fabs(g - r));
    }
  std::printf("  check vs the double reference over %lld elements: max error %.2f ULP of the terms (%.1e absolute)\n",
              static_cast<long long>(rows * cols), worst_ulp, worst_abs);
}

void run(fuse::index_t batch, fuse::index_t hidden, int reps) {
  fuse::tensor<float, 2> x({batch, 3 * hidden}), out({batch, hidden});
  std::mt19937 g(7);
  std::uniform_real_distribution<float> d(-4.0f, 4.0f);
  for (float& v : x) v = d(g);

  auto s = fuse::split<3>(x, /*axis=*/1);
  auto gate = fuse::sigmoid(s[0]) + fuse::tanh(s[1]) * fuse::exp(s[2]);

  std::printf("x: (%lld, %lld) -> out: (%lld, %lld)  [%.1f MB read, %.1f MB written]\n", static_cast<long long>(batch),
              static_cast<long long>(3 * hidden), static_cast<long long>(batch), static_cast<long long>(hidden),
              3.0 * batch * hidden * 4 / 1e6, 1.0 * batch * hidden * 4 / 1e6);

  const double fused = best_ms([&] { fuse::eval(out, gate); }, reps);

  // Reference on (up to) the first 64 rows: the reference evaluator is deliberately slow.
  const fuse::index_t check_rows = std::min<fuse::index_t>(batch, 64);
  auto xs = fuse::strided_slice(x, {0, 0}, {check_rows, 3 * hidden});
  auto ss = fuse::split<3>(xs, 1);
  const auto ref = fuse::reference(fuse::sigmoid(ss[0]) + fuse::tanh(ss[1]) * fuse::exp(ss[2]));
  const auto terms = fuse::reference(fuse::sigmoid(ss[0]) + fuse::abs(fuse::tanh(ss[1]) * fuse::exp(ss[2])));
  report_error(out, ref, terms, check_rows, hidden);

  // Op by op: every op a full pass with a temporary.
  fuse::tensor<float, 2> t0({batch, hidden}), t1({batch, hidden}), t2({batch, hidden}), t3({batch, hidden});
  fuse::tensor<float, 2> unfused_out({batch, hidden});
  auto op_by_op = [&] {
    fuse::eval(t0, fuse::sigmoid(s[0]));
    fuse::eval(t1, fuse::tanh(s[1]));
    fuse::eval(t2, fuse::exp(s[2]));
    fuse::eval(t3, t1 * t2);
    fuse::eval(unfused_out, t0 + t3);
  };
  const double unfused = best_ms(op_by_op, reps);
  double diff = 0;
  for (fuse::index_t i = 0; i < out.size(); ++i)
    diff = std::max(diff, double(std::fabs(out.data()[i] - unfused_out.data()[i])));
  std::printf("  fused (1 loop):       %10.1f us\n", fused * 1e3);
  std::printf("  unfused (5 passes):   %10.1f us   -> fused is %.2fx faster (the two differ by at most %.1e)\n",
              unfused * 1e3, unfused / fused, diff);
}

}  // namespace

int main() {
  std::printf("fuse demo: the seed's dense->split->gates epilogue, sigmoid(s0) + tanh(s1) * exp(s2)\n\n");
  run(1, 10, 2000);  // the seed's exact shapes
  std::printf("\n");
  run(64, 1024, 50);  // an LSTM/GRU-sized batch: cache-resident
  std::printf("\n");
  run(4096, 4096, 10);  // 200 MB of gates: memory-bound
  return 0;
}
