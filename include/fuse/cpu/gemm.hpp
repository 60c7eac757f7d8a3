// The CPU GEMM: C[m, n] = sum_k A(m, k) B(k, n) over strided operands, packed panels and a
// register-blocked micro-kernel on xsimd batches (vectorized along n, the contiguous axis of
// the output, where epilogues run).
//
// Blocking (Goto's scheme, loops in BLIS's order): for each block of NC columns and KC of the
// reduction, B is packed into panels of NR columns (zero padded); for each block of MC rows, A
// is packed into panels of MR rows; then each B panel (KC x NR) is swept by every A panel of
// the block (MC x KC; both in L2), the micro-kernel keeping an MR x NR tile of C in registers
// over the KC steps. Packing reads any strides (transposed operands cost nothing
// extra) and converts the element type to the accumulator's (int8/uint8 -> int32, float16 and
// bfloat16 -> float, fuse/cpu/gemm_half.hpp). A 16-bit result is accumulated in float and
// rounded once when stored (gemm_rounded, gemm_prepacked_rounded).
//
// B may also come packed ahead of time (fuse::pack, packed_b): the same panels for every
// reduction block, block after block in memory order, read in place, so that constant weights
// are never repacked.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <xsimd/xsimd.hpp>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "fuse/core/config.hpp"
#include "fuse/cpu/gemm_half.hpp"

namespace fuse::cpu::gemm {

/// One strided matrix operand: element (i, j) at data[i * rs + j * cs].
template <class T>
struct strided {
  const T* data;
  index_t rs, cs;
  FUSE_FORCE_INLINE const T& operator()(index_t i, index_t j) const { return data[i * rs + j * cs]; }
};

#ifndef FUSE_GEMM_KC
#define FUSE_GEMM_KC 1024
#endif
#ifndef FUSE_GEMM_MC
#define FUSE_GEMM_MC 96
#endif
#ifndef FUSE_GEMM_NC
#define FUSE_GEMM_NC 4096
#endif

constexpr index_t round_up(index_t x, index_t q) { return (x + q - 1) / q * q; }

/// The length of the blocks that cut k into equal blocks of at most `most`, rounded up to a
/// multiple of `multiple` (k = 0: any length).
constexpr index_t even_blocks(index_t k, index_t most, index_t multiple) {
  if (k <= 0) return multiple;
  const index_t blocks = (k + most - 1) / most;
  return std::min<index_t>(most, round_up((k + blocks - 1) / blocks, multiple));
}

template <class Acc>
struct blocking {
  using batch = xsimd::batch<Acc>;
  static constexpr int W = static_cast<int>(batch::size);
  static constexpr int NRV = 2;       ///< vectors per micro-tile row
  static constexpr int NR = W * NRV;  ///< micro-tile columns
  /// Rows: 2*MR accumulators + 2 B vectors (+1 broadcast) fit the registers (32 with AVX-512,
  /// 16 otherwise).
  static constexpr int MR = sizeof(batch) >= 64 ? 12 : 6;
  /// The reduction block (at most KC; kc_for() splits K into equal blocks). Long blocks save
  /// passes over C; a B panel of 1024 x 32 floats (128 KiB) then lives in L2 beside the A
  /// block (96 x 1024, 384 KiB), which feeds its two loads per 24 FMAs easily. Measured on Zen 5
  /// against 256..768 and MC 48..384: 1024 / 96 gained 3-4% at 1024^3 and 3072x768x768.
  static constexpr index_t KC = FUSE_GEMM_KC * 4 / static_cast<index_t>(sizeof(Acc) < 4 ? 4 : sizeof(Acc));
  static constexpr index_t MC = FUSE_GEMM_MC / MR * MR;  ///< rows per A block (MC x KC in L2)
  static constexpr index_t NC = FUSE_GEMM_NC / NR * NR;  ///< columns per B block (KC x NC in L3)

  /// The reduction block for a reduction of k: K cut into equal blocks of at most KC (768 is
  /// two blocks of 384 rather than 512 + 256), a multiple of 8.
  static constexpr index_t kc_for(index_t k) { return even_blocks(k, KC, 8); }

  /// The width of the A panel holding h <= MR rows: the last panel of a block is narrowed to a
  /// multiple of 4 rows so that a 4-row tail (64 = 5*12 + 4) does not cost a 12-row tile.
  static constexpr int panel_rows(index_t h) { return h > 8 || MR <= 8 ? MR : (h > 4 ? 8 : 4); }
  /// Rows of A's packings (m rounded up to MR) and columns of B's (n rounded up to NR).
  static constexpr index_t padded_rows(index_t m) { return round_up(m, MR); }
  static constexpr index_t padded_cols(index_t n) { return round_up(n, NR); }
};

/// B as packed panels: the panel of columns [p NR, p NR + NR) starts at data + p * panel_stride,
/// its row k at + k * NR (NR values, zero past the last column).
template <class Acc>
struct panels {
  const Acc* data;
  index_t panel_stride;
};

namespace detail {

template <class T>
struct aligned_buffer {
  T* p = nullptr;
  explicit aligned_buffer(std::size_t n)
      : p(n ? static_cast<T*>(::operator new[](n * sizeof(T) + 64, std::align_val_t{64})) : nullptr) {}
  ~aligned_buffer() {
    if (p) ::operator delete[](p, std::align_val_t{64});
  }
  aligned_buffer(const aligned_buffer&) = delete;
  aligned_buffer& operator=(const aligned_buffer&) = delete;
};

#if defined(__AVX512F__)
/// r[i][j] <- r[j][i] for a 16 x 16 block of floats: pairs of lanes, then of pairs, then of
/// 128-bit quarters, twice (four rounds of 16 shuffles).
FUSE_FORCE_INLINE void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int j = 0; j < 2; ++j) {
      r[i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + j]), _mm512_castps_pd(t[i + j + 2])));
      r[i + 2 * j + 1] =
          _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + j]), _mm512_castps_pd(t[i + j + 2])));
    }
  for (int i = 0; i < 16; i += 8)
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
}
#endif

