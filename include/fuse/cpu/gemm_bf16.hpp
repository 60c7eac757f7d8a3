// The bfloat16 x bfloat16 GEMM on pairs of the reduction: AVX512_BF16's vdpbf16ps where the CPU
// has it (compiled with __AVX512BF16__), the same loops with float FMAs elsewhere.
//
// Layout. vdpbf16ps multiplies, in each 32-bit lane, a pair of bfloat16s of one operand by a
// pair of the other and adds both products to a float: acc += a[1] b[1], then acc += a[0] b[0]
// (Intel SDM, VDPBF16PS: two steps, each exact product added with one rounding to nearest
// even). So both operands are packed in pairs of consecutive k (k even in the low 16 bits, k + 1
// in the high ones, zero past an odd K): B's panels hold, per pair, NR columns of 32-bit pairs;
// A's panels, per pair, the pairs of their rows, which the micro-kernel broadcasts. A pair is
// the two bfloat16s' own bits: packing is a copy, and B's panels take half the bytes of the
// float GEMM's. The loops, blocks and tile (MR x NR, fuse/cpu/gemm.hpp's blocking<float>) are
// the float GEMM's, with each k step covering two k.
//
// Numbers. The instruction reads bfloat16 subnormals as zero (DAZ) and flushes subnormal
// results to zero (FTZ); fuse's bfloat16 contractions must not depend on the CPU they run on.
// The widened pair kernel (pair_kernel::widened) adds the same products in the same order with
// float FMAs, exactly as IEEE says (subnormals kept). The two give the same bits whenever
// neither flag can act: no subnormal operand, no nonzero product below 2^-102 (then every
// partial sum is a nonzero multiple of 2^-116 or zero, never subnormal), no finite product
// beyond 2^126 (where an FMA and a rounded product differ). gemm_bf16 scans both operands for
// their least nonzero and greatest finite magnitudes (bf16_range) and takes the instruction only
// when that holds (dpbf16_exact); otherwise the float GEMM (operands widened while packed), and
// for weights packed in pairs the widened pair kernel. Both add products in float with one
// rounding each, within the float GEMM's bound.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>
#if defined(__AVX512BF16__) && defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "fuse/core/config.hpp"
#include "fuse/core/half.hpp"
#include "fuse/cpu/gemm.hpp"
#include "fuse/simd/half_convert.hpp"

