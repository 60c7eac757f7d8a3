// The int8 GEMM: C[m, n] (int32) = sum_k A(m, k) B(k, n) for A and B each int8 or uint8, over
// strided operands, exact: every result is bit-equal to the integer sum reduced modulo 2^32, as
// int32 arithmetic wraps in TVM (and as the vector units add).
//
// Why its own kernel: widening to int32 and multiplying 16 lanes per instruction wastes 3/4 of
// every vector. vpdpbusd (AVX-512 VNNI, AVX-VNNI) multiplies 64 (32) byte pairs and adds each
// group of four products into one int32 lane in a single instruction: 4x the work of an int32
// multiply-add, and it never saturates (vpdpbusds is the saturating form, vpmaddubsw the
// saturating pre-VNNI one: neither is used).
//
// Layout. The reduction is cut into groups of G consecutive k that fill one 32-bit lane: G = 4
// bytes for vpdpbusd, G = 2 int16 for the vpmaddwd fallback. B is packed into panels of NR
// columns, group-major: group g of a panel is NR lanes, lane j holding B(G g .. G g + G-1, j),
// so one aligned vector load gives W columns' groups. A is packed into panels of MR rows the
// same way (MR lanes per group); the micro-kernel broadcasts one row's 32-bit group to every
// lane. k is zero padded to a multiple of G, tails of m and n to MR and NR: padding is 0 in
// both operands' packed form, so it adds nothing.
//
// Signedness. vpdpbusd multiplies an unsigned byte by a signed byte. The operand that is uint8
// takes the unsigned side as it is; the other side must then be signed:
//   uint8 A x int8  B: A unsigned, B signed, nothing to correct.
//   int8  A x uint8 B: B unsigned, A signed, nothing to correct.
//   int8  A x int8  B: A is stored as A ^ 0x80 = A + 128 (now unsigned), so the product gains
//                      128 * sum_k B(k, j): subtracted per column.
//   uint8 A x uint8 B: A is stored as A ^ 0x80 = A - 128 (now signed), so the product loses
//                      128 * sum_k B(k, j): added back per column.
// The shifted operand is always A and the correction is always a per-column sum of B, so it is
// computed once per packed B panel (with vpdpbusd against a vector of ones) and stored after
// the panel; the micro-kernel starts its accumulators from it instead of from zero. Every step
// (products, sums, the shift by 7) is exact modulo 2^32, so the result is too.
//
// Without VNNI, each operand is widened to int16 while packing (sign- or zero-extended by its
// own type) and vpmaddwd multiplies pairs and adds each pair into an int32: exact, since
// |a b| <= 255 * 128 and two such products fit easily (vpmaddubsw would saturate its int16
// sums, so it is not used). No correction is needed there. The same kernel runs on AVX-512BW,
// AVX2 and SSE2 vectors; off x86 the widening GEMM of gemm.hpp is the (exact) last resort.
//
// Blocking (BLIS order): for each NC columns and KC of the reduction B is packed (its panels
// stay in L2/L3), for each MC rows A is packed (its block stays in L2), then every NR-column B
// panel (in L1 while it is used) meets every MR-row A panel in the register-blocked micro-kernel.
// Packing reads any strides; contiguous rows or columns of 8-bit data take SSE2 4x4 transposes.
//
// Constant B packed ahead of time (fuse::pack of int8/uint8 weights): pack_int8_b_ahead keeps
// the panels run() would pack, for every reduction block and every column, and
// gemm_int8_prepacked reads them in place from any column (a section of a split starting
// inside a panel stores only the columns it asked for). The packing does not know A's dtype;
// only the A dtype equal to B's needs a correction, and its sign follows from B's dtype, so one
// correction row per panel serves every A (the mixed pairs skip it). Without VNNI the panels
// hold int16 and no correction; the portable build keeps B as it came.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "fuse/cpu/gemm.hpp"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <immintrin.h>
#endif