#if defined(__AVX2__)
/// r[i][j] <- r[j][i] for an 8 x 8 block of floats: pairs of lanes, then pairs of pairs
/// (within each 128-bit half), then the halves.
FUSE_FORCE_INLINE void transpose8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);      // a0 b0 a1 b1 | a4 b4 a5 b5
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);  // a2 b2 a3 b3 | a6 b6 a7 b7
  }
  for (int i = 0; i < 2; ++i) {
    __m256* v = t + 4 * i;
    u[4 * i + 0] = _mm256_shuffle_ps(v[0], v[2], _MM_SHUFFLE(1, 0, 1, 0));  // a0 b0 c0 d0 | a4 b4 c4 d4
    u[4 * i + 1] = _mm256_shuffle_ps(v[0], v[2], _MM_SHUFFLE(3, 2, 3, 2));  // a1 b1 c1 d1 | a5 ..
    u[4 * i + 2] = _mm256_shuffle_ps(v[1], v[3], _MM_SHUFFLE(1, 0, 1, 0));  // a2 .. | a6 ..
    u[4 * i + 3] = _mm256_shuffle_ps(v[1], v[3], _MM_SHUFFLE(3, 2, 3, 2));  // a3 .. | a7 ..
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}
#endif

/// B rows [k0, k0 + kc), columns [j0, j0 + nc) into panels of NR columns, panel p at
/// dst + p * panel_stride.
template <class Acc, class TB>
void pack_b(Acc* dst, index_t panel_stride, strided<TB> src, index_t k0, index_t kc, index_t j0, index_t nc) {
  constexpr int NR = blocking<Acc>::NR;
  if constexpr (is_float16_dtype<TB>) {
    static_assert(std::is_same_v<Acc, float>, "fuse: 16-bit operands are packed as float");
    // Panel by panel: the panel's columns widened into a scratch (along the source's contiguous
    // axis, with the SIMD conversions), then packed as float.
    aligned_buffer<float> scratch(static_cast<std::size_t>(kc * NR));
    for (index_t jp = 0; jp < nc; jp += NR) {
      const index_t w = std::min<index_t>(NR, nc - jp);
      index_t srs = 0, scs = 0;
      widen_block(scratch.p, src.data, src.rs, src.cs, k0, kc, j0 + jp, w, srs, scs);
      pack_b<float, float>(dst + (jp / NR) * panel_stride, panel_stride, strided<float>{scratch.p, srs, scs}, 0, kc, 0,
                           w);
    }
    return;
  }
  const bool k_contiguous = src.rs == 1 && src.cs != 1;  // dense's weight rows
  for (index_t jp = 0; jp < nc; jp += NR) {
    const index_t w = std::min<index_t>(NR, nc - jp);
    Acc* panel = dst + (jp / NR) * panel_stride;
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<Acc, float> && NR == 32 && std::is_same_v<TB, float>) {
      if (k_contiguous) {
        // Columns contiguous along k (dense's weight rows): 16 columns by 16 k steps at a
        // time, transposed in registers.
        for (int half = 0; half < 2; ++half) {
          const index_t c0 = jp + 16 * half;
          const index_t cw = std::max<index_t>(0, std::min<index_t>(16, nc - c0));
          const float* s0 = &src(k0, j0 + std::min(c0, nc - 1));
          index_t k = 0;
          for (; k + 16 <= kc; k += 16) {
            __m512 r[16];
            for (int q = 0; q < 16; ++q) r[q] = q < cw ? _mm512_loadu_ps(s0 + q * src.cs + k) : _mm512_setzero_ps();
            transpose16(r);
            for (int q = 0; q < 16; ++q) _mm512_store_ps(panel + (k + q) * NR + 16 * half, r[q]);
          }
          for (; k < kc; ++k)
            for (index_t q = 0; q < 16; ++q) panel[k * NR + 16 * half + q] = q < cw ? s0[q * src.cs + k] : 0.0f;
        }
        continue;
      }
    }
#elif defined(__AVX2__)
    if constexpr (std::is_same_v<Acc, float> && NR == 16 && std::is_same_v<TB, float>) {
      if (k_contiguous) {
        // Columns contiguous along k (dense's weight rows, attention's K): 8 columns by 8 k
        // steps at a time, transposed in registers (the scalar loop below writes one float
        // at a time: 3x slower).
        for (int half = 0; half < 2; ++half) {
          const index_t c0 = jp + 8 * half;
          const index_t cw = std::max<index_t>(0, std::min<index_t>(8, nc - c0));
          const float* s0 = &src(k0, j0 + std::min(c0, nc - 1));
          index_t k = 0;
          for (; k + 8 <= kc; k += 8) {
            __m256 r[8];
            for (int q = 0; q < 8; ++q) r[q] = q < cw ? _mm256_loadu_ps(s0 + q * src.cs + k) : _mm256_setzero_ps();
            transpose8(r);
            for (int q = 0; q < 8; ++q) _mm256_store_ps(panel + (k + q) * NR + 8 * half, r[q]);
          }
          for (; k < kc; ++k)
            for (index_t q = 0; q < 8; ++q) panel[k * NR + 8 * half + q] = q < cw ? s0[q * src.cs + k] : 0.0f;
        }
        continue;
      }
    }
#endif
    if (k_contiguous) {
      // Columns contiguous along k (dense's weight rows): read each column once, in order.
      constexpr index_t KB = 64;
      for (index_t kb = 0; kb < kc; kb += KB) {
        const index_t ke = std::min(kc, kb + KB);
        for (index_t j = 0; j < w; ++j) {
          const auto* s = &src(k0 + kb, j0 + jp + j);
          for (index_t k = kb; k < ke; ++k) panel[k * NR + j] = static_cast<Acc>(s[k - kb]);
        }
        if (w < NR)
          for (index_t k = kb; k < ke; ++k)
            for (index_t j = w; j < NR; ++j) panel[k * NR + j] = Acc(0);
      }
    } else {
      for (index_t k = 0; k < kc; ++k) {
        Acc* row = panel + k * NR;
        for (index_t j = 0; j < w; ++j) row[j] = static_cast<Acc>(src(k0 + k, j0 + jp + j));
        for (index_t j = w; j < NR; ++j) row[j] = Acc(0);
      }
    }
  }
}

