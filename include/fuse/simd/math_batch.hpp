// CPU only: fuse's math primitives (fuse/math/prims.hpp) for xsimd::batch<float, A> on x86.
//
// Including this header makes every function of fuse/math accept xsimd float batches:
//   auto y = fuse::math::tanh(xsimd::batch<float>::load_unaligned(p));
// Each primitive returns, lane by lane, the bits the scalar prims<float> returns. Where an
// AVX-512 instruction does the job in one step it is used (vscalefps for scaling by 2^n,
// vgetmantps/vgetexpps for log's split, vpermps for the 16-entry table lookups, vrangeps for
// |x| clamped, a merge-masked vpternlogd for the sign), and the scalar version computes the
// same correctly rounded or exact value another way. AVX2 and SSE batches use the same
// algorithms with plainer instructions (two vpermps for a lookup on AVX2, a scalar gather on SSE).
//
// The AVX-512 intrinsics are spelled in their merge-masked form with an all-ones mask: GCC 12's
// plain forms start from _mm512_undefined_ps() and trigger false -Wuninitialized warnings
// (GCC bug 105593) in every caller; the code generated is the same.
#pragma once

#include <fuse/math/math.hpp>

#include <xsimd/xsimd.hpp>

#include <cstddef>
#include <cstdint>
#include <immintrin.h>
#include <type_traits>

#if defined(__AVX512F__) && !defined(__FMA__)
#error "fuse: an AVX-512 build without FMA (-mavx512f alone) is not supported; add -mfma or use -march"
#endif

namespace fuse::math {

template <class A>
struct prims<xsimd::batch<float, A>> {
  using V = xsimd::batch<float, A>;
  using mask = xsimd::batch_bool<float, A>;
  using I = xsimd::batch<std::int32_t, A>;

  static constexpr bool is512 = std::is_base_of_v<xsimd::avx512f, A>;
  static constexpr bool is256 = std::is_base_of_v<xsimd::avx, A>;
  static constexpr bool is128 = std::is_base_of_v<xsimd::sse2, A>;
  static_assert(is512 || is256 || is128, "fuse math: only x86 xsimd architectures are supported");
  static constexpr unsigned short all16 = 0xffff;  // the all-lanes mask of the AVX-512 forms

  static FUSE_FORCE_INLINE V fma(V a, V b, V c) noexcept {
#if FUSE_MATH_FUSED_FMA
    if constexpr (is512) return _mm512_fmadd_ps(a, b, c);
    else if constexpr (is256) return _mm256_fmadd_ps(a, b, c);
    else return _mm_fmadd_ps(a, b, c);
#else
    return a * b + c;  // like the scalar version: no FMA instructions exist in this build
#endif
  }

  static FUSE_FORCE_INLINE V select(mask m, V a, V b) noexcept { return xsimd::select(m, a, b); }

  static FUSE_FORCE_INLINE V min(V a, V b) noexcept {
    if constexpr (is512) return _mm512_mask_min_ps(a, all16, a, b);
    else if constexpr (is256) return _mm256_min_ps(a, b);
    else return _mm_min_ps(a, b);
  }
  static FUSE_FORCE_INLINE V max(V a, V b) noexcept {
    if constexpr (is512) return _mm512_mask_max_ps(a, all16, a, b);
    else if constexpr (is256) return _mm256_max_ps(a, b);
    else return _mm_max_ps(a, b);
  }

  static FUSE_FORCE_INLINE V abs(V a) noexcept {
    return xsimd::bitwise_cast<V>(xsimd::bitwise_cast<I>(a) & I(0x7fffffff));
  }
  static FUSE_FORCE_INLINE V or_sign(V mag, V sign) noexcept {
    return xsimd::bitwise_cast<V>(xsimd::bitwise_cast<I>(mag) |
                                  (xsimd::bitwise_cast<I>(sign) & I(std::int32_t(0x80000000u))));
  }
  static FUSE_FORCE_INLINE mask is_nan(V a) noexcept { return xsimd::isnan(a); }
  static FUSE_FORCE_INLINE bool any(mask m) noexcept { return xsimd::any(m); }

