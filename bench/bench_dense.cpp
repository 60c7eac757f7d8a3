// fp32 GEMM as nn.dense computes it, C [M, N] = A [M, K] * W [N, K]^T (both row-major), beside
// its anchors in the same run:
//   gemm/fuse/M/N/K      fuse::eval(C, fuse::dense(A, W))
//   gemm/fuse_packed/... the same over fuse::pack(W), packed once outside the timing
//   gemm/eigen/M/N/K     row-major Eigen::Map matrices, C.noalias() = A * W.transpose()
//   gemm/openblas/M/N/K  cblas_sgemm(RowMajor, NoTrans, Trans), one thread, its AVX-512
//                        kernel forced where the CPU has AVX-512 (see openblas_main.cpp)
//   gemm/floor/M/N/K     not timed: 2MNK / the FP32 FMA peak of one core (241 GFLOP/s measured
//                        on this project's Zen 5 machines; FUSE_PEAK_GFLOPS overrides it)
// Shapes: 1024^3, BERT's projection (M = 3072 rows of 768 by 768 weights), the LSTM's
// [64 x 2048] by [4096 x 2048]^T, and odd ones (257x1000x300, a GEMV 1x4096x1024).
// Every variant's result is checked once against double-precision dot products (whole first,
// last and sampled rows and columns) before it is timed. Items are FLOPs (2MNK per call).
// int8 (nn.dense with int8 data and weights, out_dtype int32, as a quantized model runs it):
//   gemm_s8/fuse/M/N/K   fuse::eval(C32, fuse::dense(A8, W8)) (VNNI where the CPU has it)
//   gemm_s8/fuse_packed  the same over fuse::pack(W8)
//   gemm_s8/eigen/M/N/K  Eigen's int32 GEMM over copies widened once, outside the timing
//                        (Eigen has no 8-bit kernel: what hand-written Eigen code would run)
//   gemm_s8/floor/M/N/K  2MNK / the vpdpbusd peak of one core (947 GOP/s measured)
// checked exactly against an int64 sum on sampled rows before timing.
// float16 and bfloat16 (nn.dense with 16-bit data and weights, accumulated in float32), at the
// fp32 shapes; compare their GFLOP/s with gemm/fuse's:
//   gemm_f16/fuse/M/N/K        fuse::eval(C16, fuse::dense(A16, W16)): result in float16 (TVM's
//                              default out_dtype), rounded once
//   gemm_f16/fuse_packed/...   the same over fuse::pack(W16) (float panels, packed once)
//   gemm_f16_f32/fuse, fuse_packed   out_dtype="float32": fuse::dense<float>(A16, W16)
//   gemm_f16/eigen/M/N/K       Eigen::half matrices, C.noalias() = A * W.transpose() (Eigen's
//                              own half GEMM; only where it finishes in reasonable time)
//   gemm_bf16/..., gemm_bf16_f32/...   the same for bfloat16 (Eigen::bfloat16)
// checked before timing against double dot products of the 16-bit values (float32 accumulation
// plus the final 16-bit rounding).
// Single thread. ./scripts/bench dense prints the ratios.
#include <Eigen/Core>

#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <memory>
#include <tuple>
#include <type_traits>
#include <vector>

#include "bench_support.hpp"