namespace fuse::cpu::gemm {

template <class TB>
struct packed_int8_b;

namespace detail::int8 {

FUSE_FORCE_INLINE std::int32_t load32(const void* p) {
  std::int32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// --- the instruction sets ------------------------------------------------------------------------
// Each provides the vector V (W int32 lanes), G (k per lane), the register blocking MR x NRV
// vectors, the cache blocking, and dot(acc, u, s): acc + the lane-wise dot products of u's and
// s's groups (u the unsigned side for vpdpbusd; for vpmaddwd both are int16 and the order is
// immaterial).

#if defined(FUSE_GEMM_INT8_PORTABLE)
#define FUSE_GEMM_INT8_ISA 0
#elif defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define FUSE_GEMM_INT8_ISA 5
#elif defined(__AVXVNNI__) && defined(__AVX2__)
#define FUSE_GEMM_INT8_ISA 4
#elif defined(__AVX512BW__)
#define FUSE_GEMM_INT8_ISA 3
#elif defined(__AVX2__)
#define FUSE_GEMM_INT8_ISA 2
#elif defined(__SSE2__) || defined(_M_X64)
#define FUSE_GEMM_INT8_ISA 1
#else
#define FUSE_GEMM_INT8_ISA 0
#endif

// The int32-lane operations of each vector width, shared by the VNNI and vpmaddwd forms.
#if FUSE_GEMM_INT8_ISA == 5 || FUSE_GEMM_INT8_ISA == 3
struct zmm_lanes {
  using V = __m512i;
  static constexpr int W = 16;
  static FUSE_FORCE_INLINE V zero() { return _mm512_setzero_si512(); }
  static FUSE_FORCE_INLINE V load(const void* p) { return _mm512_load_si512(p); }
  static FUSE_FORCE_INLINE V loadu(const void* p) { return _mm512_loadu_si512(p); }
  static FUSE_FORCE_INLINE void storeu(void* p, V v) { _mm512_storeu_si512(p, v); }
  static FUSE_FORCE_INLINE void store(void* p, V v) { _mm512_store_si512(p, v); }
  static FUSE_FORCE_INLINE V set1(std::int32_t x) { return _mm512_set1_epi32(x); }
  static FUSE_FORCE_INLINE V add(V a, V b) { return _mm512_add_epi32(a, b); }
  static FUSE_FORCE_INLINE V sub(V a, V b) { return _mm512_sub_epi32(a, b); }
  // (a multiply: GCC 12's _mm512_slli_epi32 trips -Wuninitialized inside its own header)
  static FUSE_FORCE_INLINE V times128(V a) { return _mm512_mullo_epi32(a, _mm512_set1_epi32(128)); }
};
#elif FUSE_GEMM_INT8_ISA == 4 || FUSE_GEMM_INT8_ISA == 2
struct ymm_lanes {
  using V = __m256i;
  static constexpr int W = 8;
  static FUSE_FORCE_INLINE V zero() { return _mm256_setzero_si256(); }
  static FUSE_FORCE_INLINE V load(const void* p) { return _mm256_load_si256(static_cast<const V*>(p)); }
  static FUSE_FORCE_INLINE V loadu(const void* p) { return _mm256_loadu_si256(static_cast<const V*>(p)); }
  static FUSE_FORCE_INLINE void storeu(void* p, V v) { _mm256_storeu_si256(static_cast<V*>(p), v); }
  static FUSE_FORCE_INLINE void store(void* p, V v) { _mm256_store_si256(static_cast<V*>(p), v); }
  static FUSE_FORCE_INLINE V set1(std::int32_t x) { return _mm256_set1_epi32(x); }
  static FUSE_FORCE_INLINE V add(V a, V b) { return _mm256_add_epi32(a, b); }
  static FUSE_FORCE_INLINE V sub(V a, V b) { return _mm256_sub_epi32(a, b); }
  static FUSE_FORCE_INLINE V times128(V a) { return _mm256_slli_epi32(a, 7); }
};
#elif FUSE_GEMM_INT8_ISA == 1
struct xmm_lanes {
  using V = __m128i;
  static constexpr int W = 4;
  static FUSE_FORCE_INLINE V zero() { return _mm_setzero_si128(); }
  static FUSE_FORCE_INLINE V load(const void* p) { return _mm_load_si128(static_cast<const V*>(p)); }
  static FUSE_FORCE_INLINE V loadu(const void* p) { return _mm_loadu_si128(static_cast<const V*>(p)); }
  static FUSE_FORCE_INLINE void storeu(void* p, V v) { _mm_storeu_si128(static_cast<V*>(p), v); }
  static FUSE_FORCE_INLINE void store(void* p, V v) { _mm_store_si128(static_cast<V*>(p), v); }
  static FUSE_FORCE_INLINE V set1(std::int32_t x) { return _mm_set1_epi32(x); }
  static FUSE_FORCE_INLINE V add(V a, V b) { return _mm_add_epi32(a, b); }
  static FUSE_FORCE_INLINE V sub(V a, V b) { return _mm_sub_epi32(a, b); }
  static FUSE_FORCE_INLINE V times128(V a) { return _mm_slli_epi32(a, 7); }
};
#endif

#if FUSE_GEMM_INT8_ISA == 5
struct isa : zmm_lanes {
  static constexpr const char* name = "avx512-vnni";
  static constexpr int G = 4;
  static constexpr bool vnni = true;
  // 24 accumulators + 2 B vectors + 1 broadcast of the 32 registers: enough independent
  // chains to cover vpdpbusd's latency at its throughput (2 per cycle on Zen 5), and 14 loads
  // per 24 vpdpbusd.
  static constexpr int MR = 12, NRV = 2;
  // A B panel of 32 columns x KC bytes (32 KiB) and an A panel (12 KiB) share L1 (48 KiB on
  // Zen 5) while the A block (MC x KC, 384 KiB) streams from L2 past the B panel; the B block
  // (KC x NC, 2 MiB) lives in L3. Measured at 1024^3, 3072x768x768 and 64x4096x2048: KC 512
  // lost ~5%, MC and NC mattered less than the noise.
  static constexpr index_t KC = 1024, MC = 384, NC = 2048;
  static FUSE_FORCE_INLINE V dot(V acc, V u, V s) {
#if defined(__GNUC__) && !defined(__clang__)
    // GCC (12) does not tie the intrinsic's accumulator to its destination across the k loop:
    // it copies every accumulator each step and spills half of them (2.3x slower). The
    // constraint "+v" makes the accumulator the destination register.
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
    return acc;
#else
    return _mm512_dpbusd_epi32(acc, u, s);
#endif
  }
};
#elif FUSE_GEMM_INT8_ISA == 4
struct isa : ymm_lanes {
  static constexpr const char* name = "avx-vnni";
  static constexpr int G = 4;
  static constexpr bool vnni = true;
  // 12 accumulators + 2 B vectors + 1 broadcast of the 16 registers.
  static constexpr int MR = 6, NRV = 2;
  static constexpr index_t KC = 1024, MC = 192, NC = 2048;
  static FUSE_FORCE_INLINE V dot(V acc, V u, V s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
};
#elif FUSE_GEMM_INT8_ISA == 3
struct isa : zmm_lanes {
  static constexpr const char* name = "avx512bw-vpmaddwd";
  static constexpr int G = 2;
  static constexpr bool vnni = false;
  // 24 accumulators + 2 B vectors + 1 broadcast + 1 product of the 32 registers.
  static constexpr int MR = 12, NRV = 2;
  static constexpr index_t KC = 256, MC = 384, NC = 2048;
  static FUSE_FORCE_INLINE V dot(V acc, V u, V s) {
#if defined(__GNUC__) && !defined(__clang__)
    V t;  // as for vpdpbusd: GCC spills the accumulators of the intrinsic form
    __asm__("vpmaddwd %[s], %[u], %[t]\n\tvpaddd %[t], %[a], %[a]"
            : [a] "+v"(acc), [t] "=&v"(t)
            : [u] "v"(u), [s] "v"(s));
    return acc;
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(u, s));
#endif
  }
};
#elif FUSE_GEMM_INT8_ISA == 2
struct isa : ymm_lanes {
  static constexpr const char* name = "avx2-vpmaddwd";
  static constexpr int G = 2;
  static constexpr bool vnni = false;
  // 8 accumulators + 2 B vectors + broadcast + product: room to spare of the 16 registers
  // (12 accumulators would spill the product).
  static constexpr int MR = 4, NRV = 2;
  static constexpr index_t KC = 512, MC = 192, NC = 2048;
  static FUSE_FORCE_INLINE V dot(V acc, V u, V s) { return _mm256_add_epi32(acc, _mm256_madd_epi16(u, s)); }
};
#elif FUSE_GEMM_INT8_ISA == 1
struct isa : xmm_lanes {
  static constexpr const char* name = "sse2-pmaddwd";
  static constexpr int G = 2;
  static constexpr bool vnni = false;
  static constexpr int MR = 4, NRV = 2;
  static constexpr index_t KC = 512, MC = 192, NC = 1024;
  static FUSE_FORCE_INLINE V dot(V acc, V u, V s) { return _mm_add_epi32(acc, _mm_madd_epi16(u, s)); }
};
#endif

#if FUSE_GEMM_INT8_ISA > 0

/// 8-bit values of T (in the low 8 or the high 8 bytes of x) as int16, by T's signedness.
template <class T, bool HIGH>
FUSE_FORCE_INLINE __m128i widen(__m128i x) {
  if constexpr (std::is_signed_v<T>) return _mm_srai_epi16(HIGH ? _mm_unpackhi_epi8(x, x) : _mm_unpacklo_epi8(x, x), 8);
  else return HIGH ? _mm_unpackhi_epi8(x, _mm_setzero_si128()) : _mm_unpacklo_epi8(x, _mm_setzero_si128());
}

/// One operand slice into panel form: lane l (< valid) of group g holds the G values
/// src[l * ls + (G g + t) * ks], t < G, as P (uint8 ^ `flip` for G = 4; int16 widened by T's
/// own signedness for G = 2); lanes [valid, L) and k >= kc are 0. Every group of a lane is 4
/// bytes; dst has L * 4 * ceil(kc / G) bytes. For B the lanes are columns (ls = b.cs,
/// ks = b.rs); for A they are rows (ls = a.rs, ks = a.cs).
template <int G, class T>
void pack_panel(unsigned char* dst, const T* src, index_t ls, index_t ks, index_t valid, index_t L, index_t kc,
                unsigned char flip) {
  using P = std::conditional_t<G == 4, unsigned char, std::int16_t>;
  P* out = reinterpret_cast<P*>(dst);
  const index_t kg = (kc + G - 1) / G;
  const index_t full = kc / G;  // groups with no padding
  const auto conv = [flip](T v) -> P {
    if constexpr (G == 4) {
      return static_cast<unsigned char>(static_cast<unsigned char>(v) ^ flip);
    } else {
      (void)flip;  // int16 operands are never shifted
      return static_cast<P>(v);
    }
  };
  // Lanes [l0, l1) x groups [g0, g1), element by element.
  const auto scalar = [&](index_t l0, index_t l1, index_t g0, index_t g1) {
    for (index_t l = l0; l < l1; ++l) {
      const T* s = src + l * ls;
      for (index_t g = g0; g < g1; ++g) {
        P* d = out + (g * L + l) * G;
        for (int t = 0; t < G; ++t) {
          const index_t kk = g * G + t;
          d[t] = kk < kc ? conv(s[kk * ks]) : P(0);
        }
      }
    }
  };
  for (index_t g = 0; g < kg; ++g)
    for (index_t l = valid; l < L; ++l)
      for (int t = 0; t < G; ++t) out[(g * L + l) * G + t] = P(0);
  const __m128i fx = _mm_set1_epi8(static_cast<char>(flip));
  const auto store = [&](index_t g, index_t l, __m128i x) {
    if constexpr (G == 4) x = _mm_xor_si128(x, fx);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (g * L + l) * 4), x);
  };
  const auto load = [](const T* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  if (ks == 1) {
    // k contiguous in each lane (A row-major, B as dense's weights): 4 groups of a lane are 16
    // consecutive bytes (8 widened for G = 2), and a 4x4 transpose of 32-bit groups turns
    // 4 lanes x 4 groups into 4 groups x 4 lanes.
    const index_t l4 = valid / 4 * 4, g4 = full / 4 * 4;
    for (index_t l = 0; l < l4; l += 4) {
      const T* s = src + l * ls;
      for (index_t g = 0; g < g4; g += 4) {
        __m128i r[4];
        for (int q = 0; q < 4; ++q) {
          if constexpr (G == 4) r[q] = load(s + q * ls + g * 4);
          else r[q] = widen<T, false>(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + q * ls + g * 2)));
        }
        const __m128i t0 = _mm_unpacklo_epi32(r[0], r[1]), t1 = _mm_unpacklo_epi32(r[2], r[3]);
        const __m128i t2 = _mm_unpackhi_epi32(r[0], r[1]), t3 = _mm_unpackhi_epi32(r[2], r[3]);
        store(g, l, _mm_unpacklo_epi64(t0, t1));
        store(g + 1, l, _mm_unpackhi_epi64(t0, t1));
        store(g + 2, l, _mm_unpacklo_epi64(t2, t3));
        store(g + 3, l, _mm_unpackhi_epi64(t2, t3));
      }
    }
    scalar(0, l4, g4, kg);
    scalar(l4, valid, 0, kg);
    return;
  }
  if (ls == 1) {
    // Lanes contiguous (B row-major, A transposed): the G k-rows of a group, 16 lanes each,
    // interleave into 16 lanes' groups (bytewise for G = 4, as int16 for G = 2).
    const index_t l16 = valid / 16 * 16;
    for (index_t g = 0; g < full; ++g) {
      const T* s = src + g * G * ks;
      for (index_t l = 0; l < l16; l += 16) {
        __m128i lo, hi, lo2, hi2;  // lanes 0-7 and 8-15 of the first and second halves
        if constexpr (G == 4) {
          const __m128i r0 = load(s + l), r1 = load(s + ks + l), r2 = load(s + 2 * ks + l), r3 = load(s + 3 * ks + l);
          lo = _mm_unpacklo_epi8(r0, r1);
          hi = _mm_unpackhi_epi8(r0, r1);
          lo2 = _mm_unpacklo_epi8(r2, r3);
          hi2 = _mm_unpackhi_epi8(r2, r3);
        } else {
          const __m128i r0 = load(s + l), r1 = load(s + ks + l);
          lo = widen<T, false>(r0);
          hi = widen<T, true>(r0);
          lo2 = widen<T, false>(r1);
          hi2 = widen<T, true>(r1);
        }
        store(g, l, _mm_unpacklo_epi16(lo, lo2));
        store(g, l + 4, _mm_unpackhi_epi16(lo, lo2));
        store(g, l + 8, _mm_unpacklo_epi16(hi, hi2));
        store(g, l + 12, _mm_unpackhi_epi16(hi, hi2));
      }
    }
    scalar(l16, valid, 0, full);
    scalar(0, valid, full, kg);
    return;
  }
  scalar(0, valid, 0, kg);
}

