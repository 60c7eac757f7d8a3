// On a real GPU (ctest label `cuda`, registered only where nvidia-smi lists one): the op table's
// scalar code and the bound evaluators give BIT-IDENTICAL results in device code and on the
// CPU's scalar lane. This is the premise of the CUDA executor's numerics (one math code, no
// compiler-made FMAs: this translation unit is compiled with -fmad=false, as the executor's
// kernels will be), checked on fresh random inputs that cover every exponent, the signs,
// subnormals, +-inf and NaN.
//
// A second build of this file with nvcc's default contraction (-fmad=true, the target
// test_cuda_scalar_lane_fmad) reports how many results the contraction changes, as a message:
// the measured reason for -fmad=false, not an assertion.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <fuse/bind/bind.hpp>
#include <fuse/core/half.hpp>
#include <fuse/expr/elementwise.hpp>
#include <fuse/expr/ops.hpp>
#include <fuse/expr/views.hpp>
#include <fuse/math/math.hpp>

#include "cuda/naive_eval.cuh"
#include "cuda/scalar_lane.hpp"
#include "support/random.hpp"

#ifndef FUSE_TEST_FMAD
#define FUSE_TEST_FMAD 0
#endif

namespace {

using fuse::test::cuda::host_runs_device_algorithm;

#define CUDA_OK(call)                                                                                        \
  do {                                                                                                       \
    const cudaError_t e_ = (call);                                                                           \
    const std::string what_ = std::string(#call ": ") + cudaGetErrorName(e_) + " " + cudaGetErrorString(e_); \
    REQUIRE_MESSAGE(e_ == cudaSuccess, what_);                                                               \
  } while (0)

/// A device buffer of n T's, freed on scope exit.
template <class T>
struct device_buffer {
  T* p = nullptr;
  std::size_t n = 0;
  explicit device_buffer(std::size_t count) : n(count) { CUDA_OK(cudaMalloc(&p, (n ? n : 1) * sizeof(T))); }
  ~device_buffer() { cudaFree(p); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  void upload(const std::vector<T>& v) {
    CUDA_OK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> v(n);
    CUDA_OK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  /// Every byte 0xFF: a result the kernel does not write stays a NaN with a recognisable pattern.
  void poison() { CUDA_OK(cudaMemset(p, 0xFF, (n ? n : 1) * sizeof(T))); }
};

void sync_and_check() {
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
}

template <class Op, class M>
__global__ void unary_kernel(const float* in, float* out, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Op{}.template apply<M>(in[i]);
}
template <class Op, class M>
__global__ void binary_kernel(const float* a, const float* b, float* out, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Op{}.template apply<M>(a[i], b[i]);
}

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + 255) / 256); }

bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;  // NaN payloads are not specified by IEEE
  std::uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

/// Floats covering every exponent and both signs (random bit patterns), then normal-range values,
/// then the edge values.
std::vector<float> test_floats(std::size_t n, std::uint64_t salt) {
  auto g = fuse::test::rng(salt);
  std::vector<float> v;
  v.reserve(n + 16);
  for (std::size_t i = 0; i < n / 2; ++i) {
    const auto bits = static_cast<std::uint32_t>(g());
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
  }
  std::uniform_real_distribution<float> u(-20.0f, 20.0f);
  while (v.size() < n) v.push_back(u(g));
  const float inf = std::numeric_limits<float>::infinity();
  for (float f :
       {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
        -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
        -std::numeric_limits<float>::max(), 0.5f, -0.5f, 2.5f, 88.7f, -103.9f, 1e-20f})
    v.push_back(f);
  return v;
}

/// Counts the results of Op (scalar code, mode M) that differ in a bit between the GPU and the CPU.
template <class Op, class M>
std::size_t unary_mismatches(const std::vector<float>& x, std::string& first) {
  device_buffer<float> din(x.size()), dout(x.size());
  din.upload(x);
  dout.poison();
  unary_kernel<Op, M><<<blocks_for(x.size()), 256>>>(din.p, dout.p, static_cast<std::uint32_t>(x.size()));
  sync_and_check();
  const auto got = dout.download();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want = Op{}.template apply<M>(x[i]);
    if (!same_bits(got[i], want) && bad++ == 0)
      first = std::string(Op::name) + "(" + std::to_string(x[i]) + "): gpu " + std::to_string(got[i]) + ", cpu " +
              std::to_string(want);
  }
  return bad;
}