namespace {

using fuse::index_t;
using fuse_bench::set_flops;
using row_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct gemm_inputs {
  index_t m, n, k;
  fuse::tensor<float, 2> a, w;
  fuse::packed_weights<float> wp;  // w packed once, outside every timing
  gemm_inputs(index_t m_, index_t n_, index_t k_) : m(m_), n(n_), k(k_), a({m_, k_}), w({n_, k_}) {
    fuse_bench::fill_uniform(a, static_cast<std::uint32_t>(m * 7 + k), 1.0f);
    fuse_bench::fill_uniform(w, static_cast<std::uint32_t>(n * 13 + k), 1.0f / std::sqrt(static_cast<float>(k)));
    wp = fuse::pack(w);
  }
};

/// Checks C against double-precision dot products on whole rows {0, M-1, 6 sampled} and whole
/// columns {0, N-1, 6 sampled}: every tile edge of the first and last row and column blocks.
std::string check(const char* variant, const gemm_inputs& d, const float* c) {
  std::vector<index_t> rows{0, d.m - 1}, cols{0, d.n - 1};
  std::mt19937 g(3);
  for (int i = 0; i < 6; ++i) {
    rows.push_back(static_cast<index_t>(g() % static_cast<std::uint32_t>(d.m)));
    cols.push_back(static_cast<index_t>(g() % static_cast<std::uint32_t>(d.n)));
  }
  double worst = 0;
  index_t wi = 0, wj = 0;
  auto at = [&](index_t i, index_t j) {
    double s = 0, mag = 0;
    for (index_t p = 0; p < d.k; ++p) {
      const double t = static_cast<double>(d.a.data()[i * d.k + p]) * d.w.data()[j * d.k + p];
      s += t;
      mag += std::abs(t);
    }
    // fp32 accumulation over K terms: relative to the sum of magnitudes.
    const double e = std::abs(c[i * d.n + j] - s) / (mag + 1e-30);
    if (!(e <= worst) && !std::isnan(worst)) worst = e, wi = i, wj = j;  // a NaN stays the worst
  };
  for (index_t i : rows)
    for (index_t j = 0; j < d.n; ++j) at(i, j);
  for (index_t j : cols)
    for (index_t i = 0; i < d.m; ++i) at(i, j);
  if (worst <= 1e-4) return {};
  return std::string(variant) + ": C(" + std::to_string(wi) + ", " + std::to_string(wj) +
         ") = " + std::to_string(c[wi * d.n + wj]) + " differs from the double-precision dot product (relative error " +
         std::to_string(worst) + ")";
}

/// Runs one variant: computes C once and checks it (once per variant and shape), then times it.
template <class Run>
void run_gemm(benchmark::State& state, const char* variant, Run run) {
  const auto m = static_cast<index_t>(state.range(0));
  const auto n = static_cast<index_t>(state.range(1));
  const auto k = static_cast<index_t>(state.range(2));
  const gemm_inputs& d = fuse_bench::inputs_of<gemm_inputs>(state);
  fuse::tensor<float, 2> c({m, n});
  std::fill(c.begin(), c.end(), std::nanf(""));
  run(d, c);
  static std::map<std::tuple<std::string, index_t, index_t, index_t>, std::string> checked;
  auto key = std::make_tuple(std::string(variant), m, n, k);
  auto it = checked.find(key);
  if (it == checked.end()) it = checked.emplace(key, check(variant, d, c.data())).first;
  if (!it->second.empty()) {
    state.SkipWithError(it->second.c_str());
    return;
  }
  for (auto _ : state) {
    run(d, c);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
}

void gemm_fuse(benchmark::State& state) {
  run_gemm(state, "fuse",
           [](const gemm_inputs& d, fuse::tensor<float, 2>& c) { fuse::eval(c, fuse::dense(d.a, d.w)); });
}

/// fuse over W packed once (fuse::pack), as inference code holds constant weights.
void gemm_fuse_packed(benchmark::State& state) {
  run_gemm(state, "fuse_packed",
           [](const gemm_inputs& d, fuse::tensor<float, 2>& c) { fuse::eval(c, fuse::dense(d.a, d.wp)); });
}

void gemm_eigen(benchmark::State& state) {
  run_gemm(state, "eigen", [](const gemm_inputs& d, fuse::tensor<float, 2>& c) {
    Eigen::Map<const row_matrix> a(d.a.data(), d.m, d.k), w(d.w.data(), d.n, d.k);
    Eigen::Map<row_matrix> out(c.data(), d.m, d.n);
    out.noalias() = a * w.transpose();
  });
}

void gemm_openblas(benchmark::State& state) {
  run_gemm(state, "openblas", [](const gemm_inputs& d, fuse::tensor<float, 2>& c) {
    fuse_bench::openblas_abt(d.a.data(), d.w.data(), c.data(), d.m, d.n, d.k);
  });
}

/// The FLOP floor: the time 2MNK FLOPs take at one core's FP32 FMA peak, not a measured kernel.
void gemm_floor(benchmark::State& state) {
  // 2 x 512-bit FMA per cycle at ~3.75 GHz, measured
  fuse_bench::operation_floor(state, "FUSE_PEAK_GFLOPS", __builtin_cpu_supports("avx512f") ? 241e9 : 0);
}

// ---- int8 -------------------------------------------------------------------------------------------

using row_matrix_i32 = Eigen::Matrix<std::int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct s8_inputs {
  index_t m, n, k;
  fuse::tensor<std::int8_t, 2> a, w;
  row_matrix_i32 a32, w32;               // the same values widened, for Eigen
  fuse::packed_weights<std::int8_t> wp;  // w packed once, outside every timing
  s8_inputs(index_t m_, index_t n_, index_t k_) : m(m_), n(n_), k(k_), a({m_, k_}), w({n_, k_}) {
    std::mt19937 g(static_cast<std::uint32_t>(m * 5 + n * 3 + k));
    std::uniform_int_distribution<int> d(-128, 127);
    for (auto& v : a) v = static_cast<std::int8_t>(d(g));
    for (auto& v : w) v = static_cast<std::int8_t>(d(g));
    a32 = Eigen::Map<const Eigen::Matrix<std::int8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(a.data(), m, k)
              .cast<std::int32_t>();
    w32 = Eigen::Map<const Eigen::Matrix<std::int8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(w.data(), n, k)
              .cast<std::int32_t>();
    wp = fuse::pack(w);
  }
};

template <class Run>
void run_gemm_s8(benchmark::State& state, Run run) {
  const s8_inputs& d = fuse_bench::inputs_of<s8_inputs>(state);
  fuse::tensor<std::int32_t, 2> c({d.m, d.n});
  run(d, c);
  for (index_t i : {index_t{0}, d.m / 2, d.m - 1})
    for (index_t j = 0; j < d.n; ++j) {
      std::int64_t s = 0;
      for (index_t p = 0; p < d.k; ++p) s += std::int64_t{d.a(i, p)} * d.w(j, p);
      if (static_cast<std::int32_t>(s) != c(i, j)) {
        state.SkipWithError(
            ("int8 GEMM: C(" + std::to_string(i) + ", " + std::to_string(j) + ") is not exact").c_str());
        return;
      }
    }
  for (auto _ : state) {
    run(d, c);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k));
}

void gemm_s8_fuse(benchmark::State& state) {
  run_gemm_s8(state,
              [](const s8_inputs& d, fuse::tensor<std::int32_t, 2>& c) { fuse::eval(c, fuse::dense(d.a, d.w)); });
}

void gemm_s8_fuse_packed(benchmark::State& state) {
  run_gemm_s8(state,
              [](const s8_inputs& d, fuse::tensor<std::int32_t, 2>& c) { fuse::eval(c, fuse::dense(d.a, d.wp)); });
}

void gemm_s8_eigen(benchmark::State& state) {
  run_gemm_s8(state, [](const s8_inputs& d, fuse::tensor<std::int32_t, 2>& c) {
    Eigen::Map<row_matrix_i32> out(c.data(), d.m, d.n);
    out.noalias() = d.a32 * d.w32.transpose();
  });
}

void gemm_s8_floor(benchmark::State& state) {
  // 2 x 512-bit vpdpbusd per cycle, measured
  fuse_bench::operation_floor(state, "FUSE_PEAK_GOPS_INT8", __builtin_cpu_supports("avx512vnni") ? 947e9 : 0);
}

// ---- float16 and bfloat16 ------------------------------------------------------------------------

/// A and W in T (fuse::half or fuse::bfloat16), with the values of the fp32 inputs rounded.
template <class T>
struct f16_inputs {
  index_t m, n, k;
  fuse::tensor<T, 2> a, w;
  fuse::packed_weights<T> wp;  // w packed once, outside every timing
  f16_inputs(index_t m_, index_t n_, index_t k_) : m(m_), n(n_), k(k_), a({m_, k_}), w({n_, k_}) {
    fuse::tensor<float, 2> af({m_, k_}), wf({n_, k_});
    fuse_bench::fill_uniform(af, static_cast<std::uint32_t>(m * 7 + k), 1.0f);
    fuse_bench::fill_uniform(wf, static_cast<std::uint32_t>(n * 13 + k), 1.0f / std::sqrt(static_cast<float>(k)));
    fuse::eval(a, fuse::cast<T>(af));
    fuse::eval(w, fuse::cast<T>(wf));
    wp = fuse::pack(w);
  }
};

/// Checks C (Out: T or float) against double dot products of the 16-bit values on rows {0,
/// M-1, M/2} and columns {0, N-1, N/2}: the accumulation's error (`acc` relative to the sum
/// of magnitudes: 1e-4 for float32 sums) plus, for a 16-bit C, its final rounding (half an
/// ulp: 2^-11 for float16, 2^-8 for bfloat16, relative to |C|).
template <class T, class Out>
std::string check_f16(const f16_inputs<T>& d, const fuse::tensor<Out, 2>& c, double acc) {
  const double ulp = std::is_same_v<Out, float> ? 0 : (std::is_same_v<T, fuse::half> ? 0x1p-11 : 0x1p-8);
  auto at = [&](index_t i, index_t j) -> std::string {
    double s = 0, mag = 0;
    for (index_t p = 0; p < d.k; ++p) {
      const double t = static_cast<double>(static_cast<float>(d.a(i, p))) * static_cast<float>(d.w(j, p));
      s += t;
      mag += std::abs(t);
    }
    const double got = static_cast<float>(c(i, j));
    if (std::abs(got - s) <= acc * mag + ulp * std::abs(s)) return {};
    return "C(" + std::to_string(i) + ", " + std::to_string(j) + ") = " + std::to_string(got) +
           " differs from the double-precision dot product " + std::to_string(s);
  };
  for (index_t i : {index_t{0}, d.m / 2, d.m - 1})
    for (index_t j = 0; j < d.n; ++j)
      if (auto e = at(i, j); !e.empty()) return e;
  for (index_t j : {index_t{0}, d.n / 2, d.n - 1})
    for (index_t i = 0; i < d.m; ++i)
      if (auto e = at(i, j); !e.empty()) return e;
  return {};
}

template <class T, class Out, class Run>
void run_gemm_f16(benchmark::State& state, Run run, double acc = 1e-4) {
  const f16_inputs<T>& d = fuse_bench::inputs_of<f16_inputs<T>>(state);
  fuse::tensor<Out, 2> c({d.m, d.n});
  run(d, c);
  if (const std::string e = check_f16(d, c, acc); !e.empty()) {
    state.SkipWithError(e.c_str());
    return;
  }
  for (auto _ : state) {
    run(d, c);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, 2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k));
}