/// The ROWS x NR tile's rows [0, h) and columns [lo, lo + w), stored from c (or, `accumulate`,
/// added to it) = A panel * B panel over kg groups (ROWS <= MR: the A
/// panel is laid out for MR rows, and only its first ROWS are multiplied, so short tails of m
/// cost what they use). BU: B on vpdpbusd's unsigned side. CORR: accumulators start from the
/// per-column correction stored after the B panel.
template <int ROWS, bool BU, bool CORR>
FUSE_FORCE_INLINE void micro_kernel(index_t kg, const unsigned char* ap, const unsigned char* bp, std::int32_t* c,
                                    index_t rs, index_t cs, index_t h, index_t lo, index_t w, bool accumulate) {
  using V = typename isa::V;
  constexpr int MR = isa::MR, NRV = isa::NRV, W = isa::W, NR = W * NRV;
  V acc[ROWS][NRV];
  FUSE_UNROLL(4)
  for (int v = 0; v < NRV; ++v) {
    const V c0 = CORR ? isa::load(bp + (kg * NR + v * W) * 4) : isa::zero();
    FUSE_UNROLL(12)
    for (int r = 0; r < ROWS; ++r) acc[r][v] = c0;
  }
  for (index_t g = 0; g < kg; ++g) {
    V bv[NRV];
    FUSE_UNROLL(4)
    for (int v = 0; v < NRV; ++v) bv[v] = isa::load(bp + (g * NR + v * W) * 4);
    const unsigned char* ag = ap + g * MR * 4;
    FUSE_UNROLL(12)
    for (int r = 0; r < ROWS; ++r) {
      const V av = isa::set1(load32(ag + r * 4));
      FUSE_UNROLL(4)
      for (int v = 0; v < NRV; ++v) acc[r][v] = BU ? isa::dot(acc[r][v], bv[v], av) : isa::dot(acc[r][v], av, bv[v]);
    }
  }
  if (h == ROWS && lo == 0 && w == NR && cs == 1) {
    FUSE_UNROLL(12)
    for (int r = 0; r < ROWS; ++r) {
      FUSE_UNROLL(4)
      for (int v = 0; v < NRV; ++v) {
        std::int32_t* p = c + r * rs + v * W;
        isa::storeu(p, accumulate ? isa::add(isa::loadu(p), acc[r][v]) : acc[r][v]);
      }
    }
    return;
  }
  alignas(64) std::int32_t buf[ROWS * NR];
  for (int r = 0; r < ROWS; ++r)
    for (int v = 0; v < NRV; ++v) isa::store(buf + r * NR + v * W, acc[r][v]);
  for (index_t r = 0; r < h; ++r)
    for (index_t j = 0; j < w; ++j) {
      std::int32_t& d = c[r * rs + j * cs];
      const std::int32_t t = buf[r * NR + lo + j];
      // wrapping, as the vector adds
      d = accumulate ? static_cast<std::int32_t>(static_cast<std::uint32_t>(d) + static_cast<std::uint32_t>(t)) : t;
    }
}

