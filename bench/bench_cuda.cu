// The GPU's anchors, the shared evaluators' scalar form on it and the CUDA executor (issue 14):
// what a fused elementwise kernel must reach, what it reaches, and what launches cost.
//   copy_d2d           cudaMemcpyAsync device to device: the bandwidth ceiling (bytes read + written)
//   copy_kernel        a plain float4 copy kernel: what one of our kernels can reach
//   seed_tree_naive    the seed's gates tree (split, sigmoid/tanh/exp, broadcast bias, half cast)
//                      through bind()'s scalar evaluators, one thread per element, 64-bit index
//                      division: the starting point the executor must improve on
//   seed_tree_rows     the same evaluators in their row form (row(x), then get(j)), one row per
//                      blockIdx.y, 4 consecutive columns per thread: no division, the executor's
//                      general path without vector loads
//   seed_tree_executor the same tree through fuse::cuda::eval (one launch, its own grid),
//                      checked against the naive kernel
//   seed_tree_vec4     the same tree written by hand over float4 loads and stores with fuse::math:
//                      the ceiling of the executor's contiguous fast path (seed_tree_vec4_fast:
//                      the same with fuse::fast_math, which reads no tables)
//   launch_empty       1000 empty kernels per iteration (stream-ordered, no sync per launch)
//   graph_node_empty   the same 1000 launches captured once in a CUDA graph and replayed
// Every time is measured with CUDA events around the region (manual time); each benchmark also
// reports its fraction of copy_d2d's bandwidth (`of_copy_bw`, printed as a rate: read 0.93/s as
// 0.93) where it moves bytes, and the launch benchmarks the time of one launch (`per_launch`).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include <fuse/bind/bind.hpp>
#include <fuse/core/half.hpp>
#include <fuse/cuda.hpp>
#include <fuse/expr/elementwise.hpp>
#include <fuse/expr/ops.hpp>
#include <fuse/expr/views.hpp>
#include <fuse/math/math.hpp>

#include "cuda/naive_eval.cuh"
#include "cuda_bench.cuh"

using namespace fuse::bench;

