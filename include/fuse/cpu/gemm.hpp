// The CPU GEMM: C[m, n] = sum_k A(m, k) B(k, n) over strided operands, packed panels and a
// register-blocked micro-kernel on xsimd batches (vectorized along n, the contiguous axis of
// the output, where epilogues will run).
//
// Blocking (Goto's scheme): for each block of NC columns and KC of the reduction, B is packed
// into panels of NR columns (zero padded), then for each block of MC rows A is packed into
// panels of MR rows; the micro-kernel keeps an MR x NR tile of C in registers over the KC steps.
// Packing reads any strides (transposed operands cost nothing extra) and converts the element
// type to the accumulator's (int8/uint8 -> int32 for the exact integer product).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "fuse/core/config.hpp"

namespace fuse::cpu::gemm {

/// One strided matrix operand: element (i, j) at data[i * rs + j * cs].
template <class T>
struct strided {
  const T* data;
  index_t rs, cs;
  FUSE_FORCE_INLINE const T& operator()(index_t i, index_t j) const { return data[i * rs + j * cs]; }
};

template <class Acc>
struct blocking {
  using batch = xsimd::batch<Acc>;
  static constexpr int W = static_cast<int>(batch::size);
  static constexpr int NRV = 2;                       ///< vectors per micro-tile row
  static constexpr int NR = W * NRV;                  ///< micro-tile columns
  static constexpr int MR = sizeof(batch) >= 64 ? 12 : 6;  ///< rows: 2*MR accumulators + 3 fit the registers
  static constexpr index_t KC = 384 * 4 / static_cast<index_t>(sizeof(Acc) < 4 ? 4 : sizeof(Acc));
  static constexpr index_t MC = MR * 8;
  static constexpr index_t NC = NR * 64;
};

namespace detail {

template <class T>
struct aligned_buffer {
  T* p = nullptr;
  explicit aligned_buffer(std::size_t n)
      : p(static_cast<T*>(::operator new[](n * sizeof(T) + 64, std::align_val_t{64}))) {}
  ~aligned_buffer() { ::operator delete[](p, std::align_val_t{64}); }
  aligned_buffer(const aligned_buffer&) = delete;
  aligned_buffer& operator=(const aligned_buffer&) = delete;
};

/// B rows [k0, k0 + kc), columns [j0, j0 + nc) into panels of NR columns: panel p holds
/// kc rows of NR values (columns past n are zero).
template <class Acc, class TB>
void pack_b(Acc* dst, strided<TB> b, index_t k0, index_t kc, index_t j0, index_t nc) {
  constexpr int NR = blocking<Acc>::NR;
  for (index_t jp = 0; jp < nc; jp += NR) {
    const index_t w = std::min<index_t>(NR, nc - jp);
    Acc* panel = dst + jp * kc;
    for (index_t k = 0; k < kc; ++k) {
      Acc* row = panel + k * NR;
      const TB* src = &b(k0 + k, j0 + jp);
      if (b.cs == 1) {
        for (index_t j = 0; j < w; ++j) row[j] = static_cast<Acc>(src[j]);
      } else {
        for (index_t j = 0; j < w; ++j) row[j] = static_cast<Acc>(src[j * b.cs]);
      }
      for (index_t j = w; j < NR; ++j) row[j] = Acc(0);
    }
  }
}

/// A rows [i0, i0 + mc), reduction [k0, k0 + kc) into panels of MR rows, k-major: panel p
/// holds kc groups of MR values (rows past m are zero).
template <class Acc, class TA>
void pack_a(Acc* dst, strided<TA> a, index_t i0, index_t mc, index_t k0, index_t kc) {
  constexpr int MR = blocking<Acc>::MR;
  for (index_t ip = 0; ip < mc; ip += MR) {
    const index_t h = std::min<index_t>(MR, mc - ip);
    Acc* panel = dst + ip * kc;
    if (a.cs == 1 || h < MR) {
      for (index_t r = 0; r < MR; ++r) {
        if (r < h) {
          const TA* src = &a(i0 + ip + r, k0);
          for (index_t k = 0; k < kc; ++k) panel[k * MR + r] = static_cast<Acc>(src[k * a.cs]);
        } else {
          for (index_t k = 0; k < kc; ++k) panel[k * MR + r] = Acc(0);
        }
      }
    } else {
      // Rows contiguous (a transposed operand): copy k-slices of MR consecutive rows.
      for (index_t k = 0; k < kc; ++k) {
        const TA* src = &a(i0 + ip, k0 + k);
        for (index_t r = 0; r < MR; ++r) panel[k * MR + r] = static_cast<Acc>(src[r * a.rs]);
      }
    }
  }
}

/// a + b, wrapping for integers (two's complement, like the vector units) instead of overflowing.
template <class Acc>
FUSE_FORCE_INLINE Acc wrapping_add(Acc a, Acc b) {
  if constexpr (std::is_integral_v<Acc>)
    return static_cast<Acc>(static_cast<std::make_unsigned_t<Acc>>(a) + static_cast<std::make_unsigned_t<Acc>>(b));
  else return a + b;
}

template <class Acc>
FUSE_FORCE_INLINE xsimd::batch<Acc> madd(const xsimd::batch<Acc>& a, const xsimd::batch<Acc>& b,
                                        const xsimd::batch<Acc>& c) {
  if constexpr (std::is_floating_point_v<Acc>) return xsimd::fma(a, b, c);
  else return a * b + c;
}

/// The MR x NR tile C[0..h, 0..w) (+)= Ap * Bp over kc steps. `accumulate`: add to C.
template <class Acc>
FUSE_FORCE_INLINE void micro_kernel(index_t kc, const Acc* Ap, const Acc* Bp, Acc* c, index_t rs, index_t cs,
                                   index_t h, index_t w, bool accumulate) {
  using B = blocking<Acc>;
  using V = typename B::batch;
  constexpr int MR = B::MR, NRV = B::NRV, W = B::W;
  V acc[MR][NRV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NRV; ++v) acc[r][v] = V(Acc(0));
  for (index_t k = 0; k < kc; ++k) {
    V bv[NRV];
    for (int v = 0; v < NRV; ++v) bv[v] = V::load_aligned(Bp + k * B::NR + v * W);
    const Acc* ak = Ap + k * MR;
    for (int r = 0; r < MR; ++r) {
      const V av(ak[r]);
      for (int v = 0; v < NRV; ++v) acc[r][v] = madd(av, bv[v], acc[r][v]);
    }
  }
  if (h == MR && w == B::NR && cs == 1) {
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NRV; ++v) {
        Acc* p = c + r * rs + v * W;
        if (accumulate) (V::load_unaligned(p) + acc[r][v]).store_unaligned(p);
        else acc[r][v].store_unaligned(p);
      }
    return;
  }
  alignas(64) Acc tile[MR * B::NR];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NRV; ++v) acc[r][v].store_aligned(tile + r * B::NR + v * W);
  for (index_t r = 0; r < h; ++r)
    for (index_t j = 0; j < w; ++j) {
      Acc& dst = c[r * rs + j * cs];
      dst = accumulate ? wrapping_add(dst, tile[r * B::NR + j]) : tile[r * B::NR + j];
    }
}

