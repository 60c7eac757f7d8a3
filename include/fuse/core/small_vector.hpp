// A vector that keeps its first N elements inline: the per-call bookkeeping of an evaluation
// (outputs, leaves, strides) fits without touching the heap, which matters for tiny tensors,
// where a fused loop of a few vectors would otherwise cost less than its allocations.
#pragma once

#include <cstddef>
#include <vector>

namespace fuse {

template <class T, std::size_t N>
class small_vector {
 public:
  small_vector() = default;
  small_vector(std::size_t n, const T& v) {
    for (std::size_t i = 0; i < n; ++i) push_back(v);
  }
  void push_back(const T& v) {
    if (size_ < N) inline_[size_] = v;
    else heap_.push_back(v);
    ++size_;
  }
  T& operator[](std::size_t i) { return i < N ? inline_[i] : heap_[i - N]; }
  const T& operator[](std::size_t i) const { return i < N ? inline_[i] : heap_[i - N]; }
  std::size_t size() const { return size_; }
  void clear() {
    heap_.clear();
    size_ = 0;
  }

 private:
  T inline_[N]{};
  std::vector<T> heap_;
  std::size_t size_ = 0;
};

}  // namespace fuse
