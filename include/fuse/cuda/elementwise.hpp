// The elementwise kernel's body: evaluators bound by bind() (fuse/bind/) written to one or more
// outputs over their last axis. One body for the GPU (the `__global__` shim in fuse/cuda/eval.hpp)
// and the host emulator (fuse/cuda/emulate.hpp); it defines no op and knows no node kind: it
// asks each evaluator for a row (row(x)) and for the elements of that row (get(j)).
//
// Work split: blockIdx.y (striding by gridDim.y) walks the rows, which are the output's outer
// coordinates in row-major order; across x, each thread takes `columns_per_thread` consecutive
// columns of its row: one vector of the lane family (fuse/cuda/lanes.hpp) where every leaf and
// output is contiguous along the row, element by element otherwise. So a thread divides only to
// find its row's coordinates, once per row, in 32 bits, and never per element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "fuse/core/dtype.hpp"
#include "fuse/core/shape.hpp"
#include "fuse/cuda/lanes.hpp"
#include "fuse/cuda/launch.hpp"
#include "fuse/expr/node.hpp"

namespace fuse::cuda {

/// Consecutive columns of one row that each thread evaluates.
inline constexpr std::uint32_t columns_per_thread = 4;
static_assert(columns_per_thread == device_lanes::width, "a thread's columns are one vector of the lane family");
/// Threads per block of the elementwise kernel.
inline constexpr std::uint32_t elementwise_block_threads = 256;
/// Most blocks across the rows (CUDA allows 65535 in y); more rows are walked by striding.
inline constexpr std::uint32_t max_row_blocks = 65535;

/// Where one output's elements go: element x at data[sum(x[k] * stride[k])].
template <class T, std::size_t Q>
struct output_slot {
  T* data = nullptr;
  index_array<Q> stride{};
  /// The stride along a row (the last axis; none at rank 0).
  FUSE_HD index_t inner() const {
    if constexpr (Q == 0) return 0;
    else return stride[Q - 1];
  }
};

/// Everything the elementwise kernel reads: passed by value as its one parameter.
template <std::size_t Q, class Outs, class Evs>
struct elementwise_params {
  Outs outs;  ///< fuse::tuple of output_slot
  Evs evs;    ///< fuse::tuple of bound evaluators, one per output
  index_array<Q> extent{};
  index_t rows = 0;  ///< product of the outer extents
};

/// The threads of a launch over p: x covers a row's columns, y the rows (see the file's top).
template <std::size_t Q, class Outs, class Evs>
launch_config elementwise_launch(const elementwise_params<Q, Outs, Evs>& p) {
  const index_t n = Q ? p.extent[Q - 1] : 1;
  const index_t per_block = index_t{elementwise_block_threads} * columns_per_thread;
  launch_config c;
  c.block = {elementwise_block_threads, 1, 1};
  c.grid = {static_cast<std::uint32_t>((n + per_block - 1) / per_block),
            static_cast<std::uint32_t>(p.rows < max_row_blocks ? p.rows : max_row_blocks), 1};
  return c;
}

/// The body: thread t's columns of every row it owns, for every output.
template <std::size_t Q, class Outs, class Evs>
FUSE_HD void elementwise_body(const elementwise_params<Q, Outs, Evs>& p, const thread_coords& t) {
  const index_t n = Q ? p.extent[Q - 1] : 1;
  const index_t j0 =
      (static_cast<index_t>(t.block.x) * t.block_dim.x + t.thread.x) * static_cast<index_t>(columns_per_thread);
  if (j0 >= n) return;
  const index_t j1 = j0 + columns_per_thread < n ? j0 + static_cast<index_t>(columns_per_thread) : n;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    using fuse::get;
    constexpr std::size_t N = sizeof...(I);
    // Each output's stride along the row, and whether this thread's columns can be one vector
    // (all of them, every output contiguous along the row): the same for every row.
    const index_t inner[N] = {get<I>(p.outs).inner()...};
    const bool whole_vector = Q >= 1 && j1 - j0 == index_t{columns_per_thread} && ((inner[I] == 1) && ...);
    for (index_t r = t.block.y; r < p.rows; r += t.grid_dim.y) {
      index_t x[Q > 0 ? Q : 1] = {};
      row_coordinates(r, p.extent, x);
      Evs evs = p.evs;  // row() keeps per-row state: each thread its own copy
      (get<I>(evs).row(x), ...);
      index_t base[N] = {};
      if constexpr (Q >= 2)
        for (std::size_t k = 0; k + 1 < Q; ++k) ((base[I] += x[k] * get<I>(p.outs).stride[k]), ...);
      // Every output's values are computed before any is stored: an output that is also read at
      // the same address (x = f(x)) is read before it is written.
      if (whole_vector && (get<I>(evs).contiguous_row() && ...)) {
        // One vector per evaluator through the lane family: 16-byte accesses where the
        // addresses allow them.
        const tuple<typename device_lanes::vec<typename std::remove_cvref_t<decltype(get<I>(evs))>::compute_type>...> v{
            get<I>(evs).template load<device_lanes>(j0, int{columns_per_thread})...};
        (device_lanes::store(get<I>(p.outs).data + base[I] + j0, get<I>(v)), ...);
        continue;
      }
      for (index_t j = j0; j < j1; ++j) {
        const tuple<typename std::remove_cvref_t<decltype(get<I>(evs))>::compute_type...> v{get<I>(evs).get(j)...};
        ((get<I>(p.outs).data[base[I] + j * inner[I]] =
              to_storage<std::remove_pointer_t<decltype(get<I>(p.outs).data)>>(get<I>(v))),
         ...);
      }
    }
  }(std::make_index_sequence<Evs::size>{});
}

}  // namespace fuse::cuda
