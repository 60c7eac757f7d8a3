// What a cooperative kernel body (one whose threads exchange values: a row reduction, softmax,
// layer norm) sees of its block, on the GPU and in the host emulator alike:
//
//   template <class Block> FUSE_HD void body(const params& p, const thread_coords& t, Block& blk) {
//     float* partial = blk.template shared<float>();   // the block's shared memory
//     v = blk.shuffle_xor(v, 16);                       // a warp's lanes exchange (all 32 take part)
//     v = blk.shuffle(v, 0);                            // every lane takes lane 0's v
//     blk.barrier();                                    // __syncthreads()
//   }
//
// `device_block` is the GPU's (CUDA's own intrinsics); the host emulator's `emulated_block`
// (fuse/cuda/fibers.hpp) runs each thread of a block as a fiber that yields at every barrier and
// shuffle, in a chosen order, so that a missing barrier changes the result under some order.
#pragma once

#include <cstdint>

#include "fuse/core/config.hpp"

namespace fuse::cuda {

/// Threads of a warp: the lanes a shuffle exchanges between.
inline constexpr std::uint32_t warp_size = 32;

#if defined(__CUDACC__)
/// The block of a kernel running on the GPU.
struct device_block {
  /// Every thread of the block waits here until all have arrived (__syncthreads).
  __device__ void barrier() const { __syncthreads(); }
  /// v of the lane (this lane ^ lane_mask) of this warp; every lane of the warp must call it.
  template <class T>
  __device__ T shuffle_xor(T v, std::uint32_t lane_mask) const {
    return __shfl_xor_sync(0xFFFFFFFFu, v, static_cast<int>(lane_mask));
  }
  /// v of lane `src_lane` of this warp (a broadcast); every lane of the warp must call it.
  template <class T>
  __device__ T shuffle(T v, std::uint32_t src_lane) const {
    return __shfl_sync(0xFFFFFFFFu, v, static_cast<int>(src_lane));
  }
  /// The block's dynamic shared memory (the launch's shared_bytes), as T.
  template <class T>
  __device__ T* shared() const {
    extern __shared__ unsigned char fuse_block_shared[];
    return reinterpret_cast<T*>(fuse_block_shared);
  }
};
#endif

}  // namespace fuse::cuda
