// Device memory for fuse::cuda::eval: device views over pointers the caller owns, a tensor that
// owns device memory (stream-ordered: allocated and freed on a stream), and copies between host
// and device.
//
//   fuse::cuda::tensor<float, 2> x({rows, cols}, stream);           // cudaMallocAsync + zeroed
//   fuse::cuda::copy(x, host_x, fuse::cuda::on(stream));             // host -> device
//   auto v = fuse::cuda::view(raw_device_ptr, {rows, cols});        // a device view, no copy
//   fuse::cuda::eval(v, sigmoid(x) * 2.f, fuse::cuda::on(stream));
//   fuse::cuda::copy(host_y, v, fuse::cuda::on(stream));             // device -> host
//
// A device view is `fuse::tensor_view<T, E, fuse::device_memory>` (alias fuse::cuda::device_view):
// fuse::eval refuses it at compile time, and fuse::cuda::eval refuses host views, so a pointer is
// never read by the wrong processor. The views need nothing from CUDA; the tensor and the copies
// call the CUDA runtime, and are defined where its header is on the include path (nvcc always has
// it; link CUDA::cudart).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "fuse/core/error.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/cuda/check.hpp"
#include "fuse/cuda/launch.hpp"

namespace fuse::cuda {

/// A view of device memory.
template <class T, auto E = 1>
using device_view = tensor_view<T, E, device_memory>;

/// A contiguous row-major device view over `p`: `fuse::cuda::view(p, {rows, cols})`.
template <class T, std::size_t R>
device_view<T, static_cast<int>(R)> view(T* p, const index_t (&extents)[R]) {
  return fuse::detail::pointer_view<device_memory>(p, extents, nullptr, "cuda::view");
}
/// A strided device view: `fuse::cuda::view(p, {4, 5}, {1, 4})` (strides in elements).
template <class T, std::size_t R>
device_view<T, static_cast<int>(R)> view(T* p, const index_t (&extents)[R], const index_t (&strides)[R]) {
  return fuse::detail::pointer_view<device_memory>(p, extents, strides, "cuda::view");
}

#if defined(FUSE_CUDA_RUNTIME)

/// Owning, contiguous row-major device memory: allocated with cudaMallocAsync on the stream it
/// is given and zeroed there, freed with cudaFreeAsync on the same stream when destroyed (so the
/// stream's earlier work on it finishes first; the stream must outlive the tensor). Move-only: a deep copy needs a stream, so it is
/// spelled `fuse::cuda::copy`.
template <class T, auto E = 1>
class tensor {
 public:
  using value_type = T;
  using shape_type = shape_from_param_t<E>;
  static constexpr std::size_t rank = shape_type::rank;
  static_assert(element<T> && !std::is_const_v<T>, "fuse::cuda::tensor: unsupported element type");

  /// Empty (extents 0, no memory). A static shape has no empty form: give it a stream.
  tensor()
    requires(!shape_type::is_static)
  = default;
  /// A zeroed tensor of shape s on stream (never the legacy default stream).
  tensor(shape_type s, stream_t stream) : shape_(s), stream_(stream) {
    fuse::detail::check_extents(shape_.array(), "cuda::tensor");
    allocate();
  }
  /// `fuse::cuda::tensor<float, 2> a({rows, cols}, stream);`
  tensor(std::initializer_list<index_t> extents, stream_t stream)
    requires(!shape_type::is_static)
      : shape_(fuse::detail::extents_from_list<rank>(extents, "cuda::tensor")), stream_(stream) {
    fuse::detail::check_extents(shape_.array(), "cuda::tensor");
    allocate();
  }
  /// A static-shape tensor on stream.
  explicit tensor(stream_t stream)
    requires(shape_type::is_static)
      : stream_(stream) {
    allocate();
  }

  tensor(const tensor&) = delete;
  tensor& operator=(const tensor&) = delete;
  /// Moving leaves the source without memory (and, for a dynamic shape, with extents 0; a
  /// moved-from static-shape tensor may only be destroyed or assigned to).
  tensor(tensor&& o) noexcept : shape_(o.shape_), stream_(o.stream_), data_(std::exchange(o.data_, nullptr)) {
    o.forget_shape();
  }
  tensor& operator=(tensor&& o) noexcept {
    if (this != &o) {
      release();
      shape_ = o.shape_;
      stream_ = o.stream_;
      data_ = std::exchange(o.data_, nullptr);
      o.forget_shape();
    }
    return *this;
  }
  ~tensor() { release(); }

  // (FUSE_HD: as_expr, which is __host__ __device__, reads them)
  FUSE_HD T* data() { return data_; }
  FUSE_HD const T* data() const { return data_; }
  FUSE_HD shape_type shape() const { return shape_; }
  index_array<rank> strides() const { return row_major_strides(shape_.array()); }
  index_t extent(std::size_t i) const { return shape_[i]; }
  FUSE_HD index_t size() const { return shape_.size(); }
  bool empty() const { return size() == 0; }
  /// The stream the memory was allocated on and will be freed on.
  stream_t stream() const { return stream_; }

  FUSE_HD device_view<T, E> view() { return {data_, shape_}; }
  FUSE_HD device_view<const T, E> view() const { return {data_, shape_}; }
  FUSE_HD operator device_view<T, E>() { return view(); }
  FUSE_HD operator device_view<const T, E>() const { return view(); }

