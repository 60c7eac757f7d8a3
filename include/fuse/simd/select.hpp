// One lane-wise select for every xsimd batch type (CPU only).
#pragma once

#include <type_traits>

#include <xsimd/xsimd.hpp>

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace fuse::simd {

/// xsimd::select, except for integer lanes on AVX-512BW, where xsimd 8.1's version does not
/// compile without optimisation (it names 8- and 16-bit blend intrinsics that GCC defines as
/// macros at -O0): fuse code must build in debug builds too.
template <class T, class A>
xsimd::batch<T, A> select(const xsimd::batch_bool<T, A>& m, const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) {
#if defined(__AVX512F__)
  if constexpr (std::is_integral_v<T> && std::is_base_of_v<xsimd::avx512f, A>) {
    if constexpr (sizeof(T) == 4) return _mm512_mask_blend_epi32(m, b, a);
    else if constexpr (sizeof(T) == 8) return _mm512_mask_blend_epi64(m, b, a);
    else return xsimd::select(m, a, b);
  } else
#endif
  {
    return xsimd::select(m, a, b);
  }
}

}  // namespace fuse::simd