/// The micro-kernel with the fewest rows that covers h (1, 2, 4, 8 or MR).
template <bool BU, bool CORR>
FUSE_FORCE_INLINE void tile(index_t kg, const unsigned char* ap, const unsigned char* bp, std::int32_t* c, index_t rs,
                            index_t cs, index_t h, index_t lo, index_t w, bool accumulate) {
  constexpr int MR = isa::MR;
  if (h == MR) micro_kernel<MR, BU, CORR>(kg, ap, bp, c, rs, cs, h, lo, w, accumulate);
  else if (h <= 1) micro_kernel<1, BU, CORR>(kg, ap, bp, c, rs, cs, h, lo, w, accumulate);
  else if (h <= 2) micro_kernel<2, BU, CORR>(kg, ap, bp, c, rs, cs, h, lo, w, accumulate);
  else if (h <= 4 && MR > 4) micro_kernel<(MR > 4 ? 4 : MR), BU, CORR>(kg, ap, bp, c, rs, cs, h, lo, w, accumulate);
  else if (h <= 8 && MR > 8) micro_kernel<(MR > 8 ? 8 : MR), BU, CORR>(kg, ap, bp, c, rs, cs, h, lo, w, accumulate);
  else micro_kernel<MR, BU, CORR>(kg, ap, bp, c, rs, cs, h, lo, w, accumulate);
}

