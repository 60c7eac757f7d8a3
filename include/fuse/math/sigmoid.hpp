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

// sigmoid.hpp: g(t_j + u) = 1/(1 + e^(t_j + u)) with t_j near j*1.125 (16 intervals); degree 7.
// c0 = g(t_j) and c1 = g'(t_j) are floats to within 2^-11 and 2^-5 of an ulp.
// The clamp: the first float where 1 - g rounds to 1.
inline constexpr float sigmoid_saturation = 0x1.154246p+4f;
// Where the table ends and the e^x - e^2x tail begins: the FMA-less table stops at 17.4.
inline constexpr float sigmoid_table_end = FUSE_MATH_FUSED_FMA ? sigmoid_saturation : 17.4f;
FUSE_MATH_TABLE(sigmoid_table, 9,
  {
   {0.0f, 0x1.1f9f50p+0f, 0x1.20953ap+1f, 0x1.b07042p+1f, 0x1.200c70p+2f, 0x1.683a2ep+2f, 0x1.b0406ap+2f, 0x1.f7b14ap+2f, 0x1.207280p+3f, 0x1.44c02cp+3f, 0x1.67ea16p+3f, 0x1.8c81cep+3f, 0x1.af948ep+3f, 0x1.d3fa48p+3f, 0x1.f34ca8p+3f, 0x1.0a6462p+4f},  // t
   {0x1.p-1f, 0x1.f67e4cp-3f, 0x1.84f204p-4f, 0x1.0e24dap-5f, 0x1.67bffcp-7f, 0x1.d55b66p-9f, 0x1.3160e8p-10f, 0x1.905c56p-12f, 0x1.fe5f26p-14f, 0x1.48496ap-15f, 0x1.b59daap-17f, 0x1.16ef40p-18f, 0x1.74df44p-20f, 0x1.de3d7cp-22f, 0x1.676826p-23f, 0x1.f8e4fap-25f},  // c0
   {-0x1.p-2f, -0x1.7b33dap-3f, -0x1.60031cp-4f, -0x1.053c4cp-5f, -0x1.63cce4p-7f, -0x1.d3ad22p-9f, -0x1.3105d6p-10f, -0x1.903534p-12f, -0x1.fe4f40p-14f, -0x1.484620p-15f, -0x1.b59c34p-17f, -0x1.16eef4p-18f, -0x1.74df22p-20f, -0x1.de3d6ep-22f, -0x1.676822p-23f, -0x1.f8e4f8p-25f},  // c1
   {-0x1.40212ep-31f, 0x1.823e44p-5f, 0x1.1d2900p-5f, 0x1.e80320p-7f, 0x1.5bfce2p-8f, 0x1.d053b0p-10f, 0x1.304fecp-11f, 0x1.8fe700p-13f, 0x1.fe2f80p-15f, 0x1.483f94p-16f, 0x1.b5994ep-18f, 0x1.16ee64p-19f, 0x1.74dee4p-21f, 0x1.de3d5cp-23f, 0x1.676814p-24f, 0x1.f8e4f2p-26f},  // c2
   {0x1.555452p-6f, 0x1.c0c21ap-9f, -0x1.c6aa54p-8f, -0x1.19ab8ap-8f, -0x1.bb7e78p-10f, -0x1.311bfap-11f, -0x1.93db90p-13f, -0x1.0a31b2p-14f, -0x1.53f544p-16f, -0x1.b59882p-18f, -0x1.23b78ap-19f, -0x1.73e6b4p-21f, -0x1.f1284ap-23f, -0x1.3ed354p-24f, -0x1.df34f0p-26f, -0x1.5098aap-27f},  // c3
   {0x1.e2e664p-19f, -0x1.3a9a2ep-8f, -0x1.7fa6eap-14f, 0x1.91c8a2p-11f, 0x1.938f72p-12f, 0x1.284b6ap-13f, 0x1.901048p-15f, 0x1.095c82p-16f, 0x1.539a82p-18f, 0x1.b56d50p-20f, 0x1.23ab7ep-21f, 0x1.73dbd2p-23f, 0x1.f12006p-25f, 0x1.3ecde6p-26f, 0x1.df39ecp-28f, 0x1.509bfap-29f},  // c4
   {-0x1.139d2ap-9f, 0x1.63f128p-11f, 0x1.03e0cep-11f, -0x1.70050ep-15f, -0x1.053da2p-14f, -0x1.be3fb8p-16f, -0x1.3a0e34p-17f, -0x1.a6096ep-19f, -0x1.0f273ap-20f, -0x1.5dba7cp-22f, -0x1.d2aeacp-24f, -0x1.298f92p-25f, -0x1.8dcfe6p-27f, -0x1.fe30c2p-29f, -0x1.7fc00ep-30f, -0x1.0d5ec8p-31f},  // c5
   {0x1.8e3256p-15f, 0x1.308e48p-12f, -0x1.274f6ep-13f, -0x1.8e22b8p-16f, 0x1.76c6a0p-18f, 0x1.058812p-18f, 0x1.964756p-20f, 0x1.18f26ap-21f, 0x1.6c1eb4p-23f, 0x1.d6f8b0p-25f, 0x1.3a2532p-26f, 0x1.9164a2p-28f, 0x1.0bc8d0p-29f, 0x1.57ac98p-31f, 0x1.fee498p-33f, 0x1.648fecp-34f},  // c6
   {0x1.56e622p-13f, -0x1.dc5156p-14f, 0x1.35b532p-17f, 0x1.35cfc8p-17f, 0x1.abc2c6p-22f, -0x1.ac0280p-22f, -0x1.a98672p-23f, -0x1.357468p-24f, -0x1.9df500p-26f, -0x1.0d5814p-27f, -0x1.5f7048p-29f, -0x1.c14c0ep-31f, -0x1.2932ecp-32f, -0x1.81a830p-34f, -0x1.f67d4cp-36f, -0x1.5980c6p-37f},  // c7
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
#if FUSE_MATH_FUSED_FMA
    const V a = P::abs_clamp(x, detail::sigmoid_table_end);
    const V k = P::fma(a, V(0x1.c71c72p-1f), V(detail::round_shifter));
    const auto& t = FUSE_MATH_TABLE_REF(detail::sigmoid_table);
    const V u = detail::table_offset(t, a, k);
    const V u2 = u * u;
    // (c0 + c1 u) + u^2 R: c0 + c1 u rounds once, then the sum.
    const V g = P::fma(u2, detail::table_tail<7>(t, k, u, u2), P::fma(P::lookup16(t[2], k), u, P::lookup16(t[1], k)));
#else
    // Without FMA every product rounds; carrying the slope in two floats keeps it under 2 ULP.
    const V a = P::abs_clamp(x, detail::sigmoid_table_end);
    const V g = detail::piecewise<7, true>(FUSE_MATH_TABLE_REF(detail::sigmoid_table_split), a,
                                           1.125f, 0x1.c71c72p-1f)
                    .sum();
#endif
    V s = P::sub_where(x >= V(0.0f), V(1.0f), g);
    // The tail, and NaN (which abs_clamp may have lost): e^x - e^2x, with 0 - e rather than -e
    // so that a NaN keeps one sign bit on both paths.
    const auto tail = !(x >= V(-detail::sigmoid_table_end));
    if (P::any(tail)) {
      const V e = fuse::math::exp(x);
      s = P::select(tail, P::fma(e, V(0.0f) - e, e), s);
    }
    return s;
  }
}

}  // namespace fuse::math
