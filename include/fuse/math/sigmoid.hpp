// The logistic function 1/(1 + e^-x) for float32 (Relay's sigmoid).
//
// accurate, AVX-512 (and CUDA) builds: sigmoid(x) itself on (-8.25, 7.75) from a 32-interval
//           piecewise polynomial of degree 5 with *relative* accuracy on both sides (one
//           vpermt2ps per coefficient row; the interval index costs one addition). Beyond it,
//           g = 1/(1 + e^|x|) = e - e^2 + e^3 with e = e^-|x|, and sigmoid = g for x < 0, 1 - g
//           for x > 0: computed only when some lane needs it, with the correct subnormals down
//           to x = -103.97. 1.445 ULP over all floats.
// accurate, other builds (a 32-entry lookup costs two permutes and a blend on AVX2, a gather
//           on SSE): g(a) = 1/(1 + e^a) = sigmoid(-a) for a = |x| <= 17.4 from a 16-interval
//           table of degree 7 (FMA-less builds carry its slope in two floats as well), so
//           sigmoid(x) = g for x < 0 (small results keep all their digits) and 1 - g for x >= 0
//           (no cancellation: g <= 1/2). Below x = -17.4 sigmoid(x) = e^x (1 - e^x) to float
//           precision, again only when some lane needs it. 1.497 ULP (1.613 without FMA).
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

// sigmoid.hpp: g(t_j + u) = 1/(1 + e^(t_j + u)) with t_j near j*1.125 (16 intervals); degree 7.
// c0 = g(t_j) and c1 = g'(t_j) are floats to within 2^-11 and 2^-5 of an ulp.
// The clamp: the first float where 1 - g rounds to 1.
inline constexpr float sigmoid_saturation = 0x1.154246p+4f;
// Where the table ends and the e^x - e^2x tail begins: the FMA-less table stops at 17.4.
inline constexpr float sigmoid_table_end = FUSE_MATH_FUSED_FMA ? sigmoid_saturation : 17.4f;
FUSE_MATH_TABLE(
    sigmoid_table, 9,
    {
        {0.0f, 0x1.1f9f50p+0f, 0x1.20953ap+1f, 0x1.b07042p+1f, 0x1.200c70p+2f, 0x1.683a2ep+2f, 0x1.b0406ap+2f,
         0x1.f7b14ap+2f, 0x1.207280p+3f, 0x1.44c02cp+3f, 0x1.67ea16p+3f, 0x1.8c81cep+3f, 0x1.af948ep+3f, 0x1.d3fa48p+3f,
         0x1.f34ca8p+3f, 0x1.0a6462p+4f},  // t
        {0x1.p-1f, 0x1.f67e4cp-3f, 0x1.84f204p-4f, 0x1.0e24dap-5f, 0x1.67bffcp-7f, 0x1.d55b66p-9f, 0x1.3160e8p-10f,
         0x1.905c56p-12f, 0x1.fe5f26p-14f, 0x1.48496ap-15f, 0x1.b59daap-17f, 0x1.16ef40p-18f, 0x1.74df44p-20f,
         0x1.de3d7cp-22f, 0x1.676826p-23f, 0x1.f8e4fap-25f},  // c0
        {-0x1.p-2f, -0x1.7b33dap-3f, -0x1.60031cp-4f, -0x1.053c4cp-5f, -0x1.63cce4p-7f, -0x1.d3ad22p-9f,
         -0x1.3105d6p-10f, -0x1.903534p-12f, -0x1.fe4f40p-14f, -0x1.484620p-15f, -0x1.b59c34p-17f, -0x1.16eef4p-18f,
         -0x1.74df22p-20f, -0x1.de3d6ep-22f, -0x1.676822p-23f, -0x1.f8e4f8p-25f},  // c1
        {-0x1.40212ep-31f, 0x1.823e44p-5f, 0x1.1d2900p-5f, 0x1.e80320p-7f, 0x1.5bfce2p-8f, 0x1.d053b0p-10f,
         0x1.304fecp-11f, 0x1.8fe700p-13f, 0x1.fe2f80p-15f, 0x1.483f94p-16f, 0x1.b5994ep-18f, 0x1.16ee64p-19f,
         0x1.74dee4p-21f, 0x1.de3d5cp-23f, 0x1.676814p-24f, 0x1.f8e4f2p-26f},  // c2
        {0x1.555452p-6f, 0x1.c0c21ap-9f, -0x1.c6aa54p-8f, -0x1.19ab8ap-8f, -0x1.bb7e78p-10f, -0x1.311bfap-11f,
         -0x1.93db90p-13f, -0x1.0a31b2p-14f, -0x1.53f544p-16f, -0x1.b59882p-18f, -0x1.23b78ap-19f, -0x1.73e6b4p-21f,
         -0x1.f1284ap-23f, -0x1.3ed354p-24f, -0x1.df34f0p-26f, -0x1.5098aap-27f},  // c3
        {0x1.e2e664p-19f, -0x1.3a9a2ep-8f, -0x1.7fa6eap-14f, 0x1.91c8a2p-11f, 0x1.938f72p-12f, 0x1.284b6ap-13f,
         0x1.901048p-15f, 0x1.095c82p-16f, 0x1.539a82p-18f, 0x1.b56d50p-20f, 0x1.23ab7ep-21f, 0x1.73dbd2p-23f,
         0x1.f12006p-25f, 0x1.3ecde6p-26f, 0x1.df39ecp-28f, 0x1.509bfap-29f},  // c4
        {-0x1.139d2ap-9f, 0x1.63f128p-11f, 0x1.03e0cep-11f, -0x1.70050ep-15f, -0x1.053da2p-14f, -0x1.be3fb8p-16f,
         -0x1.3a0e34p-17f, -0x1.a6096ep-19f, -0x1.0f273ap-20f, -0x1.5dba7cp-22f, -0x1.d2aeacp-24f, -0x1.298f92p-25f,
         -0x1.8dcfe6p-27f, -0x1.fe30c2p-29f, -0x1.7fc00ep-30f, -0x1.0d5ec8p-31f},  // c5
        {0x1.8e3256p-15f, 0x1.308e48p-12f, -0x1.274f6ep-13f, -0x1.8e22b8p-16f, 0x1.76c6a0p-18f, 0x1.058812p-18f,
         0x1.964756p-20f, 0x1.18f26ap-21f, 0x1.6c1eb4p-23f, 0x1.d6f8b0p-25f, 0x1.3a2532p-26f, 0x1.9164a2p-28f,
         0x1.0bc8d0p-29f, 0x1.57ac98p-31f, 0x1.fee498p-33f, 0x1.648fecp-34f},  // c6
        {0x1.56e622p-13f, -0x1.dc5156p-14f, 0x1.35b532p-17f, 0x1.35cfc8p-17f, 0x1.abc2c6p-22f, -0x1.ac0280p-22f,
         -0x1.a98672p-23f, -0x1.357468p-24f, -0x1.9df500p-26f, -0x1.0d5814p-27f, -0x1.5f7048p-29f, -0x1.c14c0ep-31f,
         -0x1.2932ecp-32f, -0x1.81a830p-34f, -0x1.f67d4cp-36f, -0x1.5980c6p-37f},  // c7
    })

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