template <class Op, class M>
std::size_t binary_mismatches(const std::vector<float>& a, const std::vector<float>& b, std::string& first) {
  device_buffer<float> da(a.size()), db(b.size()), dout(a.size());
  da.upload(a);
  db.upload(b);
  dout.poison();
  binary_kernel<Op, M><<<blocks_for(a.size()), 256>>>(da.p, db.p, dout.p, static_cast<std::uint32_t>(a.size()));
  sync_and_check();
  const auto got = dout.download();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const float want = Op{}.template apply<M>(a[i], b[i]);
    if (!same_bits(got[i], want) && bad++ == 0)
      first = std::string(Op::name) + "(" + std::to_string(a[i]) + ", " + std::to_string(b[i]) + "): gpu " +
              std::to_string(got[i]) + ", cpu " + std::to_string(want);
  }
  return bad;
}

/// FUSE_TEST_FMAD=0 on a host that runs the device's algorithm: every difference is a failure.
/// Otherwise the count is reported.
void expect_identical(const char* what, std::size_t bad, std::size_t n, const std::string& first) {
  const std::string text = std::string(what) + ": " + std::to_string(bad) + " of " + std::to_string(n) +
                           " results differ from the CPU" + (bad ? "; first: " + first : std::string());
  if (FUSE_TEST_FMAD) {
    const std::string line = "-fmad=true: " + text;
    MESSAGE(line);
  } else if (!host_runs_device_algorithm) {
    const std::string line =
        "host math without fused fma or wide tables (compile with -march=native on AVX-512): " + text;
    MESSAGE(line);
  } else {
    CHECK_MESSAGE(bad == 0, text);  // a std::string: doctest streams it
  }
}

template <class M, class... Ops>
void check_unary(const std::vector<float>& x) {
  (
      [&] {
        std::string first;
        expect_identical(Ops::name, unary_mismatches<Ops, M>(x, first), x.size(), first);
      }(),
      ...);
}
template <class M, class... Ops>
void check_binary(const std::vector<float>& a, const std::vector<float>& b) {
  (
      [&] {
        std::string first;
        expect_identical(Ops::name, binary_mismatches<Ops, M>(a, b, first), a.size(), first);
      }(),
      ...);
}

}  // namespace

TEST_CASE("cuda: a GPU is present (this suite is registered only where nvidia-smi lists one)") {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  const std::string what = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e);
  REQUIRE_MESSAGE(e == cudaSuccess, what);
  REQUIRE(n > 0);
  cudaDeviceProp p{};
  CUDA_OK(cudaGetDeviceProperties(&p, 0));
  const std::string line = "device 0: " + std::string(p.name) + ", sm_" + std::to_string(p.major * 10 + p.minor) +
                           ", " + std::to_string(p.multiProcessorCount) + " SMs, " +
                           std::to_string(p.totalGlobalMem >> 20) + " MiB; host math " +
                           (host_runs_device_algorithm ? "runs the device's algorithm"
                                                       : "differs from the device's (no fused fma or wide tables)");
  MESSAGE(line);
}

namespace {

/// The ops of fuse's table that take float operands (float results, or bool ones stored as 0/1:
/// isnan, isinf, isfinite), of one arity: every one is checked, so that an op added to the table
/// is checked on the GPU without being listed here.
template <class Op, int Arity>
inline constexpr bool float_op_of_arity =
    Op::arity == Arity && (Op::kind == fuse::ops::rule_kind::numeric || Op::kind == fuse::ops::rule_kind::floating ||
                           Op::kind == fuse::ops::rule_kind::classify);

/// Calls f.template operator()<Op>() for each such op of the list; returns how many.
template <int Arity, class F, class... Op>
std::size_t for_each_float_op(fuse::ops::op_list<Op...>, F&& f) {
  std::size_t count = 0;
  (
      [&] {
        if constexpr (float_op_of_arity<Op, Arity>) {
          f.template operator()<Op>();
          ++count;
        }
      }(),
      ...);
  return count;
}

}  // namespace

