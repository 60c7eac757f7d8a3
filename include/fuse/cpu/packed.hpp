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

#include "fuse/core/error.hpp"
#include "fuse/cpu/gemm.hpp"
#include "fuse/cpu/gemm_int8.hpp"
#include "fuse/core/shape.hpp"

namespace fuse {

/// The expression leaf of packed weights: logically the [N, K] matrix it was packed from.
template <class T>
struct packed_view {
  using value_type = T;
  using shape_type = dynamic_shape<2>;
  using packed_weight_tag = void;
  static constexpr std::size_t rank = 2;
  static constexpr bool is_fuse_expr = true;

  const T* data = nullptr;
  index_t n = 0, k = 0;
  index_t ldp = 0;  ///< columns of the packing: n rounded up to the panel width

  FUSE_HD constexpr shape_type shape() const { return shape_type({n, k}); }

  /// Element (j, kk) of the [N, K] matrix, read from the panels (references and checks).
  T element(index_t j, index_t kk) const {
    using Bk = cpu::gemm::blocking<T>;
    const index_t kb = Bk::kc_for(k);
    const index_t k0 = kk / kb * kb;
    const index_t kc = std::min(kb, k - k0);
    return data[k0 * ldp + (j / Bk::NR) * kc * Bk::NR + (kk - k0) * Bk::NR + j % Bk::NR];
  }
};

/// 8-bit weights: the int8 GEMM's packing (gemm::packed_int8_b: B(k, j) of the GEMM is W(j, k)).
template <class T>
  requires(std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>)
struct packed_view<T> {
  using value_type = T;
  using shape_type = dynamic_shape<2>;
  using packed_weight_tag = void;
  static constexpr std::size_t rank = 2;
  static constexpr bool is_fuse_expr = true;

  cpu::gemm::packed_int8_b<T> packed{};
  index_t n = 0, k = 0;

  FUSE_HD constexpr shape_type shape() const { return shape_type({n, k}); }

  /// Element (j, kk) of the [N, K] matrix, read from the packing (references and checks).
  T element(index_t j, index_t kk) const { return packed.element(kk, j); }
};

template <class T>
struct is_packed_view : std::false_type {};
template <class T>
struct is_packed_view<packed_view<T>> : std::true_type {};

/// Weights packed for the CPU GEMM (see fuse::pack). Move-only owner of the panels.
template <class T>
class packed_weights {
 public:
  using value_type = T;
  using packed_view_type = packed_view<T>;

  packed_weights() = default;

  /// Packs the [N, K] matrix whose element (j, k) is at data[j * row_stride + k * col_stride].
  packed_weights(const T* data, index_t n, index_t k, index_t row_stride, index_t col_stride) : n_(n), k_(k) {
    using Bk = cpu::gemm::blocking<T>;
    ldp_ = (n + Bk::NR - 1) / Bk::NR * Bk::NR;
    const std::size_t count = static_cast<std::size_t>(ldp_ * k) + 16;
    storage_.reset(static_cast<T*>(::operator new[](count * sizeof(T), std::align_val_t{64})));
    // B(k, j) of the GEMM is W(j, k).
    cpu::gemm::pack_b_ahead<T>(storage_.get(), cpu::gemm::strided<T>{data, col_stride, row_stride}, k, n,
                               col_stride == 1 && row_stride != 1);
  }

  packed_view<T> view() const { return {storage_.get(), n_, k_, ldp_}; }
  dynamic_shape<2> shape() const { return dynamic_shape<2>({n_, k_}); }

 private:
  struct aligned_delete {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<T, aligned_delete> storage_;
  index_t n_ = 0, k_ = 0, ldp_ = 0;
};

/// 8-bit weights packed for the int8 GEMM (see fuse::pack). Move-only owner of the packing.
template <class T>
  requires(std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>)
class packed_weights<T> {
 public:
  using value_type = T;
  using packed_view_type = packed_view<T>;

  packed_weights() = default;

  /// Packs the [N, K] matrix whose element (j, k) is at data[j * row_stride + k * col_stride].
  packed_weights(const T* data, index_t n, index_t k, index_t row_stride, index_t col_stride) : n_(n), k_(k) {
    const std::size_t bytes = static_cast<std::size_t>(cpu::gemm::packed_int8_b_bytes<T>(k, n)) + 64;
    storage_.reset(static_cast<unsigned char*>(::operator new[](bytes, std::align_val_t{64})));
    // B(k, j) of the GEMM is W(j, k).
    packed_ = cpu::gemm::pack_int8_b_ahead<T>(storage_.get(), cpu::gemm::strided<T>{data, col_stride, row_stride},
                                              k, n);
  }

  packed_view<T> view() const { return {packed_, n_, k_}; }
  dynamic_shape<2> shape() const { return dynamic_shape<2>({n_, k_}); }

 private:
  struct aligned_delete {
    void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<unsigned char, aligned_delete> storage_;
  cpu::gemm::packed_int8_b<T> packed_{};
  index_t n_ = 0, k_ = 0;
};

}  // namespace fuse
