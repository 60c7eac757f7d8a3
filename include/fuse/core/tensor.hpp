// Leaves of every expression: `tensor_view` (non-owning, strided) and `tensor` (owning,
// 64-byte aligned, row-major).
//
//   fuse::tensor<float, 2> a({1, 30});                  // rank 2, extents at run time
//   fuse::tensor<float, fuse::fixed<2, 3>> b;            // extents at compile time
//   fuse::tensor_view<const float, 2> v = fuse::view(ptr, {4, 5}, {1, 4});  // strided, no copy
//
// Strides are in elements and may be zero (broadcast) or negative. A view's third parameter says
// where its elements live: host memory (the default; what fuse::eval reads and writes) or device
// memory (fuse::cuda::eval's; made by fuse::cuda::view or fuse::cuda::tensor). The executors
// check it at compile time, so a device pointer never reaches a CPU loop.
#pragma once

#include <cassert>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "fuse/core/dtype.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/shape.hpp"

namespace fuse {

namespace detail {
template <std::size_t R>
index_array<R> extents_from_list(std::initializer_list<index_t> l, const char* what) {
  if (l.size() != R) throw_shape_error(what, ": ", static_cast<index_t>(l.size()), " values given for rank ", R);
  index_array<R> a{};
  std::size_t i = 0;
  for (index_t x : l) a[i++] = x;
  return a;
}
template <std::size_t R>
void check_extents(const index_array<R>& e, const char* what) {
  for (std::size_t i = 0; i < R; ++i)
    if (e[i] < 0) throw_shape_error(what, ": negative extent in shape ", e);
}
}  // namespace detail

/// Where a view's elements live: the memory the host's loads reach.
struct host_memory {
  static constexpr const char* name = "host";
};
/// Where a view's elements live: a GPU's global memory (cudaMalloc, cudaMallocAsync).
struct device_memory {
  static constexpr const char* name = "device";
};
template <class S>
inline constexpr bool memory_space = std::is_same_v<S, host_memory> || std::is_same_v<S, device_memory>;

/// A non-owning, strided window onto elements of type T (const T for read-only views) in
/// memory space Space (host_memory or device_memory).
template <class T, auto E = 1, class Space = host_memory>
class tensor_view {
 public:
  using element_type = T;
  using memory_space_type = Space;
  using value_type = std::remove_cv_t<T>;
  using shape_type = shape_from_param_t<E>;
  static constexpr std::size_t rank = shape_type::rank;
  static constexpr bool is_fuse_expr = true;
  static_assert(element<value_type>, "fuse::tensor_view: unsupported element type");
  static_assert(memory_space<Space>, "fuse::tensor_view: the memory space is fuse::host_memory or fuse::device_memory");

  constexpr tensor_view() = default;

  /// Contiguous row-major view of `s` over `data`.
  FUSE_HD constexpr tensor_view(T* data, shape_type s)
      : data_(data), shape_(s), strides_(row_major_strides(s.array())) {}
  /// Strided view: element (i0, i1, ...) lives at data[i0*strides[0] + i1*strides[1] + ...].
  FUSE_HD constexpr tensor_view(T* data, shape_type s, const index_array<rank>& strides)
      : data_(data), shape_(s), strides_(strides) {}

  /// A view of U converts to a view of const U, and a static-shape view to a dynamic one, in
  /// the same memory space (never from host to device or back: see fuse::cuda::copy).
  template <class U, auto F>
    requires(std::is_convertible_v<U*, T*> && shape_from_param_t<F>::rank == rank &&
             std::is_convertible_v<typename tensor_view<U, F, Space>::shape_type, shape_type> &&
             !(std::is_same_v<U, T> && std::is_same_v<shape_from_param_t<F>, shape_type>))
  FUSE_HD constexpr tensor_view(const tensor_view<U, F, Space>& o)
      : data_(o.data()), shape_(o.shape()), strides_(o.strides()) {}

  FUSE_HD constexpr T* data() const { return data_; }
  FUSE_HD constexpr shape_type shape() const { return shape_; }
  FUSE_HD constexpr const index_array<rank>& strides() const { return strides_; }
  FUSE_HD constexpr index_t extent(std::size_t i) const { return shape_[i]; }
  FUSE_HD constexpr index_t stride(std::size_t i) const { return strides_[i]; }
  FUSE_HD constexpr index_t size() const { return shape_.size(); }
  FUSE_HD constexpr bool empty() const { return size() == 0; }

