// fuse::cuda::eval on a real GPU (ctest label `cuda`, registered only where nvidia-smi lists
// one; built by nvcc in every CI run): the launched kernel gives BIT-IDENTICAL results to the
// CPU's scalar lane, as the emulator does (tests/cuda/test_emulated.cpp), and one eval is one
// launch on the stream it was given. This file includes both executors, as a user's .cu file may,
// and runs the CPU's fuse::eval beside the GPU's.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fuse/cuda.hpp>
#include <fuse/fuse.hpp>

#include "cuda/scalar_lane.hpp"

namespace {

using namespace fuse;

/// The seed's gate tree over x [rows, 4n] and a bias row [1, 4n], whatever memory they are in.
template <class X, class B>
auto gate_tree(const X& x, const B& bias) {
  const auto s = split<4>(x + bias, 1);
  return sigmoid(s[0]) * tanh(s[1]) + exp(s[2]) * sigmoid(s[3]);
}

}  // namespace

TEST_CASE("cuda eval on the GPU: the seed's gate tree, bit-identical to the CPU scalar lane, one launch") {
  cudaStream_t stream{};
  FUSE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937 g(7);
  std::uniform_real_distribution<float> d(-8, 8);
  for (index_t n : {index_t{1}, index_t{7}, index_t{1023}, index_t{4097}}) {
    for (index_t rows : {index_t{1}, index_t{5}, index_t{70000}}) {
      if (rows * n > (index_t{1} << 24)) continue;
      CAPTURE(n);
      CAPTURE(rows);
      std::vector<float> hx(static_cast<std::size_t>(rows * 4 * n)), hb(static_cast<std::size_t>(4 * n));
      for (auto& v : hx) v = d(g);
      for (auto& v : hb) v = d(g) / 8;
      float *dx = nullptr, *db = nullptr, *dout = nullptr;
      FUSE_CUDA_CHECK(cudaMallocAsync(&dx, hx.size() * sizeof(float), stream));
      FUSE_CUDA_CHECK(cudaMallocAsync(&db, hb.size() * sizeof(float), stream));
      FUSE_CUDA_CHECK(cudaMallocAsync(&dout, static_cast<std::size_t>(rows * n) * sizeof(float), stream));
      FUSE_CUDA_CHECK(cudaMemcpyAsync(dx, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
      FUSE_CUDA_CHECK(cudaMemcpyAsync(db, hb.data(), hb.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
      FUSE_CUDA_CHECK(cudaMemsetAsync(dout, 0xFF, static_cast<std::size_t>(rows * n) * sizeof(float), stream));

      const tensor_view<const float, 2> x(dx, dynamic_shape<2>({rows, 4 * n})), b(db, dynamic_shape<2>({1, 4 * n}));
      tensor_view<float, 2> out(dout, dynamic_shape<2>({rows, n}));
      cuda::launch_log log;
      cuda::eval(out, gate_tree(x, b), cuda::on(stream), cuda::log_to(log));
      CHECK(log.size() == 1);
      std::vector<float> got(static_cast<std::size_t>(rows * n));
      FUSE_CUDA_CHECK(cudaMemcpyAsync(got.data(), dout, got.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
      FUSE_CUDA_CHECK(cudaStreamSynchronize(stream));
      FUSE_CUDA_CHECK(cudaFreeAsync(dx, stream));
      FUSE_CUDA_CHECK(cudaFreeAsync(db, stream));
      FUSE_CUDA_CHECK(cudaFreeAsync(dout, stream));

      const tensor_view<const float, 2> hxv(hx.data(), dynamic_shape<2>({rows, 4 * n})),
          hbv(hb.data(), dynamic_shape<2>({1, 4 * n}));
      const auto want = test::cuda::scalar_lane<accurate_math_t, float>(index_array<2>{{rows, n}}, gate_tree(hxv, hbv));
      CHECK(test::cuda::count_differences(got.data(), want.data(), got.size()) == 0);
      // The CPU executor from the same .cu file: its SIMD lanes take the scalar lane's algorithm
      // on AVX-512 hosts and other forms (same ULP bounds) on AVX2 ones, so this is reported.
      std::vector<float> cpu(got.size());
      fuse::eval(tensor_view<float, 2>(cpu.data(), dynamic_shape<2>({rows, n})), gate_tree(hxv, hbv));
      const std::size_t cpu_differ = test::cuda::count_differences(got.data(), cpu.data(), got.size());
      MESSAGE("rows " << rows << ", n " << n << ": " << cpu_differ << " of " << got.size()
                      << " results differ between the GPU and fuse::eval on this CPU");
    }
  }
  FUSE_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("cuda eval on the GPU: a launch without a stream, or on the legacy default stream, is refused") {
  float* d = nullptr;
  FUSE_CUDA_CHECK(cudaMalloc(&d, 16 * sizeof(float)));
  tensor_view<float, 1> v(d, dynamic_shape<1>({16}));
  CHECK_THROWS_WITH_AS(cuda::eval(v, v * 2.0f), doctest::Contains("fuse::cuda::on(stream)"), error);
  CHECK_THROWS_WITH_AS(cuda::eval(v, v * 2.0f, cuda::on(nullptr)), doctest::Contains("legacy default stream"), error);
  FUSE_CUDA_CHECK(cudaFree(d));
}

TEST_CASE("cuda errors become fuse::error naming the call, the file, the line and the CUDA error") {
  void* p = nullptr;
  CHECK_THROWS_WITH_AS(FUSE_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 60)), doctest::Contains("test_eval.cu:"),
                       error);
  CHECK_THROWS_WITH_AS(FUSE_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 60)),
                       doctest::Contains("cudaMalloc(&p, std::size_t{1} << 60): cudaErrorMemoryAllocation"), error);
  (void)cudaGetLastError();  // clear the sticky-free error state for the next cases
}
