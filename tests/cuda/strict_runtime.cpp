// The strict CUDA runtime of tests/cuda/strict_runtime.hpp: the entry points nvcc's generated
// host code and fuse::cuda::eval call for a launch, and nothing else (a missing symbol at link
// time is the test's verdict on any other call). Compiled by the host compiler.
#include "cuda/strict_runtime.hpp"

#include <vector>

namespace fuse::test::strict {

std::vector<launch>& launches() {
  static std::vector<launch> l;
  return l;
}
std::vector<const char*>& registered_kernels() {
  static std::vector<const char*> k;
  return k;
}

namespace {
struct configuration {
  dim3 grid, block;
  std::size_t shared_bytes = 0;
  void* stream = nullptr;
};
// <<<...>>> pushes a configuration that the kernel's host stub pops before cudaLaunchKernel.
thread_local std::vector<configuration> pushed;
thread_local cudaError_t last_error = cudaSuccess;
int module_handle = 0;
}  // namespace

}  // namespace fuse::test::strict

using namespace fuse::test::strict;

extern "C" {

void** __cudaRegisterFatBinary(void*) { return reinterpret_cast<void**>(&module_handle); }
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterFunction(void**, const char*, char*, const char* name, int, uint3*, uint3*, dim3*, dim3*, int*) {
  registered_kernels().push_back(name);
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, std::size_t shared_bytes, struct CUstream_st* stream) {
  pushed.push_back(configuration{grid, block, shared_bytes, stream});
  return 0;
}
cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, std::size_t* shared_bytes, void* stream) {
  if (pushed.empty()) return last_error = cudaErrorInvalidConfiguration;
  const configuration c = pushed.back();
  pushed.pop_back();
  *grid = c.grid;
  *block = c.block;
  *shared_bytes = c.shared_bytes;
  *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}

void __cudaRegisterVar(void**, char*, char*, const char*, int, std::size_t, int, int) {}  // __device__ tables

// nvcc 13's stubs look the kernel up (__cudaGetKernel) and launch it (__cudaLaunchKernel); older
// ones call cudaLaunchKernel with the stub's address. The handle here is that address.
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* stub) {
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(stub));
  return cudaSuccess;
}
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void**, std::size_t shared_bytes,
                               cudaStream_t stream) {
  launches().push_back(launch{reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, stream});
  return cudaSuccess;
}
cudaError_t cudaLaunchKernel(const void* kernel, dim3 grid, dim3 block, void**, std::size_t shared_bytes,
                             cudaStream_t stream) {
  launches().push_back(launch{kernel, grid, block, shared_bytes, stream});
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return last_error; }
const char* cudaGetErrorName(cudaError_t) { return "strict runtime error"; }
const char* cudaGetErrorString(cudaError_t) { return "strict runtime error"; }

}  // extern "C"