/// Per-column corrections of one packed B panel (kg groups of NR lanes), stored after it:
/// -128 * sum_k B (int8 x int8: A was shifted up) or +128 * sum_k B (uint8 x uint8: A was
/// shifted down). The sums are vpdpbusd against bytes of 1 (exact; padding adds 0).
template <bool BU, bool NEGATE>
void store_correction(unsigned char* bp, index_t kg) {
  using V = typename isa::V;
  constexpr int NRV = isa::NRV, W = isa::W, NR = W * NRV;
  const V ones = isa::set1(0x01010101);
  for (int v = 0; v < NRV; ++v) {
    // Four independent sums: one chain would wait on vpdpbusd's latency every group, and
    // with few rows of A this pass would cost as much as the products.
    V s[4] = {isa::zero(), isa::zero(), isa::zero(), isa::zero()};
    const auto step = [&](int q, index_t g) {
      const V x = isa::load(bp + (g * NR + v * W) * 4);
      s[q] = BU ? isa::dot(s[q], x, ones) : isa::dot(s[q], ones, x);
    };
    index_t g = 0;
    for (; g + 4 <= kg; g += 4)
      for (int q = 0; q < 4; ++q) step(q, g + q);
    for (; g < kg; ++g) step(0, g);
    const V k128 = isa::times128(isa::add(isa::add(s[0], s[1]), isa::add(s[2], s[3])));
    isa::store(bp + (kg * NR + v * W) * 4, NEGATE ? isa::sub(isa::zero(), k128) : k128);
  }
}

