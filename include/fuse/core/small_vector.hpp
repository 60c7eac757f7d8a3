// A vector that keeps its first N elements inline: the per-call bookkeeping of an evaluation
// (outputs, leaves, strides) fits without touching the heap, which matters for tiny tensors,
// where a fused loop of a few vectors would otherwise cost less than its allocations.
//
// The inline slots are raw storage: only live elements are constructed, copied and destroyed.
// (Value-initialising all N slots cost a memset of ~1 KiB per evaluation, and copying the whole
// array read back bytes just written in narrower stores: store-forwarding stalls that were a
// third of a 10-element eval's time.)
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace fuse {

template <class T, std::size_t N>
class small_vector {
 public:
  small_vector() = default;
  small_vector(std::size_t n, const T& v) {
    for (std::size_t i = 0; i < n; ++i) push_back(v);
  }
  small_vector(const small_vector& o) : heap_(o.heap_) {
    for (std::size_t i = 0; i < o.inline_size(); ++i) ::new (slot(i)) T(o[i]);
    size_ = o.size_;
  }
  small_vector(small_vector&& o) noexcept(std::is_nothrow_move_constructible_v<T>) : heap_(std::move(o.heap_)) {
    for (std::size_t i = 0; i < o.inline_size(); ++i) ::new (slot(i)) T(std::move(o[i]));
    size_ = o.size_;
    o.clear();
  }
  small_vector& operator=(const small_vector& o) {
    if (this != &o) {
      clear();
      for (std::size_t i = 0; i < o.size(); ++i) push_back(o[i]);
    }
    return *this;
  }
  small_vector& operator=(small_vector&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) {
      clear();
      for (std::size_t i = 0; i < o.inline_size(); ++i) ::new (slot(i)) T(std::move(o[i]));
      heap_ = std::move(o.heap_);
      size_ = o.size_;
      o.clear();
    }
    return *this;
  }
  ~small_vector() { destroy_inline(); }

  void push_back(const T& v) {
    if (size_ < N) ::new (slot(size_)) T(v);
    else heap_.push_back(v);
    ++size_;
  }
  void push_back(T&& v) {
    if (size_ < N) ::new (slot(size_)) T(std::move(v));
    else heap_.push_back(std::move(v));
    ++size_;
  }
  T& operator[](std::size_t i) { return i < N ? *slot(i) : heap_[i - N]; }
  const T& operator[](std::size_t i) const { return i < N ? *slot(i) : heap_[i - N]; }
  std::size_t size() const { return size_; }
  void clear() {
    destroy_inline();
    heap_.clear();
    size_ = 0;
  }

 private:
  std::size_t inline_size() const { return size_ < N ? size_ : N; }
  T* slot(std::size_t i) { return std::launder(reinterpret_cast<T*>(storage_ + i * sizeof(T))); }
  const T* slot(std::size_t i) const { return std::launder(reinterpret_cast<const T*>(storage_ + i * sizeof(T))); }
  void destroy_inline() {
    if constexpr (!std::is_trivially_destructible_v<T>)
      for (std::size_t i = 0; i < inline_size(); ++i) slot(i)->~T();
  }

  alignas(T) unsigned char storage_[N * sizeof(T)];
  std::vector<T> heap_;
  std::size_t size_ = 0;
};

}  // namespace fuse