  static FUSE_FORCE_INLINE V abs_clamp(V x, float c) noexcept {
#if defined(__AVX512DQ__)
    // min(|x|, |c|) with the sign cleared, in one instruction (a quiet NaN x gives c).
    if constexpr (is512) return _mm512_mask_range_ps(x, all16, x, _mm512_set1_ps(c), 0b1010);
#endif
    return min(V(c), abs(x));
  }

  static FUSE_FORCE_INLINE V clamp_sym(V x, float c) noexcept {
#if defined(__AVX512DQ__)
    // min(|x|, c) with the sign of x, in one instruction (a quiet NaN x gives c with its sign).
    if constexpr (is512) return _mm512_mask_range_ps(x, all16, x, _mm512_set1_ps(c), 0b0010);
#endif
    return or_sign(min(abs(x), V(c)), x);
  }

  static FUSE_FORCE_INLINE V or_sign_nan(V mag, V x) noexcept {
    if constexpr (is512) {
      // One merge-masked bitwise select: x's sign bit over mag in ordered lanes; NaN lanes are
      // masked off and keep the merge source, x itself.
      const __mmask16 ordered = _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);
      const __m512i xb = _mm512_castps_si512(x);
      return _mm512_castsi512_ps(_mm512_mask_ternarylogic_epi32(xb, ordered, _mm512_castps_si512(mag),
                                                                _mm512_set1_epi32(std::int32_t(0x80000000u)),
                                                                0xe4));  // sign mask ? x : mag, bit by bit
    } else {
      return xsimd::select(is_nan(x), x, or_sign(mag, x));
    }
  }

  /// row[k's bits & mask], lane by lane: the lookups of builds without a wide permute (SSE).
  static FUSE_FORCE_INLINE V gather(const float* row, V k, std::uint32_t mask) noexcept {
    alignas(64) std::uint32_t idx[V::size];
    alignas(64) float out[V::size];
    xsimd::bitwise_cast<I>(k).store_aligned(reinterpret_cast<std::int32_t*>(idx));
    for (std::size_t i = 0; i < V::size; ++i) out[i] = row[idx[i] & mask];
    return V::load_aligned(out);
  }

  static FUSE_FORCE_INLINE V lookup16(const float* row, V k) noexcept {
    if constexpr (is512) {
      const __m512 table = _mm512_loadu_ps(row);
      return _mm512_mask_permutexvar_ps(table, all16, _mm512_castps_si512(k), table);
    }
#if defined(__AVX2__)
    else if constexpr (is256) {
      // Two 8-entry permutes; bit 3 of the index (moved to the sign bit) picks the half.
      const __m256i idx = _mm256_castps_si256(k);
      const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(row), idx);
      const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(row + 8), idx);
      return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
    }