namespace fuse::cpu::gemm {

/// Whether this translation unit was compiled for a CPU with vdpbf16ps (-mavx512bf16, or
/// -march=native on Cooper Lake, Sapphire Rapids, Zen 4 and later).
#if defined(__AVX512BF16__) && defined(__AVX512F__)
inline constexpr bool has_dpbf16 = true;
#else
inline constexpr bool has_dpbf16 = false;
#endif

/// The micro-kernel of the pair GEMM: the instruction, or its products and order in float FMAs.
enum class pair_kernel { dpbf16, widened };

/// Pairs of k: `kc` values of the reduction take (kc + 1) / 2 pairs.
constexpr index_t pairs_of(index_t kc) { return (kc + 1) / 2; }

/// The least nonzero and the greatest finite magnitude of an operand, as bfloat16 bits without
/// the sign (least = 0xFFFF: no nonzero value; greatest = 0: none finite and nonzero).
struct bf16_range {
  std::uint16_t least = 0xFFFF, greatest = 0;
};

/// The range of rows x cols values of a strided bfloat16 matrix.
inline bf16_range range_of(strided<bfloat16> x, index_t rows, index_t cols) {
  // In float (every bfloat16 widens exactly; float's min and max are single instructions, unlike
  // 16-bit integers' on AVX2): the least of |v| over nonzero v, the greatest over finite v.
  using V = xsimd::batch<float>;
  constexpr index_t W = static_cast<index_t>(V::size);
  constexpr float inf = std::numeric_limits<float>::infinity(), largest = std::numeric_limits<float>::max();
  float least = inf, greatest = 0;
  const auto visit = [&](const bfloat16* p, index_t n, index_t step) {
    index_t i = 0;
    if (step == 1 && n >= W) {
      V lo(inf), hi(0.0f);
      for (; i + W <= n; i += W) {
        const V v = xsimd::abs(simd::load_bf16(p + i));
        lo = xsimd::min(lo, xsimd::select(v == V(0.0f), V(inf), v));
        hi = xsimd::max(hi, xsimd::select(v <= V(largest), v, V(0.0f)));  // inf and NaN: 0
      }
      alignas(64) float l[W], h[W];
      lo.store_aligned(l);
      hi.store_aligned(h);
      for (index_t q = 0; q < W; ++q) least = std::min(least, l[q]), greatest = std::max(greatest, h[q]);
    }
    for (const bfloat16* q = p + i * step; i < n; ++i, q += step) {
      const float v = std::fabs(static_cast<float>(*q));
      if (v != 0) least = std::min(least, v);
      if (v <= largest) greatest = std::max(greatest, v);
    }
  };
  if (x.cs == 1 || (x.rs != 1 && rows >= cols)) {
    for (index_t i = 0; i < rows; ++i) visit(x.data + i * x.rs, cols, x.cs);
  } else {
    for (index_t j = 0; j < cols; ++j) visit(x.data + j * x.cs, rows, x.rs);
  }
  return {least == inf ? std::uint16_t(0xFFFF) : bfloat16(least).bits(), bfloat16(greatest).bits()};
}

/// Whether vdpbf16ps gives the widened pair kernel's bits for operands of ranges a and b: its
/// DAZ and FTZ cannot act and no finite product overflows (see the header's comment).
constexpr bool dpbf16_exact(bf16_range a, bf16_range b) {
  if (a.least == 0xFFFF || b.least == 0xFFFF) return true;  // one operand all zero (or inf/NaN)
  if (a.least < 0x0080 || b.least < 0x0080) return false;   // a subnormal operand
  const auto exponent = [](std::uint16_t bits) { return static_cast<int>(bits >> 7) - 127; };
  // |x| >= 2^exponent(least) and |x| < 2^(exponent(greatest) + 1).
  if (exponent(a.least) + exponent(b.least) < -102) return false;
  return exponent(a.greatest) + exponent(b.greatest) + 2 <= 126;
}

struct pair_blocking {
  using Bk = blocking<float>;
  static constexpr int MR = Bk::MR, NR = Bk::NR, NRV = Bk::NRV, W = Bk::W;
  static constexpr index_t MC = Bk::MC, NC = Bk::NC;
  /// The reduction block in k (even; the last block of an odd K is odd). A B panel of KC x NR
  /// bfloat16s takes the bytes of the float GEMM's KC / 2 x NR floats.
  static constexpr index_t KC = 2 * Bk::KC;
  static constexpr index_t kc_for(index_t k) { return even_blocks(k, KC, 8); }
};

/// B packed in pairs ahead of time (pack_pairs_b_ahead; fuse::pack of bfloat16 weights where the
/// CPU has vdpbf16ps): for each reduction block of kc rows, the NR-column panels of every column
/// (pairs_of(kc) rows of NR pairs), block after block. `range`: the weights' bf16_range.
struct packed_pairs_b {
  const std::uint32_t* data = nullptr;
  index_t k = 0, n = 0;
  index_t kc = 8;   ///< reduction rows per block (even; the last block may be shorter)
  index_t ldp = 0;  ///< columns of the packing: n rounded up to NR
  bf16_range range{};

