// A strict stand-in for the CUDA runtime (tests/cuda/strict_runtime.cpp): test_cuda_strict is
// linked against it INSTEAD of cudart, so it defines only what a kernel launch needs (the
// registration of the module's kernels, the launch configuration, cudaLaunchKernel and the error
// queries). A program that allocates, copies, frees or synchronizes does not link; the launches
// it makes are recorded, never run (no GPU is needed). This is how CI proves that
// fuse::cuda::eval does nothing but launch.
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_runtime_api.h>

namespace fuse::test::strict {

/// One cudaLaunchKernel call as the program made it.
struct launch {
  const void* kernel = nullptr;  ///< the host stub's address (the registered kernel)
  dim3 grid, block;
  std::size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;
};

/// Every launch since the program started (or since clear()).
std::vector<launch>& launches();
/// The names of the kernels the module registered.
std::vector<const char*>& registered_kernels();

}  // namespace fuse::test::strict
