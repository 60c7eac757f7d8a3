// The row kernel's body: a row program (fuse/cuda/row_program.hpp) over the rows of its
// iteration space. One group of threads owns each row (the outer coordinates, row-major): a warp
// for rows up to `warp_row_limit` elements (BERT's 768, attention's 384), a whole block above,
// and a single thread for a reduction whose input's last axis is kept (a column reduction:
// consecutive threads, consecutive columns). For its row the group
//   1. computes the row's values, phase after phase: its threads walk the row's columns
//      `row_threads` apart (consecutive threads, consecutive columns: coalesced reads), each
//      accumulating a partial result in the phase's partial type (expr/reduce.hpp: double for
//      float sums), which the group then combines (warp shuffles, then the warps' results
//      through shared memory) so that every thread holds the same value;
//   2. then either writes its outputs along the row, each thread its columns, every output's
//      value computed before any is stored (`row_outputs`), or, for a reduction at the root
//      of the eval, writes the reduction's one value per row (`row_result`).
// A row may be a block of sub-rows (`row_params::block_mask`): a root reduction's reduced axes,
// or the block every phase of a program walks (group norm's group), whose values the group then
// computes once for the whole block; short sub-rows are walked by teams of a warp.
// Nothing is stored between the phases and the outputs: the tree that feeds a row node is
// evaluated again in each phase that reads it (a row of a few thousand elements stays in L1).
// The combination order differs from the CPU's, so a reduction's result matches the double
// reference within its bound, not the CPU bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "fuse/core/dtype.hpp"
#include "fuse/core/shape.hpp"
#include "fuse/cuda/block.hpp"
#include "fuse/cuda/elementwise.hpp"
#include "fuse/cuda/launch.hpp"
#include "fuse/cuda/row_program.hpp"
#include "fuse/cuda/row_staging.hpp"
#include "fuse/expr/reduce.hpp"