  /// The panel of columns [j, j + NR) (j a multiple of NR) in the block of rows from k0.
  const std::uint32_t* panel(index_t k0, index_t j) const {
    return data + (k0 / 2) * ldp + j * pairs_of(std::min(kc, k - k0));
  }
  /// B(kk, j), read back from the packing.
  bfloat16 element(index_t kk, index_t j) const {
    constexpr int NR = pair_blocking::NR;
    const index_t k0 = kk / kc * kc;
    const std::uint32_t pair = panel(k0, j / NR * NR)[((kk - k0) / 2) * NR + j % NR];
    return bfloat16::from_bits(static_cast<std::uint16_t>((kk - k0) % 2 ? pair >> 16 : pair & 0xFFFFu));
  }
};

namespace detail {

FUSE_FORCE_INLINE std::uint32_t bits_of(const bfloat16& v) { return v.bits(); }

/// The pair (x[k], x[k + 1]) of a strided line (k + 1 past the end: zero).
FUSE_FORCE_INLINE std::uint32_t pair_at(const bfloat16* p, index_t step, index_t k, index_t kc) {
  if (k + 1 >= kc) return bits_of(p[k * step]);
  if (step == 1) {
    std::uint32_t v;
    std::memcpy(&v, p + k, sizeof v);  // little endian: x[k] in the low half
    return v;
  }
  return bits_of(p[k * step]) | (bits_of(p[(k + 1) * step]) << 16);
}

/// B rows [k0, k0 + kc), columns [j0, j0 + nc) into pair panels of NR columns, panel p at
/// dst + p * panel_stride (pairs_of(kc) rows of NR pairs, zero past the last column).
inline void pack_b_pairs(std::uint32_t* dst, index_t panel_stride, strided<bfloat16> src, index_t k0, index_t kc,
                         index_t j0, index_t nc) {
  constexpr int NR = pair_blocking::NR;
  const index_t kp = pairs_of(kc);
  for (index_t jp = 0; jp < nc; jp += NR) {
    const index_t w = std::min<index_t>(NR, nc - jp);
    std::uint32_t* panel = dst + (jp / NR) * panel_stride;
#if defined(__AVX512F__)
    if (src.rs == 1 && src.cs != 1 && NR == 32) {
      // Columns contiguous along k (dense's weight rows): 16 columns by 16 pairs at a time,
      // transposed in registers as 32-bit words (the float GEMM's transpose16).
      for (int half = 0; half < 2; ++half) {
        const index_t c0 = jp + 16 * half;
        const index_t cw = std::max<index_t>(0, std::min<index_t>(16, nc - c0));
        const bfloat16* s0 = &src(k0, j0 + std::min(c0, nc - 1));
        index_t p = 0;
        for (; 2 * p + 32 <= kc; p += 16) {
          __m512 r[16];
          for (int q = 0; q < 16; ++q)
            r[q] =
                q < cw ? _mm512_loadu_ps(reinterpret_cast<const float*>(s0 + q * src.cs + 2 * p)) : _mm512_setzero_ps();
          transpose16(r);
          for (int q = 0; q < 16; ++q)
            _mm512_store_ps(reinterpret_cast<float*>(panel + (p + q) * NR + 16 * half), r[q]);
        }
        for (; p < kp; ++p)
          for (index_t q = 0; q < 16; ++q)
            panel[p * NR + 16 * half + q] = q < cw ? pair_at(s0 + q * src.cs, 1, 2 * p, kc) : 0u;
      }
      continue;
    }
#endif
    if (src.rs == 1 && src.cs != 1) {
      // Columns contiguous along k (dense's weight rows): each column read once, in order, in
      // blocks of 64 pairs so that the panel rows written stay in L1.
      constexpr index_t PB = 64;
      for (index_t pb = 0; pb < kp; pb += PB) {
        const index_t pe = std::min(kp, pb + PB);
        for (index_t j = 0; j < w; ++j) {
          const bfloat16* col = &src(k0, j0 + jp + j);
          for (index_t p = pb; p < pe; ++p) panel[p * NR + j] = pair_at(col, 1, 2 * p, kc);
        }
        if (w < NR)
          for (index_t p = pb; p < pe; ++p) std::fill(panel + p * NR + w, panel + p * NR + NR, 0u);
      }
    } else {
      for (index_t p = 0; p < kp; ++p) {
        std::uint32_t* row = panel + p * NR;
        const bfloat16* r0 = &src(k0 + 2 * p, j0 + jp);
        const bool odd_end = 2 * p + 1 >= kc;
        for (index_t j = 0; j < w; ++j)
          row[j] = bits_of(r0[j * src.cs]) | (odd_end ? 0u : bits_of(r0[j * src.cs + src.rs]) << 16);
        std::fill(row + w, row + NR, 0u);
      }
    }
  }
}

/// A rows [i0, i0 + mc), reduction [k0, k0 + kc) into pair panels of MR rows (the last one of
/// panel_rows(h) rows), pair-major: panel p at dst + p MR pairs_of(kc) holds pairs_of(kc) groups
/// of its row count (rows past m are zero).
inline void pack_a_pairs(std::uint32_t* dst, strided<bfloat16> a, index_t i0, index_t mc, index_t k0, index_t kc) {
  using Bk = blocking<float>;
  const index_t kp = pairs_of(kc);
  for (index_t ip = 0; ip < mc; ip += Bk::MR) {
    const index_t h = std::min<index_t>(Bk::MR, mc - ip);
    const index_t pr = Bk::panel_rows(h);
    std::uint32_t* panel = dst + ip * kp;
    for (index_t r = 0; r < pr; ++r) {
      if (r < h) {
        const bfloat16* row = &a(i0 + ip + r, k0);
        for (index_t p = 0; p < kp; ++p) panel[p * pr + r] = pair_at(row, a.cs, 2 * p, kc);
      } else {
        for (index_t p = 0; p < kp; ++p) panel[p * pr + r] = 0;
      }
    }
  }
}

/// The P x NR tile product of pair panels Ap (kp groups of P pairs) and Bp (kp rows of NR
/// pairs), rows [0, h) and columns [lo, lo + w) of it stored (or, `accumulate`, added) at c.
template <pair_kernel Kern, int P>
void pair_micro_kernel(index_t kp, const std::uint32_t* __restrict Ap, const std::uint32_t* __restrict Bp, float* c,
                       index_t rs, index_t cs, index_t h, index_t lo, index_t w, bool accumulate) {
  using Bk = pair_blocking;
  using V = xsimd::batch<float>;
  using U = xsimd::batch<std::uint32_t>;
  constexpr int NRV = Bk::NRV, W = Bk::W, NR = Bk::NR;
  prefetch_tile<P, NR>(c, rs, cs);
  V acc[P][NRV];
  for (int r = 0; r < P; ++r)
    for (int v = 0; v < NRV; ++v) acc[r][v] = V(0.0f);
  if constexpr (Kern == pair_kernel::dpbf16) {
#if defined(__AVX512BF16__) && defined(__AVX512F__)
    static_assert(W == 16, "fuse: the vdpbf16ps kernel works on 512-bit vectors");
    // Raw registers: the P x NRV accumulators must stay in registers across the loop.
    __m512 sum[P][NRV];
    FUSE_UNROLL(16)
    for (int r = 0; r < P; ++r) {
      FUSE_UNROLL(4)
      for (int v = 0; v < NRV; ++v) sum[r][v] = _mm512_setzero_ps();
    }
    FUSE_UNROLL(2)
    for (index_t p = 0; p < kp; ++p) {
      __m512bh bv[NRV];
      FUSE_UNROLL(4)
      for (int v = 0; v < NRV; ++v) bv[v] = (__m512bh)_mm512_load_si512(Bp + p * NR + v * W);
      if constexpr (P <= 4) stream_ahead(Bp + p * NR);
      const std::uint32_t* ap = Ap + p * P;
      FUSE_UNROLL(16)
      for (int r = 0; r < P; ++r) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[r]));
        FUSE_UNROLL(4)
        for (int v = 0; v < NRV; ++v) sum[r][v] = _mm512_dpbf16_ps(sum[r][v], av, bv[v]);
      }
    }
    for (int r = 0; r < P; ++r)
      for (int v = 0; v < NRV; ++v) acc[r][v] = V(sum[r][v]);
#else
    static_assert(Kern != pair_kernel::dpbf16, "fuse: vdpbf16ps needs a CPU with AVX512_BF16 (-mavx512bf16)");
#endif
  } else {
    // The instruction's two steps in float FMAs: the odd k's product first, then the even one's.
    const U high(0xFFFF0000u);
    FUSE_UNROLL(2)
    for (index_t p = 0; p < kp; ++p) {
      V b_even[NRV], b_odd[NRV];
      for (int v = 0; v < NRV; ++v) {
        const U b = U::load_aligned(Bp + p * NR + v * W);
        b_even[v] = xsimd::bitwise_cast<V>(b << 16);
        b_odd[v] = xsimd::bitwise_cast<V>(b & high);
      }
      if constexpr (P <= 4) stream_ahead(Bp + p * NR);
      const std::uint32_t* ap = Ap + p * P;
      for (int r = 0; r < P; ++r) {
        float a_even, a_odd;
        const std::uint32_t e = ap[r] << 16, o = ap[r] & 0xFFFF0000u;
        std::memcpy(&a_even, &e, sizeof e);
        std::memcpy(&a_odd, &o, sizeof o);
        for (int v = 0; v < NRV; ++v) acc[r][v] = xsimd::fma(V(a_odd), b_odd[v], acc[r][v]);
        for (int v = 0; v < NRV; ++v) acc[r][v] = xsimd::fma(V(a_even), b_even[v], acc[r][v]);
      }
    }
  }
  store_tile<float, P>(acc, c, rs, cs, h, lo, w, accumulate);
}