/// A rows [i0, i0 + mc), reduction [k0, k0 + kc) into panels of MR rows (the last one of
/// panel_rows(h) rows), k-major: panel p at dst + p MR kc holds kc groups of its row count
/// (rows past m are zero).
template <class Acc, class TA>
void pack_a(Acc* dst, strided<TA> a, index_t i0, index_t mc, index_t k0, index_t kc) {
  using Bk = blocking<Acc>;
  if constexpr (is_float16_dtype<TA>) {
    static_assert(std::is_same_v<Acc, float>, "fuse: 16-bit operands are packed as float");
    // Panel by panel (MR rows by kc): widened into a scratch, then packed as float.
    constexpr index_t local_elems = 4096;
    alignas(64) float local[local_elems];
    const bool small = Bk::MR * kc <= local_elems;
    aligned_buffer<float> heap(small ? 0 : static_cast<std::size_t>(Bk::MR * kc));
    float* const scratch = small ? local : heap.p;
    for (index_t ip = 0; ip < mc; ip += Bk::MR) {
      const index_t h = std::min<index_t>(Bk::MR, mc - ip);
      index_t srs = 0, scs = 0;
      widen_block(scratch, a.data, a.rs, a.cs, i0 + ip, h, k0, kc, srs, scs);
      pack_a<float, float>(dst + ip * kc, strided<float>{scratch, srs, scs}, 0, h, 0, kc);
    }
    return;
  }
  for (index_t ip = 0; ip < mc; ip += Bk::MR) {
    const index_t h = std::min<index_t>(Bk::MR, mc - ip);
    const index_t p = Bk::panel_rows(h);
    Acc* panel = dst + ip * kc;
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<Acc, float> && std::is_same_v<TA, float>) {
      if (a.cs == 1) {
        // Rows contiguous along k: 16 k steps of the panel's rows at a time, transposed in
        // registers. A k group of p values is written as 16 (the next group, or the buffer's
        // slack, takes the excess; groups are written in order).
        const float* src = &a(i0 + ip, k0);
        index_t k = 0;
        for (; k + 16 <= kc; k += 16) {
          __m512 r[16];
          for (int q = 0; q < 16; ++q) r[q] = q < h ? _mm512_loadu_ps(src + q * a.rs + k) : _mm512_setzero_ps();
          transpose16(r);
          for (int q = 0; q < 16; ++q) _mm512_storeu_ps(panel + (k + q) * p, r[q]);
        }
        for (; k < kc; ++k)
          for (index_t q = 0; q < p; ++q) panel[k * p + q] = q < h ? src[q * a.rs + k] : 0.0f;
        continue;
      }
    }
#elif defined(__AVX2__)
    if constexpr (std::is_same_v<Acc, float> && std::is_same_v<TA, float>) {
      if (a.cs == 1) {
        // As above with 8 k steps of the panel's rows (p <= 8) at a time; a group of p values
        // is written as 8 (the next group, or the buffer's slack, takes the excess).
        const float* src = &a(i0 + ip, k0);
        index_t k = 0;
        for (; k + 8 <= kc; k += 8) {
          __m256 r[8];
          for (int q = 0; q < 8; ++q) r[q] = q < h ? _mm256_loadu_ps(src + q * a.rs + k) : _mm256_setzero_ps();
          transpose8(r);
          for (int q = 0; q < 8; ++q) _mm256_storeu_ps(panel + (k + q) * p, r[q]);
        }
        for (; k < kc; ++k)
          for (index_t q = 0; q < p; ++q) panel[k * p + q] = q < h ? src[q * a.rs + k] : 0.0f;
        continue;
      }
    }
#endif
    if (a.cs == 1 || h < p) {
      for (index_t r = 0; r < p; ++r) {
        if (r < h) {
          const TA* src = &a(i0 + ip + r, k0);
          for (index_t k = 0; k < kc; ++k) panel[k * p + r] = static_cast<Acc>(src[k * a.cs]);
        } else {
          for (index_t k = 0; k < kc; ++k) panel[k * p + r] = Acc(0);
        }
      }
    } else {
      // Rows contiguous (a transposed operand): copy k-slices of p consecutive rows.
      for (index_t k = 0; k < kc; ++k) {
        const TA* src = &a(i0 + ip, k0 + k);
        for (index_t r = 0; r < p; ++r) panel[k * p + r] = static_cast<Acc>(src[r * a.rs]);
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

/// Few rows (a GEMV): B streams from memory, each panel row used once. The hardware prefetcher
/// alone reaches ~80% of the copy bandwidth; fetching 8 KiB ahead of a panel row reaches it.
template <class Acc>
FUSE_FORCE_INLINE void stream_ahead(const Acc* row) {
  constexpr std::size_t ahead = 8192 / sizeof(Acc);
  __builtin_prefetch(row + ahead);
  __builtin_prefetch(row + ahead + 64 / sizeof(Acc));
}

/// C's P x NR tile is read (or written) only after the micro-kernel's k steps: fetched now, while
/// they run.
template <int P, int NR, class T>
FUSE_FORCE_INLINE void prefetch_tile(const T* c, index_t rs, index_t cs) {
  for (int r = 0; r < P; ++r) {
    __builtin_prefetch(c + r * rs, 1, 3);
    __builtin_prefetch(c + r * rs + (NR - 1) * cs, 1, 3);
  }
}

/// A P x NR tile of accumulators stored at c (or, `accumulate`, added to it): its rows [0, h)
/// and columns [lo, lo + w), where C's rows are rs apart and its columns cs.
template <class Acc, int P>
FUSE_FORCE_INLINE void store_tile(const typename blocking<Acc>::batch (&acc)[P][blocking<Acc>::NRV], Acc* c, index_t rs,
                                  index_t cs, index_t h, index_t lo, index_t w, bool accumulate) {
  using B = blocking<Acc>;
  using V = typename B::batch;
  constexpr int NRV = B::NRV, W = B::W, NR = B::NR;
  if (h == P && lo == 0 && w == NR && cs == 1) {
    FUSE_UNROLL(32)
    for (int r = 0; r < P; ++r) FUSE_UNROLL(4)
    for (int v = 0; v < NRV; ++v) {
      Acc* p = c + r * rs + v * W;
      if (accumulate) (V::load_unaligned(p) + acc[r][v]).store_unaligned(p);
      else acc[r][v].store_unaligned(p);
    }
    return;
  }
  alignas(64) Acc tile[P * NR];
  FUSE_UNROLL(32)
  for (int r = 0; r < P; ++r) FUSE_UNROLL(4)
  for (int v = 0; v < NRV; ++v) acc[r][v].store_aligned(tile + r * NR + v * W);
  for (index_t r = 0; r < h; ++r)
    for (index_t j = 0; j < w; ++j) {
      Acc& dst = c[r * rs + j * cs];
      dst = accumulate ? wrapping_add(dst, tile[r * NR + lo + j]) : tile[r * NR + lo + j];
    }
}

/// The P x NR tile product Ap * Bp over kc steps (Ap: kc groups of P values, Bp: kc rows of NR),
/// rows [0, h) and columns [lo, lo + w) of it stored (or, `accumulate`, added) at c.
template <class Acc, int P>
void micro_kernel(index_t kc, const Acc* __restrict Ap, const Acc* __restrict Bp, Acc* c, index_t rs, index_t cs,
                  index_t h, index_t lo, index_t w, bool accumulate) {
  using B = blocking<Acc>;
  using V = typename B::batch;
  constexpr int NRV = B::NRV, W = B::W, NR = B::NR;
  prefetch_tile<P, NR>(c, rs, cs);
  // Every loop over the tile unrolled by request: at -O2 GCC keeps the P x NRV loops rolled
  // and the accumulators in memory on AVX2 (a 1024^3 product: 17 GFLOP/s at -O2, 61 at -O3).
  V acc[P][NRV];
  FUSE_UNROLL(32)
  for (int r = 0; r < P; ++r) FUSE_UNROLL(4)
  for (int v = 0; v < NRV; ++v) acc[r][v] = V(Acc(0));
  FUSE_UNROLL(4)
  for (index_t k = 0; k < kc; ++k) {
    V bv[NRV];
    FUSE_UNROLL(4)
    for (int v = 0; v < NRV; ++v) bv[v] = V::load_aligned(Bp + k * NR + v * W);
    if constexpr (P <= 4) stream_ahead(Bp + k * NR);
    const Acc* ak = Ap + k * P;
    FUSE_UNROLL(32)
    for (int r = 0; r < P; ++r) {
      const V av(ak[r]);
      FUSE_UNROLL(4)
      for (int v = 0; v < NRV; ++v) acc[r][v] = madd(av, bv[v], acc[r][v]);
    }
  }
  store_tile<Acc, P>(acc, c, rs, cs, h, lo, w, accumulate);
}

#if defined(__AVX512F__)
FUSE_FORCE_INLINE __m512 masked_load(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
FUSE_FORCE_INLINE __m512d masked_load(__mmask8 m, const double* p) { return _mm512_maskz_loadu_pd(m, p); }
#endif

#if defined(__AVX512F__)
/// The sums of eight 16-lane accumulators, in order: a tree of 128-bit-lane and in-lane
/// shuffles, 15 shuffles and 8 additions in all (eight horizontal adds take about 64 steps).
template <class V>
FUSE_FORCE_INLINE __m256 sum_columns8(const V (&acc)[8]) {
  __m512 s[4], t[2];
  for (int p = 0; p < 4; ++p) {  // halves of 512 bits: column 2p in bits 0..255, 2p+1 in 256..511
    const __m512 a = acc[2 * p], b = acc[2 * p + 1];
    s[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  for (int p = 0; p < 2; ++p)  // one column per 128-bit lane: 4p, 4p+1, 4p+2, 4p+3
    t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], 0x88),
                         _mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], 0xDD));
  // Lane q holds two partial sums of column q (elements 0, 1) and of column 4 + q (2, 3).
  const __m512 u = _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], 0x44), _mm512_shuffle_ps(t[0], t[1], 0xEE));
  const __m512 v = _mm512_add_ps(u, _mm512_permute_ps(u, 0xB1));  // column q at 4q, column 4 + q at 4q + 2
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, v));
}
#endif