 private:
  void allocate() {
    if (stream_ == nullptr)
      throw error(
          "cuda::tensor: give the stream to allocate on (not the legacy default stream 0, which cannot be "
          "captured in a graph and synchronizes with every other stream)");
    const std::size_t bytes = sizeof(T) * static_cast<std::size_t>(size());
    if (bytes == 0) return;
    void* p = nullptr;
    FUSE_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream_));
    data_ = static_cast<T*>(p);
    FUSE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  }
  void forget_shape() noexcept {
    if constexpr (!shape_type::is_static) shape_ = shape_type{};
  }
  void release() noexcept {
    // A destructor cannot throw: an error here leaves the memory to the driver, which frees it
    // with the context. The stream must still exist: cudaFreeAsync on a destroyed stream is
    // undefined (on an H100 with driver 580 it crashed inside the driver), so destroy a tensor
    // before its stream.
    if (data_) (void)cudaFreeAsync(data_, stream_);
    data_ = nullptr;
  }

  [[no_unique_address]] shape_type shape_{};
  stream_t stream_ = nullptr;
  T* data_ = nullptr;
};

namespace detail {
template <class D, class S>
void copy_views(const D& dst, const S& src, stream_t stream, cudaMemcpyKind kind) {
  using T = typename D::value_type;
  static_assert(std::is_same_v<T, typename S::value_type>,
                "fuse::cuda::copy: the two sides have different element types (convert with fuse::cast in an eval)");
  static_assert(!std::is_const_v<typename D::element_type>, "fuse::cuda::copy: the destination is a view of const");
  static_assert(D::rank == S::rank, "fuse::cuda::copy: the two sides have different ranks");
  if (!(dst.shape().array() == src.shape().array()))
    throw_shape_error("cuda::copy: the destination has shape ", dst.shape().array(), " and the source ",
                      src.shape().array());
  if (!dst.is_contiguous() || !src.is_contiguous())
    throw_shape_error(
        "cuda::copy: both sides must be contiguous row-major (a strided view is evaluated into a "
        "contiguous one first: fuse::eval on the host, fuse::cuda::eval on the device)");
  if (stream == nullptr) throw error("cuda::copy: give the stream to copy on (fuse::cuda::on(stream))");
  const std::size_t bytes = sizeof(T) * static_cast<std::size_t>(dst.size());
  if (bytes == 0) return;
  FUSE_CUDA_CHECK(
      cudaMemcpyAsync(static_cast<void*>(dst.data()), static_cast<const void*>(src.data()), bytes, kind, stream));
}
template <class X>
auto any_view(X&& x) {
  using D = std::remove_cvref_t<X>;
  if constexpr (is_tensor_view<D>::value) return x;
  else return x.view();
}
}  // namespace detail

/// dst = src on the stream, host to device, device to host or device to device, by the views'
/// memory spaces (both sides contiguous, one shape, one element type). Asynchronous: host memory
/// must stay alive and unchanged until the stream reaches the copy (from pageable memory the
/// runtime stages it and may return before the transfer; to pageable memory it returns after).
template <class Dst, class Src>
void copy(Dst&& dst_, const Src& src_, on where) {
  const auto dst = detail::any_view(dst_);
  const auto src = detail::any_view(src_);
  using DM = typename std::remove_cvref_t<decltype(dst)>::memory_space_type;
  using SM = typename std::remove_cvref_t<decltype(src)>::memory_space_type;
  static_assert(std::is_same_v<DM, device_memory> || std::is_same_v<SM, device_memory>,
                "fuse::cuda::copy: both sides are host memory: copy them with fuse::eval(dst, src)");
  constexpr cudaMemcpyKind kind =
      std::is_same_v<DM, device_memory>
          ? (std::is_same_v<SM, device_memory> ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
          : cudaMemcpyDeviceToHost;
  detail::copy_views(dst, src, where.stream, kind);
}

/// A new device tensor holding host tensor or view h (copied on the stream).
template <class H>
auto to_device(const H& h, stream_t stream) {
  const auto v = detail::any_view(h);
  using V = std::remove_cvref_t<decltype(v)>;
  static_assert(std::is_same_v<typename V::memory_space_type, host_memory>, "fuse::cuda::to_device: give host memory");
  tensor<typename V::value_type, shape_param_v<typename V::shape_type>> d(v.shape(), stream);
  copy(d, v, on(stream));
  return d;
}

/// A new host tensor holding device tensor or view d: copied on the stream, which is then
/// synchronized (the one call here that waits).
template <class D>
auto to_host(const D& d, stream_t stream) {
  const auto v = detail::any_view(d);
  using V = std::remove_cvref_t<decltype(v)>;
  static_assert(std::is_same_v<typename V::memory_space_type, device_memory>,
                "fuse::cuda::to_host: give device memory");
  fuse::tensor<typename V::value_type, shape_param_v<typename V::shape_type>> h(v.shape());
  copy(h, v, on(stream));
  FUSE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return h;
}

#endif  // FUSE_CUDA_RUNTIME

}  // namespace fuse::cuda

#if defined(FUSE_CUDA_RUNTIME)
namespace fuse {
/// A fuse::cuda::tensor is an owning tensor like fuse::tensor: an operand (kept as its device
/// view, refused as a temporary) and an output of fuse::cuda::eval.
template <class T, auto E>
struct is_tensor<cuda::tensor<T, E>> : std::true_type {};
}  // namespace fuse
#endif
