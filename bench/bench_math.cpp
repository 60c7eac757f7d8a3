// math/<fn>/{fuse,fuse_fast,eigen}: one transcendental over an L1-resident array (4096 floats),
// fuse's accurate and fast modes beside Eigen's vectorized version, in the same binary.
//
// Each case reports ns_per_elem, nanoseconds per element from Google Benchmark's CPU time (an
// inverted rate, so the console appends "s": "ns_per_elem=0.102s" reads 0.102 ns; the JSON
// holds the plain number), and items_per_second (elements). The fuse loop walks the
// array in xsimd batches of the build's architecture (16 lanes with AVX-512), which is how the
// CPU executor calls these functions. Inputs are uniform in [-5, 5] (the range activations
// live in), and in [-80, 80] for exp so that nothing over- or underflows. No main():
// bench_elementwise links benchmark_main.

// Eigen's AVX-512 packet math trips GCC 12's false -W(maybe-)uninitialized (GCC bug 105593)
// wherever it is inlined; the pragma has to precede every include to cover those headers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <benchmark/benchmark.h>

#include <fuse/simd/math_batch.hpp>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include <cstddef>
#include <random>
#include <vector>

namespace {

constexpr std::size_t math_elems = 4096;

struct math_arrays {
  std::vector<float, xsimd::aligned_allocator<float, 64>> in, out;
  math_arrays(float lo, float hi) : in(math_elems), out(math_elems) {
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (float& v : in) v = dist(gen);
  }
};

void set_counters(benchmark::State& state) {
  const auto elems = static_cast<double>(state.iterations()) * math_elems;
  state.SetItemsProcessed(static_cast<std::int64_t>(elems));
  state.counters["ns_per_elem"] =
      benchmark::Counter(elems * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <class F>
void run_fuse(benchmark::State& state, float lo, float hi, F f) {
  using batch = xsimd::batch<float>;
  static_assert(math_elems % batch::size == 0);
  math_arrays a(lo, hi);
  for (auto _ : state) {
    for (std::size_t i = 0; i < math_elems; i += batch::size)
      f(batch::load_aligned(a.in.data() + i)).store_aligned(a.out.data() + i);
    benchmark::DoNotOptimize(a.out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}

template <class F>
void run_eigen(benchmark::State& state, float lo, float hi, F f) {
  math_arrays a(lo, hi);
  Eigen::Map<const Eigen::ArrayXf> in(a.in.data(), math_elems);
  Eigen::Map<Eigen::ArrayXf> out(a.out.data(), math_elems);
  for (auto _ : state) {
    f(in, out);
    benchmark::DoNotOptimize(a.out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state);
}

namespace fm = fuse::math;
using accurate = fuse::accurate_math_t;
using fast = fuse::fast_math_t;
using batch = xsimd::batch<float>;

void math_exp_fuse(benchmark::State& s) {
  run_fuse(s, -80.f, 80.f, [](batch x) FUSE_LAMBDA_INLINE { return fm::exp<accurate>(x); });
}
void math_exp_fast(benchmark::State& s) {
  run_fuse(s, -80.f, 80.f, [](batch x) FUSE_LAMBDA_INLINE { return fm::exp<fast>(x); });
}
void math_exp_eigen(benchmark::State& s) {
  run_eigen(s, -80.f, 80.f, [](const auto& i, auto& o) { o = i.exp(); });
}

void math_tanh_fuse(benchmark::State& s) {
  run_fuse(s, -5.f, 5.f, [](batch x) FUSE_LAMBDA_INLINE { return fm::tanh<accurate>(x); });
}
void math_tanh_fast(benchmark::State& s) {
  run_fuse(s, -5.f, 5.f, [](batch x) FUSE_LAMBDA_INLINE { return fm::tanh<fast>(x); });
}
void math_tanh_eigen(benchmark::State& s) {
  run_eigen(s, -5.f, 5.f, [](const auto& i, auto& o) { o = i.tanh(); });
}

void math_sigmoid_fuse(benchmark::State& s) {
  run_fuse(s, -5.f, 5.f, [](batch x) FUSE_LAMBDA_INLINE { return fm::sigmoid<accurate>(x); });
}
void math_sigmoid_fast(benchmark::State& s) {
  run_fuse(s, -5.f, 5.f, [](batch x) FUSE_LAMBDA_INLINE { return fm::sigmoid<fast>(x); });
}
void math_sigmoid_eigen(benchmark::State& s) {
  run_eigen(s, -5.f, 5.f, [](const auto& i, auto& o) { o = i.logistic(); });
}

void math_erf_fuse(benchmark::State& s) {
  run_fuse(s, -5.f, 5.f, [](batch x) FUSE_LAMBDA_INLINE { return fm::erf<accurate>(x); });
}
void math_erf_fast(benchmark::State& s) {
  run_fuse(s, -5.f, 5.f, [](batch x) FUSE_LAMBDA_INLINE { return fm::erf<fast>(x); });
}
void math_erf_eigen(benchmark::State& s) {
  run_eigen(s, -5.f, 5.f, [](const auto& i, auto& o) { o = i.erf(); });
}

}  // namespace

BENCHMARK(math_exp_fuse)->Name("math/exp/fuse");
BENCHMARK(math_exp_fast)->Name("math/exp/fuse_fast");
BENCHMARK(math_exp_eigen)->Name("math/exp/eigen");
BENCHMARK(math_tanh_fuse)->Name("math/tanh/fuse");
BENCHMARK(math_tanh_fast)->Name("math/tanh/fuse_fast");
BENCHMARK(math_tanh_eigen)->Name("math/tanh/eigen");
BENCHMARK(math_sigmoid_fuse)->Name("math/sigmoid/fuse");
BENCHMARK(math_sigmoid_fast)->Name("math/sigmoid/fuse_fast");
BENCHMARK(math_sigmoid_eigen)->Name("math/sigmoid/eigen");
BENCHMARK(math_erf_fuse)->Name("math/erf/fuse");
BENCHMARK(math_erf_fast)->Name("math/erf/fuse_fast");
BENCHMARK(math_erf_eigen)->Name("math/erf/eigen");