template <class T, class Out>
void gemm_f16_fuse(benchmark::State& state) {
  run_gemm_f16<T, Out>(
      state, [](const f16_inputs<T>& d, fuse::tensor<Out, 2>& c) { fuse::eval(c, fuse::dense<Out>(d.a, d.w)); });
}

template <class T, class Out>
void gemm_f16_fuse_packed(benchmark::State& state) {
  run_gemm_f16<T, Out>(
      state, [](const f16_inputs<T>& d, fuse::tensor<Out, 2>& c) { fuse::eval(c, fuse::dense<Out>(d.a, d.wp)); });
}

/// Eigen's own 16-bit GEMM (Eigen::half / Eigen::bfloat16 hold the same bits as fuse's types).
/// It accumulates in the 16-bit type (every multiply-add rounded), so its check allows K ulps.
template <class T>
void gemm_f16_eigen(benchmark::State& state) {
  using E = std::conditional_t<std::is_same_v<T, fuse::half>, Eigen::half, Eigen::bfloat16>;
  using M = Eigen::Matrix<E, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  static_assert(sizeof(E) == sizeof(T));
  run_gemm_f16<T, T>(
      state,
      [](const f16_inputs<T>& d, fuse::tensor<T, 2>& c) {
        Eigen::Map<const M> a(reinterpret_cast<const E*>(d.a.data()), d.m, d.k),
            w(reinterpret_cast<const E*>(d.w.data()), d.n, d.k);
        Eigen::Map<M> out(reinterpret_cast<E*>(c.data()), d.m, d.n);
        out.noalias() = a * w.transpose();
      },
      static_cast<double>(state.range(2)) * (std::is_same_v<T, fuse::half> ? 0x1p-11 : 0x1p-8));
}

