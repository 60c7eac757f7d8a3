// Helpers shared by the contraction benchmarks (bench_dense, bench_rnn_cell): random inputs,
// the FLOP-rate counters, the result checks run once before timing, and OpenBLAS's row-major
// C = A B^T.
#pragma once

#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <sstream>
#include <string>

#include <fuse/fuse.hpp>

namespace fuse_bench {

using fuse::index_t;

/// The inputs D(a, b, c) of one shape (the benchmark's three arguments), made on first use and
/// shared by its variants (Google Benchmark runs each benchmark function several times).
template <class D>
const D& inputs_of(const benchmark::State& state) {
  static std::map<std::tuple<index_t, index_t, index_t>, std::unique_ptr<D>> cache;
  const index_t a = state.range(0), b = state.range(1), c = state.range(2);
  auto& p = cache[{a, b, c}];
  if (!p) p = std::make_unique<D>(a, b, c);
  return *p;
}

/// Fills t with uniform values in [-scale, scale] (a fixed seed per call site: same data each run).
template <class T>
void fill_uniform(T& t, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  float* p = t.data();
  const auto n = static_cast<std::size_t>(t.size());
  for (std::size_t i = 0; i < n; ++i) p[i] = d(g);
}

/// Items = floating-point operations (the report's ns/item is ns per FLOP), and a "FLOP" rate
/// counter (the console prints FLOP=...G/s; its presence makes the report add a GFLOP/s column).
inline void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.SetItemsProcessed(static_cast<int64_t>(flops_per_iteration) * static_cast<int64_t>(state.iterations()));
  state.counters["FLOP"] = benchmark::Counter(flops_per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

/// A floor that is not timed: the 2 * range(0) * range(1) * range(2) operations of a product at
/// `peak` per second (the environment variable `env`, in G/s, overrides it; no peak: skipped).
inline void operation_floor(benchmark::State& state, const char* env, double peak) {
  if (const char* e = std::getenv(env)) peak = std::atof(e) * 1e9;
  if (!(peak > 0)) {
    state.SkipWithError((std::string("no peak known for this CPU: set ") + env).c_str());
    return;
  }
  const double ops = 2.0 * static_cast<double>(state.range(0)) * static_cast<double>(state.range(1)) *
                     static_cast<double>(state.range(2));
  for (auto _ : state) state.SetIterationTime(ops / peak);
  set_flops(state, ops);
}

/// Empty when every got[i] is within rel * (1 + |want[i]|) of want[i]; else a message naming
/// the worst element.
inline std::string compare(const char* what, const float* got, const float* want, std::size_t n, double rel) {
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = std::abs(static_cast<double>(got[i]) - want[i]) / (1.0 + std::abs(static_cast<double>(want[i])));
    if (std::isnan(e)) {
      worst = e, at = i;
      break;
    }
    if (e > worst) worst = e, at = i;
  }
  if (worst <= rel) return {};
  std::ostringstream s;
  s << what << ": result differs from the anchor at flat index " << at << ": " << got[at] << " vs " << want[at]
    << " (relative error " << worst << " > " << rel << ")";
  return s.str();
}

/// For the fused variants: 1 when the last fuse::eval on this thread ran as one blocked pass
/// with every contraction computed block by block in it (nothing evaluated whole, no
/// temporaries), else 0; the counter "one_pass" shows it beside the timing.
inline fuse::eval_statistics last_stats;  ///< what the last fused step's eval did (set by the step)
inline double last_eval_was_one_pass() {
  const auto& st = last_stats;
  return st.passes == 1 && st.whole_leaves == 0 && st.through_temporaries == 0 && st.partial_leaves > 0 ? 1.0 : 0.0;
}

/// C [m, n] = A [m, k] * B [n, k]^T, all row-major and contiguous.
inline void openblas_abt(const float* a, const float* b, float* c, index_t m, index_t n, index_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              1.0f, a, static_cast<int>(k), b, static_cast<int>(k), 0.0f, c, static_cast<int>(n));
}

}  // namespace fuse_bench
