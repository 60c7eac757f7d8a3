// Storage that one eval reuses for the results it evaluates ahead of a loop (materialised
// nodes: a reduction inside a tree, a block of attention's scores).
//
// A chained attention pass materialises, per row block, the block of scores and the block of
// probabilities (2 x 196 KB at BERT's sizes, 288 times in seed 002's block). Allocated fresh
// each time, they are mapped and unmapped by the allocator (glibc maps blocks above 128 KB
// until its threshold adapts): a program making one call of seed 002's block faulted in 33,865
// pages, 15,593 with the pool (`perf stat -e page-faults`). The pool keeps freed blocks for the
// next request they fit, until the eval ends, whatever the allocator does.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "fuse/core/shape.hpp"
#include "fuse/core/tensor.hpp"

namespace fuse::cpu {

/// Blocks of 64-byte aligned bytes, kept after use for later requests of one eval.
class scratch_pool {
 public:
  struct block {
    void* p = nullptr;
    std::size_t bytes = 0;
  };

  scratch_pool() = default;
  scratch_pool(const scratch_pool&) = delete;
  scratch_pool& operator=(const scratch_pool&) = delete;
  scratch_pool(scratch_pool&& o) noexcept : free_(std::move(o.free_)), kept_(o.kept_) { o.kept_ = 0; }
  scratch_pool& operator=(scratch_pool&&) = delete;
  ~scratch_pool() {
    for (const block& b : free_) release_memory(b);
  }

  /// A block of at least `bytes`: the smallest kept one that fits without wasting more than
  /// its size again, else a new one.
  block acquire(std::size_t bytes) {
    std::size_t best = free_.size();
    for (std::size_t i = 0; i < free_.size(); ++i)
      if (free_[i].bytes >= bytes && free_[i].bytes <= 2 * bytes + 4096 &&
          (best == free_.size() || free_[i].bytes < free_[best].bytes))
        best = i;
    if (best == free_.size()) return {::operator new(bytes ? bytes : 1, std::align_val_t{64}), bytes};
    const block b = free_[best];
    free_[best] = free_.back();
    free_.pop_back();
    kept_ -= b.bytes;
    return b;
  }
  /// Takes b back: kept for reuse while the pool holds little, else freed.
  void release(block b) noexcept {
    if (b.bytes <= max_block && kept_ + b.bytes <= max_kept) {
      try {
        free_.push_back(b);
        kept_ += b.bytes;
        return;
      } catch (...) {}
    }
    release_memory(b);
  }

 private:
  static constexpr std::size_t max_block = std::size_t{8} << 20;
  static constexpr std::size_t max_kept = std::size_t{32} << 20;
  static void release_memory(const block& b) noexcept { ::operator delete(b.p, std::align_val_t{64}); }
  std::vector<block> free_;
  std::size_t kept_ = 0;  ///< bytes in free_
};

/// A row-major tensor of rank R in a block of a scratch_pool, given back when it is destroyed;
/// its elements start unset. What cpu::context::materialize returns.
template <class T, std::size_t R>
class scratch_tensor {
 public:
  using value_type = T;
  using shape_type = dynamic_shape<R>;

  scratch_tensor(scratch_pool& pool, const shape_type& s)
      : pool_(&pool), block_(pool.acquire(sizeof(T) * static_cast<std::size_t>(product(s.array())))), shape_(s) {}
  scratch_tensor(scratch_tensor&& o) noexcept
      : pool_(std::exchange(o.pool_, nullptr)), block_(std::exchange(o.block_, {})), shape_(o.shape_) {}
  scratch_tensor(const scratch_tensor&) = delete;
  scratch_tensor& operator=(const scratch_tensor&) = delete;
  scratch_tensor& operator=(scratch_tensor&&) = delete;
  ~scratch_tensor() {
    if (pool_) pool_->release(block_);
  }

  T* data() { return static_cast<T*>(block_.p); }
  const T* data() const { return static_cast<const T*>(block_.p); }
  const shape_type& shape() const { return shape_; }
  tensor_view<T, static_cast<int>(R)> view() { return {data(), shape_}; }
  tensor_view<const T, static_cast<int>(R)> view() const { return {data(), shape_}; }

 private:
  scratch_pool* pool_;
  scratch_pool::block block_;
  shape_type shape_;
};

}  // namespace fuse::cpu
