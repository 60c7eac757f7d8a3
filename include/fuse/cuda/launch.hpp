// What a kernel body sees of the grid, and what the executor tells about its launches.
//
// Kernel bodies (fuse/cuda/elementwise.hpp, ...) are FUSE_HD functions of a `thread_coords`: the
// `__global__` shim fills it from CUDA's built-in variables, the host emulator
// (fuse/cuda/emulate.hpp) from its own loops, so that one body runs on the GPU and on any CPU.
// Every launch, real or emulated, is appended to the `launch_log` an eval was given
// (fuse::cuda::log_to(log)): tests read it to see that one expression is one kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuse/core/config.hpp"
#include "fuse/core/shape.hpp"

// The runtime's stream handle is `cudaStream_t`, a pointer to this incomplete struct: naming it
// here lets code that never includes the CUDA runtime (the emulator's users) pass streams around.
struct CUstream_st;

namespace fuse::cuda {

/// A stream (cudaStream_t).
using stream_t = CUstream_st*;

/// The option that names the stream to launch, allocate or copy on (a cudaStream_t).
struct on {
  stream_t stream = nullptr;
  explicit on(stream_t s) : stream(s) {}
};

/// Three extents or coordinates of the grid (CUDA's dim3 / uint3).
struct dim {
  std::uint32_t x = 1, y = 1, z = 1;
};

/// The position of one thread: its block in the grid and itself in its block.
struct thread_coords {
  dim block{0, 0, 0};   ///< blockIdx
  dim thread{0, 0, 0};  ///< threadIdx
  dim block_dim;        ///< blockDim
  dim grid_dim;         ///< gridDim
};

/// Grid and block of a launch.
struct launch_config {
  dim grid;
  dim block;
  std::size_t shared_bytes = 0;

  std::uint64_t blocks() const { return std::uint64_t{grid.x} * grid.y * grid.z; }
  std::uint64_t threads_per_block() const { return std::uint64_t{block.x} * block.y * block.z; }
};

/// Sets x[0..Q-2] to the coordinates of row r of extents ext (rows: the outer coordinates in
/// row-major order; x[Q-1] is left alone), in 32-bit arithmetic: the host checked that the rows
/// fit, and a 64-bit division is a call to a software routine on the GPU. The outermost
/// coordinate needs no division.
template <std::size_t Q>
FUSE_HD void row_coordinates(index_t r, const index_array<Q>& ext, index_t* x) {
  if constexpr (Q >= 2) {
    auto rest = static_cast<std::uint32_t>(r);
    for (std::size_t k = Q - 2; k > 0; --k) {
      const auto e = static_cast<std::uint32_t>(ext[k]);
      x[k] = rest % e;
      rest /= e;
    }
    x[0] = rest;
  }
}

/// One launch as the executor made it.
struct launch_record {
  std::string kernel;  ///< which body ("elementwise", ...)
  launch_config config;
  bool emulated = false;  ///< run by the host emulator rather than on a GPU
  /// The row kernel's passes over each row: the phases it computes (a repeated one is copied),
  /// then the pass that writes (0 for other kernels).
  std::size_t row_passes = 0;
  /// The row kernel's rows, a group of threads each (0 for other kernels): a row may be a block
  /// of sub-rows (group norm's groups).
  index_t rows = 0;
};

/// Every launch of the evals that were given this log, in order.
struct launch_log {
  std::vector<launch_record> launches;
  std::size_t size() const { return launches.size(); }
  void clear() { launches.clear(); }
};

}  // namespace fuse::cuda
