// TVM's fast approximations (Relay's fast_exp, fast_tanh, fast_erf), the same formulas as TVM's
// float32 lowering (topi: fast_exp_float32; fast_tanh_float and fast_erf_float_expr, both taken
// by TVM from Eigen), written over prims<V> like the rest of fuse/math, so that a SIMD lane, a
// scalar lane and a CUDA thread give the same bits. They differ from TVM's generated code only
// in that products feeding additions are fused (prims::fma), so the last bits may differ; the
// error class is the formulas' (measured in docs/ops.md).
//
// NaN propagates (TVM's clamps would turn it into a finite value on some targets).
#pragma once

#include <fuse/math/prims.hpp>

namespace fuse::math {

/// e^x: x clamped to [-88.3762626647949, 88.3762626647950], n = floor(x log2(e) + 1/2),
/// f = x - n ln2 (one constant), e^f = 1 + f + f^2 P(f) (Cephes' expf polynomial), times 2^n
/// (0 for n = -127); then TVM's max(that, x), which only +inf and NaN reach.
template <class V>
FUSE_HD FUSE_FORCE_INLINE V fast_exp(V x) noexcept {
  using P = prims<V>;
  const V xc = P::max(P::min(x, V(88.3762626647950f)), V(-88.3762626647949f));
  // floor(t): t rounded to the nearest integer (the shifter), less one where that rounded up.
  const V t = P::fma(xc, V(1.44269504088896341f), V(0.5f));
  const V nr = (t + V(detail::round_shifter)) - V(detail::round_shifter);
  const V n = P::select(nr > t, nr - V(1.0f), nr);
  const V f = P::fma(n, V(-0.6931471805599453f), xc);
  const V p = horner(f, 5.0000001201E-1f, 1.6666665459E-1f, 4.1665795894E-2f, 8.3334519073E-3f, 1.3981999507E-3f,
                     1.9875691500E-4f);
  const V y = P::fma(p * f, f, f) + V(1.0f);
  const V two_n = P::pow2_from_shifted(n + V(detail::round_shifter));  // 0 for n = -127
  return P::max(two_n * y, x);  // the second operand when NaN: x's NaN propagates
}

/// tanh(x): x clamped to [-9, 9], then an odd degree-13 polynomial over an even degree-6 one.
template <class V>
FUSE_HD FUSE_FORCE_INLINE V fast_tanh(V x) noexcept {
  using P = prims<V>;
  const V xc = P::clamp_sym(x, 9.0f);
  const V x2 = xc * xc;
  const V p = horner(x2, 4.89352455891786e-03f, 6.37261928875436e-04f, 1.48572235717979e-05f, 5.12229709037114e-08f,
                     -8.60467152213735e-11f, 2.00018790482477e-13f, -2.76076847742355e-16f);
  const V q = horner(x2, 4.89352518554385e-03f, 2.26843463243900e-03f, 1.18534705686654e-04f, 1.19825839466702e-06f);
  return P::select(P::is_nan(x), x, (xc * p) / q);
}

/// erf(x): x clamped to [-4, 4], then an odd degree-13 polynomial over an even degree-8 one.
template <class V>
FUSE_HD FUSE_FORCE_INLINE V fast_erf(V x) noexcept {
  using P = prims<V>;
  const V xc = P::clamp_sym(x, 4.0f);
  const V x2 = xc * xc;
  const V p = horner(x2, -1.60960333262415e-02f, -2.95459980854025e-03f, -7.34990630326855e-04f, -5.69250639462346e-05f,
                     -2.10102402082508e-06f, 2.77068142495902e-08f, -2.72614225801306e-10f);
  const V q = horner(x2, -1.42647390514189e-02f, -7.37332916720468e-03f, -1.68282697438203e-03f, -2.13374055278905e-04f,
                     -1.45660718464996e-05f);
  return P::select(P::is_nan(x), x, (xc * p) / q);
}

}  // namespace fuse::math
