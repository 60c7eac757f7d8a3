// bfloat16 x bfloat16 products (nn.dense of bfloat16 data and weights, float32 sums): the pair
// kernel with vdpbf16ps (fuse/cpu/gemm_bf16.hpp) beside the float GEMM with the operands widened
// while packed (the path of CPUs without AVX512_BF16), the pair kernel in float FMAs, and the
// float32 GEMM of the same values; the CPU's measured peaks beside them. No OpenBLAS needed.
//
//   bf16/dpbf16/M/N/K          gemm_pairs<dpbf16>: B packed in pairs per call (skipped without AVX512_BF16)
//   bf16/widened/M/N/K         the float GEMM reading bfloat16 operands (widened while packed)
//   bf16/pairs_fma/M/N/K       gemm_pairs<widened>: the pair layout, float FMAs
//   bf16/f32/M/N/K             the float32 GEMM of the same values (float operands)
//   bf16_packed/eval/M/N/K     fuse::eval(C, dense(X, pack(W))): the kernel this CPU picks for weights packed once
//   bf16_packed/widened/M/N/K  B packed once as float panels, the float GEMM (what CPUs without the instruction run)
//   peak/fma512, peak/dpbf16   one core's throughput of 512-bit FMAs and of vdpbf16ps (FLOP: 2 per product)
//
// The counter FLOP is 2MNK per iteration (GFLOP/s in the report).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include <fuse/fuse.hpp>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace {

using fuse::bfloat16;
using fuse::index_t;
namespace gm = fuse::cpu::gemm;

struct operands {
  index_t m, n, k;
  fuse::tensor<bfloat16, 2> x, w;  // X [M, K], W [N, K] (dense's layout)
  fuse::tensor<float, 2> xf, wf;   // the same values in float
  fuse::tensor<float, 2> c;
  operands(index_t m_, index_t n_, index_t k_)
      : m(m_), n(n_), k(k_), x({m_, k_}), w({n_, k_}), xf({m_, k_}), wf({n_, k_}), c({m_, n_}) {
    std::mt19937 g(7);
    std::uniform_real_distribution<float> d(-1, 1);
    for (index_t i = 0; i < x.size(); ++i) xf.data()[i] = static_cast<float>(x.data()[i] = bfloat16(d(g)));
    for (index_t i = 0; i < w.size(); ++i) wf.data()[i] = static_cast<float>(w.data()[i] = bfloat16(d(g)));
  }
  gm::strided<bfloat16> a() const { return {x.data(), k, 1}; }
  gm::strided<bfloat16> b() const { return {w.data(), 1, k}; }  // B(kk, j) = W(j, kk)
};

operands& inputs(const benchmark::State& s) {
  static std::vector<std::unique_ptr<operands>> cache;
  for (auto& p : cache)
    if (p->m == s.range(0) && p->n == s.range(1) && p->k == s.range(2)) return *p;
  cache.push_back(std::make_unique<operands>(s.range(0), s.range(1), s.range(2)));
  return *cache.back();
}

