// The logistic function 1/(1 + e^-x) for float32 (Relay's sigmoid).
//
// accurate, AVX-512 (and CUDA) builds: sigmoid(x) itself on (-8.25, 7.75) from a 32-interval
//           piecewise polynomial of degree 5 with *relative* accuracy on both sides (one
//           vpermt2ps per coefficient row; the interval index costs one addition). Beyond it,
//           g = 1/(1 + e^|x|) = e - e^2 + e^3 with e = e^-|x|, and sigmoid = g for x < 0, 1 - g
//           for x > 0: computed only when some lane needs it, with the correct subnormals down
//           to x = -103.97. 1.445 ULP over all floats.
// accurate, other builds (AVX2, SSE: a 16-entry lookup costs two permutes and a blend on AVX2,
//           a gather on SSE, and a table read 9 of them): 1/(1 + e^-x) with e^-x = 2^n (1 + t)
//           from the exp reduction and the denominator rounded once (the rounding of 1 + 2^n
//           recovered exactly), then one division; no table. Below x = -87 sigmoid(x) =
//           e^x (1 - e^x) to float precision, only when some lane needs it. 1.753 ULP over all
//           floats (AVX2 + FMA; 1.766 without FMA or on SSE, every 7th pattern), 2.2x faster than
//           the 16-interval table it replaced on a Zen 3 core (docs/math.md).
//           Never 0.5 + 0.5*tanh(x/2), which loses all relative accuracy for negative x.
// fast:     1/(1 + e^-x) with a degree-5 e^r and a one-constant reduction: one division, no
//           branch. Results below 4.2e-39 (x < -88.38) flush to 0.
#pragma once

#include <fuse/math/exp.hpp>
#include <fuse/math/mode.hpp>
#include <fuse/math/prims.hpp>
#include <fuse/math/table.hpp>

