// The row-reduction kernel's body: sum, mean, max, min or prod over the LAST axis of a tree
// bound by bind() (the tree that feeds the reduction is evaluated inside the loop, never
// stored). One warp per row: its 32 lanes walk the row's columns 32 apart (consecutive lanes,
// consecutive columns: coalesced reads), each accumulating a partial result in the type the
// reduction defines (expr/reduce.hpp: double for float sums, int64 for integers), then the warp
// combines its lanes by shuffles and lane 0 writes the row's result. Blocks of 8 warps take 8
// rows and stride by the grid over the rest. The combination order differs from the CPU's, so
// results match the double reference within the reduction's bound, not the CPU bit for bit.
//
// Rows wider than ~1k elements (block-per-row), other axes, softmax, layer norm, and a
// reduction inside a larger tree: not yet (issue 14).
#pragma once

#include <cstddef>
#include <cstdint>

#include "fuse/core/dtype.hpp"
#include "fuse/core/shape.hpp"
#include "fuse/cuda/block.hpp"
#include "fuse/cuda/launch.hpp"
#include "fuse/expr/reduce.hpp"

namespace fuse::cuda {

/// Threads per block of the row-reduction kernel, and so rows per block (a warp each).
inline constexpr std::uint32_t row_reduce_block_threads = 256;
inline constexpr std::uint32_t row_reduce_rows_per_block = row_reduce_block_threads / warp_size;
/// Most blocks of a launch; more rows are walked by striding.
inline constexpr std::uint32_t row_reduce_max_blocks = 1u << 20;

/// Everything the row-reduction kernel reads: its one parameter.
template <reduce_kind K, std::size_t Q, class T, class Ev>
struct row_reduce_params {
  T* out = nullptr;
  index_array<Q> out_stride{};  ///< per input coordinate (the reduced last one: 0)
  Ev ev;                        ///< the reduced tree, bound over its own coordinates (rank Q)
  index_array<Q> extent{};      ///< the tree's extents
  index_t rows = 0;             ///< product of all but the last extent
};

template <reduce_kind K, std::size_t Q, class T, class Ev>
launch_config row_reduce_launch(const row_reduce_params<K, Q, T, Ev>& p) {
  const index_t blocks = (p.rows + row_reduce_rows_per_block - 1) / row_reduce_rows_per_block;
  launch_config c;
  c.block = {row_reduce_block_threads, 1, 1};
  c.grid = {static_cast<std::uint32_t>(blocks < row_reduce_max_blocks ? blocks : row_reduce_max_blocks), 1, 1};
  return c;
}

/// The body: each warp reduces the rows it owns.
template <reduce_kind K, std::size_t Q, class T, class Ev, class Block>
FUSE_HD void row_reduce_body(const row_reduce_params<K, Q, T, Ev>& p, const thread_coords& t, Block& blk) {
  using C = typename Ev::compute_type;
  using S = reduce_partial_t<K, C>;
  using P = reduce_partial<K, S>;
  static_assert(Q >= 1, "a row reduction reduces the last axis of a tree of rank 1 or more");
  const std::uint32_t lane = t.thread.x % warp_size;
  const index_t warp = static_cast<index_t>(t.block.x) * row_reduce_rows_per_block + t.thread.x / warp_size;
  const index_t warps = static_cast<index_t>(t.grid_dim.x) * row_reduce_rows_per_block;
  const index_t n = p.extent[Q - 1];
  for (index_t r = warp; r < p.rows; r += warps) {  // uniform across a warp: its shuffles match
    index_t x[Q] = {};
    row_coordinates(r, p.extent, x);
    Ev ev = p.ev;  // row() keeps per-row state
    ev.row(x);
    S acc = P::identity();
    for (index_t j = lane; j < n; j += warp_size) acc = P::combine(acc, static_cast<S>(ev.get(j)));
    for (std::uint32_t m = warp_size / 2; m > 0; m /= 2) acc = P::combine(acc, blk.shuffle_xor(acc, m));
    if (lane == 0) {
      index_t o = 0;
      for (std::size_t k = 0; k + 1 < Q; ++k) o += x[k] * p.out_stride[k];
      p.out[o] = to_storage<T>(reduce_finish<K, T>(acc, n));
    }
  }
}

}  // namespace fuse::cuda
