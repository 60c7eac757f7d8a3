// exp and expm1 for float32, and the argument reduction that sigmoid, tanh and erfc share.
//
// x = n*ln2 + r with integral n and |r| <= ln2/2, so e^x = 2^n * e^r, and
// e^r = 1 + t with t = r + r^2*Q(r), Q a degree-4 minimax fit (tools/fit_math.py) for the
// relative error of t itself (2^-25.8), which also makes 1 + t accurate to 2^-27.3. Keeping t
// apart from the 1 is what lets expm1 and erfc stay near 1 ULP: 1 + t is never rounded there.
#pragma once

#include <fuse/math/mode.hpp>
#include <fuse/math/prims.hpp>
#include <fuse/math/table.hpp>

namespace fuse::math {
namespace detail {

inline constexpr float log2_e = 0x1.715476p+0f;
// ln2 = ln2_hi + ln2_lo. With an fma, n*ln2_hi is subtracted exactly whatever its length, so
// ln2_hi is float(ln2) (residual 2^-54). Without one, n*ln2_hi must itself be exact for
// |n| <= 150, so ln2_hi keeps 13 bits and ln2_lo the rest.
#if FUSE_MATH_FUSED_FMA
inline constexpr float ln2_hi = 0x1.62e430p-1f;
inline constexpr float ln2_lo = -0x1.05c610p-29f;
#else
inline constexpr float ln2_hi = 0x1.62e000p-1f;
inline constexpr float ln2_lo = 0x1.0bfbe8p-15f;
#endif

// Q(r) ~ (e^r - 1 - r) / r^2 on |r| <= ln2/2.
inline constexpr float expq0 = 0x1.fffffep-2f;
inline constexpr float expq1 = 0x1.5554b0p-3f;
inline constexpr float expq2 = 0x1.555678p-5f;
inline constexpr float expq3 = 0x1.122764p-7f;
inline constexpr float expq4 = 0x1.6bec16p-10f;

// exp: x = (n + j/16) ln2 + r with |r| <= ln2/32, e^x = 2^n 2^(j/16) (1 + t), t = r + r^2 Q(r),
// Q of degree 1 (relative error of 1 + t: 2^-28.7). Adding this shifter rounds x log2(e) to a
// sixteenth and leaves 16 (n + j/16) in the low mantissa bits: j is the low 4 bits (lookup16).
inline constexpr float exp16_shifter = 0x1.8p19f;
inline constexpr float exp16_q0 = 0x1.00028ap-1f;
inline constexpr float exp16_q1 = 0x1.555768p-3f;
// 2^(j/16), rounded (relative error <= 0.8 * 2^-24).
FUSE_MATH_TABLE(exp2_16_table, 1,
                {
                    {0x1.p+0f, 0x1.0b5586p+0f, 0x1.172b84p+0f, 0x1.2387a6p+0f, 0x1.306fe0p+0f, 0x1.3dea64p+0f,
                     0x1.4bfdaep+0f, 0x1.5ab07ep+0f, 0x1.6a09e6p+0f, 0x1.7a1148p+0f, 0x1.8ace54p+0f, 0x1.9c4918p+0f,
                     0x1.ae89fap+0f, 0x1.c199bep+0f, 0x1.d5818ep+0f, 0x1.ea4afap+0f},
                })

/// x = n*ln2 + r. k = n + round_shifter carries n in its low bits (for pow2_from_shifted).
template <class V>
struct exp_reduction {
  V k, n, r;
};

/// Needs |x| <= 2^21 or so (callers clamp first); r is then within ln2/2 + 2^-20.
template <class V>
FUSE_HD FUSE_FORCE_INLINE exp_reduction<V> reduce_exp(V x) noexcept {
  using P = prims<V>;
  const V k = P::fma(x, V(log2_e), V(round_shifter));
  const V n = k - V(round_shifter);
  V r = P::fma(n, V(-ln2_hi), x);
  r = P::fma(n, V(-ln2_lo), r);
  return {k, n, r};
}

/// Q(r) of e^r - 1 = r + r^2 Q(r) for |r| <= ln2/2, r2 = r^2 (Estrin's scheme: its shorter
/// dependency chain is worth more than Horner's one saved op).
template <class V>
FUSE_HD FUSE_FORCE_INLINE V expm1_q(V r, V r2) noexcept {
  using P = prims<V>;
  return P::fma(P::fma(V(expq4), r2, P::fma(V(expq3), r, V(expq2))), r2, P::fma(V(expq1), r, V(expq0)));
}

/// e^r - 1 for |r| <= ln2/2, with relative error 2^-25.8 before the final rounding.
template <class V>
FUSE_HD FUSE_FORCE_INLINE V expm1_reduced(V r) noexcept {
  const V r2 = r * r;
  return prims<V>::fma(r2, expm1_q(r, r2), r);
}

}  // namespace detail

/// e^x. Correct overflow (+inf exactly when e^x rounds above FLT_MAX, i.e. x > 88.7228394),
/// gradual underflow to subnormals down to x = -103.97, 0 below, NaN propagates.
/// Both modes are the same function: it is already faster than Eigen's exp (docs/math.md).
template <class Mode = fuse::accurate_math_t, class V>
FUSE_HD FUSE_FORCE_INLINE V exp(V x) noexcept {
  using P = prims<V>;
  // x = m ln2 + r with m = n + j/16 a multiple of 1/16 and |r| <= ln2/32. x is not clamped:
  // up to |x| = 7e5 the reduction is exact and scale() over- or underflows correctly; beyond,
  // and for +-inf (r = NaN), clamping r keeps 1 + t positive and finite, so that 2^m gives
  // inf or +0; a NaN x makes m NaN, which scale() returns.
  const V k = P::fma(x, V(detail::log2_e), V(detail::exp16_shifter));
  const V m = k - V(detail::exp16_shifter);
  V r = P::fma(m, V(-detail::ln2_hi), x);
  r = P::clamp_sym(P::fma(m, V(-detail::ln2_lo), r), 0.03125f);
  const V t = P::fma(r * r, P::fma(V(detail::exp16_q1), r, V(detail::exp16_q0)), r);
  // 2^(j/16) (1 + t), rounded once, then scaled by 2^floor(m) = 2^n (vscalefps floors m).
  const V c = P::lookup16(FUSE_MATH_TABLE_REF(detail::exp2_16_table)[0], k);
  return P::scale(P::fma(c, t, c), m);
}

/// e^x - 1: relative accuracy near 0 (x itself below 2^-25), -1 below x = -17.4, +inf past
/// 88.7228394.
template <class Mode = fuse::accurate_math_t, class V>
FUSE_HD FUSE_FORCE_INLINE V expm1(V x) noexcept {
  using P = prims<V>;
  const V xc = P::min(V(89.0f), P::max(V(-18.0f), x));
  const auto red = detail::reduce_exp(xc);
  const V r = red.r;
  const V r2 = r * r;
  const V q = detail::expm1_q(r, r2);
  const V t = P::fma(r2, q, r);
  const V t_lo = P::fma(r2, q, r - t);  // t's rounding error (r - t is exact: t/r is in [0.8, 1.2])
  // e^x - 1 = s (1 + t) - 1 = c + s t with s = 2^n, computed at half scale so that s/2 = 2^(n-1)
  // stays a normal float for n = 128: c = s/2 - 1/2 (exact for every n that matters) and s/2 t
  // (exact: a power of two). Their sum is rounded once, its error recovered (Fast2Sum:
  // |c| >= |s/2 t|), and added back with t's own error in one last rounding.
  const V half_s = P::pow2_from_shifted(red.k - V(1.0f));
  const V c = half_s - V(0.5f);
  const V st = half_s * t;  // exact, so contracting it into either use changes nothing
  const V v = P::fma(half_s, t, c);
  const V v_err = st - (v - c);
  const V half_result = v + P::fma(half_s, t_lo, v_err);
  // Below 2^-25 expm1(x) rounds to x; the half-scale path would drop a subnormal's last bit.
  return P::select(P::abs(x) < V(0x1p-25f), x, half_result + half_result);
}

}  // namespace fuse::math