namespace fuse::math {
namespace detail {

// Below this the closed form of AVX2 and SSE builds, 1/(1 + e^-x), would leave the normal range.
inline constexpr float sigmoid_closed_form_end = 87.0f;

// sigmoid.hpp, AVX-512 builds: sigmoid(t_m + u) itself on (-8.25, 7.75), 32 intervals of width
// 1/2 centred at m/2, m = -16..15 (row index m mod 32), degree 5; c0 = sigmoid(t_m) and
// c1 = sigmoid'(t_m) are floats to within 2^-11 and 2^-5 of an ulp (fit_math_tables.py
// sigmoid_signed); worst interval: relative error 2^-25.5.
// x + 1.5 * 2^22 rounds x to a multiple of 1/2 and leaves round(2x) in the low bits: the
// interval index costs one addition, not a multiply-add.
inline constexpr float sigmoid_signed_shifter = 0x1.8p+22f;
inline constexpr float sigmoid_signed_start = 8.25f;  // -16.5 widths (excluded)
inline constexpr float sigmoid_signed_end = 7.75f;    // 15.5 widths (excluded)
FUSE_MATH_TABLE32(
    sigmoid_signed_table, 7,
    {
        {0.0f,
         0x1.fff044p-2f,
         0x1.001746p+0f,
         0x1.7ffcb6p+0f,
         0x1.ff6426p+0f,
         0x1.403cf4p+1f,
         0x1.801938p+1f,
         0x1.bff22ep+1f,
         0x1.ff8e3ep+1f,
         0x1.201d5ap+2f,
         0x1.40272ep+2f,
         0x1.60094cp+2f,
         0x1.7fea22p+2f,
         0x1.9feb98p+2f,
         0x1.bf8e90p+2f,
         0x1.df68d6p+2f,
         -0x1.000deep+3f,
         -0x1.e05a62p+2f,
         -0x1.bfa5f2p+2f,
         -0x1.9fe6f4p+2f,
         -0x1.7fb766p+2f,
         -0x1.601294p+2f,
         -0x1.418132p+2f,
         -0x1.200c70p+2f,
         -0x1.00165ap+2f,
         -0x1.c02d54p+1f,
         -0x1.7ff986p+1f,
         -0x1.40b660p+1f,
         -0x1.ffde08p+0f,
         -0x1.7f9734p+0f,
         -0x1.001746p+0f,
         -0x1.fff516p-2f},  // t
        {0x1.p-1f,        0x1.3eb124p-1f,  0x1.765676p-1f, 0x1.a29824p-1f, 0x1.c2d714p-1f,  0x1.d93a32p-1f,
         0x1.e7bc5ap-1f,  0x1.f0fc6ap-1f,  0x1.f6c276p-1f, 0x1.fa6278p-1f, 0x1.fc94d6p-1f,  0x1.fdead2p-1f,
         0x1.febb7ap-1f,  0x1.ff3afep-1f,  0x1.ff87c2p-1f, 0x1.ffb6e0p-1f, 0x1.5f0afap-12f, 0x1.2038c2p-11f,
         0x1.e04890p-11f, 0x1.8a2088p-10f, 0x1.458704p-9f, 0x1.0a7082p-8f, 0x1.ac7f54p-8f,  0x1.67bffcp-7f,
         0x1.264aa2p-6f,  0x1.df9b6ep-6f,  0x1.8495fep-5f, 0x1.351ee8p-4f, 0x1.e87a66p-4f,  0x1.76189ep-3f,
         0x1.135314p-2f,  0x1.829c96p-2f},  // c0
        {0x1.p-2f,        0x1.e14b70p-3f,  0x1.92985cp-3f,  0x1.317630p-3f,  0x1.aed544p-4f,  0x1.1eb128p-4f,
         0x1.71d458p-5f,  0x1.d25c06p-6f,  0x1.225b18p-6f,  0x1.6370f8p-7f,  0x1.b2a90ap-8f,  0x1.098162p-8f,
         0x1.43b84ep-9f,  0x1.896c64p-10f, 0x1.e0870cp-11f, 0x1.24563ap-11f, 0x1.5eece4p-12f, 0x1.201032p-11f,
         0x1.dfd7eep-11f, 0x1.8988d6p-10f, 0x1.44b80cp-9f,  0x1.095b34p-8f,  0x1.a9b21ap-8f,  0x1.63cce4p-7f,
         0x1.210164p-6f,  0x1.d19152p-6f,  0x1.722746p-5f,  0x1.1dcaaep-4f,  0x1.ae3938p-4f,  0x1.31c320p-3f,
         0x1.92985cp-3f,  0x1.e14ae2p-3f},  // c1
        {0x1.2441ccp-28f,  -0x1.d770d6p-6f,  -0x1.7432ccp-5f,  -0x1.8404a2p-5f,  -0x1.47e816p-5f, -0x1.e68ba6p-6f,
         -0x1.4ec72cp-6f,  -0x1.b7025cp-7f,  -0x1.17e00cp-7f,  -0x1.5ba4e6p-8f,  -0x1.acdabcp-9f, -0x1.07583cp-9f,
         -0x1.421d74p-10f, -0x1.883d3ap-11f, -0x1.dfa508p-12f, -0x1.2402e0p-12f, 0x1.5eb05ap-13f, 0x1.1fbecap-12f,
         0x1.def644p-12f,  0x1.885984p-11f,  0x1.431adap-10f,  0x1.073294p-9f,   0x1.a420c0p-9f,  0x1.5bfcc2p-8f,
         0x1.169f82p-7f,   0x1.b64fc6p-7f,   0x1.4f09dep-6f,   0x1.e55048p-6f,   0x1.479c76p-5f,  0x1.841dfcp-5f,
         0x1.7432d0p-5f,   0x1.d7755ep-6f},  // c2
        {-0x1.5552bep-6f, -0x1.072390p-6f, -0x1.816818p-8f, 0x1.5664ccp-9f,  0x1.a7d0b8p-8f,  0x1.bb7524p-8f,
         0x1.678ad4p-8f,  0x1.01cf3ap-8f,  0x1.59f9fep-9f,  0x1.bb13bcp-10f, 0x1.163d9ep-10f, 0x1.5966acp-11f,
         0x1.a93b06p-12f, 0x1.03eb94p-12f, 0x1.3e97d2p-13f, 0x1.847c36p-14f, 0x1.d2f684p-15f, 0x1.7ed12ap-14f,
         0x1.3e24f4p-13f, 0x1.03fee0p-12f, 0x1.aa8750p-12f, 0x1.593710p-11f, 0x1.10bb0ep-10f, 0x1.bb7edap-10f,
         0x1.588ee8p-9f,  0x1.0175f8p-8f,  0x1.67bbd8p-8f,  0x1.bb1034p-8f,  0x1.a83af8p-8f,  0x1.53dbbap-9f,
         -0x1.815cd2p-8f, -0x1.071ef0p-6f},  // c3
        {-0x1.953dbap-24f, 0x1.1aba80p-8f,   0x1.4ecc46p-8f,   0x1.9887a8p-9f,   0x1.d138bep-11f,  -0x1.93c1a0p-12f,
         -0x1.965e2ep-11f, -0x1.80a252p-11f, -0x1.25e41ep-11f, -0x1.93b2dap-12f, -0x1.07b394p-12f, -0x1.4ec60ep-13f,
         -0x1.a1fa7ep-14f, -0x1.01772ep-14f, -0x1.3d0598p-15f, -0x1.835e58p-16f, 0x1.d3042ap-17f,  0x1.7e33e0p-16f,
         0x1.3cb9eep-15f,  0x1.018632p-14f,  0x1.a3047cp-14f,  0x1.4eb62cp-13f,  0x1.02b9dep-12f,  0x1.94091cp-12f,
         0x1.24e92ap-11f,  0x1.805ef0p-11f,  0x1.9682bep-11f,  0x1.99984cp-12f,  -0x1.ce2d54p-11f, -0x1.998730p-9f,
         -0x1.4ecdb8p-8f,  -0x1.1b0826p-8f},  // c4
        {0x1.0df91cp-9f,   0x1.28427ap-10f, -0x1.ae29b2p-12f, -0x1.0410b2p-10f, -0x1.7b2c86p-11f, -0x1.3cdab0p-12f,
         -0x1.6c3e2cp-15f, 0x1.dcdf08p-15f, 0x1.3872e0p-14f,  0x1.05252cp-14f,  0x1.76dcb8p-15f,  0x1.f3afa8p-16f,
         0x1.404042p-16f,  0x1.916360p-17f, 0x1.f0c02ep-18f,  0x1.303f54p-18f,  0x1.729826p-19f,  0x1.2f2d70p-18f,
         0x1.eeda0ap-18f,  0x1.8ff3a4p-17f, 0x1.3f50f2p-16f,  0x1.f1d69ap-16f,  0x1.74823ap-15f,  0x1.04a85ap-14f,
         0x1.381de6p-14f,  0x1.dfea32p-15f, -0x1.608988p-15f, -0x1.38d88cp-12f, -0x1.7934e4p-11f, -0x1.040d0cp-10f,
         -0x1.b9698ep-12f, 0x1.24b914p-10f},  // c5
    })

// Q(r) ~ (e^r - 1 - r)/r^2, degree 3, for the fast sigmoid (relative error of e^r: 2^-23).
inline constexpr float fast_expq0 = 0x1.fffe70p-2f;
inline constexpr float fast_expq1 = 0x1.555632p-3f;
inline constexpr float fast_expq2 = 0x1.570520p-5f;
inline constexpr float fast_expq3 = 0x1.1138cep-7f;

/// sigmoid beyond the signed table (x outside (-8.25, 7.75), and NaN): g = 1/(1 + e^|x|) =
/// e - e^2 + e^3 with e = e^-|x| <= 4.4e-4 (the next term is below 2^-44 of g); sigmoid = g
/// for x < 0 and 1 - g for x > 0 (1 from x = 17.33 on). Taken only when some lane needs it.
template <class V>
FUSE_HD FUSE_FORCE_INLINE V sigmoid_beyond_table(V x) noexcept {
  using P = prims<V>;
  const V e = fuse::math::exp(V(0.0f) - P::abs(x));
  const V g = P::fma(e, P::fma(e, e, V(0.0f) - e), e);  // e + e (e^2 - e): one rounding that counts
  return P::sub_where(x >= V(0.0f), V(1.0f), g);
}

}  // namespace detail

/// sigmoid(x) = 1/(1 + e^-x): 1/2 at +-0, 1 from x = 17.33 on, correct subnormals below
/// x = -87.3 (accurate), 0 below -103.97, NaN propagates.
template <class Mode = fuse::accurate_math_t, class V>
FUSE_HD FUSE_FORCE_INLINE V sigmoid(V x) noexcept {
  using P = prims<V>;
  if constexpr (detail::is_fast<Mode>) {
    // y in [-88.72, 87.33] keeps n = round(-y/ln2) in [-126, 128]; 2^128 reads as +inf and
    // makes the result 0 (x < -88.38), 2^-126 makes it 1 (x > 87.3).
    const V y = P::min(V(87.33f), P::max(V(-88.72f), x));
    const V k = P::fma(y, V(-detail::log2_e), V(detail::round_shifter));
    const V n = k - V(detail::round_shifter);
    V rho = P::fma(n, V(detail::ln2_hi), y);  // -r: e^-y = 2^n e^r, r = -rho
#if !FUSE_MATH_FUSED_FMA
    rho = P::fma(n, V(detail::ln2_lo), rho);  // the short ln2_hi of FMA-less builds needs it
#endif
    const V rho2 = rho * rho;
    const V q = P::fma(rho2, P::fma(V(-detail::fast_expq3), rho, V(detail::fast_expq2)),
                       P::fma(V(-detail::fast_expq1), rho, V(detail::fast_expq0)));
    const V e_r = P::fma(rho2, q, V(1.0f) - rho);
    return V(1.0f) / P::fma(P::pow2_from_shifted(k), e_r, V(1.0f));
  } else {
#if FUSE_MATH_WIDE_TABLES
    // sigmoid(x) straight from the signed table: relative accuracy on both sides, no |x|, no
    // 1 - g. Lanes beyond the table (and NaN) read some row and are replaced below.
    const V k = x + V(detail::sigmoid_signed_shifter);
    const auto& t = FUSE_MATH_TABLE_REF(detail::sigmoid_signed_table);
    const V u = detail::table_offset(t, x, k);
    const V u2 = u * u;
    V s = P::fma(u2, detail::table_tail<5>(t, k, u, u2),
                 P::fma(detail::table_row(t, 2, k), u, detail::table_row(t, 1, k)));
    const auto tail = !(x > V(-detail::sigmoid_signed_start)) || !(x < V(detail::sigmoid_signed_end));
    if (FUSE_UNLIKELY(P::any(tail))) s = P::select(tail, detail::sigmoid_beyond_table(x), s);
    return s;
#else
    // 1/(1 + e^-x) with e^-x = s (1 + t), s = 2^n, and the denominator 1 + s + s t rounded
    // once: c = 1 + s, its rounding error (nonzero for n > 23 or n < -24) recovered exactly by
    // Fast2Sum, s t (exact: s is a power of two) added to it in one fma. Lanes below -87 (and
    // NaN) are replaced below; beyond 18 the result rounds to 1, which y's clamp keeps.
    const V y = P::min(V(88.0f), P::max(V(-18.0f), V(0.0f) - x));
    const auto red = detail::reduce_exp(y);
    const V t = detail::expm1_reduced(red.r);
    const V s = P::pow2_from_shifted(red.k);
    const V c = V(1.0f) + s;
    const V c_err = P::select(s > V(1.0f), V(1.0f) - (c - s), s - (c - V(1.0f)));
    V res = V(1.0f) / (c + P::fma(s, t, c_err));
    // The tail, where 1/(1 + e^-x) would leave the normal range, and NaN: e^x - e^2x, with
    // 0 - e rather than -e so that a NaN keeps one sign bit on both paths.
    const auto tail = !(x >= V(-detail::sigmoid_closed_form_end));
    if (P::any(tail)) {
      const V e = fuse::math::exp(x);
      res = P::select(tail, P::fma(e, V(0.0f) - e, e), res);
    }
    return res;
#endif
  }
}

}  // namespace fuse::math
