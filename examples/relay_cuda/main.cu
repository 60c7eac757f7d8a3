// A Relay model compiled for CUDA by CMake: fuse_relay_generate(... OPTIONS --target cuda) turns
// attention_tail.relay into attention_tail.cuh at build time. The program runs the generated
// model on the host emulator (any machine) and checks it against the CPU executor running the
// same functions written with fuse's builders; where a GPU is present it also runs the model
// there, once directly and ten times as a replayed CUDA graph (run() only launches, so it can be
// captured), and checks that the GPU gives the emulator's results bit for bit. Exits 1 when a
// check fails.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

#include <fuse/fuse.hpp>

#include "attention_tail.cuh"

namespace {

template <class T, int R>
fuse::tensor<T, R> random_tensor(std::initializer_list<fuse::index_t> shape, std::mt19937& gen, float lo, float hi) {
  fuse::tensor<T, R> t(shape);
  std::uniform_real_distribution<float> u(lo, hi);
  for (T& v : t) v = u(gen);
  return t;
}

template <class A>
bool same_bits(const A& a, const A& b) {
  return std::memcmp(a.data(), b.data(), sizeof(*a.data()) * static_cast<std::size_t>(a.size())) == 0;
}

}  // namespace

int main() {
  std::mt19937 gen(11);
  auto scores = random_tensor<float, 4>({2, 4, 33, 33}, gen, -40, 40);
  auto mask = random_tensor<float, 4>({2, 1, 1, 33}, gen, 0, 1);
  for (float& m : mask) m = m < 0.25f ? -10000.0f : 0.0f;  // attention's additive mask
  auto x = random_tensor<float, 3>({2, 33, 96}, gen, -3, 3);
  auto residual = random_tensor<float, 3>({2, 33, 96}, gen, -3, 3);
  auto gamma = random_tensor<float, 1>({96}, gen, 0.5f, 1.5f);
  auto beta = random_tensor<float, 1>({96}, gen, -1, 1);
  fuse::tensor<std::int8_t, 4> probs({2, 4, 33, 33});
  fuse::tensor<float, 3> y({2, 33, 96});

  // The emulator: the kernel bodies on the host.
  attention_tail::emulated_model emulated(nullptr);
  emulated.run(std::as_const(scores).view(), std::as_const(mask).view(), std::as_const(x).view(),
               std::as_const(residual).view(), std::as_const(gamma).view(), std::as_const(beta).view(), probs.view(),
               y.view(), nullptr);

  // The same functions on the CPU executor.
  fuse::tensor<std::int8_t, 4> probs_cpu({2, 4, 33, 33});
  fuse::tensor<float, 3> y_cpu({2, 33, 96});
  using namespace fuse;
  eval(probs_cpu,
       cast<std::int8_t>(clip(round(softmax(scores.view() * 0.125f + mask.view()) * 127.0f), -128.0, 127.0)));
  eval(y_cpu, layer_norm(x.view() + residual.view(), gamma.view(), beta.view(), -1, 1e-12));
  int differing = 0;
  for (index_t i = 0; i < probs.size(); ++i) differing += probs.data()[i] != probs_cpu.data()[i];
  double worst = 0;
  for (index_t i = 0; i < y.size(); ++i) worst = std::fmax(worst, std::fabs(double(y.data()[i]) - y_cpu.data()[i]));
  // (a softmax times 127 can land on a rounding tie that the two summation orders split)
  const bool emulator_ok = differing <= probs.size() / 1000 && worst < 1e-4;
  std::printf("emulator vs CPU executor: %d of %lld int8 probabilities differ, layer norm max |diff| %.3g: %s\n",
              differing, static_cast<long long>(probs.size()), worst, emulator_ok ? "ok" : "FAILED");

  bool gpu_ok = true;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    cudaStream_t s = nullptr;
    FUSE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    {
      attention_tail::model m(s);  // constants uploaded, arena allocated: the only allocations
      const auto d_scores = cuda::to_device(scores, s), d_mask = cuda::to_device(mask, s);
      const auto d_x = cuda::to_device(x, s), d_residual = cuda::to_device(residual, s);
      const auto d_gamma = cuda::to_device(gamma, s), d_beta = cuda::to_device(beta, s);
      cuda::tensor<std::int8_t, 4> d_probs(probs.shape(), s);
      cuda::tensor<float, 3> d_y(y.shape(), s);
      const auto run = [&] {
        m.run(d_scores.view(), d_mask.view(), d_x.view(), d_residual.view(), d_gamma.view(), d_beta.view(),
              d_probs.view(), d_y.view(), s);
      };
      run();
      const auto probs_gpu = cuda::to_host(d_probs, s);
      const auto y_gpu = cuda::to_host(d_y, s);
      // The same run captured as a graph and replayed.
      FUSE_CUDA_CHECK(cudaMemsetAsync(d_y.data(), 0, sizeof(float) * static_cast<std::size_t>(d_y.size()), s));
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      FUSE_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      run();
      FUSE_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
      FUSE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      for (int i = 0; i < 10; ++i) FUSE_CUDA_CHECK(cudaGraphLaunch(exec, s));
      const auto y_graph = cuda::to_host(d_y, s);
      FUSE_CUDA_CHECK(cudaGraphExecDestroy(exec));
      FUSE_CUDA_CHECK(cudaGraphDestroy(graph));
      gpu_ok = same_bits(probs_gpu, probs) && same_bits(y_gpu, y) && same_bits(y_graph, y);
      cudaDeviceProp prop{};
      FUSE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
      std::printf("%s: the model, direct and as a replayed graph, gives the emulator's bits: %s\n", prop.name,
                  gpu_ok ? "ok" : "FAILED");
    }
    FUSE_CUDA_CHECK(cudaStreamSynchronize(s));
    FUSE_CUDA_CHECK(cudaStreamDestroy(s));
  } else {
    std::printf("no GPU: the model ran on the emulator only\n");
  }
  return emulator_ok && gpu_ok ? 0 : 1;
}