/// The reduction block for a reduction of k (> 0): equal blocks of at most KC, a multiple of 4
/// each, so that k = 1100 runs as 2 x 552 rather than 1024 + a short block that reads and
/// writes C as often for a tenth of the products.
inline index_t kc_for(index_t k) { return even_blocks(k, isa::KC, 4); }

/// Bytes of one B panel of kc reduction rows, with its correction row when `corr`.
inline index_t panel_bytes(index_t kc, bool corr) {
  return ((kc + isa::G - 1) / isa::G + (corr ? 1 : 0)) * isa::W * isa::NRV * 4;
}

/// The blocked loops (BLIS order) over a source of packed B panels: `bpanels(k0, kc, jb, nc)`
/// makes ready the panels of that block and returns the first one and the bytes from one to the
/// next. Columns are counted in panel space, where the product's column 0 is column `skip` of
/// the first panel (prepacked weights read from a column inside a panel).
/// Whether B sits on vpdpbusd's unsigned side (uint8 B), and whether the accumulators start
/// from a per-column correction (A and B of one signedness: one side is flipped by 128).
template <class TA, class TB>
inline constexpr bool b_unsigned = isa::vnni && std::is_same_v<TB, std::uint8_t>;
template <class TA, class TB>
inline constexpr bool corrected = isa::vnni && std::is_same_v<TA, TB>;

template <class TA, class TB, class BPanels>
void blocked(index_t m, index_t n, index_t k, strided<TA> a, index_t kc_step, BPanels&& bpanels, index_t skip,
             std::int32_t* c, index_t rs, index_t cs) {
  constexpr int G = isa::G, MR = isa::MR, NR = isa::W * isa::NRV;
  constexpr index_t MC = isa::MC, NC = isa::NC;
  constexpr bool BU = b_unsigned<TA, TB>;
  constexpr bool CORR = corrected<TA, TB>;
  constexpr unsigned char flip = CORR ? 0x80 : 0;
  const index_t np = skip + n;
  const index_t kg_max = (std::min(kc_step, k) + G - 1) / G;
  const index_t mc_max = std::min(MC, round_up(m, MR));
  gemm::detail::aligned_buffer<unsigned char> abuf(static_cast<std::size_t>(mc_max * kg_max * 4));
  for (index_t jb = 0; jb < np; jb += NC) {
    const index_t nc = std::min(NC, np - jb);
    for (index_t k0 = 0; k0 < k; k0 += kc_step) {
      const index_t kc = std::min(kc_step, k - k0);
      const index_t kg = (kc + G - 1) / G;
      const auto [block, bstride] = bpanels(k0, kc, jb, nc);
      for (index_t i0 = 0; i0 < m; i0 += MC) {
        const index_t mc = std::min(MC, m - i0);
        for (index_t ip = 0; ip < mc; ip += MR)
          pack_panel<G>(abuf.p + ip * kg * 4, &a(i0 + ip, k0), a.rs, a.cs, std::min<index_t>(MR, mc - ip), MR, kc,
                        flip);
        for (index_t jp = 0; jp < nc; jp += NR) {
          const unsigned char* bp = block + jp / NR * bstride;
          const index_t lo = std::max<index_t>(0, skip - (jb + jp));
          const index_t w = std::min<index_t>(NR, np - (jb + jp)) - lo;
          std::int32_t* cc = c + i0 * rs + (jb + jp + lo - skip) * cs;
          for (index_t ip = 0; ip < mc; ip += MR)
            tile<BU, CORR>(kg, abuf.p + ip * kg * 4, bp, cc + ip * rs, rs, cs, std::min<index_t>(MR, mc - ip), lo, w,
                           k0 > 0);
        }
      }
    }
  }
}

template <class TA, class TB>
void run(index_t m, index_t n, index_t k, strided<TA> a, strided<TB> b, std::int32_t* c, index_t rs, index_t cs) {
  constexpr int G = isa::G, NR = isa::W * isa::NRV;
  static_assert(isa::KC % 4 == 0 && isa::MC % isa::MR == 0 && isa::NC % NR == 0, "int8 GEMM blocking");
  constexpr bool CORR = corrected<TA, TB>;
  const index_t kc_step = kc_for(k);
  const index_t nc_max = std::min(isa::NC, round_up(n, NR));
  gemm::detail::aligned_buffer<unsigned char> bbuf(
      static_cast<std::size_t>(nc_max / NR * panel_bytes(std::min(kc_step, k), CORR)));
  blocked<TA, TB>(
      m, n, k, a, kc_step,
      [&](index_t k0, index_t kc, index_t jb, index_t nc) {
        const index_t bstride = panel_bytes(kc, CORR);  // aligned: a multiple of NR * 4
        for (index_t jp = 0; jp < nc; jp += NR) {
          unsigned char* bp = bbuf.p + jp / NR * bstride;
          pack_panel<G>(bp, &b(k0, jb + jp), b.cs, b.rs, std::min<index_t>(NR, nc - jp), NR, kc, 0);
          if constexpr (CORR)
            store_correction<b_unsigned<TA, TB>, std::is_same_v<TA, std::int8_t>>(bp, (kc + G - 1) / G);
        }
        return std::pair<const unsigned char*, index_t>{bbuf.p, bstride};
      },
      0, c, rs, cs);
}

