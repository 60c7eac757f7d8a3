// The logistic function 1/(1 + e^-x) for float32 (Relay's sigmoid).
//
// accurate: g(a) = 1/(1 + e^a) = sigmoid(-a) for a = |x| <= 17.4 comes from a 16-interval
//           piecewise polynomial of degree 7 (fuse/math/table.hpp) with *relative* accuracy
//           (FMA-less builds carry its slope in two floats as well),
//           so sigmoid(x) = g for x < 0 (small results keep all their digits) and 1 - g for
//           x >= 0 (no cancellation: g <= 1/2). Below x = -17.4 sigmoid(x) = e^x (1 - e^x) to
//           float precision: that tail is computed only when some lane needs it, and gives the
//           correct subnormals down to x = -103.97. Never 0.5 + 0.5*tanh(x/2), which loses all
//           relative accuracy for negative x.
// fast:     1/(1 + e^-x) with a degree-5 e^r and a one-constant reduction: one division, no
//           branch. Results below 4.2e-39 (x < -88.38) flush to 0.
#pragma once

#include <fuse/math/exp.hpp>
#include <fuse/math/mode.hpp>
#include <fuse/math/prims.hpp>
#include <fuse/math/table.hpp>

namespace fuse::math {
namespace detail {

// sigmoid.hpp: 1/(1 + e^(j*1.125 + u)), |u| <= 0.5625; worst interval: relative error 2^-25.1
FUSE_MATH_TABLE(sigmoid_table, 9,
  {
   {0x1.p-1f, 0x1.f5ef22p-3f, 0x1.868d2ap-4f, 0x1.0f0a54p-5f, 0x1.680528p-7f, 0x1.d7054cp-9f, 0x1.329482p-10f, 0x1.8e7150p-12f, 0x1.02c6f6p-13f, 0x1.501420p-15f, 0x1.b47262p-17f, 0x1.1b63bap-18f, 0x1.700376p-20f, 0x1.dde80cp-22f, 0x1.364e9ep-23f, 0x1.92f7c8p-25f},  // c0_hi
   {-0x1.382f76p-30f, -0x1.0adf54p-28f, -0x1.9f214cp-29f, -0x1.fde744p-31f, -0x1.3660b4p-33f, -0x1.691596p-34f, -0x1.28705ap-35f, 0x1.87b5d8p-37f, -0x1.cf01dap-38f, -0x1.7e1ac8p-43f, -0x1.074cbcp-44f, -0x1.08393ap-45f, 0x1.5a0b80p-46f, -0x1.5536d8p-50f, 0x1.765138p-49f, 0x1.22f526p-50f},  // c0_lo
   {-0x1.p-2f, -0x1.7aeae6p-3f, -0x1.615004p-4f, -0x1.06129cp-5f, -0x1.64108ap-7f, -0x1.d553fap-9f, -0x1.3238b8p-10f, -0x1.8e4a8ep-12f, -0x1.02bec8p-13f, -0x1.5010aep-15f, -0x1.b470eep-17f, -0x1.1b636cp-18f, -0x1.700356p-20f, -0x1.dde7fep-22f, -0x1.364e9cp-23f, -0x1.92f7c8p-25f},  // c1
   {0x1.0c22f8p-23f, 0x1.825decp-5f, 0x1.1defc8p-5f, 0x1.e97612p-7f, 0x1.5c3d86p-8f, 0x1.d1f474p-10f, 0x1.318160p-11f, 0x1.8dfd1ap-13f, 0x1.02ae76p-14f, 0x1.5009d0p-16f, 0x1.b46e10p-18f, 0x1.1b62d6p-19f, 0x1.70031cp-21f, 0x1.dde7eep-23f, 0x1.364e9cp-24f, 0x1.92f7cep-26f},  // c2
   {0x1.554e40p-6f, 0x1.bd1056p-9f, -0x1.c68c80p-8f, -0x1.1a5bfcp-8f, -0x1.bbcd04p-10f, -0x1.3229c2p-11f, -0x1.956ee6p-13f, -0x1.08ec04p-14f, -0x1.58bcdap-16f, -0x1.bffa7ap-18f, -0x1.22f004p-19f, -0x1.79d748p-21f, -0x1.eaaddep-23f, -0x1.3e9a4ep-24f, -0x1.9dbde0p-26f, -0x1.0ca50cp-27f},  // c3
   {0x1.75a9a0p-17f, -0x1.3a475cp-8f, -0x1.afac32p-14f, 0x1.92329ep-11f, 0x1.93d0dap-12f, 0x1.294930p-13f, 0x1.919c18p-15f, 0x1.08195ep-16f, 0x1.585fb4p-18f, 0x1.bfcdbcp-20f, 0x1.22e30cp-21f, 0x1.79cd38p-23f, 0x1.eaa3aap-25f, 0x1.3e9448p-26f, 0x1.9db64ep-28f, 0x1.0ca030p-29f},  // c4
   {-0x1.1633bep-9f, 0x1.64e4e6p-11f, 0x1.05e544p-11f, -0x1.6ba57ap-15f, -0x1.0554d0p-14f, -0x1.bfa6b0p-16f, -0x1.3b4b0ap-17f, -0x1.a415e0p-19f, -0x1.130664p-20f, -0x1.661b22p-22f, -0x1.d1717cp-24f, -0x1.2e4cb8p-25f, -0x1.889aeep-27f, -0x1.fddb2ap-29f, -0x1.4b0e26p-30f, -0x1.ade9bap-32f},  // c5
   {0x1.31c23ap-14f, 0x1.2f8c02p-12f, -0x1.277436p-13f, -0x1.934142p-16f, 0x1.75aee6p-18f, 0x1.063cdap-18f, 0x1.97b0c6p-20f, 0x1.176f18p-21f, 0x1.7128f0p-23f, 0x1.e20e12p-25f, 0x1.398fecp-26f, 0x1.976e8ap-28f, 0x1.0898f0p-29f, 0x1.57a13ep-31f, 0x1.be4000p-33f, 0x1.21c114p-34f},  // c6
   {0x1.3c051ep-13f, -0x1.d74f44p-14f, 0x1.344786p-17f, 0x1.34fcb2p-17f, 0x1.a9a370p-22f, -0x1.ab7c56p-22f, -0x1.a4f9eap-23f, -0x1.316026p-24f, -0x1.9a5298p-26f, -0x1.0d57a4p-27f, -0x1.5f00d0p-29f, -0x1.c8560ep-31f, -0x1.286934p-32f, -0x1.80f7eap-34f, -0x1.f3f17ap-36f, -0x1.449ea8p-37f},  // c7
  })

// sigmoid.hpp, FMA-less builds: the same with c1 in two floats; worst interval: relative error 2^-26.6
FUSE_MATH_TABLE(sigmoid_table_split, 10,
  {
   {0x1.p-1f, 0x1.f5ef22p-3f, 0x1.868d28p-4f, 0x1.0f0a54p-5f, 0x1.680528p-7f, 0x1.d7054cp-9f, 0x1.329482p-10f, 0x1.8e7150p-12f, 0x1.02c6f6p-13f, 0x1.501420p-15f, 0x1.b47262p-17f, 0x1.1b63bap-18f, 0x1.700376p-20f, 0x1.dde80cp-22f, 0x1.364e9ep-23f, 0x1.92f7c8p-25f},  // c0_hi
   {0x1.fa132cp-37f, -0x1.4eb078p-29f, 0x1.eae0dep-29f, -0x1.2ece32p-30f, -0x1.3b552ap-33f, -0x1.dd5fa8p-34f, -0x1.52b518p-35f, 0x1.f1ba24p-37f, -0x1.3c3a04p-38f, -0x1.d1b38cp-42f, -0x1.23d410p-45f, -0x1.1fc6c6p-45f, 0x1.95d8cap-47f, 0x1.36e282p-49f, 0x1.0c60aap-50f, 0x1.a81684p-51f},  // c0_lo
   {-0x1.p-2f, -0x1.7aeae6p-3f, -0x1.615004p-4f, -0x1.06129cp-5f, -0x1.64108ap-7f, -0x1.d553fap-9f, -0x1.3238b8p-10f, -0x1.8e4a8ep-12f, -0x1.02bec8p-13f, -0x1.5010aep-15f, -0x1.b470eep-17f, -0x1.1b636cp-18f, -0x1.700356p-20f, -0x1.dde7fep-22f, -0x1.364e9cp-23f, -0x1.92f7c8p-25f},  // c1
   {0x1.0c22f8p-23f, 0x1.825decp-5f, 0x1.1defc8p-5f, 0x1.e97612p-7f, 0x1.5c3d86p-8f, 0x1.d1f474p-10f, 0x1.318160p-11f, 0x1.8dfd1ap-13f, 0x1.02ae76p-14f, 0x1.5009d0p-16f, 0x1.b46e10p-18f, 0x1.1b62d6p-19f, 0x1.70031cp-21f, 0x1.dde7eep-23f, 0x1.364e9cp-24f, 0x1.92f7cep-26f},  // c2
   {0x1.554e40p-6f, 0x1.bd1056p-9f, -0x1.c68c80p-8f, -0x1.1a5bfcp-8f, -0x1.bbcd04p-10f, -0x1.3229c2p-11f, -0x1.956ee6p-13f, -0x1.08ec04p-14f, -0x1.58bcdap-16f, -0x1.bffa7ap-18f, -0x1.22f004p-19f, -0x1.79d748p-21f, -0x1.eaaddep-23f, -0x1.3e9a4ep-24f, -0x1.9dbde0p-26f, -0x1.0ca50cp-27f},  // c3
   {0x1.75a9a0p-17f, -0x1.3a475cp-8f, -0x1.afac32p-14f, 0x1.92329ep-11f, 0x1.93d0dap-12f, 0x1.294930p-13f, 0x1.919c18p-15f, 0x1.08195ep-16f, 0x1.585fb4p-18f, 0x1.bfcdbcp-20f, 0x1.22e30cp-21f, 0x1.79cd38p-23f, 0x1.eaa3aap-25f, 0x1.3e9448p-26f, 0x1.9db64ep-28f, 0x1.0ca030p-29f},  // c4
   {-0x1.1633bep-9f, 0x1.64e4e6p-11f, 0x1.05e544p-11f, -0x1.6ba57ap-15f, -0x1.0554d0p-14f, -0x1.bfa6b0p-16f, -0x1.3b4b0ap-17f, -0x1.a415e0p-19f, -0x1.130664p-20f, -0x1.661b22p-22f, -0x1.d1717cp-24f, -0x1.2e4cb8p-25f, -0x1.889aeep-27f, -0x1.fddb2ap-29f, -0x1.4b0e26p-30f, -0x1.ade9bap-32f},  // c5
   {0x1.31c23ap-14f, 0x1.2f8c02p-12f, -0x1.277436p-13f, -0x1.934142p-16f, 0x1.75aee6p-18f, 0x1.063cdap-18f, 0x1.97b0c6p-20f, 0x1.176f18p-21f, 0x1.7128f0p-23f, 0x1.e20e12p-25f, 0x1.398fecp-26f, 0x1.976e8ap-28f, 0x1.0898f0p-29f, 0x1.57a13ep-31f, 0x1.be4000p-33f, 0x1.21c114p-34f},  // c6
   {0x1.3c051ep-13f, -0x1.d74f44p-14f, 0x1.344786p-17f, 0x1.34fcb2p-17f, 0x1.a9a370p-22f, -0x1.ab7c56p-22f, -0x1.a4f9eap-23f, -0x1.316026p-24f, -0x1.9a5298p-26f, -0x1.0d57a4p-27f, -0x1.5f00d0p-29f, -0x1.c8560ep-31f, -0x1.286934p-32f, -0x1.80f7eap-34f, -0x1.f3f17ap-36f, -0x1.449ea8p-37f},  // c7
   {-0x1.df0e72p-29f, -0x1.fff85ep-28f, 0x1.c60030p-29f, 0x1.bda50ep-33f, -0x1.19e2fap-33f, 0x1.f42166p-34f, 0x1.32698ep-36f, -0x1.d270d8p-37f, -0x1.f0a61ap-38f, 0x1.e91bc8p-41f, -0x1.6d098cp-44f, 0x1.f8aa38p-45f, 0x1.0ab618p-45f, -0x1.698a2cp-47f, 0x1.5a03a8p-48f, 0x1.ef6f0ap-51f},  // c1_lo
  })

// Q(r) ~ (e^r - 1 - r)/r^2, degree 3, for the fast sigmoid (relative error of e^r: 2^-23).
inline constexpr float fast_expq0 = 0x1.fffe70p-2f;
inline constexpr float fast_expq1 = 0x1.555632p-3f;
inline constexpr float fast_expq2 = 0x1.570520p-5f;
inline constexpr float fast_expq3 = 0x1.1138cep-7f;

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
    const V a = P::abs_clamp(x, 17.4f);
#if FUSE_MATH_FUSED_FMA
    const V g = detail::piecewise<7>(FUSE_MATH_TABLE_REF(detail::sigmoid_table), a, 1.125f,
                                     0x1.c71c72p-1f)
                    .sum();
#else
    // Without FMA every product rounds; carrying the slope in two floats keeps it under 2 ULP.
    const V g = detail::piecewise<7, true>(FUSE_MATH_TABLE_REF(detail::sigmoid_table_split), a,
                                           1.125f, 0x1.c71c72p-1f)
                    .sum();
#endif
    V s = P::select(x < V(0.0f), g, V(1.0f) - g);
    // The tail, and NaN (which abs_clamp may have lost): e^x - e^2x, with 0 - e rather than -e
    // so that a NaN keeps one sign bit on both paths.
    const auto tail = !(x >= V(-17.4f));
    if (P::any(tail)) {
      const V e = fuse::math::exp(x);
      s = P::select(tail, P::fma(e, V(0.0f) - e, e), s);
    }
    return s;
  }
}

}  // namespace fuse::math
