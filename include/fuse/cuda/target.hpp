// Where a model generated for CUDA (`fuse-relay compile --target cuda`) runs: the one header
// serves both, as a class template over its target.
//
//   fuse::cuda::gpu       device memory (fuse::cuda::tensor), kernels launched on a stream
//   fuse::cuda::emulator  host memory (fuse::tensor), the same kernel bodies run on the host
//                         (fuse::cuda::emulated): any machine, no GPU, no CUDA runtime
//
// A target says what memory the model's views are (`memory`), what owns its constants and its
// arena (`tensor<T, R>`, made by `make`), how host bytes reach them (`upload`), which option
// every eval takes (`option`), and how the constructor waits for its uploads (`finish`).
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "fuse/core/tensor.hpp"
#include "fuse/cuda/check.hpp"
#include "fuse/cuda/eval.hpp"
#include "fuse/cuda/launch.hpp"
#include "fuse/cuda/memory.hpp"

namespace fuse::cuda {

/// The host emulator: host memory, kernel bodies run on the host (the stream is not used).
struct emulator {
  using memory = host_memory;
  template <class T, int R>
  using tensor = fuse::tensor<T, R>;

  template <class T, int R>
  static tensor<T, R> make(const index_array<static_cast<std::size_t>(R)>& extents, stream_t) {
    return tensor<T, R>(dynamic_shape<static_cast<std::size_t>(R)>(extents));
  }
  /// dst's elements from host memory (dst.size() of them).
  template <class T, int R>
  static void upload(tensor<T, R>& dst, const T* host, stream_t) {
    std::copy(host, host + dst.size(), dst.data());
  }
  static emulated_t option(stream_t) { return emulated; }
  static void finish(stream_t) {}
};

#if defined(FUSE_CUDA_RUNTIME)
/// The GPU: device memory allocated on the model's stream, kernels launched on the run's.
struct gpu {
  using memory = device_memory;
  template <class T, int R>
  using tensor = cuda::tensor<T, R>;

  template <class T, int R>
  static tensor<T, R> make(const index_array<static_cast<std::size_t>(R)>& extents, stream_t stream) {
    return tensor<T, R>(dynamic_shape<static_cast<std::size_t>(R)>(extents), stream);
  }
  /// dst's elements from host memory, copied on the stream. From pageable memory the runtime
  /// stages the bytes before it returns, so `host` may go once this returns; the constructor
  /// that uploads waits for the stream at its end (finish).
  template <class T, int R>
  static void upload(tensor<T, R>& dst, const T* host, stream_t stream) {
    const std::size_t bytes = sizeof(T) * static_cast<std::size_t>(dst.size());
    if (bytes == 0) return;
    FUSE_CUDA_CHECK(cudaMemcpyAsync(static_cast<void*>(dst.data()), static_cast<const void*>(host), bytes,
                                    cudaMemcpyHostToDevice, stream));
  }
  static on option(stream_t stream) { return on(stream); }
  static void finish(stream_t stream) { FUSE_CUDA_CHECK(cudaStreamSynchronize(stream)); }
};
#endif

}  // namespace fuse::cuda