// --- B packed ahead of time (fuse::pack of 8-bit weights) -----------------------------------------
// The layout run() packs block by block, kept whole: for each reduction block (kc_for(k) rows,
// the last one shorter), the panels of all columns, each panel as pack_panel writes it (B's own
// bytes, or int16 for vpmaddwd) followed, with VNNI, by one row of per-column corrections.
// A panel of B does not know A's dtype, but only one A dtype needs its correction: the one
// equal to B's (int8 x int8: -128 * sum_k B; uint8 x uint8: +128 * sum_k B); the mixed pairs
// skip the row.

/// Packs B (k x n) whole for gemm_int8_prepacked; dst: 64-byte aligned, packed_int8_b_bytes(k, n).
template <class TB>
void pack_b_whole(unsigned char* dst, strided<TB> b, index_t k, index_t n) {
  constexpr int G = isa::G, NR = isa::W * isa::NRV;
  const index_t kc_step = kc_for(k), panels = (n + NR - 1) / NR;
  for (index_t k0 = 0; k0 < k; k0 += kc_step) {
    const index_t kc = std::min(kc_step, k - k0);
    unsigned char* block = dst + (k0 / kc_step) * panels * panel_bytes(kc_step, isa::vnni);
    for (index_t p = 0; p < panels; ++p) {
      unsigned char* bp = block + p * panel_bytes(kc, isa::vnni);
      pack_panel<G>(bp, &b(k0, p * NR), b.cs, b.rs, std::min<index_t>(NR, n - p * NR), NR, kc, 0);
      if constexpr (isa::vnni)
        store_correction<std::is_same_v<TB, std::uint8_t>, std::is_same_v<TB, std::int8_t>>(bp, (kc + G - 1) / G);
    }
  }
}

/// run() over B packed ahead (pack_b_whole), from its column j0 on (a panel boundary or not).
template <class TA, class TB>
void run_prepacked(index_t m, index_t n, index_t k, strided<TA> a, const packed_int8_b<TB>& b, index_t j0,
                   std::int32_t* c, index_t rs, index_t cs) {
  constexpr int NR = isa::W * isa::NRV;
  const index_t first = j0 / NR * NR;
  blocked<TA, TB>(
      m, n, k, a, b.kc,
      [&](index_t k0, index_t kc, index_t jb, index_t) {
        return std::pair<const unsigned char*, index_t>{b.panel(k0, first + jb), panel_bytes(kc, isa::vnni)};
      },
      j0 - first, c, rs, cs);
}

#endif  // FUSE_GEMM_INT8_ISA > 0

}  // namespace detail::int8

/// The instruction set the int8 GEMM was compiled for ("avx512-vnni", "avx-vnni",
/// "avx512bw-vpmaddwd", "avx2-vpmaddwd", "sse2-pmaddwd", or "portable").
#if FUSE_GEMM_INT8_ISA > 0
inline constexpr const char* gemm_int8_isa = detail::int8::isa::name;
#else
inline constexpr const char* gemm_int8_isa = "portable";
#endif

/// C = A B for A m x k and B k x n (strided; each int8 or uint8), C m x n int32 with strides
/// (rs, cs): C is overwritten (k = 0 gives zeros, m or n = 0 does nothing). Exact: the int32
/// results wrap as TVM's int32 arithmetic does.
template <class TA, class TB>
void gemm_int8(index_t m, index_t n, index_t k, strided<TA> a, strided<TB> b, std::int32_t* c, index_t rs, index_t cs) {
  static_assert((std::is_same_v<TA, std::int8_t> || std::is_same_v<TA, std::uint8_t>)&&(
                    std::is_same_v<TB, std::int8_t> || std::is_same_v<TB, std::uint8_t>),
                "fuse: gemm_int8 takes int8 or uint8 operands");
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return detail::zero_fill(m, n, c, rs, cs);
#if FUSE_GEMM_INT8_ISA > 0
  detail::int8::run<TA, TB>(m, n, k, a, b, c, rs, cs);
#else
  // No vector dot-product instructions known here: the widening GEMM (exact, wrapping).
  gemm<std::int32_t>(m, n, k, a, b, c, rs, cs);
#endif
}