/// gemm_dots over RB rows by CB columns at a time. T: the operands' dtype (Acc, or float16 /
/// bfloat16 widened to Acc = float as they are loaded); Out: C's (Acc, or a 16-bit dtype that
/// each sum is rounded to once).
template <class Acc, class T, class Out, int RB, int CB>
void gemm_dots_rows(index_t m, index_t n, index_t k, strided<T> a, strided<T> b, Out* c, index_t rs, index_t cs) {
  using V = xsimd::batch<Acc>;
  constexpr index_t W = static_cast<index_t>(V::size);
  const auto load = [](const T* p) {
    if constexpr (std::is_same_v<T, Acc>) return V::load_unaligned(p);
    else return load_widened(p);
  };
  for (index_t i0 = 0; i0 < m; i0 += RB) {
    const int h = static_cast<int>(std::min<index_t>(RB, m - i0));
    const T* ar[RB];
    for (int r = 0; r < RB; ++r) ar[r] = a.data + (i0 + std::min(r, h - 1)) * a.rs;
    for (index_t j0 = 0; j0 < n; j0 += CB) {
      const int w = static_cast<int>(std::min<index_t>(CB, n - j0));
      const T* bc[CB];
      for (int q = 0; q < CB; ++q) bc[q] = b.data + (j0 + std::min(q, w - 1)) * b.cs;
      // The RB x CB loops unrolled by request (rolled at -O2, the accumulators then live in
      // memory: 2.2x slower).
      V acc[RB][CB];
      FUSE_UNROLL(16)
      for (int r = 0; r < RB; ++r) FUSE_UNROLL(16)
      for (int q = 0; q < CB; ++q) acc[r][q] = V(Acc(0));
      index_t kk = 0;
      for (; kk + W <= k; kk += W) {
        V bv[CB];
        FUSE_UNROLL(16)
        for (int q = 0; q < CB; ++q) bv[q] = load(bc[q] + kk);
        FUSE_UNROLL(16)
        for (int r = 0; r < RB; ++r) {
          const V av = load(ar[r] + kk);
          FUSE_UNROLL(16)
          for (int q = 0; q < CB; ++q) acc[r][q] = xsimd::fma(av, bv[q], acc[r][q]);
        }
      }
      if constexpr (!std::is_same_v<T, Acc>) {
        // 16-bit operands: the last k % W terms as one vector step too, from zero-padded
        // copies (the widening loads read whole vectors).
        if (kk < k) {
          const auto partial = [&](const T* p) {
            alignas(64) T tail[W] = {};
            for (index_t t = 0; t < k - kk; ++t) tail[t] = p[t];
            return load_widened(tail);
          };
          V bv[CB];
          for (int q = 0; q < CB; ++q) bv[q] = partial(bc[q] + kk);
          for (int r = 0; r < RB; ++r) {
            const V av = partial(ar[r] + kk);
            for (int q = 0; q < CB; ++q) acc[r][q] = xsimd::fma(av, bv[q], acc[r][q]);
          }
          kk = k;
        }
      }
#if defined(__AVX512F__)
      // The last k % W terms as one masked vector step: a scalar tail is a chain of dependent
      // multiply-adds per column, which dominates short rows (the seed's k = 10).
      if constexpr (sizeof(V) == 64 && std::is_same_v<T, Acc>) {
        if (kk < k) {
          using mask = std::conditional_t<W == 16, __mmask16, __mmask8>;
          const auto mk = static_cast<mask>((1u << (k - kk)) - 1);
          V bv[CB];
          for (int q = 0; q < CB; ++q) bv[q] = V(masked_load(mk, bc[q] + kk));
          for (int r = 0; r < RB; ++r) {
            const V av(masked_load(mk, ar[r] + kk));
            for (int q = 0; q < CB; ++q) acc[r][q] = xsimd::fma(av, bv[q], acc[r][q]);
          }
          kk = k;
        }
      }
#endif
#if defined(__AVX512F__)
      if constexpr (CB == 8 && std::is_same_v<Acc, float> && sizeof(V) == 64) {
        // Eight sums per row at once: a horizontal add per column costs more than the products
        // of a short row (the seed's k = 10).
        for (int r = 0; r < h; ++r) {
          alignas(32) float sums[8];
          _mm256_store_ps(sums, sum_columns8(acc[r]));
          for (int q = 0; q < w; ++q) c[(i0 + r) * rs + (j0 + q) * cs] = Out(sums[q]);
        }
        continue;
      }
#endif
      for (int r = 0; r < h; ++r)
        for (int q = 0; q < w; ++q) {
          Acc sum = xsimd::hadd(acc[r][q]);
          for (index_t t = kk; t < k; ++t) sum += static_cast<Acc>(ar[r][t]) * static_cast<Acc>(bc[q][t]);
          c[(i0 + r) * rs + (j0 + q) * cs] = Out(sum);
        }
    }
  }
}

