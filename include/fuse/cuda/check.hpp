// CUDA runtime errors as fuse::error, saying where they happened:
//   FUSE_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream));
//   // throws fuse::error("file.cu:12: cudaMallocAsync(&p, bytes, stream): cudaErrorMemoryAllocation (out of memory)")
// Defined where the CUDA runtime's header is on the include path (nvcc always has it).
#pragma once

#include <string>

#include "fuse/core/error.hpp"

#if defined(__CUDACC__) || __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
/// Defined where the CUDA runtime's API is declared (what calls it: check, cuda::tensor, copy).
#define FUSE_CUDA_RUNTIME 1

namespace fuse::cuda {

/// Throws fuse::error naming the call, its file and line and the CUDA error, unless e is cudaSuccess.
inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  throw error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " + cudaGetErrorName(e) + " (" +
              cudaGetErrorString(e) + ")");
}

}  // namespace fuse::cuda

#define FUSE_CUDA_CHECK(call) ::fuse::cuda::check((call), #call, __FILE__, __LINE__)
#endif