/// C (m x n, float; C's column 0 is column j0 of the packing b) = A B: the float GEMM's blocked
/// loops (gemm_blocked) over pair panels. Every k block after the first adds its tile to C.
template <pair_kernel Kern>
void pairs_blocked(index_t m, index_t n, strided<bfloat16> a, const packed_pairs_b& b, index_t j0, float* c, index_t rs,
                   index_t cs) {
  using Bk = pair_blocking;
  using B = blocking<float>;
  const index_t k = b.k;
  const index_t kp_max = pairs_of(std::min(b.kc, k));
  const index_t mc_max = std::min<index_t>(Bk::MC, B::padded_rows(m));
  constexpr index_t local_elems = 2048;
  alignas(64) std::uint32_t local[local_elems + 16];
  const bool small = mc_max * kp_max <= local_elems;
  aligned_buffer<std::uint32_t> heap(small ? 0 : static_cast<std::size_t>(mc_max * kp_max));
  std::uint32_t* const abuf = small ? local : heap.p;
  const index_t first = j0 / Bk::NR * Bk::NR, skip = j0 - first, np = skip + n;
  for (index_t jb = 0; jb < np; jb += Bk::NC) {
    const index_t nc = std::min<index_t>(Bk::NC, np - jb);
    for (index_t k0 = 0; k0 < k; k0 += b.kc) {
      const index_t kc = std::min(b.kc, k - k0), kp = pairs_of(kc);
      for (index_t i0 = 0; i0 < m; i0 += Bk::MC) {
        const index_t mc = std::min<index_t>(Bk::MC, m - i0);
        pack_a_pairs(abuf, a, i0, mc, k0, kc);
        for (index_t jp = 0; jp < nc; jp += Bk::NR) {
          const std::uint32_t* bpanel = b.panel(k0, first + jb + jp);
          const index_t lo = std::max<index_t>(0, skip - (jb + jp));
          const index_t w = std::min<index_t>(Bk::NR, np - (jb + jp)) - lo;
          float* cc = c + i0 * rs + (jb + jp + lo - skip) * cs;
          for (index_t ip = 0; ip < mc; ip += Bk::MR) {
            const index_t h = std::min<index_t>(Bk::MR, mc - ip);
            const std::uint32_t* apanel = abuf + ip * kp;
            float* ct = cc + ip * rs;
            switch (B::panel_rows(h)) {
              case 4: pair_micro_kernel<Kern, 4>(kp, apanel, bpanel, ct, rs, cs, h, lo, w, k0 > 0); break;
              case 8: pair_micro_kernel<Kern, 8>(kp, apanel, bpanel, ct, rs, cs, h, lo, w, k0 > 0); break;
              default: pair_micro_kernel<Kern, Bk::MR>(kp, apanel, bpanel, ct, rs, cs, h, lo, w, k0 > 0);
            }
          }
        }
      }
    }
  }
}

}  // namespace detail

