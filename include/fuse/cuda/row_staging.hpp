// Staging a long row in shared memory. A block that owns one row (fuse/cuda/row_kernel.hpp)
// reads it once per phase and once more for the outputs: softmax three times, layer norm three.
// For long rows those rereads come from device memory (an H100's L2 cannot hold the rows in
// flight: 0.35 of copy bandwidth at [4096, 32768]), so the block first copies the row of each
// leaf that is read again (contiguous along the row, in the first phase's tree) into shared
// memory, 16 bytes at a time with several loads in flight, waits, and then every phase and the
// outputs read those leaves there: their evaluators' row pointers are pointed at the copy.
//
// Which leaves are staged is decided on the host (`plan_row_stage` in fuse/cuda/row_kernel.hpp,
// by `plan_staged_leaves` here): the first phase's leaves in the order `bind::visit_row_leaves`
// meets them, those read again later (by row pointer), within
// `row_stage_max_bytes`; the kernel stages the same ones in the same order, so the values read
// are the same bits as without staging. Opt-in (`fuse::cuda::stage_rows(true)`): measured on an
// H100, staging made two of three long-row kernels slower (docs/performance.md). Leaves
// inside a concatenate or a take are never staged nor redirected: they may read the row at other
// positions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "fuse/bind/evaluators.hpp"
#include "fuse/core/config.hpp"
#include "fuse/core/shape.hpp"

namespace fuse::cuda {

/// Leaves a row stages at most.
inline constexpr int row_stage_max_leaves = 4;
/// Shared memory a block may stage its row's leaves in: a 32768-float row (128 KiB) fits, within
/// the 227 KiB a Hopper block may opt in to.
inline constexpr std::size_t row_stage_max_bytes = 192 * 1024;

/// Where the current row's staged leaves are: entry k is the leaf whose row starts at src[k]
/// (elements of elem[k] bytes), copied to the staging area at byte offset at[k]. It lives at the
/// start of the staging area, in shared memory, not in each thread's registers: a launch that
/// stages nothing keeps its registers.
struct row_stage {
  const void* src[row_stage_max_leaves];
  std::uint32_t at[row_stage_max_leaves];
  std::uint32_t elem[row_stage_max_leaves];
  int count;
};
/// The table's bytes at the start of the staging area (16-byte aligned: the rows follow).
inline constexpr std::uint32_t row_stage_table_bytes = (sizeof(row_stage) + 15) / 16 * 16;

/// The bytes a staged row of n elements of `elem` bytes takes (16-byte aligned; in 64 bits, so
/// that a row of gigabytes is too big rather than wrapped to a small size).
FUSE_HD inline std::size_t staged_row_bytes(index_t n, std::size_t elem) {
  return (static_cast<std::size_t>(n) * elem + 15) / 16 * 16;
}

/// Which leaves of the first phase's tree to stage: bit i for the i-th leaf visit_row_leaves
/// meets, and the bytes they take.
struct row_stage_plan {
  std::uint32_t mask = 0;
  std::uint32_t bytes = 0;
};

namespace detail {

/// 16 bytes, moved as one access.
struct alignas(16) row_chunk {
  std::uint32_t w[4];
};
FUSE_HD inline row_chunk load_chunk(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const row_chunk*>(p);
#else
  row_chunk c;
  std::memcpy(&c, p, sizeof c);
  return c;
#endif
}
FUSE_HD inline void store_chunk(unsigned char* p, const row_chunk& c) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<row_chunk*>(p) = c;
#else
  std::memcpy(p, &c, sizeof c);
#endif
}

/// The group's threads (lane of G) copy n elements of V from src to dst: 16-byte chunks, four a
/// thread at once, where src is 16-byte aligned; element by element otherwise and for the tail.
template <class V>
FUSE_HD void copy_row(unsigned char* dst, const V* src, index_t n, index_t lane, index_t G) {
  index_t done = 0;  // elements copied by chunks
  if ((reinterpret_cast<std::uintptr_t>(src) & 15) == 0) {
    const auto* s = reinterpret_cast<const unsigned char*>(src);
    const index_t chunks = n * static_cast<index_t>(sizeof(V)) / 16;
    constexpr int U = 4;
    index_t c = lane;
    FUSE_DEVICE_NO_UNROLL
    for (; c + (U - 1) * G < chunks; c += U * G) {
      row_chunk v[U];
      FUSE_DEVICE_UNROLL
      for (int u = 0; u < U; ++u) v[u] = load_chunk(s + 16 * (c + u * G));
      FUSE_DEVICE_UNROLL
      for (int u = 0; u < U; ++u) store_chunk(dst + 16 * (c + u * G), v[u]);
    }
    FUSE_DEVICE_NO_UNROLL
    for (; c < chunks; c += G) store_chunk(dst + 16 * c, load_chunk(s + 16 * c));
    done = chunks * 16 / static_cast<index_t>(sizeof(V));
  }
  V* d = reinterpret_cast<V*>(dst);
  FUSE_DEVICE_NO_UNROLL
  for (index_t j = done + lane; j < n; j += G) d[j] = src[j];
}

}  // namespace detail