  /// True when the elements are densely packed in row-major order (extent-1 axes ignored).
  FUSE_HD constexpr bool is_contiguous() const {
    index_t expect = 1;
    for (std::size_t i = rank; i-- > 0;) {
      if (shape_[i] == 1) continue;
      if (strides_[i] != expect) return false;
      expect *= shape_[i];
    }
    return true;
  }

  FUSE_HD constexpr index_t offset_of(const index_array<rank>& idx) const {
    index_t o = 0;
    for (std::size_t i = 0; i < rank; ++i) o += idx[i] * strides_[i];
    return o;
  }
  template <class... I>
    requires(sizeof...(I) == rank && (std::is_integral_v<I> && ...))
  FUSE_HD constexpr T& operator()(I... i) const {
    return data_[offset_of(index_array<rank>{{static_cast<index_t>(i)...}})];
  }
  FUSE_HD constexpr T& operator[](const index_array<rank>& idx) const { return data_[offset_of(idx)]; }

  /// Bounds-checked element access (host only).
  template <class... I>
    requires(sizeof...(I) == rank && (std::is_integral_v<I> && ...))
  T& at(I... i) const {
    index_array<rank> idx{{static_cast<index_t>(i)...}};
    for (std::size_t d = 0; d < rank; ++d)
      if (idx[d] < 0 || idx[d] >= shape_[d])
        throw_shape_error("tensor_view::at: index ", idx, " is outside shape ", shape_);
    return (*this)[idx];
  }

 private:
  T* data_ = nullptr;
  [[no_unique_address]] shape_type shape_{};
  index_array<rank> strides_{};
};

/// The view type of element T, shape type S and memory space M (one type per shape, whatever
/// spelled it).
template <class T, class S, class M = host_memory>
using view_t = tensor_view<T, shape_param_v<S>, M>;

/// The tag of a tensor constructor that leaves the elements unset: for storage that is written
/// whole before it is read (the executors' temporaries), where zeroing it first costs a pass.
struct uninitialized_t {
  explicit uninitialized_t() = default;
};
inline constexpr uninitialized_t uninitialized{};

/// An owning tensor: 64-byte aligned, row-major, zero-initialised (unless made with
/// fuse::uninitialized), deep-copied.
template <class T, auto E = 1>
class tensor {
 public:
  using value_type = T;
  using shape_type = shape_from_param_t<E>;
  static constexpr std::size_t rank = shape_type::rank;
  static_assert(element<T> && !std::is_const_v<T>, "fuse::tensor: unsupported element type");

  /// Static shapes allocate their extents; dynamic ones start empty (all extents 0).
  tensor() { allocate(); }
  explicit tensor(shape_type s) : shape_(s) {
    detail::check_extents(shape_.array(), "tensor");
    allocate();
  }
  /// Elements left unset: every one must be written before it is read.
  tensor(shape_type s, uninitialized_t) : shape_(s) {
    detail::check_extents(shape_.array(), "tensor");
    allocate(false);
  }
  /// `fuse::tensor<float, 2> a({1, 30});`
  tensor(std::initializer_list<index_t> extents)
    requires(!shape_type::is_static)
      : shape_(detail::extents_from_list<rank>(extents, "tensor")) {
    detail::check_extents(shape_.array(), "tensor");
    allocate();
  }
  explicit tensor(const index_array<rank>& extents)
    requires(!shape_type::is_static)
      : shape_(extents) {
    detail::check_extents(shape_.array(), "tensor");
    allocate();
  }

  tensor(const tensor& o) : shape_(o.shape_) {
    allocate(false);
    if (size()) std::memcpy(static_cast<void*>(data_.get()), o.data_.get(), sizeof(T) * size());
  }
  tensor(tensor&&) noexcept = default;
  tensor& operator=(const tensor& o) {
    if (this != &o) *this = tensor(o);
    return *this;
  }
  tensor& operator=(tensor&&) noexcept = default;

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  shape_type shape() const { return shape_; }
  index_array<rank> strides() const { return row_major_strides(shape_.array()); }
  index_t extent(std::size_t i) const { return shape_[i]; }
  index_t size() const { return shape_.size(); }
  bool empty() const { return size() == 0; }