/// The direct form for few rows or tiny products: C(i, j) as dot products along k, A's rows
/// and B's columns read in place (both contiguous along k), four rows by four columns at a time
/// (sixteen independent accumulators). For M = 1 this is the GEMV that streams each weight row
/// once; packing would only add a copy of the weights.
template <class T>
void gemm_dots(index_t m, index_t n, index_t k, strided<T> a, strided<T> b, T* c, index_t rs, index_t cs) {
  using V = xsimd::batch<T>;
  constexpr index_t W = static_cast<index_t>(V::size);
  constexpr int RB = 4, CB = 4;
  for (index_t i0 = 0; i0 < m; i0 += RB) {
    const int h = static_cast<int>(std::min<index_t>(RB, m - i0));
    const T* ar[RB];
    for (int r = 0; r < RB; ++r) ar[r] = a.data + (i0 + std::min(r, h - 1)) * a.rs;
    for (index_t j0 = 0; j0 < n; j0 += CB) {
      const int w = static_cast<int>(std::min<index_t>(CB, n - j0));
      const T* bc[CB];
      for (int q = 0; q < CB; ++q) bc[q] = b.data + (j0 + std::min(q, w - 1)) * b.cs;
      V acc[RB][CB];
      for (int r = 0; r < RB; ++r)
        for (int q = 0; q < CB; ++q) acc[r][q] = V(T(0));
      index_t kk = 0;
      for (; kk + W <= k; kk += W) {
        V bv[CB];
        for (int q = 0; q < CB; ++q) bv[q] = V::load_unaligned(bc[q] + kk);
        for (int r = 0; r < RB; ++r) {
          const V av = V::load_unaligned(ar[r] + kk);
          for (int q = 0; q < CB; ++q) acc[r][q] = xsimd::fma(av, bv[q], acc[r][q]);
        }
      }
      for (int r = 0; r < h; ++r)
        for (int q = 0; q < w; ++q) {
          T sum = xsimd::hadd(acc[r][q]);
          for (index_t t = kk; t < k; ++t) sum += ar[r][t] * bc[q][t];
          c[(i0 + r) * rs + (j0 + q) * cs] = sum;
        }
    }
  }
}

}  // namespace detail

