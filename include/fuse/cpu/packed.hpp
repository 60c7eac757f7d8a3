// The types of constant weights packed once for the CPU GEMM (fuse::pack, fuse/cpu/pack.hpp):
//
//   auto Wp = fuse::pack(W);                    // W: [N, K], nn.dense's weight layout
//   fuse::eval(out, fuse::sigmoid(fuse::dense(x, Wp)));   // wherever W would be
//
// A contraction reading Wp runs on the GEMM's own panel layout (fuse/cpu/gemm.hpp,
// pack_b_ahead: blocks of reduction rows, each holding NR-column panels of every output
// column), so the weights are neither transposed nor copied again on any call; the blocks are
// read in memory order, which lets a batch-1 cell stream them at the memory's speed.
//
// float16 and bfloat16 weights are widened to float once, as they are packed, into the same
// float panels: a call pays no conversion of W (the 16-bit data is widened as its rows are
// packed, and a 16-bit result rounded as it is stored). Where the CPU has vdpbf16ps, bfloat16
// weights are packed in pairs of k instead (fuse/cpu/gemm_bf16.hpp: half the bytes).
//
// int8 and uint8 weights are packed for the int8 GEMM instead (fuse/cpu/gemm_int8.hpp,
// pack_int8_b_ahead: the VNNI kernel's 4-byte groups, or int16 pairs without VNNI, with the
// per-column sums the int8 x int8 and uint8 x uint8 products need), for data of either dtype.
//
// Wp is the weight operand of fuse::dense and of fuse::matmul with transpose_b (both read it
// as [N, K]); an elementwise tree cannot read it (use W there). It owns its memory; the
// expressions that use it hold a view (like a tensor's), so it must outlive them.
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

#include "fuse/core/shape.hpp"
#include "fuse/cpu/gemm.hpp"
#include "fuse/cpu/gemm_bf16.hpp"
#include "fuse/cpu/gemm_int8.hpp"
#include "fuse/expr/node.hpp"

namespace fuse {

namespace detail {
template <class T>
inline constexpr bool is_8bit_weight = std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>;

/// The GEMM's description of packed weights of dtype T: the float GEMM's panels (float16 and
/// bfloat16 weights widened to float once, when packed), or the int8 GEMM's groups. Both read
/// element (kk, j) of B = W^T back with element(kk, j).
template <class T>
inline constexpr bool is_pair_weight = std::is_same_v<T, bfloat16> && cpu::gemm::has_dpbf16;

template <class T>
using packed_layout = std::conditional_t<is_8bit_weight<T>, cpu::gemm::packed_int8_b<T>,
                                         std::conditional_t<is_pair_weight<T>, cpu::gemm::packed_pairs_b,
                                                            cpu::gemm::packed_b<cpu::gemm::accumulator_t<T, T>>>>;

/// W (n x k: element (j, kk) at data[j * row_stride + kk * col_stride]) packed as B = W^T into
/// dst (packed_bytes<T>(k, n) bytes, 64-byte aligned).
template <class T>
std::size_t packed_bytes(index_t k, index_t n) {
  if constexpr (is_8bit_weight<T>) return static_cast<std::size_t>(cpu::gemm::packed_int8_b_bytes<T>(k, n)) + 64;
  else if constexpr (is_pair_weight<T>) return cpu::gemm::packed_pairs_b_bytes(k, n);
  else return cpu::gemm::packed_b_bytes<cpu::gemm::accumulator_t<T, T>>(k, n);
}
template <class T>
packed_layout<T> pack_weights(unsigned char* dst, const T* data, index_t n, index_t k, index_t row_stride,
                              index_t col_stride) {
  const cpu::gemm::strided<T> b{data, col_stride, row_stride};  // B(kk, j) = W(j, kk)
  if constexpr (is_8bit_weight<T>) return cpu::gemm::pack_int8_b_ahead<T>(dst, b, k, n);
  else if constexpr (is_pair_weight<T>) return cpu::gemm::pack_pairs_b_ahead(dst, b, k, n);
  else return cpu::gemm::pack_b_ahead<cpu::gemm::accumulator_t<T, T>>(dst, b, k, n);
}
}  // namespace detail

/// The expression leaf of packed weights: logically the [N, K] matrix it was packed from.
template <class T>
struct packed_view {
  using value_type = T;
  using shape_type = dynamic_shape<2>;
  static constexpr std::size_t rank = 2;
  static constexpr bool is_fuse_expr = true;
  static constexpr node_kind kind_tag = node_kind::packed_weights;

  detail::packed_layout<T> packed{};
  index_t n = 0, k = 0;

  FUSE_HD constexpr shape_type shape() const { return shape_type({n, k}); }

  /// Whether o views the same packing (a packing never changes once made).
  bool same_as(const packed_view& o) const { return packed.data == o.packed.data && n == o.n && k == o.k; }
  /// Element (j, kk) of the [N, K] matrix, read from the packing (references and checks).
  T element(index_t j, index_t kk) const { return static_cast<T>(packed.element(kk, j)); }
};

template <class T>
struct is_packed_view : std::false_type {};
template <class T>
struct is_packed_view<packed_view<T>> : std::true_type {};

/// Weights packed for the CPU GEMM (see fuse::pack). Move-only owner of the packing.
template <class T>
class packed_weights {
 public:
  using value_type = T;
  using packed_view_type = packed_view<T>;

  packed_weights() = default;

  /// Packs the [N, K] matrix whose element (j, k) is at data[j * row_stride + k * col_stride].
  packed_weights(const T* data, index_t n, index_t k, index_t row_stride, index_t col_stride) : n_(n), k_(k) {
    storage_.reset(static_cast<unsigned char*>(::operator new[](detail::packed_bytes<T>(k, n), std::align_val_t{64})));
    packed_ = detail::pack_weights<T>(storage_.get(), data, n, k, row_stride, col_stride);
  }

  packed_view<T> view() const { return {packed_, n_, k_}; }
  dynamic_shape<2> shape() const { return dynamic_shape<2>({n_, k_}); }

 private:
  struct aligned_delete {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<unsigned char, aligned_delete> storage_;
  detail::packed_layout<T> packed_{};
  index_t n_ = 0, k_ = 0;
};

}  // namespace fuse
