// Natural logarithm for float32.
//
// x = m * 2^e with m in [0.75, 1.5) (subnormals included; AVX-512 splits with vgetmantps and
// vgetexpps), f = m - 1 exactly, log x = e*ln2 + log1p(f), log1p(f) = f + f^2 Q(f) with Q a
// degree-8 minimax fit on [-0.25, 0.5] (tools/fit_math.py, relative error 2^-26.8).
// The sum is ordered so that only small terms are rounded before the last two operations.
#pragma once

#include <fuse/math/exp.hpp>
#include <fuse/math/mode.hpp>
#include <fuse/math/prims.hpp>

namespace fuse::math {
/// log(x): -inf at +-0, NaN below 0 and for NaN, +inf at +inf, exact 0 at 1, subnormals
/// handled. Both modes are the same function (log is cheap next to the division-bound ops).
template <class Mode = fuse::accurate_math_t, class V>
FUSE_HD FUSE_FORCE_INLINE V log(V x) noexcept {
  using P = prims<V>;
  V m, e;
  P::split_exponent(x, m, e);
  const V f = m - V(1.0f);
  const V f2 = f * f;
  const V f4 = f2 * f2;
  // Q(f) by Estrin: (q0 + q1 f) + f^2 (q2 + q3 f) + f^4 ((q4 + q5 f) + f^2 (q6 + q7 f) + f^4 q8)
  const V q01 = P::fma(V(0x1.5555a6p-2f), f, V(-0x1.p-1f));
  const V q23 = P::fma(V(0x1.99685ap-3f), f, V(-0x1.000024p-2f));
  const V q45 = P::fma(V(0x1.2897b6p-3f), f, V(-0x1.54f23cp-3f));
  const V q67 = P::fma(V(0x1.abf736p-4f), f, V(-0x1.0d901ep-3f));
  const V q4_8 = P::fma(f4, V(-0x1.6fe6f6p-5f), P::fma(f2, q67, q45));
  const V q = P::fma(f4, q4_8, P::fma(f2, q23, q01));
  // e*ln2 + f + f^2 Q: e*ln2_lo joins the small part, e*ln2_hi (exact) the final fma.
  const V small = P::fma(f2, q, e * V(detail::ln2_lo));
  const V result = P::fma(e, V(detail::ln2_hi), small + f);
  // Special inputs: the split above is meaningless there.
  // The special cases: +-0 -> -inf, x < 0 -> the default quiet NaN, NaN -> quieted x, +inf -> +inf.
  const V special = P::select(x == V(0.0f), V(-__builtin_inff()), P::select(x < V(0.0f), V(__builtin_nanf("")), x + x));
  return P::select((x > V(0.0f)) & (x < V(__builtin_inff())), result, special);
}

}  // namespace fuse::math