/// Bytes of the pair packing of a k x n B (pack_pairs_b_ahead).
inline std::size_t packed_pairs_b_bytes(index_t k, index_t n) {
  return static_cast<std::size_t>(blocking<float>::padded_cols(std::max<index_t>(n, 0)) *
                                  pairs_of(std::max<index_t>(k, 0))) *
             sizeof(std::uint32_t) +
         64;
}

/// Packs B (k x n, strided bfloat16) in pairs into dst (packed_pairs_b_bytes(k, n) bytes,
/// 64-byte aligned); returns its description, B's range included unless `with_range` is false
/// (a caller that has chosen its kernel).
inline packed_pairs_b pack_pairs_b_ahead(void* dst, strided<bfloat16> b, index_t k, index_t n, bool with_range = true) {
  using Bk = pair_blocking;
  packed_pairs_b p{static_cast<const std::uint32_t*>(dst), k, n, Bk::kc_for(k), blocking<float>::padded_cols(n), {}};
  if (with_range && k > 0 && n > 0) p.range = range_of(b, k, n);
  for (index_t k0 = 0; k0 < k; k0 += p.kc) {
    const index_t kc = std::min<index_t>(p.kc, k - k0);
    detail::pack_b_pairs(static_cast<std::uint32_t*>(dst) + (k0 / 2) * p.ldp, pairs_of(kc) * Bk::NR, b, k0, kc, 0, n);
  }
  return p;
}