/// Eigen's 16-bit GEMM only where it takes at most a few seconds per call.
void shapes_f16_eigen(benchmark::internal::Benchmark* b) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{257, 1000, 300}, {1, 4096, 1024}}) b->Args({m, n, k});
}

void shapes_s8(benchmark::internal::Benchmark* b) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1024, 1024, 1024}, {64, 4096, 2048}}) b->Args({m, n, k});
}

void shapes(benchmark::internal::Benchmark* b) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1024, 1024, 1024},
                         {3072, 768, 768},
                         {64, 4096, 2048},
                         {257, 1000, 300},
                         {1, 4096, 1024}})
    b->Args({m, n, k});
}

}  // namespace

BENCHMARK(gemm_fuse)->Name("gemm/fuse")->Apply(shapes)->UseRealTime();
BENCHMARK(gemm_fuse_packed)->Name("gemm/fuse_packed")->Apply(shapes)->UseRealTime();
BENCHMARK(gemm_eigen)->Name("gemm/eigen")->Apply(shapes)->UseRealTime();
BENCHMARK(gemm_openblas)->Name("gemm/openblas")->Apply(shapes)->UseRealTime();
BENCHMARK(gemm_floor)->Name("gemm/floor")->Apply(shapes)->UseManualTime();
BENCHMARK(gemm_s8_fuse)->Name("gemm_s8/fuse")->Apply(shapes_s8)->UseRealTime();
BENCHMARK(gemm_s8_fuse_packed)->Name("gemm_s8/fuse_packed")->Apply(shapes_s8)->UseRealTime();
BENCHMARK(gemm_s8_eigen)->Name("gemm_s8/eigen")->Apply(shapes_s8)->UseRealTime();
BENCHMARK(gemm_s8_floor)->Name("gemm_s8/floor")->Apply(shapes_s8)->UseManualTime();
BENCHMARK(gemm_f16_fuse<fuse::half, fuse::half>)->Name("gemm_f16/fuse")->Apply(shapes)->UseRealTime();
BENCHMARK(gemm_f16_fuse_packed<fuse::half, fuse::half>)->Name("gemm_f16/fuse_packed")->Apply(shapes)->UseRealTime();
BENCHMARK(gemm_f16_eigen<fuse::half>)->Name("gemm_f16/eigen")->Apply(shapes_f16_eigen)->UseRealTime();
BENCHMARK(gemm_f16_fuse<fuse::half, float>)->Name("gemm_f16_f32/fuse")->Apply(shapes)->UseRealTime();
BENCHMARK(gemm_f16_fuse_packed<fuse::half, float>)->Name("gemm_f16_f32/fuse_packed")->Apply(shapes)->UseRealTime();
BENCHMARK(gemm_f16_fuse<fuse::bfloat16, fuse::bfloat16>)->Name("gemm_bf16/fuse")->Apply(shapes)->UseRealTime();
BENCHMARK(gemm_f16_fuse_packed<fuse::bfloat16, fuse::bfloat16>)
    ->Name("gemm_bf16/fuse_packed")
    ->Apply(shapes)
    ->UseRealTime();
BENCHMARK(gemm_f16_eigen<fuse::bfloat16>)->Name("gemm_bf16/eigen")->Apply(shapes_f16_eigen)->UseRealTime();
BENCHMARK(gemm_f16_fuse<fuse::bfloat16, float>)->Name("gemm_bf16_f32/fuse")->Apply(shapes)->UseRealTime();
BENCHMARK(gemm_f16_fuse_packed<fuse::bfloat16, float>)->Name("gemm_bf16_f32/fuse_packed")->Apply(shapes)->UseRealTime();