/// C = A B for A m x k and B k x n (strided), C m x n with strides (rs, cs). C is overwritten
/// (k = 0 gives zeros). Integer accumulators wrap (computed in unsigned arithmetic semantics
/// of the vector units: two's complement, as int32 arithmetic in TVM).
template <class Acc, class TA, class TB>
void gemm(index_t m, index_t n, index_t k, strided<TA> a, strided<TB> b, Acc* c, index_t rs, index_t cs) {
  using Bk = blocking<Acc>;
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j) c[i * rs + j * cs] = Acc(0);
    return;
  }
  if constexpr (std::is_floating_point_v<Acc> && std::is_same_v<TA, Acc> && std::is_same_v<TB, Acc>) {
    if (a.cs == 1 && b.rs == 1 && (m <= 4 || m * n * k <= 32768)) {
      detail::gemm_dots<Acc>(m, n, k, a, b, c, rs, cs);
      return;
    }
  }
  const index_t nc_max = std::min<index_t>(Bk::NC, (n + Bk::NR - 1) / Bk::NR * Bk::NR);
  const index_t kc_max = std::min<index_t>(Bk::KC, k);
  const index_t mc_max = std::min<index_t>(Bk::MC, (m + Bk::MR - 1) / Bk::MR * Bk::MR);
  detail::aligned_buffer<Acc> bp(static_cast<std::size_t>(nc_max * kc_max));
  detail::aligned_buffer<Acc> ap(static_cast<std::size_t>(mc_max * kc_max));
  for (index_t j0 = 0; j0 < n; j0 += Bk::NC) {
    const index_t nc = std::min<index_t>(Bk::NC, n - j0);
    for (index_t k0 = 0; k0 < k; k0 += Bk::KC) {
      const index_t kc = std::min<index_t>(Bk::KC, k - k0);
      detail::pack_b<Acc>(bp.p, b, k0, kc, j0, nc);
      for (index_t i0 = 0; i0 < m; i0 += Bk::MC) {
        const index_t mc = std::min<index_t>(Bk::MC, m - i0);
        detail::pack_a<Acc>(ap.p, a, i0, mc, k0, kc);
        for (index_t ip = 0; ip < mc; ip += Bk::MR)
          for (index_t jp = 0; jp < nc; jp += Bk::NR)
            detail::micro_kernel<Acc>(kc, ap.p + ip * kc, bp.p + jp * kc, c + (i0 + ip) * rs + (j0 + jp) * cs, rs, cs,
                                      std::min<index_t>(Bk::MR, mc - ip), std::min<index_t>(Bk::NR, nc - jp), k0 > 0);
      }
    }
  }
}

}  // namespace fuse::cpu::gemm