namespace fuse::cuda {

/// Threads per block of the row kernel where warps (or single threads) own the rows.
inline constexpr std::uint32_t row_block_threads = 256;
/// Threads of the group, and of the block, that owns one long row. Measured on an H100 (docs/
/// performance.md): 512 ran a [4096, 32768] layer norm 24% and a softmax 7% faster than 256;
/// 1024 helped softmax further and cost layer norm.
inline constexpr std::uint32_t row_long_threads = 512;
/// Rows up to this many elements are a warp's; longer ones a block's.
inline constexpr index_t warp_row_limit = 1024;
/// Most blocks of a launch; more rows are walked by striding.
inline constexpr std::uint32_t row_max_blocks = 1u << 20;
/// Shared memory of a row kernel's block: one partial result (<= 8 bytes) per warp of the
/// largest block.
inline constexpr std::size_t row_shared_bytes = (row_long_threads / warp_size) * 8;

/// The outputs of a row program written along each row: evs[i] into outs[i].
template <class Outs, class Evs>
struct row_outputs {
  Outs outs;  ///< fuse::tuple of output_slot over the iteration space
  Evs evs;    ///< fuse::tuple of evaluators over the iteration space
};

/// A reduction at the root of an eval: its value for each row, written at `out` + the row's
/// coordinates times `stride`. A row is the block of the reduced axes, which the iteration
/// space puts last; the axes before the last are the row's block (row_params::block_mask).
template <class T, std::size_t Q, class Phase>
struct row_result {
  T* out = nullptr;
  index_array<Q> stride{};
  Phase phase;
  index_t count = 0;  ///< elements reduced per row
};

/// Everything the row kernel reads: its one parameter.
template <std::size_t Q, class Phases, class Final>
struct row_params {
  Phases phases;                          ///< fuse::tuple of row_phase, in the order their values are computed
  Final fin;                              ///< row_outputs or row_result
  index_array<Q> extent{};                ///< the iteration space; extent[Q - 1] is the outputs' row length
  index_t rows = 0;                       ///< product of all but the last extent
  std::uint32_t row_threads = warp_size;  ///< threads per row: a warp, or the block
  row_stage_plan stage{};                 ///< the row's leaves staged in shared memory (row_staging.hpp)
  /// The row's block: coordinates below Q - 1 that the final walk (the outputs, or a root
  /// reduction's) sets itself, sub-row after sub-row (extents `block_extent`; `extent` holds 1
  /// there). A root reduction's reduced axes; a row program's when every phase walks the same
  /// block (group norm's statistics), so that a group computes a block's values once and writes
  /// all of it. 0: the row is one sub-row.
  std::uint64_t block_mask = 0;
  index_array<Q> block_extent{};
};

/// Calls f(team_lane, team_size) for each sub-row of a row's block (coordinates `mask` below
/// Q - 1, extents `ext`, n columns each) that the calling thread's team walks, x's coordinates in
/// mask set to the sub-row's (at constant indices: x stays in registers). A group of G threads
/// whose sub-rows are shorter than it walks them in teams of a warp, team t taking sub-rows t, t +
/// teams, ... (a block's 640 sub-rows of 64 elements keep every warp busy, not 64 of 512
/// threads); else the whole group walks each sub-row. mask 0: the row itself, once, by the whole
/// group. The coordinates are left set: the caller finds the row's again (keeping them beside
/// would cost registers the row kernel lacks). The sub-rows number below 2^32 (the executor
/// checks: `sub_rows`).
template <std::size_t Q, class F>
FUSE_HD void for_each_sub_row(index_t* x, std::uint64_t mask, const index_array<Q>& ext, index_t n, std::uint32_t lane,
                              std::uint32_t G, F&& f) {
  if (mask == 0) {
    f(static_cast<index_t>(lane), static_cast<index_t>(G));
    return;
  }
  const std::uint32_t T = G > warp_size && n < static_cast<index_t>(G) ? warp_size : G;
  std::uint32_t count = 1;
  for (std::size_t k = 0; k + 1 < Q; ++k)
    if ((mask >> k) & 1) count *= static_cast<std::uint32_t>(ext[k]);
  for (std::uint32_t s = lane / T; s < count; s += G / T) {
    std::uint32_t rest = s;
    for (std::size_t k = Q - 1; k-- > 0;)
      if ((mask >> k) & 1) {
        const auto e = static_cast<std::uint32_t>(ext[k]);
        x[k] = rest % e;
        rest /= e;
      }
    f(static_cast<index_t>(lane % T), static_cast<index_t>(T));
  }
}

/// Columns a thread reads at once along a row: its loads are independent, so they are in flight
/// together. (One at a time, each waiting for the last to come back, left a long row latency-bound
/// at about a third of an H100's copy bandwidth.)
inline constexpr int row_columns_at_once = 4;

/// The partial result of kind P over columns lane, lane + G, ... of ev's current row, in the
/// same order on every executor: column j goes to accumulator (j - lane) / G mod
/// row_columns_at_once while whole groups of them remain, the rest to the first, and the
/// accumulators are combined pairwise at the end.
template <class P, class S, class Ev>
FUSE_HD S row_partial(Ev& ev, index_t lane, index_t n, index_t G) {
  constexpr int U = row_columns_at_once;
  S acc[U];
  FUSE_DEVICE_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = P::identity();
  index_t j = lane;
  FUSE_DEVICE_NO_UNROLL
  for (; j + (U - 1) * G < n; j += U * G) {
    S v[U];
    FUSE_DEVICE_UNROLL
    for (int u = 0; u < U; ++u) v[u] = static_cast<S>(ev.get(j + u * G));
    FUSE_DEVICE_UNROLL
    for (int u = 0; u < U; ++u) acc[u] = P::combine(acc[u], v[u]);
  }
  FUSE_DEVICE_NO_UNROLL
  for (; j < n; j += G) acc[0] = P::combine(acc[0], static_cast<S>(ev.get(j)));
  FUSE_DEVICE_UNROLL
  for (int s = 1; s < U; s *= 2)  // pairwise: (0 1) (2 3) ..., then (0 2) ...
    FUSE_DEVICE_UNROLL
  for (int u = 0; u + s < U; u += 2 * s) acc[u] = P::combine(acc[u], acc[u + s]);
  return acc[0];
}

/// The threads a group uses for rows whose longest walk (phases and outputs) is `longest`.
inline std::uint32_t row_threads_for(index_t longest) {
  return longest > warp_row_limit ? row_long_threads : warp_size;
}

template <std::size_t Q, class Phases, class Final>
launch_config row_launch(const row_params<Q, Phases, Final>& p) {
  const std::uint32_t threads = p.row_threads > row_block_threads ? p.row_threads : row_block_threads;
  const index_t per_block = threads / p.row_threads;
  const index_t blocks = (p.rows + per_block - 1) / per_block;
  launch_config c;
  c.block = {threads, 1, 1};
  c.grid = {static_cast<std::uint32_t>(blocks < row_max_blocks ? blocks : row_max_blocks), 1, 1};
  c.shared_bytes = row_shared_bytes + p.stage.bytes;
  return c;
}

/// The leaves a block that owns a whole row stages in shared memory (row_staging.hpp): only
/// such blocks (warps walk their rows independently, so no barrier could wait for them), only
/// where every phase walks the output's row once (no sub-rows), and only leaves read again.
template <std::size_t Q, class Phases, class Outs, class Evs>
row_stage_plan plan_row_stage(const row_params<Q, Phases, row_outputs<Outs, Evs>>& p) {
  if constexpr (Phases::size == 0) {
    return {};
  } else {
    if (p.row_threads != row_long_threads) return {};
    const index_t n = p.extent[Q - 1];
    bool one_walk = true;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((one_walk = one_walk && fuse::get<I>(p.phases).sub_mask == 0 && fuse::get<I>(p.phases).n == n), ...);
    }(std::make_index_sequence<Phases::size>{});
    if (!one_walk) return {};
    // Any row: the leaves' contiguity and identity are the same on every row.
    index_t x[Q + max_row_values] = {};
    auto phases = p.phases;
    auto evs = p.fin.evs;
    leaf_rows<32> first;
    leaf_rows<64> later;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (fuse::get<I>(phases).ev.row(x), ...);
      ((I == 0 ? bind::visit_row_leaves(fuse::get<I>(phases).ev, first)
               : bind::visit_row_leaves(fuse::get<I>(phases).ev, later)),
       ...);
    }(std::make_index_sequence<Phases::size>{});
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (fuse::get<I>(evs).row(x), ...);
      (bind::visit_row_leaves(fuse::get<I>(evs), later), ...);
    }(std::make_index_sequence<Evs::size>{});
    return plan_staged_leaves(first, later, n);
  }
}