/// Whether a product takes the direct form (gemm_dots) rather than the packed, blocked one:
/// A's rows and B's columns contiguous along k, and few rows or a tiny product.
template <class TA, class TB>
constexpr bool takes_direct_form(index_t m, index_t n, index_t k, strided<TA> a, strided<TB> b) {
  return a.cs == 1 && b.rs == 1 && (m <= 4 || m * n * k <= 32768);
}

/// The direct form for few rows or tiny products: C(i, j) as dot products along k, A's rows
/// and B's columns read in place (both contiguous along k), sixteen independent accumulators
/// (four rows by four columns; one row by sixteen columns for a GEMV). For M = 1 this streams
/// each weight row once; packing would only add a copy of the weights.
template <class Acc, class T, class Out>
void gemm_dots(index_t m, index_t n, index_t k, strided<T> a, strided<T> b, Out* c, index_t rs, index_t cs) {
  if (m == 1) gemm_dots_rows<Acc, T, Out, 1, 8>(m, n, k, a, b, c, rs, cs);
  else gemm_dots_rows<Acc, T, Out, 4, 4>(m, n, k, a, b, c, rs, cs);
}

/// The blocked loops over a source of B panels: `bpanels(k0, kc, j0, nc)` returns the panels of
/// that block (packing them if it must). Columns are counted in panel space, where the product's
/// column 0 is column `skip` of the first panel (prepacked weights read from a column that is
/// not a panel boundary). `a_packed`: A packed ahead (pack_a_ahead) or null (packed here, block
/// by block).
template <class Acc, class TA, class BPanels>
void gemm_blocked(index_t m, index_t n, index_t k, strided<TA> a, const Acc* a_packed, BPanels&& bpanels, index_t skip,
                  Acc* c, index_t rs, index_t cs) {
  using Bk = blocking<Acc>;
  const index_t kc_max = std::min<index_t>(Bk::kc_for(k), k);
  const index_t m_pad = Bk::padded_rows(m);
  const index_t mc_max = std::min<index_t>(Bk::MC, m_pad);
  // A's block buffer: on the stack when small (tiny products must not pay an allocation).
  constexpr index_t local_elems = 2048;
  alignas(64) Acc local[local_elems + 64 / sizeof(Acc)];
  const bool small = mc_max * kc_max <= local_elems;
  aligned_buffer<Acc> heap(a_packed || small ? 0 : static_cast<std::size_t>(mc_max * kc_max));
  Acc* const abuf = small ? local : heap.p;
  const index_t np = skip + n;
  for (index_t j0 = 0; j0 < np; j0 += Bk::NC) {
    const index_t nc = std::min<index_t>(Bk::NC, np - j0);
    for (index_t k0 = 0; k0 < k; k0 += kc_max) {
      const index_t kc = std::min<index_t>(kc_max, k - k0);
      const panels<Acc> bp = bpanels(k0, kc, j0, nc);
      for (index_t i0 = 0; i0 < m; i0 += Bk::MC) {
        const index_t mc = std::min<index_t>(Bk::MC, m - i0);
        const Acc* ablock = a_packed ? a_packed + k0 * m_pad + i0 * kc : abuf;
        if (!a_packed) pack_a<Acc>(abuf, a, i0, mc, k0, kc);
        for (index_t jp = 0; jp < nc; jp += Bk::NR) {
          const Acc* bpanel = bp.data + (jp / Bk::NR) * bp.panel_stride;
          const index_t lo = std::max<index_t>(0, skip - (j0 + jp));
          const index_t w = std::min<index_t>(Bk::NR, np - (j0 + jp)) - lo;
          Acc* cc = c + i0 * rs + (j0 + jp + lo - skip) * cs;
          for (index_t ip = 0; ip < mc; ip += Bk::MR) {
            const index_t h = std::min<index_t>(Bk::MR, mc - ip);
            const Acc* apanel = ablock + ip * kc;
            Acc* ct = cc + ip * rs;
            switch (Bk::panel_rows(h)) {
              case 4: micro_kernel<Acc, 4>(kc, apanel, bpanel, ct, rs, cs, h, lo, w, k0 > 0); break;
              case 8: micro_kernel<Acc, 8>(kc, apanel, bpanel, ct, rs, cs, h, lo, w, k0 > 0); break;
              default: micro_kernel<Acc, Bk::MR>(kc, apanel, bpanel, ct, rs, cs, h, lo, w, k0 > 0);
            }
          }
        }
      }
    }
  }
}

