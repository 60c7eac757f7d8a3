// Compiled by nvcc whenever it is found (see the top-level CMakeLists.txt): it includes the
// headers the CUDA executor shares with the CPU one (core, expr, the op table, math, bind) and
// evaluates a fused tree with views, casts and broadcasting in device code, so that CI keeps
// them nvcc-clean while the CUDA executor is being built.
#include <fuse/bind/bind.hpp>
#include <fuse/core/half.hpp>
#include <fuse/expr/elementwise.hpp>
#include <fuse/expr/ops.hpp>
#include <fuse/expr/views.hpp>
#include <fuse/math/math.hpp>

#include "cuda/naive_eval.cuh"

namespace {

/// Every op of the table on one lane, both math modes.
__global__ void ops_kernel(float* p, fuse::half* h) {
  const float x = p[threadIdx.x];
  float r = fuse::ops::exp{}.apply<fuse::accurate_math_t>(x) + fuse::ops::log{}.apply<fuse::fast_math_t>(x) +
            fuse::ops::tanh{}.apply<fuse::accurate_math_t>(x) + fuse::ops::sigmoid{}.apply<fuse::fast_math_t>(x) +
            fuse::ops::sigmoid{}.apply<fuse::accurate_math_t>(x) + fuse::ops::erf{}.apply<fuse::accurate_math_t>(x) +
            fuse::ops::gelu{}.apply<fuse::accurate_math_t>(x) + fuse::ops::gelu_tanh{}.apply<fuse::accurate_math_t>(x) +
            fuse::ops::rsqrt{}.apply<fuse::accurate_math_t>(x) + fuse::ops::round{}.apply<fuse::accurate_math_t>(x) +
            fuse::ops::sign{}.apply<fuse::accurate_math_t>(x);
  r += fuse::ops::maximum{}.apply<fuse::accurate_math_t>(x, r) + fuse::ops::clip{}.apply<fuse::accurate_math_t>(x);
  h[threadIdx.x] = fuse::half(r) + h[threadIdx.x];
  p[threadIdx.x] = r + static_cast<float>(fuse::convert_value<std::int8_t, float>(r));
}

}  // namespace

/// Host side: builds a tree like the seed's (split of a strided input, gates, a broadcast bias,
/// a cast) and launches its evaluator. Never called by the tests; it only has to compile.
void fuse_cuda_headers_check(const float* dev_x, const float* dev_bias, float* dev_out, fuse::index_t rows,
                             fuse::index_t cols) {
  auto x = fuse::view(dev_x, {rows, 3 * cols});
  auto bias = fuse::view(dev_bias, {cols});
  auto s = fuse::split<3>(x, 1);
  auto e = fuse::cast<float>(fuse::cast<fuse::half>(fuse::sigmoid(s[0]) + fuse::tanh(s[1]) * fuse::exp(s[2]) + bias));
  auto ev = fuse::test::cuda::bind_2d(e, rows, cols);
  fuse::test::cuda::naive_eval_kernel<<<static_cast<unsigned>((rows * cols + 255) / 256), 256>>>(ev, dev_out, rows,
                                                                                                 cols);
  ops_kernel<<<1, 32>>>(dev_out, nullptr);
}
