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

/// Runs body(thread_coords) for every thread of the grid of `cfg`.
template <class Body>
void emulate_grid(const launch_config& cfg, schedule order, const Body& body) {
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
    for (const std::uint64_t i : threads) {
      t.thread = {static_cast<std::uint32_t>(i % cfg.block.x),
                  static_cast<std::uint32_t>(i / cfg.block.x % cfg.block.y),
                  static_cast<std::uint32_t>(i / cfg.block.x / cfg.block.y)};
      body(t);
    }
  }
}

}  // namespace fuse::cuda