// sigmoid.hpp, FMA-less builds: the same with c1 in two floats; worst interval: relative error 2^-26.6
FUSE_MATH_TABLE(
    sigmoid_table_split, 10,
    {
        {0x1.p-1f, 0x1.f5ef22p-3f, 0x1.868d28p-4f, 0x1.0f0a54p-5f, 0x1.680528p-7f, 0x1.d7054cp-9f, 0x1.329482p-10f,
         0x1.8e7150p-12f, 0x1.02c6f6p-13f, 0x1.501420p-15f, 0x1.b47262p-17f, 0x1.1b63bap-18f, 0x1.700376p-20f,
         0x1.dde80cp-22f, 0x1.364e9ep-23f, 0x1.92f7c8p-25f},  // c0_hi
        {0x1.fa132cp-37f, -0x1.4eb078p-29f, 0x1.eae0dep-29f, -0x1.2ece32p-30f, -0x1.3b552ap-33f, -0x1.dd5fa8p-34f,
         -0x1.52b518p-35f, 0x1.f1ba24p-37f, -0x1.3c3a04p-38f, -0x1.d1b38cp-42f, -0x1.23d410p-45f, -0x1.1fc6c6p-45f,
         0x1.95d8cap-47f, 0x1.36e282p-49f, 0x1.0c60aap-50f, 0x1.a81684p-51f},  // c0_lo
        {-0x1.p-2f, -0x1.7aeae6p-3f, -0x1.615004p-4f, -0x1.06129cp-5f, -0x1.64108ap-7f, -0x1.d553fap-9f,
         -0x1.3238b8p-10f, -0x1.8e4a8ep-12f, -0x1.02bec8p-13f, -0x1.5010aep-15f, -0x1.b470eep-17f, -0x1.1b636cp-18f,
         -0x1.700356p-20f, -0x1.dde7fep-22f, -0x1.364e9cp-23f, -0x1.92f7c8p-25f},  // c1
        {0x1.0c22f8p-23f, 0x1.825decp-5f, 0x1.1defc8p-5f, 0x1.e97612p-7f, 0x1.5c3d86p-8f, 0x1.d1f474p-10f,
         0x1.318160p-11f, 0x1.8dfd1ap-13f, 0x1.02ae76p-14f, 0x1.5009d0p-16f, 0x1.b46e10p-18f, 0x1.1b62d6p-19f,
         0x1.70031cp-21f, 0x1.dde7eep-23f, 0x1.364e9cp-24f, 0x1.92f7cep-26f},  // c2
        {0x1.554e40p-6f, 0x1.bd1056p-9f, -0x1.c68c80p-8f, -0x1.1a5bfcp-8f, -0x1.bbcd04p-10f, -0x1.3229c2p-11f,
         -0x1.956ee6p-13f, -0x1.08ec04p-14f, -0x1.58bcdap-16f, -0x1.bffa7ap-18f, -0x1.22f004p-19f, -0x1.79d748p-21f,
         -0x1.eaaddep-23f, -0x1.3e9a4ep-24f, -0x1.9dbde0p-26f, -0x1.0ca50cp-27f},  // c3
        {0x1.75a9a0p-17f, -0x1.3a475cp-8f, -0x1.afac32p-14f, 0x1.92329ep-11f, 0x1.93d0dap-12f, 0x1.294930p-13f,
         0x1.919c18p-15f, 0x1.08195ep-16f, 0x1.585fb4p-18f, 0x1.bfcdbcp-20f, 0x1.22e30cp-21f, 0x1.79cd38p-23f,
         0x1.eaa3aap-25f, 0x1.3e9448p-26f, 0x1.9db64ep-28f, 0x1.0ca030p-29f},  // c4
        {-0x1.1633bep-9f, 0x1.64e4e6p-11f, 0x1.05e544p-11f, -0x1.6ba57ap-15f, -0x1.0554d0p-14f, -0x1.bfa6b0p-16f,
         -0x1.3b4b0ap-17f, -0x1.a415e0p-19f, -0x1.130664p-20f, -0x1.661b22p-22f, -0x1.d1717cp-24f, -0x1.2e4cb8p-25f,
         -0x1.889aeep-27f, -0x1.fddb2ap-29f, -0x1.4b0e26p-30f, -0x1.ade9bap-32f},  // c5
        {0x1.31c23ap-14f, 0x1.2f8c02p-12f, -0x1.277436p-13f, -0x1.934142p-16f, 0x1.75aee6p-18f, 0x1.063cdap-18f,
         0x1.97b0c6p-20f, 0x1.176f18p-21f, 0x1.7128f0p-23f, 0x1.e20e12p-25f, 0x1.398fecp-26f, 0x1.976e8ap-28f,
         0x1.0898f0p-29f, 0x1.57a13ep-31f, 0x1.be4000p-33f, 0x1.21c114p-34f},  // c6
        {0x1.3c051ep-13f, -0x1.d74f44p-14f, 0x1.344786p-17f, 0x1.34fcb2p-17f, 0x1.a9a370p-22f, -0x1.ab7c56p-22f,
         -0x1.a4f9eap-23f, -0x1.316026p-24f, -0x1.9a5298p-26f, -0x1.0d57a4p-27f, -0x1.5f00d0p-29f, -0x1.c8560ep-31f,
         -0x1.286934p-32f, -0x1.80f7eap-34f, -0x1.f3f17ap-36f, -0x1.449ea8p-37f},  // c7
        {-0x1.df0e72p-29f, -0x1.fff85ep-28f, 0x1.c60030p-29f, 0x1.bda50ep-33f, -0x1.19e2fap-33f, 0x1.f42166p-34f,
         0x1.32698ep-36f, -0x1.d270d8p-37f, -0x1.f0a61ap-38f, 0x1.e91bc8p-41f, -0x1.6d098cp-44f, 0x1.f8aa38p-45f,
         0x1.0ab618p-45f, -0x1.698a2cp-47f, 0x1.5a03a8p-48f, 0x1.ef6f0ap-51f},  // c1_lo
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
#if FUSE_MATH_FUSED_FMA
    const V a = P::abs_clamp(x, detail::sigmoid_table_end);
    const V k = P::fma(a, V(0x1.c71c72p-1f), V(detail::round_shifter));
    const auto& t = FUSE_MATH_TABLE_REF(detail::sigmoid_table);
    const V u = detail::table_offset(t, a, k);
    const V u2 = u * u;
    // (c0 + c1 u) + u^2 R: c0 + c1 u rounds once, then the sum.
    const V g = P::fma(u2, detail::table_tail<7>(t, k, u, u2),
                       P::fma(detail::table_row(t, 2, k), u, detail::table_row(t, 1, k)));
#else
    // Without FMA every product rounds; carrying the slope in two floats keeps it under 2 ULP.
    const V a = P::abs_clamp(x, detail::sigmoid_table_end);
    const V g =
        detail::piecewise<7, true>(FUSE_MATH_TABLE_REF(detail::sigmoid_table_split), a, 1.125f, 0x1.c71c72p-1f).sum();
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
#endif
  }
}

}  // namespace fuse::math
