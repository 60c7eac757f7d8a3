// What the LSTM and GRU examples share: their command-line sizes, the sigmoid of their double
// loops, and the end of the run (the final h checked against the double-precision loop, the
// whole sequence timed, the verdict printed).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <fuse/fuse.hpp>

namespace example {

/// argv[i] as a positive integer, or `fallback` when absent; a bad value stops the program.
inline fuse::index_t positive_arg(int argc, char** argv, int i, fuse::index_t fallback) {
  if (i >= argc) return fallback;
  const long long v = std::atoll(argv[i]);
  if (v <= 0) {
    std::fprintf(stderr, "%s: argument %d must be a positive integer, got '%s'\n", argv[0], i, argv[i]);
    std::exit(2);
  }
  return static_cast<fuse::index_t>(v);
}

inline double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

/// Prints the error of h against `ref` and the time per step (best of 10 runs of
/// run_sequence); returns the program's exit status (1 when the error exceeds tol).
template <class Run>
int check_and_time(const fuse::tensor<float, 2>& h, const std::vector<double>& ref, double tol, Run&& run_sequence,
                   fuse::index_t steps) {
  double max_err = 0;
  for (fuse::index_t i = 0; i < h.shape()[0]; ++i)
    for (fuse::index_t j = 0; j < h.shape()[1]; ++j)
      max_err = std::max(max_err, std::fabs(double(h(i, j)) - ref[static_cast<std::size_t>(i * h.shape()[1] + j)]));
  std::printf("  final h vs the double-precision reference: max abs error %.2e (tolerance %.1e)\n", max_err, tol);

  double best = 1e300;
  for (int r = 0; r < 10; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run_sequence();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::printf("  %.2f us per step (best of 10 runs of %lld steps)\n", best / double(steps),
              static_cast<long long>(steps));

  if (!(max_err <= tol)) {
    std::printf("FAILED: the error exceeds the tolerance\n");
    return 1;
  }
  std::printf("OK\n");
  return 0;
}

}  // namespace example