/// Times `product()` (one 2MNK-FLOP product of the shape's operands) and reports its FLOP rate.
template <class Product>
void timed(benchmark::State& s, Product&& product) {
  for (auto _ : s) {
    product();
    benchmark::ClobberMemory();
  }
  const double flops =
      2.0 * static_cast<double>(s.range(0)) * static_cast<double>(s.range(1)) * static_cast<double>(s.range(2));
  s.counters["FLOP"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

void bf16_dpbf16(benchmark::State& s) {
#if defined(__AVX512BF16__) && defined(__AVX512F__)  // (a lambda in a discarded branch would still be instantiated)
  auto& o = inputs(s);
  timed(s, [&] { gm::gemm_pairs<gm::pair_kernel::dpbf16>(o.m, o.n, o.k, o.a(), o.b(), o.c.data(), o.n, 1); });
#else
  s.SkipWithError("no AVX512_BF16 in this build");
#endif
}
void bf16_widened(benchmark::State& s) {
  auto& o = inputs(s);
  timed(s, [&] { gm::gemm<float>(o.m, o.n, o.k, o.a(), o.b(), o.c.data(), o.n, 1); });
}
void bf16_pairs_fma(benchmark::State& s) {
  auto& o = inputs(s);
  timed(s, [&] { gm::gemm_pairs<gm::pair_kernel::widened>(o.m, o.n, o.k, o.a(), o.b(), o.c.data(), o.n, 1); });
}
void bf16_f32(benchmark::State& s) {
  auto& o = inputs(s);
  const gm::strided<float> a{o.xf.data(), o.k, 1}, b{o.wf.data(), 1, o.k};
  timed(s, [&] { gm::gemm<float>(o.m, o.n, o.k, a, b, o.c.data(), o.n, 1); });
}
void bf16_packed_eval(benchmark::State& s) {
  auto& o = inputs(s);
  const auto wp = fuse::pack(o.w);
  timed(s, [&] { fuse::eval(o.c, fuse::dense<float>(o.x, wp)); });
}
void bf16_packed_widened(benchmark::State& s) {
  auto& o = inputs(s);
  const gm::detail::aligned_buffer<unsigned char> buffer(gm::packed_b_bytes<float>(o.k, o.n));  // 64-byte aligned
  const auto packed = gm::pack_b_ahead<float>(buffer.p, o.b(), o.k, o.n);
  timed(s, [&] { gm::gemm_prepacked(o.m, o.n, o.k, o.a(), packed, 0, o.c.data(), o.n, 1); });
}

// Peaks: 24 independent accumulators (enough for 4-cycle latency at 2 per cycle), 8 steps each
// per iteration.
void peak_fma512(benchmark::State& s) {
#if defined(__AVX512F__)
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-3f);
  for (auto _ : s) {
    // Unrolled: a loop over acc[i] would keep the array in memory.
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r)
#pragma GCC unroll 24
      for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(a, acc[i], b);
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) benchmark::DoNotOptimize(acc[i]);
  }
  s.counters["FLOP"] = benchmark::Counter(8.0 * 24 * 16 * 2, benchmark::Counter::kIsIterationInvariantRate);
#else
  s.SkipWithError("no AVX-512 in this build");
#endif
}
void peak_dpbf16(benchmark::State& s) {
#if defined(__AVX512BF16__) && defined(__AVX512F__)
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3F803F80), b = (__m512bh)_mm512_set1_epi32(0x3A833A83);
  for (auto _ : s) {
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r)
#pragma GCC unroll 24
      for (int i = 0; i < 24; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) benchmark::DoNotOptimize(acc[i]);
  }
  s.counters["FLOP"] = benchmark::Counter(8.0 * 24 * 32 * 2, benchmark::Counter::kIsIterationInvariantRate);
#else
  s.SkipWithError("no AVX512_BF16 in this build");
#endif
}

void shapes(benchmark::internal::Benchmark* b) {
  for (auto [m, n, k] :
       {std::tuple<int, int, int>{512, 1024, 1024}, {384, 768, 768}, {128, 3072, 768}, {8, 3072, 768}, {1, 3072, 768}})
    b->Args({m, n, k});
}

}  // namespace

BENCHMARK(peak_fma512)->Name("peak/fma512");
BENCHMARK(peak_dpbf16)->Name("peak/dpbf16");
BENCHMARK(bf16_dpbf16)->Name("bf16/dpbf16")->Apply(shapes);
BENCHMARK(bf16_widened)->Name("bf16/widened")->Apply(shapes);
BENCHMARK(bf16_pairs_fma)->Name("bf16/pairs_fma")->Apply(shapes);
BENCHMARK(bf16_f32)->Name("bf16/f32")->Apply(shapes);
BENCHMARK(bf16_packed_eval)->Name("bf16_packed/eval")->Apply(shapes);
BENCHMARK(bf16_packed_widened)->Name("bf16_packed/widened")->Apply(shapes);