/// Combines acc of every thread of a row group (G threads: a warp or the block) so that each
/// holds the same result.
template <reduce_kind K, class S, class Block>
FUSE_HD S row_allreduce(S acc, std::uint32_t G, std::uint32_t tid, Block& blk) {
  using P = reduce_partial<K, S>;
  if (G == 1) return acc;  // a thread a row
  for (std::uint32_t m = warp_size / 2; m > 0; m /= 2) acc = P::combine(acc, blk.shuffle_xor(acc, m));
  // The lanes' combinations may differ in a zero's sign or a NaN's payload: lane 0's for all.
  acc = blk.shuffle(acc, 0);
  if (G == warp_size) return acc;
  S* part = blk.template shared<S>();
  if (tid % warp_size == 0) part[tid / warp_size] = acc;
  blk.barrier();
  S r = part[0];
  for (std::uint32_t w = 1; w < G / warp_size; ++w) r = P::combine(r, part[w]);
  blk.barrier();  // every thread has read before the next phase writes
  return r;
}

/// The value of phase ph for the row whose coordinates and earlier values are x. A reduction
/// over several axes walks its block of sub-rows along the coordinates it borrows.
template <class Ph, class Block>
FUSE_HD typename Ph::value_type phase_value(const Ph& ph, index_t* x, std::uint32_t lane, std::uint32_t G,
                                            std::uint32_t tid, Block& blk, const unsigned char* staged) {
  using S = typename Ph::partial_type;
  using P = reduce_partial<Ph::kind, S>;
  auto ev = ph.ev;  // row() keeps per-row state
  S acc = P::identity();
  for_each_sub_row<Ph::rank>(x, Ph::walks_blocks ? ph.sub_mask : 0, ph.sub_extent, ph.n, lane, G,
                             [&](index_t tl, index_t T) {
                               ev.row(x);
                               if (staged) read_staged_leaves(ev, staged);
                               acc = P::combine(acc, row_partial<P, S>(ev, tl, ph.n, T));
                             });
  return ph.finish(row_allreduce<Ph::kind>(acc, G, tid, blk));
}

/// The value of a root reduction for the row whose coordinates are x: the phase over every
/// sub-row of the row's block.
template <std::size_t Q, class Phases, class Fin, class Block>
FUSE_HD auto result_value(const row_params<Q, Phases, Fin>& p, index_t* x, std::uint32_t lane, std::uint32_t G,
                          std::uint32_t tid, Block& blk) {
  using Ph = std::remove_cvref_t<decltype(p.fin.phase)>;
  using S = typename Ph::partial_type;
  using P = reduce_partial<Ph::kind, S>;
  auto ev = p.fin.phase.ev;
  S acc = P::identity();
  for_each_sub_row<Q>(x, p.block_mask, p.block_extent, p.fin.phase.n, lane, G, [&](index_t tl, index_t T) {
    ev.row(x);
    acc = P::combine(acc, row_partial<P, S>(ev, tl, p.fin.phase.n, T));
  });
  return p.fin.phase.finish(row_allreduce<Ph::kind>(acc, G, tid, blk), p.fin.count);
}

/// Whether a row program of these phases may own blocks of sub-rows: every phase a reduction's
/// (row_phase::walks_blocks); else its outputs' walk is compiled without the block's.
template <class Phases>
inline constexpr bool phases_walk_blocks = false;
template <class... P>
inline constexpr bool phases_walk_blocks<tuple<P...>> = sizeof...(P) > 0 && (P::walks_blocks && ...);

