// What the CUDA benchmarks share (bench_cuda.cu, bench_cuda_executor.cu: one executable, so that
// every ratio is against the copy bandwidth measured in the same run on the same card): error
// checks, CUDA-event timing, the stream, and the copy bandwidth the others report against.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace fuse::bench {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
    std::exit(1);
  }
}
#define CUDA_CHECK(call) ::fuse::bench::cuda_check((call), #call)

/// A start and a stop event; seconds() waits for the stop.
struct events {
  cudaEvent_t start{}, stop{};
  events() {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  events(const events&) = delete;
  events& operator=(const events&) = delete;
  double seconds() {
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms * 1e-3;
  }
};

/// The one (non-blocking) stream every benchmark launches on.
inline cudaStream_t stream() {
  static cudaStream_t s = [] {
    cudaStream_t t;
    CUDA_CHECK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
    return t;
  }();
  return s;
}

/// Bytes/s of copy_d2d (cudaMemcpyAsync device to device), set by it; it runs first.
inline double copy_bandwidth = 0;

/// Bytes moved per iteration, and their time as a fraction of the copy's (`of_copy_bw`,
/// printed as a rate: read 0.93/s as 0.93).
inline void report_bandwidth(benchmark::State& state, double bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_iteration * static_cast<double>(state.iterations())));
  if (copy_bandwidth > 0) {
    state.counters["of_copy_bw"] = benchmark::Counter(
        bytes_per_iteration * static_cast<double>(state.iterations()) / copy_bandwidth, benchmark::Counter::kIsRate);
  }
}

/// The benchmarks of fuse::cuda::eval against the issue's anchors (bench_cuda_executor.cu),
/// registered after bench_cuda.cu's own.
void register_executor_benchmarks();

}  // namespace fuse::bench