template <class Out>
void zero_fill(index_t m, index_t n, Out* c, index_t rs, index_t cs) {
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) c[i * rs + j * cs] = Out(0.0f);
}

}  // namespace detail

/// C = A B for A m x k and B k x n (strided), C m x n with strides (rs, cs). C is overwritten
/// (k = 0 gives zeros). Integer accumulators wrap (two's complement, as int32 arithmetic in
/// TVM).
template <class Acc, class TA, class TB>
void gemm(index_t m, index_t n, index_t k, strided<TA> a, strided<TB> b, Acc* c, index_t rs, index_t cs,
          const Acc* a_packed = nullptr) {
  using Bk = blocking<Acc>;
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return detail::zero_fill(m, n, c, rs, cs);
  if constexpr (std::is_floating_point_v<Acc> && std::is_same_v<TA, TB> &&
                (std::is_same_v<TA, Acc> || is_float16_dtype<TA>)) {
    if (detail::takes_direct_form(m, n, k, a, b)) {
      detail::gemm_dots<Acc>(m, n, k, a, b, c, rs, cs);
      return;
    }
  }
  const index_t kc_max = std::min<index_t>(Bk::kc_for(k), k);
  const index_t nc_max = std::min<index_t>(Bk::NC, Bk::padded_cols(n));
  detail::aligned_buffer<Acc> bp(static_cast<std::size_t>(nc_max * kc_max));
  detail::gemm_blocked<Acc>(
      m, n, k, a, a_packed,
      [&](index_t k0, index_t kc, index_t j0, index_t nc) {
        detail::pack_b<Acc>(bp.p, kc * Bk::NR, b, k0, kc, j0, nc);
        return panels<Acc>{bp.p, kc * Bk::NR};
      },
      0, c, rs, cs);
}

/// B (k x n) packed ahead of time (pack_b_ahead) for gemm_prepacked: for each reduction block
/// of kc rows (the last one shorter), the NR-column panels of every column, block after block
/// in memory order. A description of memory owned elsewhere (packed_b_bytes(k, n) bytes,
/// 64-byte aligned).
template <class Acc>
struct packed_b {
  const Acc* data = nullptr;
  index_t k = 0, n = 0;
  index_t kc = 8;   ///< reduction rows per block (the last block may be shorter)
  index_t ldp = 0;  ///< columns of the packing: n rounded up to NR

  /// The panel of columns [j, j + NR) (j a multiple of NR) in the block of rows from k0.
  const Acc* panel(index_t k0, index_t j) const { return data + k0 * ldp + j * std::min(kc, k - k0); }
  /// B(kk, j), read back from the packing.
  Acc element(index_t kk, index_t j) const {
    constexpr int NR = blocking<Acc>::NR;
    const index_t k0 = kk / kc * kc;
    return panel(k0, j / NR * NR)[(kk - k0) * NR + j % NR];
  }
};

