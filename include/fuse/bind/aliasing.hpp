// When may an output be written while the leaves of its tree are read? The rule every executor
// applies (the CPU sends a failing output through a temporary, CUDA refuses it): an output may
// share memory with a leaf only when both walk exactly the same addresses (x = f(x) in place),
// since then each element is read before that same element is written.
#pragma once

#include <cstddef>

#include "fuse/bind/evaluators.hpp"
#include "fuse/core/shape.hpp"

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

}  // namespace fuse::bind
