// The seed's gate chain, sigmoid(a) + tanh(b) * exp(c), over 2^24 floats (DRAM: the memory path
// decides) and 2^15 floats (cache-resident: the math decides), beside its anchors in the same
// run:
//   gate_chain/fused/N       fuse::eval, accurate math (<= 2 ULP per function)
//   gate_chain/fused_fast/N  fuse::eval with fuse::fast_math (Eigen's accuracy class)
//   gate_chain/unfused/N     one pass per op with temporaries, as op-by-op execution runs it:
//                            plain stores, as TVM's and PyTorch's elementwise kernels write
//   gate_chain/unfused_nt/N  the same passes with fuse's streaming stores (a stronger anchor
//                            than any op-by-op runtime, shown for completeness)
//   gate_chain/eigen/N       the same expression on Eigen arrays (Eigen fuses it into one loop too)
//   gate_chain/floor/N       a plain loop that reads the three inputs and writes one output
//                            with no math: the bandwidth floor of plain stores
//   gate_chain/floor_nt/N    the same loop with streaming (non-temporal) stores: the true
//                            bandwidth floor at 2^24, which the fused loop approaches
// Single thread. ./scripts/bench prints the ratios.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <immintrin.h>
#include <random>

#include <fuse/fuse.hpp>

namespace {

struct gate_inputs {
  fuse::tensor<float, 1> a, b, c, out;
  explicit gate_inputs(fuse::index_t n) : a({n}), b({n}), c({n}), out({n}) {
    std::mt19937 g(42);
    // Gate pre-activations of a trained cell mostly lie within a few units of zero.
    std::uniform_real_distribution<float> d(-4.0f, 4.0f);
    for (fuse::index_t i = 0; i < n; ++i) a(i) = d(g), b(i) = d(g), c(i) = d(g);
  }
};

void finish(benchmark::State& state, fuse::index_t n) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * 16);  // 3 reads + 1 write
}

void gate_fused(benchmark::State& state) {
  const auto n = static_cast<fuse::index_t>(state.range(0));
  gate_inputs in(n);
  for (auto _ : state) {
    fuse::eval(in.out, fuse::sigmoid(in.a) + fuse::tanh(in.b) * fuse::exp(in.c));
    benchmark::DoNotOptimize(in.out.data());
    benchmark::ClobberMemory();
  }
  finish(state, n);
}

void gate_fused_fast(benchmark::State& state) {
  const auto n = static_cast<fuse::index_t>(state.range(0));
  gate_inputs in(n);
  for (auto _ : state) {
    fuse::eval(in.out, fuse::sigmoid(in.a) + fuse::tanh(in.b) * fuse::exp(in.c), fuse::fast_math);
    benchmark::DoNotOptimize(in.out.data());
    benchmark::ClobberMemory();
  }
  finish(state, n);
}

template <fuse::streaming_stores Stores>
void gate_unfused(benchmark::State& state) {
  const auto n = static_cast<fuse::index_t>(state.range(0));
  gate_inputs in(n);
  fuse::tensor<float, 1> t1({n}), t2({n}), t3({n}), t4({n});
  for (auto _ : state) {
    // One kernel per op, each a full pass through memory, as TVM's three groups (or any
    // op-by-op runtime) execute it.
    fuse::eval(t1, fuse::sigmoid(in.a), Stores);
    fuse::eval(t2, fuse::tanh(in.b), Stores);
    fuse::eval(t3, fuse::exp(in.c), Stores);
    fuse::eval(t4, t2 * t3, Stores);
    fuse::eval(in.out, t1 + t4, Stores);
    benchmark::DoNotOptimize(in.out.data());
    benchmark::ClobberMemory();
  }
  finish(state, n);
}

void gate_eigen(benchmark::State& state) {
  const auto n = static_cast<fuse::index_t>(state.range(0));
  gate_inputs in(n);
  Eigen::Map<const Eigen::ArrayXf> a(in.a.data(), n), b(in.b.data(), n), c(in.c.data(), n);
  Eigen::Map<Eigen::ArrayXf> out(in.out.data(), n);
  for (auto _ : state) {
    out = a.logistic() + b.tanh() * c.exp();
    benchmark::DoNotOptimize(in.out.data());
    benchmark::ClobberMemory();
  }
  finish(state, n);
}

void gate_floor(benchmark::State& state) {
  const auto n = static_cast<fuse::index_t>(state.range(0));
  gate_inputs in(n);
  const float* __restrict a = in.a.data();
  const float* __restrict b = in.b.data();
  const float* __restrict c = in.c.data();
  float* __restrict o = in.out.data();
  for (auto _ : state) {
    for (fuse::index_t i = 0; i < n; ++i) o[i] = a[i] + b[i] + c[i];
    benchmark::DoNotOptimize(o);
    benchmark::ClobberMemory();
  }
  finish(state, n);
}

void gate_floor_nt(benchmark::State& state) {
  const auto n = static_cast<fuse::index_t>(state.range(0));
  gate_inputs in(n);
  const float* a = in.a.data();
  const float* b = in.b.data();
  const float* c = in.c.data();
  float* o = in.out.data();  // fuse::tensor storage is 64-byte aligned; n is a multiple of 16
  for (auto _ : state) {
#if defined(__AVX512F__)
    for (fuse::index_t i = 0; i < n; i += 16)
      _mm512_stream_ps(
          o + i, _mm512_add_ps(_mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)), _mm512_loadu_ps(c + i)));
#elif defined(__AVX__)
    for (fuse::index_t i = 0; i < n; i += 8)
      _mm256_stream_ps(
          o + i, _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)), _mm256_loadu_ps(c + i)));
#else
    for (fuse::index_t i = 0; i < n; i += 4)
      _mm_stream_ps(o + i, _mm_add_ps(_mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)), _mm_loadu_ps(c + i)));
#endif
    _mm_sfence();
    benchmark::DoNotOptimize(o);
    benchmark::ClobberMemory();
  }
  finish(state, n);
}

constexpr int64_t dram = int64_t{1} << 24;
constexpr int64_t cached = int64_t{1} << 15;

}  // namespace

BENCHMARK(gate_fused)->Name("gate_chain/fused")->Arg(dram)->Arg(cached)->UseRealTime();
BENCHMARK(gate_fused_fast)->Name("gate_chain/fused_fast")->Arg(dram)->Arg(cached)->UseRealTime();
BENCHMARK(gate_unfused<fuse::streaming_stores::off>)->Name("gate_chain/unfused")->Arg(dram)->Arg(cached)->UseRealTime();
BENCHMARK(gate_unfused<fuse::streaming_stores::automatic>)
    ->Name("gate_chain/unfused_nt")
    ->Arg(dram)
    ->Arg(cached)
    ->UseRealTime();
BENCHMARK(gate_eigen)->Name("gate_chain/eigen")->Arg(dram)->Arg(cached)->UseRealTime();
BENCHMARK(gate_floor)->Name("gate_chain/floor")->Arg(dram)->Arg(cached)->UseRealTime();
BENCHMARK(gate_floor_nt)->Name("gate_chain/floor_nt")->Arg(dram)->Arg(cached)->UseRealTime();