#endif
    else {
      return gather(row, k, 15u);
    }
  }

  /// row[k's bits & 7] for an 8-entry row: one vpermps on AVX2 (which reads the low 3 bits).
  /// Only builds without wide tables read 8-entry rows, and an AVX-512 build always has them.
  static FUSE_FORCE_INLINE V lookup8(const float* row, V k) noexcept {
    static_assert(!is512, "fuse math: AVX-512 builds read the 16-interval tables (FUSE_MATH_WIDE_TABLES)");
#if defined(__AVX2__)
    if constexpr (is256) return _mm256_permutevar8x32_ps(_mm256_loadu_ps(row), _mm256_castps_si256(k));
#endif
    return gather(row, k, 7u);
  }

  /// row[k's bits & 31] for a 32-entry row: one vpermt2ps on AVX-512, two 16-entry lookups and
  /// a blend on bit 4 elsewhere.
  static FUSE_FORCE_INLINE V lookup32(const float* row, V k) noexcept {
    if constexpr (is512) {
      return _mm512_mask_permutex2var_ps(_mm512_loadu_ps(row), all16, _mm512_castps_si512(k),
                                         _mm512_loadu_ps(row + 16));
    }
#if defined(__AVX2__)
    else if constexpr (is256) {
      const __m256i idx = _mm256_castps_si256(k);
      return _mm256_blendv_ps(lookup16(row, k), lookup16(row + 16, k), _mm256_castsi256_ps(_mm256_slli_epi32(idx, 27)));
    }
#endif
    else {
      return gather(row, k, 31u);
    }
  }

  static FUSE_FORCE_INLINE V shift_bits_right(V x, int n) noexcept {
    if constexpr (is512) {
      const __m512i xb = _mm512_castps_si512(x);
      return _mm512_castsi512_ps(_mm512_mask_srli_epi32(xb, all16, xb, static_cast<unsigned>(n)));
    } else if constexpr (is256) {
#if defined(__AVX2__)
      return _mm256_castsi256_ps(_mm256_srli_epi32(_mm256_castps_si256(x), n));
#else
      return xsimd::bitwise_cast<V>(xsimd::bitwise_cast<I>(x) >> n);  // only the low bits are used
#endif
    } else {
      return _mm_castsi128_ps(_mm_srli_epi32(_mm_castps_si128(x), n));
    }
  }

  static FUSE_FORCE_INLINE V sub_where(mask m, V a, V b) noexcept {
    if constexpr (is512) return _mm512_mask_sub_ps(b, m, a, b);
    else return xsimd::select(m, a - b, b);
  }

  static FUSE_FORCE_INLINE V pow2_from_shifted(V k) noexcept {
    if constexpr (is512) {
      const __m512i kb = _mm512_castps_si512(k);
      const __m512i shifted = _mm512_mask_slli_epi32(kb, all16, kb, 23);
      return _mm512_castsi512_ps(_mm512_add_epi32(shifted, _mm512_set1_epi32(0x3f800000)));
    } else {
      return xsimd::bitwise_cast<V>((xsimd::bitwise_cast<I>(k) << 23) + I(0x3f800000));
    }
  }

  static FUSE_FORCE_INLINE V scale(V p, V n) noexcept {
    if constexpr (is512) {
      return _mm512_mask_scalef_ps(p, all16, p, n);
    }
#if defined(__AVX512VL__)
    else if constexpr (is256) {
      return _mm256_scalef_ps(p, n);
    } else {
      return _mm_scalef_ps(p, n);
    }
#else
    else {
      // Two exact-then-rounding multiplications, as the scalar version does (n floored).
      const I ni = xsimd::batch_cast<std::int32_t>(xsimd::floor(min(V(200.0f), max(V(-200.0f), n))));
      const I lo = ni >> 1;
      const I hi = ni - lo;
      const V p_half = p * xsimd::bitwise_cast<V>((lo + I(127)) << 23);
      const V scaled = p_half * xsimd::bitwise_cast<V>((hi + I(127)) << 23);
      return xsimd::select(is_nan(n), p + n, scaled);
    }
#endif
  }

  static FUSE_FORCE_INLINE void split_exponent(V x, V& m, V& e) noexcept {
    if constexpr (is512) {
      m = _mm512_mask_getmant_ps(x, all16, x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_src);
      const V e_floor = _mm512_mask_getexp_ps(x, all16, x);  // floor(log2 x), subnormals included
      e = xsimd::select(m < V(1.0f), e_floor + V(1.0f), e_floor);
    } else {
      const mask tiny = x < V(0x1p-126f);
      const I u = xsimd::bitwise_cast<I>(xsimd::select(tiny, x * V(0x1p23f), x));
      const I k = (u - I(0x3f400000)) >> 23;
      m = xsimd::bitwise_cast<V>(u - (k << 23));
      e = xsimd::batch_cast<float>(k) - xsimd::select(tiny, V(23.0f), V(0.0f));
    }
  }
};

}  // namespace fuse::math
