// The host emulator: runs a kernel body over a whole grid on the CPU, block by block, so that
// every kernel of the CUDA executor is tested on machines without a GPU (CI among them).
//
// The bodies of the elementwise executor have no barriers and no cooperation between threads,
// so the threads of a block run one after the other. The order is a parameter (forward, reverse,
// shuffled): a body whose result depended on the order its threads ran in would differ between
// them, which the tests check.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "fuse/cuda/launch.hpp"

namespace fuse::cuda {

/// In which order the emulator runs the threads of a block (and the blocks of a grid).
enum class schedule { forward, reverse, shuffled };

/// The coordinates of the thread of linear index i in a block of extents `block`.
inline dim thread_at(std::uint64_t i, const dim& block) {
  return {static_cast<std::uint32_t>(i % block.x), static_cast<std::uint32_t>(i / block.x % block.y),
          static_cast<std::uint32_t>(i / block.x / block.y)};
}

/// Calls f(t, threads) for each block of the grid of `cfg`, blocks in the schedule's order: t
/// holds the block's coordinates (its `thread` unset), `threads` the linear indices of the
/// block's threads in the order to run them.
template <class F>
void for_each_block(const launch_config& cfg, schedule order, F&& f) {
  const std::uint64_t nb = cfg.blocks(), nt = cfg.threads_per_block();
  std::vector<std::uint64_t> blocks(nb), threads(nt);
  std::iota(blocks.begin(), blocks.end(), std::uint64_t{0});
  std::iota(threads.begin(), threads.end(), std::uint64_t{0});
  std::mt19937_64 g(nb * 1000003u + nt);
  if (order == schedule::reverse) {
    std::reverse(blocks.begin(), blocks.end());
    std::reverse(threads.begin(), threads.end());
  } else if (order == schedule::shuffled) {
    std::shuffle(blocks.begin(), blocks.end(), g);
  }
  thread_coords t;
  t.block_dim = cfg.block;
  t.grid_dim = cfg.grid;
  for (const std::uint64_t b : blocks) {
    t.block = {static_cast<std::uint32_t>(b % cfg.grid.x), static_cast<std::uint32_t>(b / cfg.grid.x % cfg.grid.y),
               static_cast<std::uint32_t>(b / cfg.grid.x / cfg.grid.y)};
    if (order == schedule::shuffled) std::shuffle(threads.begin(), threads.end(), g);
    f(static_cast<const thread_coords&>(t), static_cast<const std::vector<std::uint64_t>&>(threads));
  }
}

/// Runs body(thread_coords) for every thread of the grid of `cfg`, one after the other.
template <class Body>
void emulate_grid(const launch_config& cfg, schedule order, const Body& body) {
  for_each_block(cfg, order, [&](thread_coords t, const std::vector<std::uint64_t>& threads) {
    for (const std::uint64_t i : threads) {
      t.thread = thread_at(i, cfg.block);
      body(t);
    }
  });
}

}  // namespace fuse::cuda