namespace {

/// The seed tree's rows x cols and the copy's bytes: several times the 50-60 MB L2.
constexpr fuse::index_t rows = 16384, cols = 1024;
constexpr std::size_t copy_bytes = std::size_t{512} << 20;

void copy_d2d(benchmark::State& state) {
  void *a, *b;
  CUDA_CHECK(cudaMalloc(&a, copy_bytes));
  CUDA_CHECK(cudaMalloc(&b, copy_bytes));
  CUDA_CHECK(cudaMemset(a, 1, copy_bytes));
  events ev;
  double total = 0;
  for (auto _ : state) {
    CUDA_CHECK(cudaEventRecord(ev.start, stream()));
    CUDA_CHECK(cudaMemcpyAsync(b, a, copy_bytes, cudaMemcpyDeviceToDevice, stream()));
    CUDA_CHECK(cudaEventRecord(ev.stop, stream()));
    const double s = ev.seconds();
    total += s;
    state.SetIterationTime(s);
  }
  copy_bandwidth = 2.0 * copy_bytes * static_cast<double>(state.iterations()) / total;
  report_bandwidth(state, 2.0 * copy_bytes);
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
}

__global__ void copy_float4(const float4* __restrict__ in, float4* __restrict__ out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    out[i] = in[i];
}

void copy_kernel(benchmark::State& state) {
  float4 *a, *b;
  const std::size_t n = copy_bytes / sizeof(float4);
  CUDA_CHECK(cudaMalloc(&a, copy_bytes));
  CUDA_CHECK(cudaMalloc(&b, copy_bytes));
  CUDA_CHECK(cudaMemset(a, 1, copy_bytes));
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  events ev;
  for (auto _ : state) {
    CUDA_CHECK(cudaEventRecord(ev.start, stream()));
    copy_float4<<<static_cast<unsigned>(sms * 8), 256, 0, stream()>>>(a, b, n);
    CUDA_CHECK(cudaEventRecord(ev.stop, stream()));
    state.SetIterationTime(ev.seconds());
  }
  CUDA_CHECK(cudaGetLastError());
  report_bandwidth(state, 2.0 * copy_bytes);
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
}

/// The seed tree's inputs on the device, and the naive kernel's result to compare with.
struct seed_inputs {
  float *x = nullptr, *bias = nullptr, *out = nullptr, *want = nullptr;
  auto tree() const {
    auto xv = fuse::cuda::view(static_cast<const float*>(x), {rows, 3 * cols});
    auto bv = fuse::cuda::view(static_cast<const float*>(bias), {cols});
    auto s = fuse::split<3>(xv, 1);
    return fuse::cast<float>(fuse::cast<fuse::half>(fuse::sigmoid(s[0]) + fuse::tanh(s[1]) * fuse::exp(s[2]) + bv));
  }
  seed_inputs() {
    CUDA_CHECK(cudaMalloc(&x, sizeof(float) * rows * 3 * cols));
    CUDA_CHECK(cudaMalloc(&bias, sizeof(float) * cols));
    CUDA_CHECK(cudaMalloc(&out, sizeof(float) * rows * cols));
    CUDA_CHECK(cudaMalloc(&want, sizeof(float) * rows * cols));
    std::vector<float> h(static_cast<std::size_t>(rows * 3 * cols));
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>((i * 2654435761u) % 1000) * 0.004f - 2.0f;
    CUDA_CHECK(cudaMemcpy(x, h.data(), sizeof(float) * h.size(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(bias, h.data(), sizeof(float) * cols, cudaMemcpyHostToDevice));
    auto bound = fuse::test::cuda::bind_2d(tree(), rows, cols);
    fuse::test::cuda::naive_eval_kernel<<<static_cast<unsigned>((rows * cols + 255) / 256), 256, 0, stream()>>>(
        bound, want, rows, cols);
    CUDA_CHECK(cudaGetLastError());
  }
  ~seed_inputs() { cudaFree(x), cudaFree(bias), cudaFree(out), cudaFree(want); }
  /// How many results differ from the naive kernel's (reported as a counter; 0 expected).
  void compare(benchmark::State& state) const {
    CUDA_CHECK(cudaStreamSynchronize(stream()));
    std::vector<float> a(static_cast<std::size_t>(rows * cols)), b(a.size());
    CUDA_CHECK(cudaMemcpy(a.data(), out, sizeof(float) * a.size(), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(b.data(), want, sizeof(float) * b.size(), cudaMemcpyDeviceToHost));
    double differ = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
    state.counters["differ_from_naive"] = differ;
  }
};

void seed_tree_naive(benchmark::State& state) {
  seed_inputs in;
  auto bound = fuse::test::cuda::bind_2d(in.tree(), rows, cols);
  events ev;
  for (auto _ : state) {
    CUDA_CHECK(cudaEventRecord(ev.start, stream()));
    fuse::test::cuda::naive_eval_kernel<<<static_cast<unsigned>((rows * cols + 255) / 256), 256, 0, stream()>>>(
        bound, in.out, rows, cols);
    CUDA_CHECK(cudaEventRecord(ev.stop, stream()));
    state.SetIterationTime(ev.seconds());
  }
  CUDA_CHECK(cudaGetLastError());
  report_bandwidth(state, sizeof(float) * (4.0 * rows * cols + cols));
}

/// bind()'s row form: row r from blockIdx.y, columns 4 t .. 4 t + 3 from the thread.
template <class Ev>
__global__ void rows_eval_kernel(Ev ev, float* out, fuse::index_t cols) {
  const fuse::index_t r = blockIdx.y;
  const fuse::index_t j0 = (static_cast<fuse::index_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (j0 >= cols) return;
  const fuse::index_t x[2] = {r, 0};
  ev.row(x);
  float* o = out + r * cols;
#pragma unroll
  for (int k = 0; k < 4; ++k)
    if (j0 + k < cols) o[j0 + k] = static_cast<float>(ev.get(j0 + k));
}

void seed_tree_executor(benchmark::State& state) {
  seed_inputs in;
  CUDA_CHECK(cudaMemset(in.out, 0xff, sizeof(float) * rows * cols));
  const auto tree = in.tree();
  const auto out = fuse::cuda::view(in.out, {rows, cols});
  events ev;
  for (auto _ : state) {
    CUDA_CHECK(cudaEventRecord(ev.start, stream()));
    fuse::cuda::eval(out, tree, fuse::cuda::on(stream()));
    CUDA_CHECK(cudaEventRecord(ev.stop, stream()));
    state.SetIterationTime(ev.seconds());
  }
  report_bandwidth(state, sizeof(float) * (4.0 * rows * cols + cols));
  in.compare(state);
}

/// The seed tree by hand: float4 loads of the three gates and the bias, float4 stores.
template <class Mode>
__device__ inline float seed_gate(float a, float b, float g, float bias) {
  const float v = fuse::math::sigmoid<Mode>(a) + fuse::math::tanh<Mode>(b) * fuse::math::exp<Mode>(g) + bias;
  return static_cast<float>(fuse::half(v));
}

template <class Mode>
__global__ void seed_tree_vec4_kernel(const float4* __restrict__ x, const float4* __restrict__ bias,
                                      float4* __restrict__ out, int cols4) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols4) return;
  const float4* xr = x + static_cast<std::size_t>(blockIdx.y) * 3 * cols4;
  const float4 a = xr[c], b = xr[cols4 + c], g = xr[2 * cols4 + c], bb = bias[c];
  out[static_cast<std::size_t>(blockIdx.y) * cols4 + c] =
      make_float4(seed_gate<Mode>(a.x, b.x, g.x, bb.x), seed_gate<Mode>(a.y, b.y, g.y, bb.y),
                  seed_gate<Mode>(a.z, b.z, g.z, bb.z), seed_gate<Mode>(a.w, b.w, g.w, bb.w));
}

void seed_tree_rows(benchmark::State& state) {
  seed_inputs in;
  auto bound = fuse::test::cuda::bind_2d(in.tree(), rows, cols);
  CUDA_CHECK(cudaMemset(in.out, 0xff, sizeof(float) * rows * cols));
  const dim3 grid(static_cast<unsigned>((cols / 4 + 255) / 256), static_cast<unsigned>(rows));
  events ev;
  for (auto _ : state) {
    CUDA_CHECK(cudaEventRecord(ev.start, stream()));
    rows_eval_kernel<<<grid, 256, 0, stream()>>>(bound, in.out, cols);
    CUDA_CHECK(cudaEventRecord(ev.stop, stream()));
    state.SetIterationTime(ev.seconds());
  }
  CUDA_CHECK(cudaGetLastError());
  report_bandwidth(state, sizeof(float) * (4.0 * rows * cols + cols));
  in.compare(state);
}

template <class Mode>
void seed_tree_vec4(benchmark::State& state) {
  seed_inputs in;
  CUDA_CHECK(cudaMemset(in.out, 0xff, sizeof(float) * rows * cols));
  const int cols4 = static_cast<int>(cols / 4);
  const dim3 grid(static_cast<unsigned>((cols4 + 255) / 256), static_cast<unsigned>(rows));
  events ev;
  for (auto _ : state) {
    CUDA_CHECK(cudaEventRecord(ev.start, stream()));
    seed_tree_vec4_kernel<Mode><<<grid, 256, 0, stream()>>>(reinterpret_cast<const float4*>(in.x),
                                                            reinterpret_cast<const float4*>(in.bias),
                                                            reinterpret_cast<float4*>(in.out), cols4);
    CUDA_CHECK(cudaEventRecord(ev.stop, stream()));
    state.SetIterationTime(ev.seconds());
  }
  CUDA_CHECK(cudaGetLastError());
  report_bandwidth(state, sizeof(float) * (4.0 * rows * cols + cols));
  if constexpr (std::is_same_v<Mode, fuse::accurate_math_t>) in.compare(state);
}

__global__ void empty_kernel() {}

/// Launches per iteration: an iteration's (manual) time is theirs together, and the counter
/// `per_launch` is the time of one (seconds; Google Benchmark prints it with a unit prefix).
constexpr int launches = 1000;

void report_per_launch(benchmark::State& state) {
  state.counters["per_launch"] =
      benchmark::Counter(static_cast<double>(launches) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void launch_empty(benchmark::State& state) {
  events ev;
  for (auto _ : state) {
    CUDA_CHECK(cudaEventRecord(ev.start, stream()));
    for (int i = 0; i < launches; ++i) empty_kernel<<<1, 32, 0, stream()>>>();
    CUDA_CHECK(cudaEventRecord(ev.stop, stream()));
    state.SetIterationTime(ev.seconds());
  }
  CUDA_CHECK(cudaGetLastError());
  report_per_launch(state);
}

void graph_node_empty(benchmark::State& state) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < launches; ++i) empty_kernel<<<1, 32, 0, stream()>>>();
  CUDA_CHECK(cudaStreamEndCapture(stream(), &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphLaunch(exec, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
  events ev;
  for (auto _ : state) {
    CUDA_CHECK(cudaEventRecord(ev.start, stream()));
    CUDA_CHECK(cudaGraphLaunch(exec, stream()));
    CUDA_CHECK(cudaEventRecord(ev.stop, stream()));
    state.SetIterationTime(ev.seconds());
  }
  report_per_launch(state);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace

// copy_d2d first: the others report their fraction of its bandwidth.
BENCHMARK(copy_d2d)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(copy_kernel)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(seed_tree_naive)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(seed_tree_rows)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(seed_tree_executor)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(seed_tree_vec4<fuse::accurate_math_t>)
    ->Name("seed_tree_vec4")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(seed_tree_vec4<fuse::fast_math_t>)
    ->Name("seed_tree_vec4_fast")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(launch_empty)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(graph_node_empty)->UseManualTime()->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "bench_cuda: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  benchmark::AddCustomContext("cuda_device", p.name);
  benchmark::AddCustomContext("cuda_sms", std::to_string(p.multiProcessorCount));
  benchmark::AddCustomContext("cuda_l2_bytes", std::to_string(p.l2CacheSize));
  fuse::bench::register_executor_benchmarks();  // after copy_d2d: they report fractions of it
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
