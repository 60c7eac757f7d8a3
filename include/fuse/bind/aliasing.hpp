// When may an output be written while the leaves of its tree are read? The rule every executor
// applies (the CPU sends a failing output through a temporary, CUDA refuses it): an output may
// share memory with a leaf only when both walk exactly the same addresses (x = f(x) in place),
// since then each element is read before that same element is written.
#pragma once

#include <cstddef>

#include "fuse/bind/evaluators.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/shape.hpp"
#include "fuse/core/small_vector.hpp"

namespace fuse::bind {

/// Do two byte ranges overlap? (An empty range overlaps nothing.)
inline bool overlaps(const void* alo, const void* ahi, const void* blo, const void* bhi) {
  return alo != ahi && blo != bhi && alo < bhi && blo < ahi;
}

/// Where an output of extents ext writes: element x at base + sum(x[k] * stride[k]) elements,
/// all within the bytes [lo, hi).
template <std::size_t Q>
struct written_range {
  const void* base = nullptr;
  index_array<Q> stride{};
  std::size_t elem_size = 0;
  const void* lo = nullptr;
  const void* hi = nullptr;

  template <class T>
  static written_range of(T* data, const index_array<Q>& ext, const index_array<Q>& stride) {
    written_range w{data, stride, sizeof(T), nullptr, nullptr};
    detail::byte_range(data, ext, stride.data(), sizeof(T), w.lo, w.hi);
    return w;
  }
};

/// Whether `leaf` may be read while `out` (extents ext) is written: they lie apart, or the leaf
/// reads exactly the addresses the output writes.
template <std::size_t Q>
bool reads_only_where_written(const leaf_info& leaf, const written_range<Q>& out, const index_array<Q>& ext) {
  if (!overlaps(out.lo, out.hi, leaf.lo, leaf.hi)) return true;
  if (!leaf.folded || leaf.base != out.base || leaf.elem_size != out.elem_size) return false;
  for (std::size_t k = 0; k < Q; ++k)
    if (ext[k] != 1 && leaf.stride[k] != out.stride[k]) return false;
  return true;
}

/// Every leaf that evaluators ev read over extents ext.
template <std::size_t Q, class... Ev>
small_vector<leaf_info, 16> leaves_of(const index_array<Q>& ext, const Ev&... ev) {
  small_vector<leaf_info, 16> leaves;
  (ev.for_each_leaf([&](const leaf_info& l) { leaves.push_back(l); }, ext), ...);
  return leaves;
}

/// For each output (extents ext), whether some leaf is read at addresses it writes other than
/// its own elements' (1: the CPU writes it through a temporary, CUDA refuses it). Two outputs
/// that overlap are an error of `who` (the eval).
template <std::size_t Q>
small_vector<char, 8> outputs_read_elsewhere(const small_vector<written_range<Q>, 8>& outs,
                                             const small_vector<leaf_info, 16>& leaves, const index_array<Q>& ext,
                                             const char* who) {
  const std::size_t n = outs.size();
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = a + 1; b < n; ++b)
      if (overlaps(outs[a].lo, outs[a].hi, outs[b].lo, outs[b].hi))
        throw memory_error(message(who, ": two outputs of one pass overlap in memory"));
  small_vector<char, 8> read_elsewhere(n, 0);
  for (std::size_t l = 0; l < leaves.size(); ++l)
    for (std::size_t o = 0; o < n; ++o)
      if (!reads_only_where_written(leaves[l], outs[o], ext)) read_elsewhere[o] = 1;
  return read_elsewhere;
}

}  // namespace fuse::bind
