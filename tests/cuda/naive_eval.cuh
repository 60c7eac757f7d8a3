// The shared evaluators in a kernel the simplest way, before the CUDA executor exists (issue 14):
// one thread per element of a rank-2 result, the index split by a 64-bit division, bind()'s
// scalar form. Used by the CUDA suites, tests/cuda/shared_headers.cu and bench/bench_cuda.cu
// (as the starting point the executor must beat).
#pragma once

#include <fuse/bind/bind.hpp>

namespace fuse::test::cuda {

/// out[i * cols + j] = ev.at({i, j}), converted to T.
template <class Ev, class T>
__global__ void naive_eval_kernel(Ev ev, T* out, index_t rows, index_t cols) {
  const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * cols) return;
  index_t x[2] = {i / cols, i % cols};
  out[i] = static_cast<T>(ev.at(x));
}

/// bind()'s context for trees that have no node needing materialisation (no reduction or
/// contraction inside).
struct no_materialize {
  template <class N>
  int materialize(const N&) {
    return 0;
  }
};

/// e bound over a rows x cols result (e broadcast to it), accurate math.
template <class E>
auto bind_2d(const E& e, index_t rows, index_t cols) {
  no_materialize ctx;
  return bind::bind<accurate_math_t>(
      e, bind::affine_map<2, 2>::broadcast(e.shape().array(), index_array<2>{{rows, cols}}), ctx);
}

}  // namespace fuse::test::cuda
