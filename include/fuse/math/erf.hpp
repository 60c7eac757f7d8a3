// erf and erfc for float32 (erfc exists for GELU: 0.5 x erfc(-x/sqrt2) keeps its accuracy for
// negative x, where 0.5 x (1 + erf(x/sqrt2)) cancels).
//
// erf:  a 16-interval piecewise polynomial of degree 6 on |x| <= 3.93 (fuse/math/table.hpp);
//       interval 0 carries its slope 2/sqrt(pi) in two floats. +-1 from |x| = 3.9192 on.
//       AVX2 and SSE builds, where a 16-entry lookup costs two permutes and a blend (or a
//       gather), read an 8-interval table of degree 9 instead (one permute per row): 1.0007
//       ULP over all floats, 1.65x faster than the 16-interval table on a Zen 3 core.
// erfc: erfc(a) = e^(-a^2) erfcx(a) for a = |x| <= 10.1, erfcx(a) = e^(a^2) erfc(a) from a
//       16-interval degree-8 table (smooth, between 0.055 and 1), e^(-a^2) from the exp
//       reduction with a^2 split exactly into two floats; the product keeps e^(-a^2) as 1 + t
//       and the table value as two floats, so only its last addition and the scaling (with
//       correctly rounded subnormals down to x = 10.05) round at full size.
//       erfc(x) = 2 - erfc(-x) for x < 0.
// Both modes are the same functions: an erf of Eigen's accuracy class (a degree-5 table) was
// measured at Eigen's speed, not below it, so it would not earn a second table (docs/math.md).
#pragma once

#include <fuse/math/exp.hpp>
#include <fuse/math/mode.hpp>
#include <fuse/math/prims.hpp>
#include <fuse/math/table.hpp>