/// What planning needs of each leaf a visit meets (at most N of them): where its row starts,
/// its element size, whether it is contiguous along the row. A visitor of its own, not a lambda:
/// bind::visit_row_leaves is __host__ __device__, and calls it from host code.
template <int N>
struct leaf_rows {
  const void* ptr[N] = {};
  std::uint32_t elem[N] = {};
  bool contiguous[N] = {};
  int count = 0;
  template <class Leaf>
  FUSE_HD void operator()(Leaf& leaf) {
    if (count == N) return;
    ptr[count] = leaf.row_ptr;
    elem[count] = static_cast<std::uint32_t>(sizeof(typename Leaf::value_type));
    contiguous[count] = leaf.contiguous_row();
    ++count;
  }
  bool holds(const void* p) const {
    for (int k = 0; k < count; ++k)
      if (contiguous[k] && ptr[k] == p) return true;
    return false;
  }
};

/// The plan for a row of n elements whose first phase's tree has the leaves `first` (in
/// visiting order) and whose later phases and outputs have the leaves `later`: the first tree's
/// contiguous leaves that a later tree reads again, distinct, in visiting order, while they fit.
template <int N, int M>
row_stage_plan plan_staged_leaves(const leaf_rows<N>& first, const leaf_rows<M>& later, index_t n) {
  static_assert(N <= 32, "the plan's mask has 32 bits");
  row_stage_plan plan;
  plan.bytes = row_stage_table_bytes;
  int staged = 0;
  for (int i = 0; i < first.count && staged < row_stage_max_leaves; ++i) {
    if (!first.contiguous[i] || !later.holds(first.ptr[i])) continue;
    bool again = false;  // the same leaf met earlier in the first tree
    for (int k = 0; k < i; ++k) again = again || (((plan.mask >> k) & 1) && first.ptr[k] == first.ptr[i]);
    const std::size_t bytes = staged_row_bytes(n, first.elem[i]);
    if (again || plan.bytes + bytes > row_stage_max_bytes) continue;
    plan.mask |= std::uint32_t{1} << i;
    plan.bytes += static_cast<std::uint32_t>(bytes);
    ++staged;
  }
  if (!plan.mask) plan.bytes = 0;
  return plan;
}

/// Copies the planned leaves of the first phase's evaluator `ev` (its row set) to the staging
/// area and writes the table there (the group's first thread); the caller then waits for the
/// whole group before anything reads them.
template <class Ev>
FUSE_HD void stage_row_leaves(Ev& ev, const row_stage_plan& plan, index_t n, index_t lane, index_t G,
                              unsigned char* area) {
  auto* table = reinterpret_cast<row_stage*>(area);
  std::uint32_t used = row_stage_table_bytes;
  int index = 0, count = 0;
  bind::visit_row_leaves(ev, [&](auto& leaf) {
    using V = typename std::remove_cvref_t<decltype(leaf)>::value_type;
    const int i = index++;
    if (i >= 32 || !((plan.mask >> i) & 1) || count == row_stage_max_leaves) return;
    const std::size_t bytes = staged_row_bytes(n, sizeof(V));
    if (used + bytes > plan.bytes) return;
    detail::copy_row(area + used, leaf.row_ptr, n, lane, G);
    if (lane == 0) {
      table->src[count] = leaf.row_ptr;
      table->at[count] = used;
      table->elem[count] = static_cast<std::uint32_t>(sizeof(V));
    }
    ++count;
    used += static_cast<std::uint32_t>(bytes);
  });
  if (lane == 0) table->count = count;
}

/// Points every leaf of ev (its row set) whose row the table says was staged at the staged copy.
template <class Ev>
FUSE_HD void read_staged_leaves(Ev& ev, const unsigned char* area) {
  const auto* table = reinterpret_cast<const row_stage*>(area);
  bind::visit_row_leaves(ev, [&](auto& leaf) {
    using V = typename std::remove_cvref_t<decltype(leaf)>::value_type;
    if (!leaf.contiguous_row()) return;
    const void* src = leaf.row_ptr;
    for (int k = 0; k < table->count; ++k)
      if (table->src[k] == src && table->elem[k] == sizeof(V))
        leaf.row_ptr = reinterpret_cast<decltype(leaf.row_ptr)>(area + table->at[k]);
  });
}

}  // namespace fuse::cuda
