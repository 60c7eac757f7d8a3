// float16 and bfloat16 for the CPU GEMM (fuse/cpu/gemm.hpp): the conversions its packing and
// its stores use.
//
// A 16-bit contraction runs the float32 GEMM unchanged. Its operands are widened to float while
// they are packed (exact: every half and bfloat16 is a float), the sums accumulate in float32,
// and a 16-bit result is rounded once, to nearest even, when it is stored (gemm_rounded). The
// products of two halves (11 x 11 significant bits) or two bfloat16s (8 x 8) are exact in float,
// so the only errors are those of the float32 additions and of the final rounding.
//
// Widening and rounding use the SIMD conversions of fuse/simd/half_convert.hpp (vcvtph2ps /
// vcvtps2ph where the CPU has F16C or AVX-512, integer shifts for bfloat16), bit-identical to the
// scalar conversions of fuse/core/half.hpp.
#pragma once

#include <cstddef>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "fuse/core/config.hpp"
#include "fuse/core/half.hpp"
#include "fuse/simd/half_convert.hpp"

namespace fuse::cpu::gemm {

/// float16 or bfloat16: the dtypes the GEMM widens to float.
template <class T>
inline constexpr bool is_float16_dtype =
    std::is_same_v<std::remove_cv_t<T>, half> || std::is_same_v<std::remove_cv_t<T>, bfloat16>;

/// The type the GEMM packs and accumulates in for operands of dtype T and a result of dtype Out:
/// float for 16-bit operands (whatever the result), otherwise the result's own type.
template <class T, class Out>
using accumulator_t = std::conditional_t<is_float16_dtype<T>, float, Out>;

namespace detail {

/// batch<float>::size values at p as floats (unaligned; T float, half or bfloat16).
template <class T>
FUSE_FORCE_INLINE xsimd::batch<float> load_widened(const T* p) {
  if constexpr (std::is_same_v<T, half>) return simd::load_half(p);
  else if constexpr (std::is_same_v<T, bfloat16>) return simd::load_bf16(p);
  else return xsimd::batch<float>::load_unaligned(p);
}

/// dst[0, n) = the n contiguous 16-bit values at src, as floats.
template <class T>
void widen(float* dst, const T* src, index_t n) {
  using V = xsimd::batch<float>;
  constexpr index_t W = static_cast<index_t>(V::size);
  index_t i = 0;
  for (; i + W <= n; i += W) load_widened(src + i).store_unaligned(dst + i);
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

/// dst[i * stride] = src[i] rounded to T (nearest even), for i in [0, n).
template <class T>
void narrow(T* dst, index_t stride, const float* src, index_t n) {
  using V = xsimd::batch<float>;
  constexpr index_t W = static_cast<index_t>(V::size);
  index_t i = 0;
  if (stride == 1) {
    for (; i + W <= n; i += W) {
      if constexpr (std::is_same_v<T, half>) simd::store_half(dst + i, V::load_unaligned(src + i));
      else simd::store_bf16(dst + i, V::load_unaligned(src + i));
    }
  }
  for (; i < n; ++i) dst[i * stride] = T(src[i]);
}

/// The block [r0, r0 + nr) x [c0, c0 + nc) of a 16-bit matrix (element (i, j) at
/// data[i * rs + j * cs]) widened into `scratch` (nr * nc floats), contiguous along the axis
/// that is contiguous in the source (rows when neither is). Returns the block's strides in the
/// scratch: element (i, j) of the block at scratch[i * srs + j * scs].
template <class T>
void widen_block(float* scratch, const T* data, index_t rs, index_t cs, index_t r0, index_t nr, index_t c0, index_t nc,
                 index_t& srs, index_t& scs) {
  const T* base = data + r0 * rs + c0 * cs;
  if (rs == 1 && cs != 1) {
    for (index_t j = 0; j < nc; ++j) widen(scratch + j * nr, base + j * cs, nr);
    srs = 1;
    scs = nr;
  } else {
    for (index_t i = 0; i < nr; ++i) {
      if (cs == 1) widen(scratch + i * nc, base + i * rs, nc);
      else
        for (index_t j = 0; j < nc; ++j) scratch[i * nc + j] = static_cast<float>(base[i * rs + j * cs]);
    }
    srs = nc;
    scs = 1;
  }
}

}  // namespace detail

}  // namespace fuse::cpu::gemm