/// C = A B with B packed in pairs (pack_pairs_b_ahead), from its column j0 on, by the kernel
/// Kern; Out float, or bfloat16 (the float sums rounded once, to nearest even, as stored).
template <pair_kernel Kern, class Out>
void gemm_pairs_prepacked(index_t m, index_t n, strided<bfloat16> a, const packed_pairs_b& b, index_t j0, Out* c,
                          index_t rs, index_t cs) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, bfloat16>);
  if (m <= 0 || n <= 0) return;
  if (b.k <= 0) return detail::zero_fill(m, n, c, rs, cs);
  if constexpr (std::is_same_v<Out, float>) {
    detail::pairs_blocked<Kern>(m, n, a, b, j0, c, rs, cs);
  } else {
    // At most MC rows by NC columns at a time into a float scratch, each rounded once into C.
    constexpr index_t NC = pair_blocking::NC;
    for (index_t jc = 0; jc < n; jc += NC) {
      const index_t nc = std::min(NC, n - jc);
      detail::rounded_rows(m, nc, std::min(m, pair_blocking::MC), c + jc * cs, rs, cs,
                           [&](index_t i0, index_t mr, float* scratch) {
                             detail::pairs_blocked<Kern>(mr, nc, strided<bfloat16>{a.data + i0 * a.rs, a.rs, a.cs}, b,
                                                         j0 + jc, scratch, nc, 1);
                           });
    }
  }
}

/// C = A B for strided bfloat16 A and B by the pair kernel Kern: B packed in pairs for a block
/// of columns over the whole reduction at a time, then swept by the rows.
template <pair_kernel Kern, class Out>
void gemm_pairs(index_t m, index_t n, index_t k, strided<bfloat16> a, strided<bfloat16> b, Out* c, index_t rs,
                index_t cs) {
  using Bk = pair_blocking;
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return detail::zero_fill(m, n, c, rs, cs);
  // B's columns per block: at most the float GEMM's B block in bytes (KC / 2 x NC floats).
  const index_t cols = std::clamp<index_t>((Bk::KC * Bk::NC) / k / Bk::NR * Bk::NR, Bk::NR, Bk::NC);
  const index_t nc_max = std::min<index_t>(cols, n);
  detail::aligned_buffer<unsigned char> bp(packed_pairs_b_bytes(k, nc_max));
  for (index_t j0 = 0; j0 < n; j0 += nc_max) {
    const index_t nc = std::min(nc_max, n - j0);
    const packed_pairs_b panels =
        pack_pairs_b_ahead(bp.p, strided<bfloat16>{b.data + j0 * b.cs, b.rs, b.cs}, k, nc, false);
    gemm_pairs_prepacked<Kern>(m, nc, a, panels, 0, c + j0 * cs, rs, cs);
  }
}

/// C = A B for bfloat16 A and B (strided), Out float or bfloat16. Where the CPU has vdpbf16ps
/// and the operands allow it (dpbf16_exact), the pair kernel with the instruction; otherwise,
/// and for the direct form's few rows or tiny products, the float GEMM with the operands widened
/// while packed (gemm / gemm_rounded). `a_packed`: A packed ahead as float, for the latter.
template <class Out>
void gemm_bf16(index_t m, index_t n, index_t k, strided<bfloat16> a, strided<bfloat16> b, Out* c, index_t rs,
               index_t cs, const float* a_packed = nullptr) {
  const auto widened = [&] {
    if constexpr (std::is_same_v<Out, float>) gemm<float>(m, n, k, a, b, c, rs, cs, a_packed);
    else gemm_rounded(m, n, k, a, b, c, rs, cs, a_packed);
  };
  if constexpr (has_dpbf16) {
    if (m <= 0 || n <= 0 || k <= 0 || a_packed || detail::takes_direct_form(m, n, k, a, b)) return widened();
    if (dpbf16_exact(range_of(a, m, k), range_of(b, k, n)))
      return gemm_pairs<pair_kernel::dpbf16>(m, n, k, a, b, c, rs, cs);
  }
  widened();
}

/// C = A B with bfloat16 weights packed in pairs, from column j0 on: the instruction where the
/// CPU has it and the operands allow it, else the widened pair kernel.
template <class Out>
void gemm_bf16_prepacked(index_t m, index_t n, strided<bfloat16> a, const packed_pairs_b& b, index_t j0, Out* c,
                         index_t rs, index_t cs) {
  if (m <= 0 || n <= 0) return;
  if constexpr (has_dpbf16) {
    if (dpbf16_exact(range_of(a, m, b.k), b.range))
      return gemm_pairs_prepacked<pair_kernel::dpbf16>(m, n, a, b, j0, c, rs, cs);
  }
  gemm_pairs_prepacked<pair_kernel::widened>(m, n, a, b, j0, c, rs, cs);
}

}  // namespace fuse::cpu::gemm
