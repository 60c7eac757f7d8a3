// fuse::cuda::eval on a real GPU (ctest label `cuda`, registered only where nvidia-smi lists
// one; built by nvcc in every CI run): the launched kernel gives BIT-IDENTICAL results to the
// CPU's scalar lane, as the emulator does (tests/cuda/test_emulated.cpp), and one eval is one
// launch on the stream it was given. This file includes both executors, as a user's .cu file may,
// and runs the CPU's fuse::eval beside the GPU's.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
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
      const tensor_view<const float, 2> hxv(hx.data(), dynamic_shape<2>({rows, 4 * n})),
          hbv(hb.data(), dynamic_shape<2>({1, 4 * n}));
      const cuda::tensor<float, 2> x = cuda::to_device(hxv, stream), b = cuda::to_device(hbv, stream);
      cuda::tensor<float, 2> out({rows, n}, stream);
      FUSE_CUDA_CHECK(cudaMemsetAsync(out.data(), 0xFF, sizeof(float) * static_cast<std::size_t>(out.size()), stream));
      cuda::launch_log log;
      cuda::eval(out, gate_tree(x.view(), b.view()), cuda::on(stream), cuda::log_to(log));
      CHECK(log.size() == 1);
      const fuse::tensor<float, 2> host_out = cuda::to_host(out, stream);
      std::vector<float> got(host_out.begin(), host_out.end());

      // Bit for bit where this host's scalar math is the device's algorithm (fused fmas and the
      // wide tables: an AVX-512 build); elsewhere the host computes the same functions by another
      // sequence of roundings, so the count is reported and the double reference decides.
      const auto want = test::cuda::scalar_lane<accurate_math_t, float>(index_array<2>{{rows, n}}, gate_tree(hxv, hbv));
      const std::size_t lane_differ = test::cuda::count_differences(got.data(), want.data(), got.size());
      if (test::cuda::host_runs_device_algorithm) CHECK(lane_differ == 0);
      else MESSAGE("host math is not the device's algorithm: " << lane_differ << " of " << got.size() << " differ");
      // Against the double reference of each op over the same float inputs (x + bias rounded as
      // the tree rounds it): each op within its few ulps, so the result within 8 ulps of the
      // larger term (a cancellation of the two terms can leave fewer correct bits).
      auto off_reference = [&](const float* r) {
        std::size_t off = 0;
        for (index_t i = 0; i < rows; ++i)
          for (index_t j = 0; j < n; ++j) {
            auto in = [&](index_t k) {
              const auto c = static_cast<std::size_t>(k * n + j);
              return double{hx[static_cast<std::size_t>(i * 4 * n) + c] + hb[c]};
            };
            auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
            const double t1 = sig(in(0)) * std::tanh(in(1)), t2 = std::exp(in(2)) * sig(in(3));
            const double v = r[static_cast<std::size_t>(i * n + j)];
            off += !(std::abs(v - (t1 + t2)) <= 0x1p-20 * std::max(std::abs(t1), std::abs(t2)) + 0x1p-140);
          }
        return off;
      };
      CHECK(off_reference(got.data()) == 0);
      CHECK(off_reference(want.data()) == 0);
      // The CPU executor from the same .cu file: its SIMD lanes take the scalar lane's algorithm
      // on AVX-512 hosts and other forms (same ULP bounds) on AVX2 ones, so this is reported.
      std::vector<float> cpu(got.size());
      fuse::eval(tensor_view<float, 2>(cpu.data(), dynamic_shape<2>({rows, n})), gate_tree(hxv, hbv));
      CHECK(off_reference(cpu.data()) == 0);
      const std::size_t cpu_differ = test::cuda::count_differences(got.data(), cpu.data(), got.size());
      MESSAGE("rows " << rows << ", n " << n << ": " << cpu_differ << " of " << got.size()
                      << " results differ between the GPU and fuse::eval on this CPU");
    }
  }
  FUSE_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("cuda eval on the GPU: row programs (softmax, layer norms, reductions) give the emulator's bits") {
  // The same body runs on the GPU and in the emulator, combining a row's partial results in the
  // same order; only log_softmax's double log may differ (the device's log against the host's).
  cudaStream_t stream{};
  FUSE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937 g(11);
  std::uniform_real_distribution<float> d(-6, 6);
  for (index_t n : {index_t{1}, index_t{7}, index_t{384}, index_t{768}, index_t{1025}, index_t{3072}}) {
    for (index_t rows : {index_t{1}, index_t{37}}) {
      CAPTURE(n);
      CAPTURE(rows);
      fuse::tensor<float, 2> hx({rows, n}), hr({rows, n});
      fuse::tensor<float, 1> hg({n}), hb({n});
      for (auto& v : hx) v = d(g);
      for (auto& v : hr) v = d(g);
      for (auto& v : hg) v = 1 + d(g) / 12;
      for (auto& v : hb) v = d(g) / 6;
      const auto x = cuda::to_device(hx.view(), stream), r = cuda::to_device(hr.view(), stream);
      const auto gm = cuda::to_device(hg.view(), stream), bt = cuda::to_device(hb.view(), stream);
      auto trees = [](const auto& x, const auto& r, const auto& gm, const auto& bt) {
        const auto dv = x - mean(x, -1, keepdims);
        return std::make_tuple(softmax(x * 0.125f + r), layer_norm(x + r, gm, bt),
                               dv / sqrt(mean(dv * dv, -1, keepdims) + 1e-12f) * gm + bt, log_softmax(x));
      };
      const auto on_gpu = trees(x.view(), r.view(), gm.view(), bt.view());
      const auto on_host = trees(hx.view(), hr.view(), hg.view(), hb.view());
      cuda::tensor<float, 2> out({rows, n}, stream);
      fuse::tensor<float, 2> emu({rows, n});
      cuda::launch_log log;
      auto compare = [&](const auto& ge, const auto& he, bool exact, const char* what) {
        INFO(what);
        cuda::eval(out, ge, cuda::on(stream), cuda::log_to(log));
        cuda::eval(emu, he, cuda::emulated);
        const auto got = cuda::to_host(out, stream);
        const std::size_t differ = test::cuda::count_differences(got.data(), emu.data(), got.size());
        if (exact) CHECK(differ == 0);
        else MESSAGE(what << ": " << differ << " of " << got.size() << " differ from the emulator");
      };
      compare(std::get<0>(on_gpu), std::get<0>(on_host), true, "softmax");
      compare(std::get<1>(on_gpu), std::get<1>(on_host), true, "residual + layer_norm");
      compare(std::get<2>(on_gpu), std::get<2>(on_host), true, "decomposed layer norm");
      compare(std::get<3>(on_gpu), std::get<3>(on_host), false, "log_softmax");
      CHECK(log.size() == 4);
      // A reduction at the root: one value a row.
      cuda::tensor<float, 1> m({rows}, stream);
      fuse::tensor<float, 1> me({rows});
      cuda::eval(m, mean(exp(x.view() * 0.5f), -1), cuda::on(stream));
      cuda::eval(me, mean(exp(hx.view() * 0.5f), -1), cuda::emulated);
      const auto mg = cuda::to_host(m, stream);
      CHECK(test::cuda::count_differences(mg.data(), me.data(), static_cast<std::size_t>(rows)) == 0);
    }
  }
  // Instance norm (reductions over H and W inside the tree: blocks of sub-rows) and a reduction
  // over two axes apart whose kept axis is the output's last.
  for (index_t hw : {index_t{1}, index_t{7}, index_t{56}}) {
    CAPTURE(hw);
    fuse::tensor<float, 4> hx({2, 3, hw, hw + 2});
    for (auto& v : hx) v = d(g);
    const auto x = cuda::to_device(hx.view(), stream);
    auto inorm = [](const auto& x) {
      const auto dv = x - mean(x, {2, 3}, keepdims);
      return dv / sqrt(mean(dv * dv, {2, 3}, keepdims) + 1e-5f);
    };
    auto apart = [](const auto& x) { return x * sum(x, {0, 2}, keepdims); };
    cuda::tensor<float, 4> out({2, 3, hw, hw + 2}, stream);
    fuse::tensor<float, 4> emu({2, 3, hw, hw + 2});
    cuda::eval(out, inorm(x.view()), cuda::on(stream));
    cuda::eval(emu, inorm(hx.view()), cuda::emulated);
    auto got = cuda::to_host(out, stream);
    CHECK(test::cuda::count_differences(got.data(), emu.data(), got.size()) == 0);
    cuda::eval(out, apart(x.view()), cuda::on(stream));
    cuda::eval(emu, apart(hx.view()), cuda::emulated);
    got = cuda::to_host(out, stream);
    CHECK(test::cuda::count_differences(got.data(), emu.data(), got.size()) == 0);
  }
  FUSE_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("cuda eval on the GPU: a launch without a stream, or on the legacy default stream, is refused") {
  float* d = nullptr;
  FUSE_CUDA_CHECK(cudaMalloc(&d, 16 * sizeof(float)));
  const auto v = cuda::view(d, {16});
  CHECK_THROWS_WITH_AS(cuda::eval(v, v * 2.0f), doctest::Contains("fuse::cuda::on(stream)"), error);
  CHECK_THROWS_WITH_AS(cuda::eval(v, v * 2.0f, cuda::on(nullptr)), doctest::Contains("legacy default stream"), error);
  FUSE_CUDA_CHECK(cudaFree(d));
}

TEST_CASE("cuda tensor and copy: stream-ordered device memory, round trips, shape and stream errors") {
  cudaStream_t stream{};
  FUSE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937 g(3);
  for (index_t n : {index_t{0}, index_t{1}, index_t{17}, index_t{1023}}) {
    CAPTURE(n);
    fuse::tensor<std::int32_t, 2> h({3, n});
    for (auto& v : h) v = static_cast<std::int32_t>(g() % 2000001) - 1000000;
    cuda::tensor<std::int32_t, 2> d({3, n}, stream);
    CHECK(d.size() == 3 * n);
    const auto zeroed = cuda::to_host(d, stream);
    CHECK(std::count(zeroed.begin(), zeroed.end(), 0) == zeroed.size());
    cuda::copy(d, h, cuda::on(stream));
    cuda::tensor<std::int32_t, 2> e({3, n}, stream);
    cuda::copy(e, d, cuda::on(stream));      // device to device
    cuda::eval(e, e + 1, cuda::on(stream));  // a device tensor as output and operand
    const auto back = cuda::to_host(e, stream);
    for (index_t i = 0; i < h.size(); ++i) CHECK(back.data()[i] == h.data()[i] + 1);
    cuda::tensor<std::int32_t, 2> moved = std::move(e);  // the memory moves with it
    CHECK(moved.size() == 3 * n);
    CHECK(e.data() == nullptr);
    CHECK(e.size() == 0);
  }
  {  // (a tensor is freed on its stream: it must go before the stream is destroyed)
    cuda::tensor<float, 2> a({2, 3}, stream);
    fuse::tensor<float, 2> wrong({3, 2});
    CHECK_THROWS_WITH_AS(cuda::copy(a, wrong, cuda::on(stream)),
                         doctest::Contains("cuda::copy: the destination has shape"), shape_error);
    CHECK_THROWS_WITH_AS(cuda::copy(cuda::view(a.data(), {3, 2}, {1, 3}), wrong, cuda::on(stream)),
                         doctest::Contains("contiguous"), shape_error);
  }
  CHECK_THROWS_WITH_AS((cuda::tensor<float, 2>({2, 3}, nullptr)), doctest::Contains("legacy default stream"), error);
  FUSE_CUDA_CHECK(cudaStreamSynchronize(stream));
  FUSE_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("cuda errors become fuse::error naming the call, the file, the line and the CUDA error") {
  void* p = nullptr;
  CHECK_THROWS_WITH_AS(FUSE_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 60)), doctest::Contains("test_eval.cu:"),
                       error);
  CHECK_THROWS_WITH_AS(FUSE_CUDA_CHECK(cudaMalloc(&p, std::size_t{1} << 60)),
                       doctest::Contains("cudaMalloc(&p, std::size_t{1} << 60): cudaErrorMemoryAllocation"), error);
  (void)cudaGetLastError();  // clear the sticky-free error state for the next cases
}
