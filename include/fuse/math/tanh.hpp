// tanh for float32.
//
// accurate: a 16-interval piecewise polynomial of degree 7 on |x| <= 9.1 (fuse/math/table.hpp),
//           odd by construction (it works on |x| and puts the sign back), so tanh(-0) = -0,
//           and exactly +-1 from |x| = 9.0109 on, where tanh rounds to 1.
// fast:     x P(x^2) / Q(x^2) with degree-4 P and Q, all coefficients positive (a minimax fit
//           of the relative error on [0, 9.1], tools/fit_math.py), one division, capped at 1.
#pragma once

#include <fuse/math/mode.hpp>
#include <fuse/math/prims.hpp>
#include <fuse/math/table.hpp>

namespace fuse::math {
namespace detail {

// tanh.hpp: tanh(j*0.625 + u), |u| <= 0.3125; worst interval: relative error 2^-27.5
FUSE_MATH_TABLE(tanh_table, 9,
  {
   {0.0f, 0x1.1bf47ep-1f, 0x1.b2523cp-1f, 0x1.e8789ep-1f, 0x1.f92582p-1f, 0x1.fe06ecp-1f, 0x1.ff6f18p-1f, 0x1.ffd678p-1f, 0x1.fff41ap-1f, 0x1.fffc98p-1f, 0x1.ffff06p-1f, 0x1.ffffb8p-1f, 0x1.ffffecp-1f, 0x1.fffffap-1f, 0x1.fffffep-1f, 0x1.p+0f},  // c0_hi
   {0.0f, 0x1.808d42p-26f, -0x1.1c0de0p-27f, 0x1.96bc44p-26f, 0x1.83fe8ap-27f, -0x1.f28990p-26f, -0x1.62961ap-27f, -0x1.e6139cp-27f, -0x1.32e1f8p-26f, -0x1.c98746p-26f, -0x1.72cda6p-29f, 0x1.6404a6p-27f, -0x1.0eb86ep-26f, 0x1.e5052ep-29f, 0x1.427460p-27f, -0x1.ee6086p-27f},  // c0_lo
   {0x1.p+0f, 0x1.6284c4p-1f, 0x1.1f2512p-2f, 0x1.6fcfa8p-4f, 0x1.b3afe2p-6f, 0x1.f81bd8p-8f, 0x1.21a7aep-9f, 0x1.4c3652p-11f, 0x1.7ccec2p-13f, 0x1.b470eep-15f, 0x1.f42de0p-17f, 0x1.1e9be8p-18f, 0x1.4875bcp-20f, 0x1.786beap-22f, 0x1.af62e8p-24f, 0x1.ee6086p-26f},  // c1
   {-0x1.0dd066p-22f, -0x1.893b92p-2f, -0x1.e72936p-3f, -0x1.5ee86ap-4f, -0x1.addadcp-6f, -0x1.f62a9ap-8f, -0x1.2155c0p-9f, -0x1.4c1b6ep-11f, -0x1.7cc5fap-13f, -0x1.b46e1cp-15f, -0x1.f42d04p-17f, -0x1.1e9bcep-18f, -0x1.4875c0p-20f, -0x1.786bf8p-22f, -0x1.af62fcp-24f, -0x1.ee609ep-26f},  // c2
   {-0x1.555210p-2f, -0x1.2434b2p-6f, 0x1.bba55ep-4f, 0x1.a85b40p-5f, 0x1.16df2ep-6f, 0x1.4c31e4p-8f, 0x1.80ed38p-10f, 0x1.ba8764p-12f, 0x1.fb9b06p-14f, 0x1.22f030p-15f, 0x1.4d7210p-17f, 0x1.7e24a6p-19f, 0x1.b5f230p-21f, 0x1.f5e53cp-23f, 0x1.1f9750p-24f, 0x1.4995bcp-26f},  // c3
   {-0x1.e111f6p-13f, 0x1.1a7fd0p-3f, -0x1.9c1516p-7f, -0x1.55f5e8p-6f, -0x1.07b96ep-7f, -0x1.47082ep-9f, -0x1.7f2f1ep-11f, -0x1.b9eb30p-13f, -0x1.fb5cfcp-15f, -0x1.22dfdep-16f, -0x1.4d65acp-18f, -0x1.7e1884p-20f, -0x1.b5e4f8p-22f, -0x1.f5d64ep-24f, -0x1.1f8ecap-25f, -0x1.498bfcp-27f},  // c4
   {0x1.15198ep-3f, -0x1.c2b50cp-5f, -0x1.3b19f8p-6f, 0x1.2ff52ap-8f, 0x1.7698ccp-9f, 0x1.faede2p-11f, 0x1.2fd4e6p-12f, 0x1.60a432p-14f, 0x1.959944p-16f, 0x1.d14e30p-18f, 0x1.0ab41cp-19f, 0x1.31ac60p-21f, 0x1.5e50e8p-23f, 0x1.9178c2p-25f, 0x1.cc185ep-27f, 0x1.07a39cp-28f},  // c5
   {-0x1.0f0d16p-7f, -0x1.94888ap-6f, 0x1.eb8836p-7f, 0x1.8c1fd0p-11f, -0x1.751db4p-11f, -0x1.3f0232p-12f, -0x1.92e076p-14f, -0x1.da373ap-16f, -0x1.11cc02p-17f, -0x1.3a74d0p-19f, -0x1.6898a6p-21f, -0x1.9d52d6p-23f, -0x1.d9b36ap-25f, -0x1.0f7068p-26f, -0x1.371360p-28f, -0x1.647fc8p-30f},  // c6
   {-0x1.421932p-5f, 0x1.caa83ap-6f, -0x1.15afe4p-8f, -0x1.440f40p-10f, 0x1.2c3be4p-14f, 0x1.395c0ap-14f, 0x1.bae8b6p-16f, 0x1.0c0046p-17f, 0x1.37d7eap-19f, 0x1.66edc6p-21f, 0x1.9bd944p-23f, 0x1.d82760p-25f, 0x1.0e937ep-26f, 0x1.36182ep-28f, 0x1.63608ep-30f, 0x1.974520p-32f},  // c7
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
    const V a = P::abs_clamp(x, 9.1f);
    const auto p = detail::piecewise<7>(FUSE_MATH_TABLE_REF(detail::tanh_table), a, 0.625f, 1.6f);
    return P::or_sign_nan(p.sum(), x);
  }
}

}  // namespace fuse::math
