// Compiled by nvcc whenever it is found (see the top-level CMakeLists.txt): it includes the
// headers the CUDA executor shares with the CPU one and instantiates them in device code.
#include <fuse/core/config.hpp>

__global__ void fuse_shared_headers_kernel(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}