  tensor_view<T, E> view() { return {data(), shape_}; }
  tensor_view<const T, E> view() const { return {data(), shape_}; }
  operator tensor_view<T, E>() { return view(); }
  operator tensor_view<const T, E>() const { return view(); }
  /// Also convertible to the dynamic-shape view of the same rank.
  operator tensor_view<T, static_cast<int>(rank)>()
    requires shape_type::is_static
  {
    return {data(), dynamic_shape<rank>(shape_)};
  }
  operator tensor_view<const T, static_cast<int>(rank)>() const
    requires shape_type::is_static
  {
    return {data(), dynamic_shape<rank>(shape_)};
  }

  template <class... I>
    requires(sizeof...(I) == rank && (std::is_integral_v<I> && ...))
  T& operator()(I... i) {
    return view()(i...);
  }
  template <class... I>
    requires(sizeof...(I) == rank && (std::is_integral_v<I> && ...))
  const T& operator()(I... i) const {
    return view()(i...);
  }
  T& operator[](const index_array<rank>& idx) { return view()[idx]; }
  const T& operator[](const index_array<rank>& idx) const { return view()[idx]; }
  template <class... I>
  T& at(I... i) {
    return view().at(i...);
  }
  template <class... I>
  const T& at(I... i) const {
    return view().at(i...);
  }

  T* begin() { return data(); }
  T* end() { return data() + size(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }

  void fill(const T& v) {
    for (T& x : *this) x = v;
  }

 private:
  struct aligned_delete {
    void operator()(T* p) const { ::operator delete[](static_cast<void*>(p), std::align_val_t{storage_alignment}); }
  };

  void allocate(bool zeroed = true) {
    const index_t n = size();
    if (n == 0) {
      data_.reset();
      return;
    }
    void* raw = ::operator new[](sizeof(T) * static_cast<std::size_t>(n), std::align_val_t{storage_alignment});
    if (zeroed) std::memset(raw, 0, sizeof(T) * static_cast<std::size_t>(n));
    data_.reset(static_cast<T*>(raw));
  }

  [[no_unique_address]] shape_type shape_{};
  std::unique_ptr<T, aligned_delete> data_;
};

// ---- views over raw pointers -----------------------------------------------------------------

namespace detail {
/// A view in memory space M over p with the given extents (checked, `what` naming the caller)
/// and strides (row-major when null): fuse::view and fuse::cuda::view.
template <class M, class T, std::size_t R>
tensor_view<T, static_cast<int>(R), M> pointer_view(T* p, const index_t (&extents)[R], const index_t* strides,
                                                    const char* what) {
  index_array<R> e{};
  for (std::size_t i = 0; i < R; ++i) e[i] = extents[i];
  check_extents(e, what);
  if (!strides) return {p, dynamic_shape<R>(e)};
  index_array<R> s{};
  for (std::size_t i = 0; i < R; ++i) s[i] = strides[i];
  return {p, dynamic_shape<R>(e), s};
}
}  // namespace detail

/// Contiguous row-major view over `n`-dimensional data at `p`: `fuse::view(p, {2, 3})`.
template <class T, std::size_t R>
tensor_view<T, static_cast<int>(R)> view(T* p, const index_t (&extents)[R]) {
  return detail::pointer_view<host_memory>(p, extents, nullptr, "view");
}
/// Strided view: `fuse::view(p, {4, 5}, {1, 4})` (strides in elements).
template <class T, std::size_t R>
tensor_view<T, static_cast<int>(R)> view(T* p, const index_t (&extents)[R], const index_t (&strides)[R]) {
  return detail::pointer_view<host_memory>(p, extents, strides, "view");
}
template <class T, auto E>
tensor_view<T, E> view(tensor<T, E>& t) {
  return t.view();
}
template <class T, auto E>
tensor_view<const T, E> view(const tensor<T, E>& t) {
  return t.view();
}
template <class T, auto E, class M>
tensor_view<T, E, M> view(tensor_view<T, E, M> v) {
  return v;
}

template <class T>
struct is_tensor : std::false_type {};
template <class T, auto E>
struct is_tensor<tensor<T, E>> : std::true_type {};
template <class T>
struct is_tensor_view : std::false_type {};
template <class T, auto E, class M>
struct is_tensor_view<tensor_view<T, E, M>> : std::true_type {};

}  // namespace fuse