/// B (k x n, int8 or uint8) packed ahead of time for gemm_int8_prepacked, in the kernel's own
/// layout (all reduction blocks, all panels, with their corrections), so that constant weights
/// are never repacked (fuse::pack). A description of memory owned elsewhere: make it with
/// pack_int8_b_ahead into packed_int8_b_bytes(k, n) bytes, 64-byte aligned. (The portable
/// build keeps B as it came, column by column: B(kk, j) at data[j k + kk].)
template <class TB>
struct packed_int8_b {
  static_assert(std::is_same_v<TB, std::int8_t> || std::is_same_v<TB, std::uint8_t>,
                "fuse: packed_int8_b holds int8 or uint8 weights");
  const unsigned char* data = nullptr;
  index_t k = 0, n = 0;
  index_t kc = 0;      ///< reduction rows per block (the last block may be shorter)
  index_t panels = 0;  ///< panels per reduction block (n rounded up to the panel width, / it)

#if FUSE_GEMM_INT8_ISA > 0
  /// The panel of columns [j, j + NR) (j a multiple of NR) in the block of rows from k0.
  const unsigned char* panel(index_t k0, index_t j) const {
    namespace d = detail::int8;
    constexpr int NR = d::isa::W * d::isa::NRV;
    return data + (k0 / kc) * panels * d::panel_bytes(kc, d::isa::vnni) +
           j / NR * d::panel_bytes(std::min(kc, k - k0), d::isa::vnni);
  }
#endif

  /// B(kk, j), read back from the packing.
  TB element(index_t kk, index_t j) const {
#if FUSE_GEMM_INT8_ISA > 0
    namespace d = detail::int8;
    constexpr int G = d::isa::G, NR = d::isa::W * d::isa::NRV;
    const index_t k0 = kk / kc * kc;
    const index_t g = (kk - k0) / G, t = (kk - k0) % G;
    const unsigned char* at = panel(k0, j / NR * NR) + (g * NR + j % NR) * 4;
    if constexpr (G == 4) {
      return static_cast<TB>(at[t]);
    } else {
      std::int16_t v;
      std::memcpy(&v, at + 2 * t, 2);
      return static_cast<TB>(v);
    }
#else
    return static_cast<TB>(data[j * k + kk]);
#endif
  }
};

/// Bytes of the packing of a k x n B (pack_int8_b_ahead).
template <class TB>
index_t packed_int8_b_bytes(index_t k, index_t n) {
  if (k <= 0 || n <= 0) return 0;
#if FUSE_GEMM_INT8_ISA > 0
  namespace d = detail::int8;
  constexpr int NR = d::isa::W * d::isa::NRV;
  const index_t kc = d::kc_for(k), panels = round_up(n, NR) / NR;
  return panels * (k / kc * d::panel_bytes(kc, d::isa::vnni) + (k % kc ? d::panel_bytes(k % kc, d::isa::vnni) : 0));
#else
  return k * n;
#endif
}

/// Packs B (k x n, strided) into dst (packed_int8_b_bytes(k, n) bytes, 64-byte aligned) for
/// gemm_int8_prepacked with any A dtype; returns its description.
template <class TB>
packed_int8_b<TB> pack_int8_b_ahead(unsigned char* dst, strided<TB> b, index_t k, index_t n) {
  packed_int8_b<TB> p;
  p.data = dst;
  p.k = k;
  p.n = n;
  if (k <= 0 || n <= 0) return p;
#if FUSE_GEMM_INT8_ISA > 0
  constexpr int NR = detail::int8::isa::W * detail::int8::isa::NRV;
  p.kc = detail::int8::kc_for(k);
  p.panels = (n + NR - 1) / NR;
  detail::int8::pack_b_whole<TB>(dst, b, k, n);
#else
  p.kc = k;
  p.panels = n;
  for (index_t j = 0; j < n; ++j)
    for (index_t kk = 0; kk < k; ++kk) std::memcpy(dst + j * k + kk, &b(kk, j), 1);
#endif
  return p;
}

/// C = A B as gemm_int8 (same results, bit for bit), with B packed ahead (pack_int8_b_ahead)
/// and read in place from its column j0 on (any column, inside a panel or not; j0 + n <= b.n,
/// k == b.k).
template <class TA, class TB>
void gemm_int8_prepacked(index_t m, index_t n, index_t k, strided<TA> a, const packed_int8_b<TB>& b, index_t j0,
                         std::int32_t* c, index_t rs, index_t cs) {
  static_assert(std::is_same_v<TA, std::int8_t> || std::is_same_v<TA, std::uint8_t>,
                "fuse: gemm_int8_prepacked takes int8 or uint8 data");
  if (m <= 0 || n <= 0) return;
  if (k <= 0) return detail::zero_fill(m, n, c, rs, cs);
#if FUSE_GEMM_INT8_ISA > 0
  detail::int8::run_prepacked<TA, TB>(m, n, k, a, b, j0, c, rs, cs);
#else
  gemm_int8<TA, TB>(m, n, k, a, strided<TB>{reinterpret_cast<const TB*>(b.data) + j0 * k, 1, k}, c, rs, cs);
#endif
}

}  // namespace fuse::cpu::gemm

#undef FUSE_GEMM_INT8_ISA