namespace detail {

/// The direct form over prepacked B for M <= 4 rows (a GEMV when M = 1): A read in place, each
/// panel row of B used once as it streams by, in memory order (reduction block by reduction
/// block), the partial sums kept in C between blocks.
template <class Acc, int M, class TA>
void prepacked_rows(index_t n, strided<TA> a, const packed_b<Acc>& b, index_t j0, Acc* c, index_t rs, index_t cs) {
  using Bk = blocking<Acc>;
  using V = typename Bk::batch;
  constexpr int NR = Bk::NR, NRV = Bk::NRV, W = Bk::W;
  const index_t first = j0 / NR * NR, skip = j0 - first, np = skip + n;
  for (index_t k0 = 0; k0 < b.k; k0 += b.kc) {
    const index_t kc = std::min(b.kc, b.k - k0);
    for (index_t jp = 0; jp < np; jp += NR) {
      const Acc* panel = b.panel(k0, first + jp);
      V acc[M][NRV];
      for (int r = 0; r < M; ++r)
        for (int v = 0; v < NRV; ++v) acc[r][v] = V(Acc(0));
      for (index_t kk = 0; kk < kc; ++kk) {
        V bv[NRV];
        for (int v = 0; v < NRV; ++v) bv[v] = V::load_aligned(panel + kk * NR + v * W);
        stream_ahead(panel + kk * NR);
        for (int r = 0; r < M; ++r) {
          const V av(static_cast<Acc>(a(r, k0 + kk)));
          for (int v = 0; v < NRV; ++v) acc[r][v] = madd(av, bv[v], acc[r][v]);
        }
      }
      alignas(64) Acc tile[M * NR];
      for (int r = 0; r < M; ++r)
        for (int v = 0; v < NRV; ++v) acc[r][v].store_aligned(tile + r * NR + v * W);
      const index_t lo = std::max<index_t>(0, skip - jp);
      const index_t hi = std::min<index_t>(NR, np - jp);
      for (int r = 0; r < M; ++r)
        for (index_t j = lo; j < hi; ++j) {
          Acc& dst = c[r * rs + (jp + j - skip) * cs];
          dst = k0 > 0 ? dst + tile[r * NR + j] : tile[r * NR + j];
        }
    }
  }
}

}  // namespace detail

/// C = A B with B packed ahead of time (pack_b_ahead), from its column j0 on (a panel boundary
/// or not): the blocks stream in order and nothing of B is copied.
template <class Acc, class TA>
void gemm_prepacked(index_t m, index_t n, index_t k, strided<TA> a, const packed_b<Acc>& b, index_t j0, Acc* c,
                    index_t rs, index_t cs, const Acc* a_packed = nullptr) {
  using Bk = blocking<Acc>;
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return detail::zero_fill(m, n, c, rs, cs);
  if (m <= 4) {
    if constexpr (is_float16_dtype<TA>) {
      // 16-bit rows widened once (the direct form reads each element of A once per panel).
      constexpr index_t local_elems = 4096;
      alignas(64) float local[local_elems];
      detail::aligned_buffer<float> heap(m * k <= local_elems ? 0 : static_cast<std::size_t>(m * k));
      float* const rows = m * k <= local_elems ? local : heap.p;
      index_t srs = 0, scs = 0;
      detail::widen_block(rows, a.data, a.rs, a.cs, 0, m, 0, k, srs, scs);
      return gemm_prepacked(m, n, k, strided<float>{rows, srs, scs}, b, j0, c, rs, cs);
    }
    // Few rows: no packing of A, no tile of padded rows.
    switch (m) {
      case 1: return detail::prepacked_rows<Acc, 1>(n, a, b, j0, c, rs, cs);
      case 2: return detail::prepacked_rows<Acc, 2>(n, a, b, j0, c, rs, cs);
      case 3: return detail::prepacked_rows<Acc, 3>(n, a, b, j0, c, rs, cs);
      default: return detail::prepacked_rows<Acc, 4>(n, a, b, j0, c, rs, cs);
    }
  }
  const index_t first = j0 / Bk::NR * Bk::NR;
  detail::gemm_blocked<Acc>(
      m, n, k, a, a_packed,
      [&](index_t k0, index_t kc, index_t jb, index_t) {
        return panels<Acc>{b.panel(k0, first + jb), kc * Bk::NR};
      },
      j0 - first, c, rs, cs);
}

/// Elements of pack_a_ahead's packing of m rows by k.
template <class Acc>
constexpr index_t packed_a_size(index_t m, index_t k) {
  return blocking<Acc>::padded_rows(m) * k + 16;
}

/// A (m x k) packed once for several products with the same rows (the gate blocks of a fused
/// cell): for each reduction block, the panels of all m rows, in gemm_blocked's layout. Passed
/// as `a_packed` to gemm / gemm_prepacked with the same m and k.
template <class Acc, class TA>
void pack_a_ahead(Acc* dst, strided<TA> a, index_t m, index_t k) {
  using Bk = blocking<Acc>;
  const index_t kb = Bk::kc_for(k);
  const index_t m_pad = Bk::padded_rows(m);
  for (index_t k0 = 0; k0 < k; k0 += kb) {
    const index_t kc = std::min<index_t>(kb, k - k0);
    for (index_t i0 = 0; i0 < m; i0 += Bk::MC)
      detail::pack_a<Acc>(dst + k0 * m_pad + i0 * kc, a, i0, std::min<index_t>(Bk::MC, m - i0), k0, kc);
  }
}