TEST_CASE("cuda: every unary float op's scalar code is bit-identical on the GPU and the CPU") {
  const auto x = test_floats(std::size_t{1} << 22, 1);
  const fuse::ops::relay_elementwise table;
  const std::size_t accurate =
      for_each_float_op<1>(table, [&]<class Op> { check_unary<fuse::accurate_math_t, Op>(x); });
  const std::size_t fast = for_each_float_op<1>(table, [&]<class Op> { check_unary<fuse::fast_math_t, Op>(x); });
  CHECK(accurate == fast);
  CHECK(accurate >= 38);  // the table's unary float ops (exp ... atanh, isnan, fast_exp, gelu, ...)
  MESSAGE(accurate << " unary ops, accurate and fast math");
}

TEST_CASE("cuda: every binary float op's scalar code is bit-identical on the GPU and the CPU") {
  const auto a = test_floats(std::size_t{1} << 21, 2), b = test_floats(std::size_t{1} << 21, 3);
  const std::size_t checked = for_each_float_op<2>(fuse::ops::relay_elementwise{},
                                                   [&]<class Op> { check_binary<fuse::accurate_math_t, Op>(a, b); });
  CHECK(checked >= 12);  // add ... minimum, floor_divide, floor_mod, trunc_divide, trunc_mod, prelu
  MESSAGE(checked << " binary ops");
}

TEST_CASE("cuda: the seed's fused tree (split, gates, broadcast bias, casts) is bit-identical on the GPU and the CPU") {
  for (const auto [rows, cols] : {std::pair<fuse::index_t, fuse::index_t>{1, 1}, {7, 17}, {37, 1031}, {64, 256}}) {
    CAPTURE(rows);
    CAPTURE(cols);
    auto g = fuse::test::rng(static_cast<std::uint64_t>(rows * 131 + cols));
    std::normal_distribution<float> nd(0.0f, 4.0f);
    std::vector<float> x(static_cast<std::size_t>(rows * 3 * cols)), bias(static_cast<std::size_t>(cols));
    for (auto& v : x) v = nd(g);
    for (auto& v : bias) v = nd(g);
    x[0] = std::numeric_limits<float>::quiet_NaN();
    if (x.size() > 5) x[5] = std::numeric_limits<float>::infinity(), x[3] = -1e30f;
    device_buffer<float> dx(x.size()), dbias(bias.size());
    dx.upload(x);
    dbias.upload(bias);
    // The same tree over host and over device memory.
    auto tree = [&](const float* px, const float* pb) {
      auto xv = fuse::view(px, {rows, 3 * cols});
      auto bv = fuse::view(pb, {cols});
      auto s = fuse::split<3>(xv, 1);
      return fuse::cast<float>(fuse::cast<fuse::half>(fuse::sigmoid(s[0]) + fuse::tanh(s[1]) * fuse::exp(s[2]) + bv));
    };
    auto int8_tree = [&](const float* px, const float* pb) {
      auto xv = fuse::view(px, {rows, 3 * cols});
      auto bv = fuse::view(pb, {cols});
      auto s = fuse::split<3>(xv, 1);
      return fuse::cast<std::int8_t>(fuse::clip(fuse::round(s[1] * 17.5f + bv), -128.0f, 127.0f));
    };
    // Evaluates make(x, bias) over device memory in a kernel and over host memory on the CPU's
    // scalar lane, as T, and compares the bits.
    auto compare = [&]<class T>(const char* what, auto make) {
      const std::size_t n = static_cast<std::size_t>(rows * cols);
      device_buffer<T> out(n);
      out.poison();
      fuse::test::cuda::naive_eval_kernel<<<blocks_for(n), 256>>>(
          fuse::test::cuda::bind_2d(make(dx.p, dbias.p), rows, cols), out.p, rows, cols);
      sync_and_check();
      const auto got = out.download();
      auto ev = fuse::test::cuda::bind_2d(make(x.data(), bias.data()), rows, cols);
      std::size_t bad = 0;
      std::string first;
      for (fuse::index_t i = 0; i < rows; ++i)
        for (fuse::index_t j = 0; j < cols; ++j) {
          fuse::index_t at[2] = {i, j};
          const T want = static_cast<T>(ev.at(at)), have = got[static_cast<std::size_t>(i * cols + j)];
          const bool same = std::is_floating_point_v<T> ? same_bits(static_cast<float>(have), static_cast<float>(want))
                                                        : have == want;
          if (!same && bad++ == 0) first = "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
        }
      expect_identical(what, bad, n, first);
    };
    compare.operator()<float>("the seed tree", tree);
    compare.operator()<std::int8_t>("the int8 requantize tree", int8_tree);
  }
}
