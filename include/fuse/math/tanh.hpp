// tanh for float32.
//
// accurate: a 16-interval piecewise polynomial of degree 7 on |x| <= 9.1 (fuse/math/table.hpp),
//           odd by construction (it works on |x| and puts the sign back), so tanh(-0) = -0,
//           and exactly +-1 from |x| = 9.0109 on, where tanh rounds to 1. AVX-512 and CUDA
//           builds read all 7 rows; AVX2 and SSE builds, where a lookup is dearer (two permutes
//           and a blend, or a gather), read 2 (the reference point t and T = tanh(t)) and apply
//           the addition formula with a Taylor tanh(u): 1.399 ULP over all floats, 1.5x faster
//           than the 7-row form on a Zen 3 core.
// fast:     x P(x^2) / Q(x^2) with degree-4 P and Q, all coefficients positive (a minimax fit
//           of the relative error on [0, 9.1], tools/fit_math.py), one division, capped at 1.
#pragma once

#include <fuse/math/mode.hpp>
#include <fuse/math/prims.hpp>
#include <fuse/math/table.hpp>

namespace fuse::math {
namespace detail {

// tanh.hpp: tanh(t_j + u) on the 16 intervals of |x| + 5/8 cut at its exponent and first two
// mantissa bits (widths 1/8 near 0 up to 2 near 9); degree 5.
// The clamp: the first float where tanh rounds to 1 (the last interval is fitted to
// tanh + 2^-30 so that it rounds to exactly 1 there).
inline constexpr float tanh_saturation = 0x1.205968p+3f;
inline constexpr float tanh_grid_offset = 0.625f;
FUSE_MATH_TABLE(
    tanh_table, 7,
    {
        {0x1.9fff10p+0f, 0x1.0ffa5ep+1f, 0x1.4fff60p+1f, 0x1.900638p+1f, 0x1.effefap+1f, 0x1.3803e6p+2f, 0x1.77f758p+2f,
         0x1.b7d874p+2f, 0x1.0399bcp+3f, 0.0f, 0x1.800092p-3f, 0x1.3ffd5cp-2f, 0x1.ffffd8p-2f, 0x1.7ffcb6p-1f,
         0x1.000d0ep+0f, 0x1.40015ep+0f},  // t
        {0x1.d9c6b6p-1f, 0x1.f1980ep-1f, 0x1.faa786p-1f, 0x1.fe071cp-1f, 0x1.ff8f20p-1f, 0x1.fff0bap-1f, 0x1.fffdeep-1f,
         0x1.ffffb8p-1f, 0x1.fffffap-1f, 0.0f, 0x1.7b9086p-3f, 0x1.35f724p-2f, 0x1.d9351ep-2f, 0x1.453048p-1f,
         0x1.85faa2p-1f, 0x1.b25300p-1f},  // c0
        {0x1.266022p-3f, 0x1.c681f6p-5f, 0x1.54554ep-6f, 0x1.f7eb1cp-8f, 0x1.c35172p-10f, 0x1.e8bc6ep-13f,
         0x1.090148p-15f, 0x1.2000d8p-18f, 0x1.819ca4p-22f, 0x1.p+0f, 0x1.ee69d6p-1f, 0x1.d1162ep-1f, 0x1.92a958p-1f,
         0x1.317630p-1f, 0x1.adec5ap-2f, 0x1.1f2278p-2f},  // c1
        {-0x1.1069d0p-3f, -0x1.b9b640p-5f, -0x1.50c326p-6f, -0x1.f5f19cp-8f, -0x1.c260d4p-10f, -0x1.e810c6p-13f,
         -0x1.08aa04p-15f, -0x1.1f9bdep-18f, -0x1.7ebbaap-22f, 0x1.ddf550p-22f, -0x1.6e86b4p-3f, -0x1.199042p-2f,
         -0x1.7425d4p-2f, -0x1.8404a0p-2f, -0x1.47770cp-2f, -0x1.e7265ep-3f},  // c2
        {0x1.33ee96p-4f, 0x1.15cc7ep-5f, 0x1.b79facp-7f, 0x1.4c0c70p-8f, 0x1.2bb8b2p-10f, 0x1.4544d6p-13f,
         0x1.60ddf2p-16f, 0x1.7f9088p-19f, 0x1.040228p-22f, -0x1.555c30p-2f, -0x1.27a58ap-2f, -0x1.c1a926p-3f,
         -0x1.81f004p-4f, 0x1.565fa4p-5f, 0x1.a875a0p-4f, 0x1.bba514p-4f},  // c3
        {-0x1.973c0ap-6f, -0x1.ec7df0p-7f, -0x1.a8b0e4p-8f, -0x1.4a616ap-9f, -0x1.38e724p-11f, -0x1.54ec16p-14f,
         -0x1.720fd2p-17f, -0x1.929904p-20f, -0x1.203586p-23f, 0x1.0d5420p-11f, 0x1.ce33d0p-4f, 0x1.4304c0p-3f,
         0x1.4f0528p-3f, 0x1.9884c8p-4f, 0x1.cbfb1cp-6f, -0x1.91bb42p-7f},  // c4
        {0x1.206ba8p-10f, 0x1.23c94ep-8f, 0x1.354b3ep-9f, 0x1.ffb104p-11f, 0x1.f073a4p-13f, 0x1.1070c4p-15f,
         0x1.2786b4p-18f, 0x1.402f24p-21f, 0x1.8c5818p-25f, 0x1.09ea12p-3f, 0x1.8dfcd8p-4f, 0x1.78909ap-5f,
         -0x1.a408bep-6f, -0x1.03a30ap-4f, -0x1.7b71d2p-5f, -0x1.3d75fep-6f},  // c5
    })

}  // namespace detail

/// tanh(x): odd, +-1 beyond |x| = 9.0109, NaN propagates.
template <class Mode = fuse::accurate_math_t, class V>
FUSE_HD FUSE_FORCE_INLINE V tanh(V x) noexcept {
  using P = prims<V>;
  if constexpr (detail::is_fast<Mode>) {
    // Odd as written (num and den are even in x), so no sign handling; the clamps keep NaN (x
    // is their second operand). The quotient overshoots 1 by an ulp around 8.9, where the caps
    // turn it into exactly +-1.
    const V xc = P::min(V(8.9f), P::max(V(-8.9f), x));
    const V z = xc * xc;
    const V num = horner(z, 0x1.p+0f, 0x1.11e8b8p-3f, 0x1.c9271ep-9f, 0x1.579d2ap-16f, 0x1.c4c440p-27f);
    const V den = horner(z, 0x1.p+0f, 0x1.de49a4p-2f, 0x1.a77b9ep-6f, 0x1.573040p-12f, 0x1.9d9a08p-21f);
    return P::max(V(-1.0f), P::min(V(1.0f), (xc * num) / den));
  } else {
    // Interval j of a = |x| is picked by the exponent and first two mantissa bits of a + 5/8.
    const V a = P::abs_clamp(x, detail::tanh_saturation);
    const V k = P::shift_bits_right(a + V(detail::tanh_grid_offset), 21);
    const auto& t = FUSE_MATH_TABLE_REF(detail::tanh_table);
    const V u = detail::table_offset(t, a, k);
#if FUSE_MATH_WIDE_TABLES
    const auto c = [&](int i) { return P::lookup16(t[i + 1], k); };
    // c0 + u (c1 + u R): one rounding of the whole result after an exact c0.
    const V q = P::fma(u, P::fma(u, P::fma(u, P::fma(c(5), u, c(4)), c(3)), c(2)), c(1));
    return P::or_sign_nan(P::fma(u, q, P::lookup16(t[1], k)), x);
#else
    // The addition formula tanh(t + u) = T + (1 - T^2) tanh(u) / (1 + T tanh(u)), T = tanh(t)
    // = c0 of the reference point (a float to within 2^-11 ulp), reads 2 rows instead of 7
    // (each 2 permutes and a blend on AVX2). tanh(u) is its Taylor polynomial to degree 9
    // (|u| is small where T's slope matters).
    const V T = P::lookup16(t[1], k);
    const V z = u * u;
    const V th = P::fma(u * z, horner(z, -0x1.555556p-2f, 0x1.111112p-3f, -0x1.ba1ba2p-5f, 0x1.664f48p-6f), u);
#if FUSE_MATH_FUSED_FMA
    const V slope = P::fma(V(0.0f) - T, T, V(1.0f));  // 1 - T^2 rounded once
#else
    // Without an fma, (1 - T)(1 + T) keeps 1 - T^2's relative accuracy near T = 1 (1 - T is
    // exact from T = 1/2 on); below, 1 - T*T has no cancellation to fear.
    const V slope = P::select(T < V(0.5f), P::fma(V(0.0f) - T, T, V(1.0f)), (V(1.0f) - T) * (V(1.0f) + T));
#endif
    return P::or_sign_nan(T + (slope * th) / P::fma(T, th, V(1.0f)), x);
#endif
  }
}

}  // namespace fuse::math