/// The body: each group its rows.
template <std::size_t Q, class Phases, class Final, class Block>
FUSE_HD void row_body(const row_params<Q, Phases, Final>& p, const thread_coords& t, Block& blk) {
  static_assert(Q >= 1, "a row program iterates over rank 1 or more");
  const std::uint32_t G = p.row_threads;
  const std::uint32_t per_block = t.block_dim.x / G;
  const std::uint32_t lane = t.thread.x % G;
  const index_t n = p.extent[Q - 1];
  const index_t step = static_cast<index_t>(t.grid_dim.x) * per_block;
  // r is the same for every thread of a group: their shuffles and barriers match.
  for (index_t r = static_cast<index_t>(t.block.x) * per_block + t.thread.x / G; r < p.rows; r += step) {
    // The row's coordinates, then its values. (A tree with more phases than max_row_values is
    // refused by the binder before any launch; the array still has room for all of them.)
    index_t x[Q + (Phases::size > max_row_values ? Phases::size : max_row_values)] = {};
    row_coordinates(r, p.extent, x);
    // A block that owns the row copies the leaves read again to shared memory first (the plan is
    // the same for every thread of the block, so the barrier is reached by all).
    unsigned char* staged = nullptr;  // the staging area, where the row is staged
    if constexpr (Phases::size > 0) {
      if (p.stage.mask) {
        staged = blk.template shared<unsigned char>() + row_shared_bytes;
        auto first = fuse::get<0>(p.phases).ev;
        first.row(x);
        stage_row_leaves(first, p.stage, n, lane, G, staged);
        blk.barrier();
      }
    }
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      // (a phase that repeats an earlier one copies its value: the same for the whole group; one
      // that walks a block of sub-rows leaves its coordinates moved: the row's are found again)
      (
          [&](const auto& ph) {
            if (ph.copy_from >= 0) {
              x[Q + I] = row_value<Q, index_t>(x, ph.copy_from);
            } else {
              x[Q + I] = pack_row_value(phase_value(ph, x, lane, G, t.thread.x, blk, staged));
              if (ph.sub_mask) row_coordinates(r, p.extent, x);
            }
          }(fuse::get<I>(p.phases)),
          ...);
    }(std::make_index_sequence<Phases::size>{});
    index_t base = 0;
    if constexpr (requires { p.fin.phase; }) {
      const auto v = result_value(p, x, lane, G, t.thread.x, blk);
      if (lane == 0) {
        for (std::size_t k = 0; k + 1 < Q; ++k) base += x[k] * p.fin.stride[k];
        p.fin.out[base] = to_storage<std::remove_pointer_t<decltype(p.fin.out)>>(v);
      }
    } else {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        using fuse::get;
        auto evs = p.fin.evs;
        const index_t inner[sizeof...(I)] = {get<I>(p.fin.outs).inner()...};
        using values = tuple<typename std::remove_cvref_t<decltype(get<I>(evs))>::compute_type...>;
        for_each_sub_row<Q>(x, phases_walk_blocks<Phases> ? p.block_mask : 0, p.block_extent, n, lane, G,
                            [&](index_t tl, index_t T) {
                              (get<I>(evs).row(x), ...);
                              if (staged) (read_staged_leaves(get<I>(evs), staged), ...);
                              index_t base_of[sizeof...(I)] = {};
                              for (std::size_t k = 0; k + 1 < Q; ++k)
                                ((base_of[I] += x[k] * get<I>(p.fin.outs).stride[k]), ...);
                              const auto store = [&](index_t j, const values& v) {
                                ((get<I>(p.fin.outs).data[base_of[I] + j * inner[I]] =
                                      to_storage<std::remove_pointer_t<decltype(get<I>(p.fin.outs).data)>>(get<I>(v))),
                                 ...);
                              };
                              // Every output's value at all the columns taken at once before any store (the loads in
                              // flight together): an output read at its own address, and only there, stays right.
                              constexpr int U = row_columns_at_once;
                              index_t j = tl;
                              FUSE_DEVICE_NO_UNROLL
                              for (; j + (U - 1) * T < n; j += U * T) {
                                values v[U];
                                FUSE_DEVICE_UNROLL
                                for (int u = 0; u < U; ++u) v[u] = values{get<I>(evs).get(j + u * T)...};
                                FUSE_DEVICE_UNROLL
                                for (int u = 0; u < U; ++u) store(j + u * T, v[u]);
                              }
                              FUSE_DEVICE_NO_UNROLL
                              for (; j < n; j += T) store(j, values{get<I>(evs).get(j)...});
                            });
      }(std::make_index_sequence<decltype(p.fin.evs)::size>{});
    }
    if (p.stage.mask) blk.barrier();  // every thread done with the staged row before the next is copied
  }
}

}  // namespace fuse::cuda