/// Bytes of the packing of a k x n B (pack_b_ahead).
template <class Acc>
std::size_t packed_b_bytes(index_t k, index_t n) {
  return static_cast<std::size_t>(blocking<Acc>::padded_cols(std::max<index_t>(n, 0)) * std::max<index_t>(k, 0)) *
             sizeof(Acc) +
         64;
}

/// Packs B (k x n, strided) into dst (packed_b_bytes(k, n) bytes, 64-byte aligned) for
/// gemm_prepacked; returns its description.
template <class Acc, class TB>
packed_b<Acc> pack_b_ahead(void* dst, strided<TB> b, index_t k, index_t n) {
  using Bk = blocking<Acc>;
  const packed_b<Acc> p{static_cast<const Acc*>(dst), k, n, Bk::kc_for(k), Bk::padded_cols(n)};
  for (index_t k0 = 0; k0 < k; k0 += p.kc) {
    const index_t kc = std::min<index_t>(p.kc, k - k0);
    detail::pack_b<Acc>(static_cast<Acc*>(dst) + k0 * p.ldp, kc * Bk::NR, b, k0, kc, 0, n);
  }
  return p;
}

// ---- 16-bit results ---------------------------------------------------------------------------

namespace detail {

/// C (m x n, n at most NC) = a float product rounded to Out: `product(i0, mr, scratch)` writes
/// rows [i0, i0 + mr) of it, `rows` at a time, into a float scratch (row stride n), each element
/// then rounded once (to nearest even) into C.
template <class Out, class Product>
void rounded_rows(index_t m, index_t n, index_t rows, Out* c, index_t rs, index_t cs, Product&& product) {
  constexpr index_t local_elems = 2048;
  alignas(64) float local[local_elems];
  const bool small = rows * n <= local_elems;
  aligned_buffer<float> heap(small ? 0 : static_cast<std::size_t>(rows * n));
  float* const scratch = small ? local : heap.p;
  for (index_t i0 = 0; i0 < m; i0 += rows) {
    const index_t mr = std::min(rows, m - i0);
    product(i0, mr, scratch);  // rows [i0, i0 + mr) into the scratch, row stride n
    for (index_t r = 0; r < mr; ++r) narrow(c + (i0 + r) * rs, cs, scratch + r * n, n);
  }
}
/// C (m x n, n at most NC; C's column 0 is column j0 of the packing b) = A B rounded to Out,
/// at most MC rows at a time (all m rows when A comes packed ahead): gemm_blocked's own A
/// blocks, so A is packed no more often than for a float C.
template <class Out, class TA>
void rounded_rows(index_t m, index_t n, index_t k, strided<TA> a, const packed_b<float>& b, index_t j0, Out* c,
                  index_t rs, index_t cs, const float* a_packed) {
  rounded_rows(m, n, a_packed ? m : std::min<index_t>(m, blocking<float>::MC), c, rs, cs,
               [&](index_t i0, index_t mr, float* scratch) {
                 gemm_prepacked(mr, n, k, strided<TA>{a.data + i0 * a.rs, a.rs, a.cs}, b, j0, scratch, n, 1, a_packed);
               });
}

}  // namespace detail

/// C = A B rounded to the 16-bit dtype Out (float16 or bfloat16) for 16-bit A and B: widened
/// to float while packed, accumulated in float, each element rounded once when stored. C is
/// overwritten (k = 0 gives zeros). `a_packed`: A packed ahead as float (pack_a_ahead), or null.
template <class Out, class TA, class TB>
void gemm_rounded(index_t m, index_t n, index_t k, strided<TA> a, strided<TB> b, Out* c, index_t rs, index_t cs,
                  const float* a_packed = nullptr) {
  static_assert(is_float16_dtype<Out> && is_float16_dtype<TA> && is_float16_dtype<TB>);
  using Bk = blocking<float>;
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return detail::zero_fill(m, n, c, rs, cs);
  if constexpr (std::is_same_v<TA, TB>) {
    if (detail::takes_direct_form(m, n, k, a, b)) {
      // Few rows or a tiny product: dot products, each rounded as it is stored.
      detail::gemm_dots<float>(m, n, k, a, b, c, rs, cs);
      return;
    }
  }
  // B packed as float for a block of columns over the whole reduction (at most KC x NC floats,
  // the float GEMM's own B block), then swept by the rows.
  const index_t cols = std::clamp<index_t>((Bk::KC * Bk::NC) / k / Bk::NR * Bk::NR, Bk::NR, Bk::NC);
  const index_t nc_max = std::min<index_t>(cols, n);
  detail::aligned_buffer<unsigned char> bp(packed_b_bytes<float>(k, nc_max));
  for (index_t j0 = 0; j0 < n; j0 += nc_max) {
    const index_t nc = std::min(nc_max, n - j0);
    const packed_b<float> panels = pack_b_ahead<float>(bp.p, strided<TB>{b.data + j0 * b.cs, b.rs, b.cs}, k, nc);
    detail::rounded_rows(m, nc, k, a, panels, 0, c + j0 * cs, rs, cs, a_packed);
  }
}

/// C = A B rounded to the 16-bit dtype Out, B packed ahead as float (fuse::pack of 16-bit
/// weights), from its column j0 on; otherwise as gemm_rounded.
template <class Out, class TA>
void gemm_prepacked_rounded(index_t m, index_t n, index_t k, strided<TA> a, const packed_b<float>& b, index_t j0,
                            Out* c, index_t rs, index_t cs, const float* a_packed = nullptr) {
  static_assert(is_float16_dtype<Out>);
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return detail::zero_fill(m, n, c, rs, cs);
  constexpr index_t NC = blocking<float>::NC;
  for (index_t jc = 0; jc < n; jc += NC)
    detail::rounded_rows(m, std::min(NC, n - jc), k, a, b, j0 + jc, c + jc * cs, rs, cs, a_packed);
}

}  // namespace fuse::cpu::gemm