namespace fuse::math {
namespace detail {

// erf.hpp: erf(j*65/256 + u), |u| <= 65/512; worst interval: relative error 2^-30.1
FUSE_MATH_TABLE(
    erf_table, 9,
    {
        {0.0f, 0x1.1f31b2p-2f, 0x1.0dff50p-1f, 0x1.6fef76p-1f, 0x1.b2bb68p-1f, 0x1.dad53ep-1f, 0x1.f00614p-1f,
         0x1.f9e15cp-1f, 0x1.fdea6ep-1f, 0x1.ff5eb6p-1f, 0x1.ffd4cap-1f, 0x1.fff5c0p-1f, 0x1.fffddap-1f, 0x1.ffff9ap-1f,
         0x1.fffff0p-1f, 0x1.fffffep-1f},  // c0_hi
        {0.0f, -0x1.edbcc6p-30f, -0x1.b70352p-26f, -0x1.2caffap-27f, -0x1.84a7b4p-27f, -0x1.a2105ap-27f,
         -0x1.580930p-26f, 0x1.5e2bccp-26f, 0x1.8acac4p-31f, -0x1.e6c040p-26f, -0x1.65ac12p-26f, 0x1.58e4d0p-29f,
         -0x1.c5bd7cp-27f, -0x1.96c476p-30f, -0x1.6b5466p-26f, -0x1.a91b96p-27f},  // c0_lo
        {0x1.20dd76p+0f, 0x1.0ed47ap+0f, 0x1.be6872p-1f, 0x1.436686p-1f, 0x1.9be438p-2f, 0x1.cd22a8p-3f, 0x1.c5d048p-4f,
         0x1.8894ecp-5f, 0x1.2a875ap-6f, 0x1.8f182cp-8f, 0x1.d4fedcp-10f, 0x1.e477e2p-12f, 0x1.b7e972p-14f,
         0x1.5f21aap-16f, 0x1.ecba88p-19f, 0x1.2fe478p-21f},  // c1
        {-0x1.14586cp-25f, -0x1.130fc6p-2f, -0x1.c56214p-2f, -0x1.ecae30p-2f, -0x1.a253cap-2f, -0x1.24b680p-2f,
         -0x1.59ada8p-3f, -0x1.5ce058p-4f, -0x1.2f3178p-5f, -0x1.c7ff1cp-7f, -0x1.29b3c2p-8f, -0x1.5246acp-10f,
         -0x1.4f16bep-12f, -0x1.21c06cp-14f, -0x1.b5df84p-17f, -0x1.21598ap-19f},  // c2
        {-0x1.812688p-2f, -0x1.3a8b0cp-2f, -0x1.203c3ep-3f, 0x1.14ad46p-5f, 0x1.23e23cp-3f, 0x1.55c3b2p-3f,
         0x1.137244p-3f, 0x1.5bf514p-4f, 0x1.68d334p-5f, 0x1.3a15b6p-6f, 0x1.d0d4bap-8f, 0x1.26ba1ap-9f,
         0x1.41f426p-11f, 0x1.301aa8p-13f, 0x1.f220ecp-16f, 0x1.627dd2p-18f},  // c3
        {-0x1.8f1398p-14f, 0x1.07348ep-3f, 0x1.776f52p-3f, 0x1.2e1c8cp-3f, 0x1.055528p-4f, -0x1.5cb4e6p-7f,
         -0x1.7a5534p-5f, -0x1.81d978p-5f, -0x1.0965f8p-5f, -0x1.1adf12p-6f, -0x1.eae660p-8f, -0x1.6338bep-9f,
         -0x1.b2a994p-11f, -0x1.c5a5a0p-13f, -0x1.963d5ap-15f, -0x1.39788ap-17f},  // c4
        {0x1.d41c30p-4f, 0x1.422c6ep-4f, 0x1.51c82cp-8f, -0x1.bee6ecp-5f, -0x1.179cc6p-4f, -0x1.6d32c0p-5f,
         -0x1.94ad86p-7f, 0x1.00ba50p-7f, 0x1.aac5d8p-7f, 0x1.4847bcp-7f, 0x1.683ccep-8f, 0x1.36b264p-9f,
         0x1.b640dcp-11f, 0x1.020a6ap-12f, 0x1.00db12p-14f, 0x1.b3cb30p-17f},  // c5
        {-0x1.4cda40p-7f, -0x1.486c8cp-5f, -0x1.9518d8p-5f, -0x1.a069f2p-6f, 0x1.891dc4p-8f, 0x1.60c25ap-6f,
         0x1.2e34b0p-6f, 0x1.016e18p-7f, -0x1.7803b4p-13f, -0x1.89bd52p-9f, -0x1.593486p-9f, -0x1.81e68cp-10f,
         -0x1.467626p-11f, -0x1.bb119ep-13f, -0x1.f00a76p-15f, -0x1.d184b2p-17f},  // c6
        {-0x1.f70586p-25f, 0x1.b9823ap-26f, 0x1.4bc8d2p-26f, -0x1.49f1eep-27f, 0x1.2d4650p-29f, -0x1.53ed12p-28f,
         0x1.900e8ap-29f, -0x1.dff016p-32f, -0x1.fc37b8p-33f, -0x1.3c5208p-33f, -0x1.b6d1a6p-37f, 0x1.cf159ep-37f,
         -0x1.c5cb30p-39f, 0x1.68b314p-41f, -0x1.2ea3eep-45f, -0x1.a5e5ecp-47f},  // c1_lo
    })

// erf.hpp, AVX2 and SSE builds: erf(j*17/32 + u), |u| <= 17/64; worst interval: relative error 2^-31.4
FUSE_MATH_TABLE_N(erf8_table, 12, 8,
                  {
                      {0.0f, 0x1.1855a6p-1f, 0x1.bbef10p-1f, 0x1.f39bc2p-1f, 0x1.fea422p-1f, 0x1.ffe96ap-1f,
                       0x1.ffff24p-1f, 0x1.fffffcp-1f},  // c0_hi
                      {0.0f, -0x1.0c4980p-31f, -0x1.0e8bbap-27f, 0x1.089b54p-27f, -0x1.c976d8p-27f, 0x1.e28262p-27f,
                       0x1.b50d1ep-28f, -0x1.b6e786p-26f},  // c0_lo
                      {0x1.20dd76p+0f, 0x1.b3aafcp-1f, 0x1.75a91ap-2f, 0x1.6c7e64p-4f, 0x1.94624ep-7f, 0x1.fe41cep-11f,
                       0x1.6e2368p-15f, 0x1.2acee4p-20f},  // c1
                      {-0x1.e04c1ap-29f, -0x1.cee5acp-2f, -0x1.8d03acp-2f, -0x1.2274b8p-3f, -0x1.ada874p-6f,
                       -0x1.52d7b4p-9f, -0x1.23c436p-13f, -0x1.15cc3ap-18f},  // c2
                      {-0x1.812746p-2f, -0x1.fa029ep-4f, 0x1.395478p-3f, 0x1.efb892p-4f, 0x1.0ea476p-5f, 0x1.16c194p-8f,
                       0x1.26bf02p-12f, 0x1.4be74ap-17f},  // c3
                      {0x1.fbcb24p-24f, 0x1.77cd44p-3f, 0x1.88e1aap-5f, -0x1.92c806p-5f, -0x1.afe578p-6f,
                       -0x1.39bf7cp-8f, -0x1.a51facp-12f, -0x1.1d6e22p-16f},  // c4
                      {0x1.ce2cc8p-4f, -0x1.fa2baep-10f, -0x1.0f7c48p-4f, -0x1.4548d2p-8f, 0x1.997428p-7f,
                       0x1.f3766cp-9f, 0x1.c081b0p-12f, 0x1.76c794p-16f},  // c5
                      {0x1.87a526p-16f, -0x1.8deed6p-5f, 0x1.5db3d2p-7f, 0x1.0211ecp-6f, -0x1.dd1d5ep-10f,
                       -0x1.12ffdcp-9f, -0x1.6c3f28p-12f, -0x1.83ebd6p-16f},  // c6
                      {-0x1.ba760ap-6f, 0x1.000530p-7f, 0x1.9af278p-7f, -0x1.885a04p-8f, -0x1.ea6c00p-10f,
                       0x1.66f140p-11f, 0x1.c20352p-13f, 0x1.4346fap-16f},  // c7
                      {0x1.e40f16p-12f, 0x1.2b34b2p-7f, -0x1.623a06p-8f, -0x1.10cfcep-10f, 0x1.64dfacp-10f,
                       0x1.e22bbep-18f, -0x1.94740ap-14f, -0x1.c41c1ep-17f},  // c8
                      {0x1.28ae08p-8f, -0x1.3e8d86p-9f, -0x1.2affa0p-10f, 0x1.847c16p-10f, -0x1.1af578p-12f,
                       -0x1.162838p-13f, 0x1.af556cp-16f, 0x1.deaedap-18f},  // c9
                      {-0x1.f6aa64p-25f, 0x1.8f5be6p-26f, 0x1.01368ap-27f, 0x1.b20c08p-29f, 0x1.477974p-33f,
                       -0x1.84c014p-36f, 0x1.c1b548p-42f, -0x1.be29e4p-45f},  // c1_lo
                  })

// erf.hpp: erfc(x) e^(x^2) at x = j*21/32 + u, |u| <= 21/64; worst interval: relative error 2^-26.6
FUSE_MATH_TABLE(
    erfcx_table, 10,
    {
        {0x1.p+0f, 0x1.164fc6p-1f, 0x1.6bb376p-2f, 0x1.08fc26p-2f, 0x1.9d7738p-3f, 0x1.51a8e2p-3f, 0x1.1cc7d2p-3f,
         0x1.ebe61cp-4f, 0x1.b096fap-4f, 0x1.81e25cp-4f, 0x1.5c2fcap-4f, 0x1.3d23ecp-4f, 0x1.2323acp-4f, 0x1.0d0da8p-4f,
         0x1.f42110p-5f, 0x1.d3225cp-5f},  // c0_hi
        {0x1.543896p-27f, 0x1.632b9ap-28f, 0x1.694dccp-27f, -0x1.27fb50p-28f, 0x1.b84a3ap-28f, -0x1.5f0c7ep-29f,
         0x1.7f42dep-29f, -0x1.439c22p-29f, 0x1.9e392cp-29f, 0x1.767e52p-29f, -0x1.3eb0e4p-30f, 0x1.e2f582p-30f,
         -0x1.d311c8p-29f, 0x1.e3e838p-30f, -0x1.b0b4d2p-30f, -0x1.3b16ecp-31f},  // c0_lo
        {-0x1.20dd76p+0f, -0x1.a8e46cp-2f, -0x1.917d7ap-3f, -0x1.c053fep-4f, -0x1.18737ap-4f, -0x1.7c1d7cp-5f,
         -0x1.11183ep-5f, -0x1.9a14d4p-6f, -0x1.3e981cp-6f, -0x1.fcab46p-7f, -0x1.9f20cap-7f, -0x1.590552p-7f,
         -0x1.232c4ep-7f, -0x1.f1e45ap-8f, -0x1.ae7950p-8f, -0x1.77d19ap-8f},  // c1
        {0x1.fffffcp-1f, 0x1.15c9a6p-2f, 0x1.90e47cp-4f, 0x1.629676p-5f, 0x1.6afd3cp-6f, 0x1.9d8b16p-7f, 0x1.fe7eb2p-8f,
         0x1.4f2308p-8f, 0x1.cdeae2p-9f, 0x1.4afd34p-9f, 0x1.e9b92cp-10f, 0x1.7407ecp-10f, 0x1.2103cep-10f,
         0x1.c9b302p-11f, 0x1.706f42p-11f, 0x1.2cdca6p-11f},  // c2
        {-0x1.8126acp-1f, -0x1.4375e0p-3f, -0x1.71143ep-5f, -0x1.08bfbep-6f, -0x1.c28ddcp-8f, -0x1.b40ee6p-9f,
         -0x1.d1d2dap-10f, -0x1.0cc656p-10f, -0x1.49d492p-11f, -0x1.a97368p-12f, -0x1.1de830p-12f, -0x1.8db1e4p-13f,
         -0x1.1cc27ep-13f, -0x1.a213b0p-14f, -0x1.39972ap-14f, -0x1.df5e1ep-15f},  // c3
        {0x1.ffecfcp-2f, 0x1.574e18p-4f, 0x1.3d5ea2p-6f, 0x1.77e70ap-8f, 0x1.0d40a4p-9f, 0x1.beb6fcp-11f,
         0x1.9f9926p-12f, 0x1.a77434p-13f, 0x1.d03e1ap-14f, 0x1.0e2ffcp-14f, 0x1.4a83fap-15f, 0x1.a58d02p-16f,
         0x1.168b46p-16f, 0x1.7b806ap-17f, 0x1.0974c8p-17f, 0x1.7c0f86p-18f},  // c4
        {-0x1.3375f2p-2f, -0x1.511466p-5f, -0x1.013350p-7f, -0x1.fe34eap-10f, -0x1.36e168p-11f, -0x1.bd7e22p-13f,
         -0x1.6afd2ep-14f, -0x1.47ec28p-15f, -0x1.422f98p-16f, -0x1.533948p-17f, -0x1.7a63bap-18f, -0x1.bb29c0p-19f,
         -0x1.0e89cep-19f, -0x1.565f90p-20f, -0x1.bf025ap-21f, -0x1.2be6a8p-21f},  // c5
        {0x1.4e4bb6p-3f, 0x1.361beep-6f, 0x1.8bffcap-9f, 0x1.4c99a6p-11f, 0x1.5bcb5cp-13f, 0x1.b14f58p-15f,
         0x1.36c05cp-16f, 0x1.f3af86p-18f, 0x1.b93db8p-19f, 0x1.a529d4p-20f, 0x1.ad20b6p-21f, 0x1.ce253ap-22f,
         0x1.04f1d8p-22f, 0x1.3304aep-23f, 0x1.766116p-24f, 0x1.d716eap-25f},  // c6
        {-0x1.334e1ap-4f, -0x1.17f73ap-7f, -0x1.2b9a9ep-10f, -0x1.ab2358p-13f, -0x1.8027c8p-15f, -0x1.a0fdd0p-17f,
         -0x1.07add0p-18f, -0x1.79e444p-20f, -0x1.2c4338p-21f, -0x1.0410d0p-22f, -0x1.e477f8p-24f, -0x1.e00facp-25f,
         -0x1.f5ad1cp-26f, -0x1.127f40p-26f, -0x1.38bad0p-27f, -0x1.712382p-28f},  // c7
        {0x1.61ec5ap-6f, 0x1.c83192p-9f, 0x1.a39e02p-12f, 0x1.028490p-14f, 0x1.953fd6p-17f, 0x1.82fb64p-19f,
         0x1.b2a37ep-21f, 0x1.17186cp-22f, 0x1.90bf32p-24f, 0x1.3bf990p-25f, 0x1.0db8d2p-26f, 0x1.ecd19ep-28f,
         0x1.dd5b64p-29f, 0x1.e6818ep-30f, 0x1.0334ccp-30f, 0x1.1f4498p-31f},  // c8
    })

/// a*a - fl(a*a), exactly (Dekker's product where no fma exists; |a| < 2^100).
template <class V>
FUSE_HD FUSE_FORCE_INLINE V square_residual(V a, V a2) noexcept {
#if FUSE_MATH_FUSED_FMA
  return prims<V>::fma(a, a, -a2);
#else
  const V big = a * V(4097.0f);  // Veltkamp's split into two 12-bit halves
  const V hi = big - (big - a);
  const V lo = a - hi;
  return ((hi * hi - a2) + (hi * lo + hi * lo)) + lo * lo;
#endif
}

}  // namespace detail

/// erf(x): odd, +-1 beyond |x| = 3.9192, NaN propagates.
template <class Mode = fuse::accurate_math_t, class V>
FUSE_HD FUSE_FORCE_INLINE V erf(V x) noexcept {
  using P = prims<V>;
  const V a = P::abs_clamp(x, 3.93f);
#if FUSE_MATH_WIDE_TABLES
  const auto y = detail::piecewise<6, true>(FUSE_MATH_TABLE_REF(detail::erf_table), a, 0x1.04p-2f, 0x1.f81f82p+1f);
#else
  // 8 wider intervals of higher degree: one permute per row on AVX2 instead of two and a blend.
  const auto y = detail::piecewise<9, true>(FUSE_MATH_TABLE_REF(detail::erf8_table), a, 0x1.1p-1f, 0x1.e1e1e2p+0f);
#endif
  return P::or_sign_nan(y.sum(), x);
}

/// erfc(x) = 1 - erf(x): 2 at -inf, 0 beyond x = 10.06 (subnormal results before that), NaN
/// propagates.
template <class Mode = fuse::accurate_math_t, class V>
FUSE_HD FUSE_FORCE_INLINE V erfc(V x) noexcept {
  using P = prims<V>;
  const V a = P::abs_clamp(x, 10.1f);  // NaN is put back at the end
  const auto h = detail::piecewise<8>(FUSE_MATH_TABLE_REF(detail::erfcx_table), a, 0x1.5p-1f, 0x1.861862p+0f);
  // e^(-a^2) = e^(-a2 - a2_lo) = 2^n (1 + t), the exact low part folded into r.
  const V a2 = a * a;
  const V a2_lo = detail::square_residual(a, a2);
  const auto red = detail::reduce_exp(-a2);
  const V t = detail::expm1_reduced(red.r - a2_lo);
  // (h.hi + h.small)(1 + t) = h.hi + (h.hi t + h.small (1 + t)): one rounding of a small term,
  // then the final sum, then the exact (or correctly rounded subnormal) scaling.
  const V mantissa = h.hi + P::fma(h.hi, t, P::fma(h.small, t, h.small));
  const V e = P::scale(mantissa, red.n);
  // NaN goes around the arithmetic above, whose negations would otherwise leave its sign bit to
  // the compiler's choice of fused negate-multiply-add forms.
  return P::select(P::is_nan(x), x + x, P::select(x < V(0.0f), V(2.0f) - e, e));
}

}  // namespace fuse::math
