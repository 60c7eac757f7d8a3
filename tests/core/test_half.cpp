// fuse::half and fuse::bfloat16: conversions, arithmetic, limits, printing, and the SIMD
// conversions of <fuse/simd/half_convert.hpp>.
//
// Every expected value comes from an oracle that shares no code with the library:
//  - values of 16-bit patterns: std::ldexp on the fields;
//  - rounding into a format: std::nearbyint (ties to even) on the value scaled by an exact
//    power of two (exact rational rounding in double / long double arithmetic);
//  - on a CPU with F16C, the hardware's own float -> half conversion, bit for bit.
//
// The full 2^32 float sweep is in the test suite `slow`, skipped by default; run it with
//   ./build/tests/test_core -ts=slow --no-skip

// GCC 12.2's AVX-512 intrinsics (`__m512i __Y = __Y;` in _mm512_undefined_*) set off
// -Wmaybe-uninitialized wherever they are inlined (GCC PR 105593, fixed in 12.3). The pragma
// must come before <immintrin.h> to cover the lines the warning points at.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <doctest/doctest.h>

#include <fuse/core/half.hpp>
#include <fuse/core/half_io.hpp>
#include <fuse/simd/half_convert.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "support/random.hpp"

namespace {

using fuse::bfloat16;
using fuse::half;

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float float_of(std::uint32_t u) { return std::bit_cast<float>(u); }
std::uint64_t bits_of(double d) { return std::bit_cast<std::uint64_t>(d); }

// ---- the two formats as the oracle sees them ------------------------------------------------

struct half_spec {
  using type = half;
  static constexpr const char* name = "half";
  static constexpr int mantissa_bits = 10;
  static constexpr int exponent_bits = 5;
  static constexpr int min_normal_exponent = -14;
  static constexpr double max_finite = 65504.0;
};
struct bf16_spec {
  using type = bfloat16;
  static constexpr const char* name = "bfloat16";
  static constexpr int mantissa_bits = 7;
  static constexpr int exponent_bits = 8;
  static constexpr int min_normal_exponent = -126;
  static constexpr double max_finite = 0x1.FEp127;
};

template <class Spec>
constexpr std::uint16_t exponent_mask = std::uint16_t(((1u << Spec::exponent_bits) - 1) << Spec::mantissa_bits);
template <class Spec>
constexpr std::uint16_t quiet_bit = std::uint16_t(1u << (Spec::mantissa_bits - 1));

/// The value a 16-bit pattern stands for, from its fields (NaN for NaNs).
template <class Spec>
double oracle_value(std::uint16_t b) {
  const int m = b & ((1 << Spec::mantissa_bits) - 1);
  const int e = (b >> Spec::mantissa_bits) & ((1 << Spec::exponent_bits) - 1);
  const int bias = (1 << (Spec::exponent_bits - 1)) - 1;
  double magnitude;
  if (e == (1 << Spec::exponent_bits) - 1)
    magnitude = m != 0 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0) magnitude = std::ldexp(double(m), 1 - bias - Spec::mantissa_bits);
  else magnitude = std::ldexp(double(m + (1 << Spec::mantissa_bits)), e - bias - Spec::mantissa_bits);
  return (b & 0x8000) ? -magnitude : magnitude;
}

/// 2^k for -1022 <= k <= 1023 (a normal double), cheaper than std::scalbn in the hot loops.
double power_of_two(int k) { return std::bit_cast<double>(std::uint64_t(k + 1023) << 52); }

/// x rounded to the format, to nearest with ties to even: scale by an exact power of two so
/// the format's unit in the last place becomes 1, round to an integer, scale back.
template <class Spec, class T>
double oracle_round(T x) {
  if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(x) || x == 0) return double(x);
  const int exponent = std::max(std::ilogb(x), Spec::min_normal_exponent);
  const int ulp_exponent = exponent - Spec::mantissa_bits;  // within [-133, 1013]: both scalings exact
  T integral;
  double value;
  if constexpr (std::is_same_v<T, double>) {
    integral = std::nearbyint(x * power_of_two(-ulp_exponent));  // default mode: ties to even
    value = integral * power_of_two(ulp_exponent);               // <= 12 significant bits: exact
  } else {
    integral = std::nearbyint(std::scalbn(x, -ulp_exponent));
    value = double(std::scalbn(integral, ulp_exponent));
  }
  if (std::fabs(value) > Spec::max_finite) return std::copysign(std::numeric_limits<double>::infinity(), double(x));
  if (value == 0) return std::copysign(0.0, double(x));
  return value;
}

/// Whether a converted pattern `got` is the oracle's value (bit-exact on the double: +0 vs -0 count).
template <class Spec>
bool matches_value(std::uint16_t got, double expected) {
  const double value = oracle_value<Spec>(got);
  if (std::isnan(expected)) return std::isnan(value);
  return bits_of(value) == bits_of(expected);
}

/// The NaN a conversion must produce from a wider NaN: sign and top of the payload, made quiet.
template <class Spec>
std::uint16_t expected_nan(bool negative, std::uint64_t top_payload_bits) {
  return std::uint16_t((negative ? 0x8000 : 0) | exponent_mask<Spec> | quiet_bit<Spec> | top_payload_bits);
}

/// Counts failures in a hot loop and keeps the first few descriptions, so that a failing run
/// says what failed without a doctest assertion per sample.
struct failures {
  std::uint64_t count = 0;
  std::string first;
  template <class... Args>
  void add(const char* fmt, Args... args) {
    if (count++ < 8) {
      char line[256];
      std::snprintf(line, sizeof line, fmt, args...);
      first += line;
      first += '\n';
    }
  }
};
#define CHECK_NO_FAILURES(f) \
  do {                       \
    INFO((f).first);         \
    CHECK((f).count == 0);   \
  } while (0)

// ---- the SIMD archs this build can run -------------------------------------------------------

template <class F>
void for_each_arch(F&& f) {
  f(xsimd::sse2{});
  f(xsimd::sse4_1{});
  f(xsimd::avx{});
  f(xsimd::avx2{});
  f(xsimd::avx512f{});
  f(xsimd::avx512bw{});
}

/// The scalar conversions of a set of floats, computed once and checked against every arch.
struct scalar_conversions {
  std::vector<float> in;
  std::vector<std::uint16_t> to_half, to_bf16;
  std::vector<std::uint32_t> rounded_half, rounded_bf16;  // float bits of (float)(half)x, (float)(bfloat16)x
  explicit scalar_conversions(std::vector<float> floats) : in(std::move(floats)) {
    for (const float x : in) {
      to_half.push_back(half(x).bits());
      to_bf16.push_back(bfloat16(x).bits());
      rounded_half.push_back(bits_of(float(half(x))));
      rounded_bf16.push_back(bits_of(float(bfloat16(x))));
    }
  }
};

/// SIMD conversions of the floats against the scalar ones, for arch A (if compiled in): the
/// public calls and, for half, the software path that runs where F16C is missing.
template <class A>
void check_simd_stores(const scalar_conversions& s, failures& f) {
  if constexpr (A::supported()) {
    using batch = xsimd::batch<float, A>;
    constexpr std::size_t W = batch::size;
    // One spare element in front so every store lands at an odd address (unaligned).
    half out_half[W + 1], out_soft[W + 1];
    bfloat16 out_bf16[W + 1];
    alignas(64) float rounded[W], rounded_bf[W], rounded_soft[W];
    for (std::size_t i = 0; i + W <= s.in.size(); i += W) {
      const batch v = batch::load_unaligned(s.in.data() + i);
      fuse::simd::store_half(out_half + 1, v);
      fuse::simd::store_bf16(out_bf16 + 1, v);
      fuse::simd::half_detail::store_half_software<A>(out_soft + 1, v);
      fuse::simd::round_to_half(v).store_aligned(rounded);
      fuse::simd::round_to_bf16(v).store_aligned(rounded_bf);
      fuse::simd::half_detail::round_to_half_software<A>(v).store_aligned(rounded_soft);
      for (std::size_t k = 0; k < W; ++k) {
        const std::uint32_t x = bits_of(s.in[i + k]);
        const std::uint16_t h = s.to_half[i + k], b = s.to_bf16[i + k];
        const std::uint32_t hf = s.rounded_half[i + k], bf = s.rounded_bf16[i + k];
        if (out_half[k + 1].bits() != h || out_soft[k + 1].bits() != h)
          f.add("%s store_half(%08x): simd %04x software %04x scalar %04x", A::name(), x, out_half[k + 1].bits(),
                out_soft[k + 1].bits(), h);
        if (out_bf16[k + 1].bits() != b)
          f.add("%s store_bf16(%08x): simd %04x scalar %04x", A::name(), x, out_bf16[k + 1].bits(), b);
        if (bits_of(rounded[k]) != hf || bits_of(rounded_soft[k]) != hf)
          f.add("%s round_to_half(%08x): simd %08x software %08x scalar %08x", A::name(), x, bits_of(rounded[k]),
                bits_of(rounded_soft[k]), hf);
        if (bits_of(rounded_bf[k]) != bf)
          f.add("%s round_to_bf16(%08x): simd %08x scalar %08x", A::name(), x, bits_of(rounded_bf[k]), bf);
      }
    }
  }
}

void check_simd_stores_every_arch(const scalar_conversions& s, failures& f) {
  for_each_arch([&](auto arch) { check_simd_stores<decltype(arch)>(s, f); });
}

/// Scalar float -> half / bf16 against the oracles for each float in `in`.
void check_scalar_from_float(const std::vector<float>& in, failures& f) {
  for (const float x : in) {
    const std::uint32_t xb = bits_of(x);
    const std::uint16_t h = half(x).bits();
    const std::uint16_t b = bfloat16(x).bits();
#if defined(__F16C__)
    // The hardware's own conversion (vcvtps2ph, round to nearest even) as the oracle.
    const auto hw = std::uint16_t(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x), _MM_FROUND_TO_NEAREST_INT), 0));
    if (h != hw) f.add("half(%08x) = %04x, F16C says %04x", xb, h, hw);
#endif
    if (std::isnan(x)) {
      const bool negative = (xb >> 31) != 0;
      if (h != expected_nan<half_spec>(negative, (xb >> 13) & 0x3FF)) f.add("half(NaN %08x) = %04x", xb, h);
      if (b != expected_nan<bf16_spec>(negative, (xb >> 16) & 0x7F)) f.add("bfloat16(NaN %08x) = %04x", xb, b);
      continue;
    }
    if (!matches_value<half_spec>(h, oracle_round<half_spec>(double(x))))
      f.add("half(%08x = %a) = %04x, oracle %a", xb, double(x), h, oracle_round<half_spec>(double(x)));
    if (!matches_value<bf16_spec>(b, oracle_round<bf16_spec>(double(x))))
      f.add("bfloat16(%08x = %a) = %04x, oracle %a", xb, double(x), b, oracle_round<bf16_spec>(double(x)));
  }
}

/// Floats just around every rounding boundary of both formats: each midpoint between adjacent
/// values (ties), its float neighbours, the overflow thresholds; both signs.
std::vector<float> boundary_floats() {
  std::vector<float> out;
  auto around = [&](std::uint32_t center, int reach) {
    for (int k = -reach; k <= reach; ++k) {
      const std::uint32_t u = center + std::uint32_t(k);
      out.push_back(float_of(u));
      out.push_back(float_of(u ^ 0x80000000u));
    }
  };
  for (std::uint32_t h = 0; h < 0x7C00; ++h) {
    const double lo = oracle_value<half_spec>(std::uint16_t(h));
    const double hi = h + 1 == 0x7C00 ? 65536.0 : oracle_value<half_spec>(std::uint16_t(h + 1));
    const double mid = (lo + hi) / 2;
    around(bits_of(float(mid)), 3);  // every midpoint is exact in float
  }
  for (std::uint32_t b = 0; b < 0x7F80; ++b) around((b << 16) | 0x8000u, 3);
  around(bits_of(65520.0f), 1000);
  around(0x7F7F8000u, 1000);
  around(0x7F800000u, 0);
  return out;
}

/// NaNs with every single payload bit, the quiet and signalling extremes, and random payloads.
std::vector<float> nan_floats(std::mt19937_64& rng) {
  std::vector<float> out;
  for (int bit = 0; bit < 23; ++bit) out.push_back(float_of(0x7F800000u | (1u << bit)));
  out.push_back(float_of(0x7FFFFFFFu));
  out.push_back(float_of(0x7F800001u));
  out.push_back(float_of(0x7FC00000u));
  for (int i = 0; i < 20000; ++i) out.push_back(float_of(0x7F800000u | std::uint32_t(rng() % 0x7FFFFF + 1)));
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; ++i) out.push_back(-out[i]);
  return out;
}

}  // namespace

// ---- compile-time facts -----------------------------------------------------------------------

static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);
static_assert(std::is_trivially_copyable_v<half> && std::is_trivially_copyable_v<bfloat16>);
static_assert(std::is_trivial_v<half> && std::is_standard_layout_v<bfloat16>);
static_assert(half(1.0f).bits() == 0x3C00 && bfloat16(1.0f).bits() == 0x3F80);
static_assert(float(half::from_bits(0x3555)) == 0x1.554p-2f);
static_assert(half(65519.0).bits() == 0x7BFF && half(65520.0).bits() == 0x7C00);
static_assert(half(std::int64_t{-2048}).bits() == 0xE800);
static_assert(half(0x1p-25).bits() == 0x0000 && half(0x1.000002p-25f).bits() == 0x0001);
static_assert((half(2.0f) * half(3.0f)).bits() == half(6.0f).bits());
static_assert(std::numeric_limits<half>::max().bits() == 0x7BFF);
static_assert(fuse::isnan(std::numeric_limits<bfloat16>::quiet_NaN()));
static_assert(std::is_convertible_v<half, float> && !std::is_convertible_v<float, half>);
static_assert(!std::is_convertible_v<int, bfloat16>);

// ---- every 16-bit pattern -------------------------------------------------------------------

TEST_CASE("every half pattern converts to float exactly and back to the same bits") {
  failures f;
  for (std::uint32_t u = 0; u < 0x10000; ++u) {
    const half h = half::from_bits(std::uint16_t(u));
    const float x = h;
    const double expected = oracle_value<half_spec>(std::uint16_t(u));
    const bool nan = std::isnan(expected);
    if (nan) {
      // Quiet NaN, same sign, payload moved up to float's top bits.
      const std::uint32_t want = ((u & 0x8000u) << 16) | 0x7FC00000u | ((u & 0x3FFu) << 13);
      if (bits_of(x) != want) f.add("float(half %04x) = %08x, want %08x", u, bits_of(x), want);
    } else if (bits_of(double(x)) != bits_of(expected)) {
      f.add("float(half %04x) = %a, want %a", u, double(x), expected);
    }
#if defined(__F16C__)
    if (bits_of(_cvtsh_ss(std::uint16_t(u))) != bits_of(x)) f.add("float(half %04x) differs from F16C", u);
#endif
    if (bits_of(static_cast<double>(h)) != bits_of(double(x)) && !nan) f.add("double(half %04x)", u);
    const std::uint16_t back = nan ? std::uint16_t(u | 0x200) : std::uint16_t(u);  // NaN comes back quiet
    if (half(x).bits() != back) f.add("half(float(half %04x)) = %04x", u, half(x).bits());
    if (half(static_cast<double>(h)).bits() != back) f.add("half(double(half %04x))", u);
    if (fuse::isnan(h) != std::isnan(x) || fuse::isinf(h) != std::isinf(x) || fuse::isfinite(h) != std::isfinite(x))
      f.add("classification of half %04x", u);
    if ((-h).bits() != (u ^ 0x8000u)) f.add("-half %04x", u);
  }
  CHECK_NO_FAILURES(f);
}

TEST_CASE("every bfloat16 pattern converts to float exactly and back to the same bits") {
  failures f;
  for (std::uint32_t u = 0; u < 0x10000; ++u) {
    const bfloat16 b = bfloat16::from_bits(std::uint16_t(u));
    const float x = b;
    const double expected = oracle_value<bf16_spec>(std::uint16_t(u));
    const bool nan = std::isnan(expected);
    // bfloat16 -> float keeps every bit, signalling NaNs included.
    if (bits_of(x) != u << 16) f.add("float(bfloat16 %04x) = %08x", u, bits_of(x));
    if (!nan && bits_of(double(x)) != bits_of(expected))
      f.add("float(bfloat16 %04x) = %a, want %a", u, double(x), expected);
    if (!nan && bits_of(static_cast<double>(b)) != bits_of(expected)) f.add("double(bfloat16 %04x)", u);
    const std::uint16_t back = nan ? std::uint16_t(u | 0x40) : std::uint16_t(u);
    if (bfloat16(x).bits() != back) f.add("bfloat16(float(bfloat16 %04x)) = %04x", u, bfloat16(x).bits());
    if (bfloat16(static_cast<double>(b)).bits() != back) f.add("bfloat16(double(bfloat16 %04x))", u);
    if (fuse::isnan(b) != std::isnan(x) || fuse::isinf(b) != std::isinf(x) || fuse::isfinite(b) != std::isfinite(x))
      f.add("classification of bfloat16 %04x", u);
    if ((-b).bits() != (u ^ 0x8000u)) f.add("-bfloat16 %04x", u);
  }
  CHECK_NO_FAILURES(f);
}

TEST_CASE("SIMD loads of every 16-bit pattern match the scalar conversions") {
  std::vector<std::uint16_t> all(0x10000 + 1);  // +1: loads also start at an odd element
  for (std::uint32_t u = 0; u < 0x10000; ++u) all[u] = std::uint16_t(u);
  std::vector<float> widened_half(0x10000), widened_bf16(0x10000);
  for (std::uint32_t u = 0; u < 0x10000; ++u) {
    widened_half[u] = half::from_bits(std::uint16_t(u));
    widened_bf16[u] = bfloat16::from_bits(std::uint16_t(u));
  }
  failures f;
  int archs = 0;
  for_each_arch([&](auto arch) {
    using A = decltype(arch);
    if constexpr (A::supported()) {
      ++archs;
      using batch = xsimd::batch<float, A>;
      constexpr std::size_t W = batch::size;
      alignas(64) float got[W], got_soft[W], got_bf[W];
      for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
        for (std::size_t i = 0; i + W <= 0x10000; i += W) {
          const auto* hp = reinterpret_cast<const half*>(all.data() + i + offset);
          const auto* bp = reinterpret_cast<const bfloat16*>(all.data() + i + offset);
          fuse::simd::load_half<A>(hp).store_aligned(got);
          fuse::simd::half_detail::load_half_software<A>(hp).store_aligned(got_soft);
          fuse::simd::load_bf16<A>(bp).store_aligned(got_bf);
          for (std::size_t k = 0; k < W; ++k) {
            const std::size_t u = i + offset + k;
            if (u >= 0x10000) break;
            if (bits_of(got[k]) != bits_of(widened_half[u]) || bits_of(got_soft[k]) != bits_of(widened_half[u]))
              f.add("%s load_half(%04zx) = %08x / software %08x", A::name(), u, bits_of(got[k]), bits_of(got_soft[k]));
            if (bits_of(got_bf[k]) != bits_of(widened_bf16[u]))
              f.add("%s load_bf16(%04zx) = %08x", A::name(), u, bits_of(got_bf[k]));
          }
        }
      }
      MESSAGE(std::string(A::name()), ": half conversions ",
              fuse::simd::half_detail::hardware_half<A> ? "in hardware" : "in software");
    }
  });
  CHECK(archs >= 1);
  // The widened values, stored back, give the patterns again (NaNs quiet).
  check_simd_stores_every_arch(scalar_conversions(widened_half), f);
  check_simd_stores_every_arch(scalar_conversions(widened_bf16), f);
  CHECK_NO_FAILURES(f);
}

TEST_CASE("SIMD stores write exactly one batch and nothing around it") {
  for_each_arch([&](auto arch) {
    using A = decltype(arch);
    if constexpr (A::supported()) {
      using batch = xsimd::batch<float, A>;
      constexpr std::size_t W = batch::size;
      std::vector<half> h(W + 2, half::from_bits(0xDEAD));
      std::vector<bfloat16> b(W + 2, bfloat16::from_bits(0xDEAD));
      fuse::simd::store_half(h.data() + 1, batch(1.0f));
      fuse::simd::store_bf16(b.data() + 1, batch(1.0f));
      CHECK(h.front().bits() == 0xDEAD);
      CHECK(h.back().bits() == 0xDEAD);
      CHECK(b.front().bits() == 0xDEAD);
      CHECK(b.back().bits() == 0xDEAD);
      for (std::size_t k = 1; k <= W; ++k) {
        CHECK(h[k].bits() == 0x3C00);
        CHECK(b[k].bits() == 0x3F80);
      }
    }
  });
}

// ---- float -> half / bfloat16 -----------------------------------------------------------------

TEST_CASE("float to half and bfloat16: dense sample, boundaries, NaNs, against the oracles") {
  auto rng = fuse::test::rng(1);
  failures f;
  // Every 37th float pattern from a fresh random start: 116 million floats over all exponents.
  const std::uint64_t stride = 37;
  const std::uint64_t start = rng() % stride;
  std::vector<float> chunk;
  chunk.reserve(1 << 16);
  std::uint64_t sampled = 0;
  auto flush = [&] {
    check_scalar_from_float(chunk, f);
    check_simd_stores_every_arch(scalar_conversions(chunk), f);
    sampled += chunk.size();
    chunk.clear();
  };
  for (std::uint64_t u = start; u < (std::uint64_t{1} << 32); u += stride) {
    chunk.push_back(float_of(std::uint32_t(u)));
    if (chunk.size() == chunk.capacity()) flush();
  }
  flush();

  // Around every rounding boundary, NaN payloads, and random patterns: every arch.
  std::vector<float> special = boundary_floats();
  const std::vector<float> nans = nan_floats(rng);
  special.insert(special.end(), nans.begin(), nans.end());
  for (int i = 0; i < 200000; ++i) special.push_back(float_of(std::uint32_t(rng())));
  check_scalar_from_float(special, f);
  check_simd_stores_every_arch(scalar_conversions(special), f);
  MESSAGE("float -> half/bfloat16: ", sampled, " strided patterns (start ", start, "), ", special.size(),
          " boundary/NaN/random patterns");
  CHECK_NO_FAILURES(f);
}

TEST_CASE("float to half: the edges by name") {
  CHECK(half(65504.0f).bits() == 0x7BFF);
  CHECK(half(65519.996f).bits() == 0x7BFF);
  CHECK(half(65520.0f).bits() == 0x7C00);  // the halfway point to 2^16 rounds to even: inf
  CHECK(half(-65520.0f).bits() == 0xFC00);
  CHECK(half(1e30f).bits() == 0x7C00);
  CHECK(half(0x1p-24f).bits() == 0x0001);      // denorm_min
  CHECK(half(0x1p-25f).bits() == 0x0000);      // half of it: tie to even (zero)
  CHECK(half(0x1.8p-24f).bits() == 0x0002);    // 1.5 denorm_min: tie to even (2)
  CHECK(half(0x1.ffcp-15f).bits() == 0x0400);  // largest subnormal + 1/2 ulp: tie, up into the normals
  CHECK(half(-0.0f).bits() == 0x8000);
  CHECK(half(-0x1p-30f).bits() == 0x8000);        // underflow keeps the sign
  CHECK(half(1.0f + 0x1p-11f).bits() == 0x3C00);  // tie, even below
  CHECK(half(1.0f + 0x3p-11f).bits() == 0x3C02);  // tie, even above
  CHECK(bfloat16(0x1p-133f).bits() == 0x0001);
  CHECK(bfloat16(0x1p-134f).bits() == 0x0000);
  CHECK(bfloat16(0x1.fep127f).bits() == 0x7F7F);
  CHECK(bfloat16(std::numeric_limits<float>::max()).bits() == 0x7F80);
  CHECK(bfloat16(float_of(0x7F800001u)).bits() == 0x7FC0);  // payload only in the low half: still NaN
  CHECK(bfloat16(float_of(0xFFA00000u)).bits() == 0xFFE0);  // signalling becomes quiet, sign kept
  CHECK(half(float_of(0x7F800001u)).bits() == 0x7E00);
  CHECK(half(float_of(0xFF900000u)).bits() == 0xFE80);
}

// ---- double (and long double) -> half / bfloat16: one rounding ----------------------------------

template <class Spec>
void check_from_double(std::mt19937_64& rng, failures& f, std::uint64_t& double_rounding_traps) {
  using T = typename Spec::type;
  auto check = [&](double d) {
    const std::uint16_t got = T(d).bits();
    const double want = oracle_round<Spec>(d);
    if (std::isnan(d)) {
      const std::uint64_t db = bits_of(d);
      if (got != expected_nan<Spec>(db >> 63, (db >> (52 - Spec::mantissa_bits)) & ((1u << Spec::mantissa_bits) - 1)))
        f.add("%s(NaN %016llx) = %04x", Spec::name, (unsigned long long)db, got);
      return;
    }
    if (!matches_value<Spec>(got, want)) f.add("%s(%a) = %04x, oracle %a", Spec::name, d, got, want);
    if (T(float(d)).bits() != got) ++double_rounding_traps;  // the float detour would have failed here
  };
  // Midpoints between every pair of adjacent finite values, and a hair either side of them:
  // float keeps the midpoint but drops the hair, so the detour through float rounds twice.
  const std::uint32_t last = exponent_mask<Spec>;
  for (std::uint32_t b = 0; b < last; ++b) {
    const double lo = oracle_value<Spec>(std::uint16_t(b));
    const double hi = b + 1 == last ? std::ldexp(1.0, (1 << (Spec::exponent_bits - 1)))  // 2^(emax+1)
                                    : oracle_value<Spec>(std::uint16_t(b + 1));
    const double mid = (lo + hi) / 2;
    for (double d : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e300), mid + mid * 0x1p-40,
                     mid - mid * 0x1p-40, mid + (hi - lo) * 0x1p-30}) {
      check(d);
      check(-d);
    }
  }
  // Random doubles over every exponent, and a band around each format's range.
  for (int i = 0; i < 300000; ++i) check(std::bit_cast<double>(rng()));
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(Spec::min_normal_exponent - Spec::mantissa_bits - 3,
                                              (1 << (Spec::exponent_bits - 1)) + 2);
  for (int i = 0; i < 300000; ++i) check((rng() & 1 ? -1 : 1) * std::ldexp(mantissa(rng), exponent(rng)));
  // Double NaNs: payload bits above and below what survives.
  for (int bit = 0; bit < 52; ++bit) check(std::bit_cast<double>(0x7FF0000000000000ull | (1ull << bit)));
}

TEST_CASE("double to half and bfloat16 rounds once, directly") {
  auto rng = fuse::test::rng(2);
  failures f;
  std::uint64_t traps_half = 0, traps_bf16 = 0;
  check_from_double<half_spec>(rng, f, traps_half);
  check_from_double<bf16_spec>(rng, f, traps_bf16);
  CHECK_NO_FAILURES(f);
  // The sample really contains inputs where rounding through float gives a different answer.
  MESSAGE("double-rounding traps: half ", traps_half, ", bfloat16 ", traps_bf16);
  CHECK(traps_half > 60000);
  CHECK(traps_bf16 > 60000);

  // By name: just below a tie, float rounds up onto the tie, and the tie goes to even.
  CHECK(half(65520.0 - 0x1p-20).bits() == 0x7BFF);
  CHECK(half(float(65520.0 - 0x1p-20)).bits() == 0x7C00);
  CHECK(half(1.0 + 0x1p-11 + 0x1p-40).bits() == 0x3C01);
  CHECK(half(0x1p-25 + 0x1p-60).bits() == 0x0001);
  CHECK(bfloat16(1.0 + 0x1p-8 + 0x1p-40).bits() == 0x3F81);
  CHECK(half(1e300).bits() == 0x7C00);
  CHECK(bfloat16(-1e300).bits() == 0xFF80);
  CHECK(bfloat16(1e-300).bits() == 0x0000);
  CHECK(half(-5e-324).bits() == 0x8000);
}

TEST_CASE("long double to half and bfloat16 rounds once") {
  if constexpr (std::numeric_limits<long double>::digits <= 53) {
    MESSAGE("long double is double here: nothing more to test");
  } else {
    failures f;
    for (std::uint32_t b = 0x3C00; b < 0x4000; ++b) {
      const long double lo = oracle_value<half_spec>(std::uint16_t(b));
      const long double hi = oracle_value<half_spec>(std::uint16_t(b + 1));
      const long double mid = (lo + hi) / 2;
      for (long double x : {mid + mid * 0x1p-60L, mid - mid * 0x1p-60L, mid}) {
        // double(x) is the midpoint itself: a detour through double would tie.
        if (!matches_value<half_spec>(half(x).bits(), oracle_round<half_spec>(x))) f.add("half(%La)", x);
        if (!matches_value<half_spec>(half(-x).bits(), oracle_round<half_spec>(-x))) f.add("half(-%La)", x);
      }
    }
    for (std::uint32_t b = 0x3F80; b < 0x4000; ++b) {
      const long double mid =
          (oracle_value<bf16_spec>(std::uint16_t(b)) + oracle_value<bf16_spec>(std::uint16_t(b + 1))) / 2;
      for (long double x : {mid + mid * 0x1p-60L, mid - mid * 0x1p-60L, mid})
        if (!matches_value<bf16_spec>(bfloat16(x).bits(), oracle_round<bf16_spec>(x))) f.add("bfloat16(%La)", x);
    }
    CHECK_NO_FAILURES(f);
    CHECK(half(1.0L + 0x1p-11L + 0x1p-62L).bits() == 0x3C01);
    CHECK(half(static_cast<long double>(std::numeric_limits<double>::max()) * 2).bits() == 0x7C00);
    CHECK(fuse::isnan(bfloat16(std::numeric_limits<long double>::quiet_NaN())));
  }
}

// ---- integers ---------------------------------------------------------------------------------

template <class Spec, class I>
void check_integer(I v, failures& f) {
  using T = typename Spec::type;
  const std::uint16_t got = T(v).bits();
  // long double holds every 64-bit integer exactly on x86; elsewhere the oracle itself would round.
  const double want = oracle_round<Spec>(static_cast<long double>(v));
  if (!matches_value<Spec>(got, want))
    f.add("%s(%lld / %llu) = %04x, oracle %a", Spec::name, (long long)v, (unsigned long long)v, got, want);
}

TEST_CASE("integers to half and bfloat16 round once; back they truncate") {
  failures f;
  for (std::int32_t i = -70000; i <= 70000; ++i) {
    check_integer<half_spec>(i, f);
    check_integer<bf16_spec>(i, f);
  }
  for (int i = -128; i < 128; ++i) {
    check_integer<half_spec>(std::int8_t(i), f);
    check_integer<bf16_spec>(std::int8_t(i), f);
    check_integer<half_spec>(std::uint8_t(i), f);
  }
  for (std::uint32_t i = 0; i < 0x10000; ++i) {
    check_integer<half_spec>(std::uint16_t(i), f);
    check_integer<bf16_spec>(std::int16_t(i), f);
  }
  if constexpr (std::numeric_limits<long double>::digits >= 64) {
    auto rng = fuse::test::rng(3);
    for (int i = 0; i < 400000; ++i) {
      const std::uint64_t u = rng() >> (rng() % 64);  // every bit width
      check_integer<half_spec>(u, f);
      check_integer<bf16_spec>(u, f);
      check_integer<half_spec>(std::int64_t(u), f);
      check_integer<bf16_spec>(std::int64_t(u), f);
      check_integer<bf16_spec>(-std::int64_t(u >> 1), f);
      check_integer<bf16_spec>(std::int32_t(u), f);
    }
    for (std::uint64_t u : {~0ull, ~0ull >> 1, 1ull << 63, (1ull << 24) + 1, (1ull << 62) + (1ull << 54) + 1}) {
      check_integer<half_spec>(u, f);
      check_integer<bf16_spec>(u, f);
      check_integer<bf16_spec>(std::int64_t(u), f);
    }
  }
  CHECK_NO_FAILURES(f);

  // Named cases: one rounding even above 2^53, where a detour through double rounds twice.
  const std::int64_t trap = (std::int64_t{1} << 62) + (std::int64_t{1} << 54) + 1;
  CHECK(float(bfloat16(trap)) == 0x1.02p62f);                    // correct: above the tie, up
  CHECK(float(bfloat16(static_cast<double>(trap))) == 0x1p62f);  // the detour lands on the tie
  CHECK(float(bfloat16(-trap)) == -0x1.02p62f);
  CHECK(bfloat16(std::numeric_limits<std::uint64_t>::max()).bits() == 0x5F80);  // 2^64
  CHECK(bfloat16(std::numeric_limits<std::int64_t>::min()).bits() == 0xDF00);   // -2^63
  CHECK(half(std::numeric_limits<std::int64_t>::min()).bits() == 0xFC00);
  CHECK(half(65519).bits() == 0x7BFF);
  CHECK(half(65520).bits() == 0x7C00);
  CHECK(half(std::uint64_t{(1ull << 24) + 1}).bits() == 0x7C00);
  CHECK(bfloat16(16777217).bits() == bfloat16(16777216.0f).bits());
  CHECK(bfloat16(257).bits() == 0x4380);  // 257 = 256 + tie: even, 256
  CHECK(bfloat16(259).bits() == 0x4382);  // 259 = 258 + tie: even, 260
  CHECK(half(true).bits() == 0x3C00);
  CHECK(half(false).bits() == 0x0000);
  CHECK(half(0).bits() == 0x0000);  // integer zero is +0

  CHECK(static_cast<int>(half(3.75f)) == 3);
  CHECK(static_cast<int>(half(-3.75f)) == -3);
  CHECK(static_cast<std::int64_t>(bfloat16(0x1p40f)) == (std::int64_t{1} << 40));
  CHECK(static_cast<unsigned>(half(65504.0f)) == 65504u);
  CHECK(static_cast<bool>(half(0.0f)) == false);
  CHECK(static_cast<bool>(half(-0.0f)) == false);
  CHECK(static_cast<bool>(half(0x1p-24f)) == true);
  CHECK(static_cast<double>(bfloat16(0.1f)) == double(float(bfloat16(0.1f))));
}

// ---- limits -------------------------------------------------------------------------------------

template <class T>
void check_limits_consistency() {
  using L = std::numeric_limits<T>;
  static_assert(L::is_specialized && L::is_signed && !L::is_integer && !L::is_exact);
  static_assert(L::has_infinity && L::has_quiet_NaN && L::has_signaling_NaN && L::radix == 2);
  static_assert(L::round_style == std::round_to_nearest && L::has_denorm == std::denorm_present);
  // The constants follow from the definitions.
  CHECK(double(L::min()) == std::ldexp(1.0, L::min_exponent - 1));
  CHECK(double(L::max()) == std::ldexp(1.0 - std::ldexp(1.0, -L::digits), L::max_exponent));
  CHECK(double(L::lowest()) == -double(L::max()));
  CHECK(double(L::epsilon()) == std::ldexp(1.0, 1 - L::digits));
  CHECK(double(L::denorm_min()) == std::ldexp(1.0, L::min_exponent - L::digits));
  CHECK(double(L::round_error()) == 0.5);
  CHECK(std::isinf(float(L::infinity())));
  CHECK(float(L::infinity()) > 0);
  CHECK(fuse::isnan(L::quiet_NaN()));
  CHECK(fuse::isnan(L::signaling_NaN()));
  CHECK(L::quiet_NaN().bits() != L::signaling_NaN().bits());
  // epsilon is the gap above 1; max is one step below infinity; denorm_min is one step above 0.
  CHECK(T::from_bits(T(1.0f).bits() + 1) - T(1.0f) == L::epsilon());
  CHECK(T::from_bits(L::max().bits() + 1).bits() == L::infinity().bits());
  CHECK(L::denorm_min().bits() == 1);
  // Decimal: 10^max_exponent10 is finite and 10^(max_exponent10 + 1) is not; likewise at min.
  CHECK(std::pow(10.0, L::max_exponent10) <= double(L::max()));
  CHECK(std::pow(10.0, L::max_exponent10 + 1) > double(L::max()));
  CHECK(std::pow(10.0, L::min_exponent10) >= double(L::min()));
  CHECK(std::pow(10.0, L::min_exponent10 - 1) < double(L::min()));
  CHECK(L::digits10 == int(std::floor((L::digits - 1) * std::log10(2.0))));
  CHECK(L::max_digits10 == int(std::ceil(1 + L::digits * std::log10(2.0))));
  // max_digits10 significant digits bring every finite value back.
  for (std::uint32_t u = 0; u < 0x10000; ++u) {
    const T x = T::from_bits(std::uint16_t(u));
    if (!fuse::isfinite(x)) continue;
    char text[64];
    std::snprintf(text, sizeof text, "%.*g", L::max_digits10, double(x));
    if (T(std::strtod(text, nullptr)).bits() != u) {
      FAIL("max_digits10 does not round-trip ", text);
      break;
    }
  }
}

TEST_CASE("numeric_limits<half> and numeric_limits<bfloat16>") {
  using LH = std::numeric_limits<half>;
  using LB = std::numeric_limits<bfloat16>;
  CHECK(float(LH::max()) == 65504.0f);
  CHECK(float(LH::lowest()) == -65504.0f);
  CHECK(float(LH::min()) == 0x1p-14f);
  CHECK(float(LH::denorm_min()) == 0x1p-24f);
  CHECK(float(LH::epsilon()) == 0x1p-10f);
  CHECK(LH::infinity().bits() == 0x7C00);
  CHECK(LH::quiet_NaN().bits() == 0x7E00);
  CHECK(LH::digits == 11);
  CHECK(LH::digits10 == 3);
  CHECK(LH::max_digits10 == 5);
  CHECK(LH::min_exponent == -13);
  CHECK(LH::max_exponent == 16);
  CHECK(LH::min_exponent10 == -4);
  CHECK(LH::max_exponent10 == 4);
  CHECK(LH::is_iec559);

  CHECK(float(LB::max()) == 0x1.FEp127f);
  CHECK(float(LB::min()) == std::numeric_limits<float>::min());
  CHECK(float(LB::denorm_min()) == 0x1p-133f);
  CHECK(float(LB::epsilon()) == 0x1p-7f);
  CHECK(LB::infinity().bits() == 0x7F80);
  CHECK(LB::quiet_NaN().bits() == 0x7FC0);
  CHECK(LB::digits == 8);
  CHECK(LB::digits10 == 2);
  CHECK(LB::max_digits10 == 4);
  CHECK(LB::min_exponent == std::numeric_limits<float>::min_exponent);
  CHECK(LB::max_exponent == std::numeric_limits<float>::max_exponent);
  CHECK(LB::min_exponent10 == std::numeric_limits<float>::min_exponent10);
  CHECK(LB::max_exponent10 == std::numeric_limits<float>::max_exponent10);
  CHECK(!LB::is_iec559);

  check_limits_consistency<half>();
  check_limits_consistency<bfloat16>();
}

// ---- comparisons and arithmetic -------------------------------------------------------------------

template <class Spec>
void check_arithmetic(std::mt19937_64& rng, failures& f) {
  using T = typename Spec::type;
  // Random pairs of patterns, biased towards nearby exponents so sums cancel and round.
  std::vector<std::uint16_t> specials = {0x0000,
                                         0x8000,
                                         0x0001,
                                         0x8001,
                                         quiet_bit<Spec>,
                                         exponent_mask<Spec>,
                                         std::uint16_t(exponent_mask<Spec> | 0x8000),
                                         std::uint16_t(exponent_mask<Spec> | 1),
                                         std::uint16_t(exponent_mask<Spec> - 1),
                                         std::uint16_t(exponent_mask<Spec> - 1 + 0x8000),
                                         T(1.0f).bits(),
                                         T(-1.0f).bits(),
                                         T(2.0f).bits(),
                                         T(0.5f).bits(),
                                         T(3.0f).bits()};
  auto check = [&](std::uint16_t ab, std::uint16_t bb) {
    const T a = T::from_bits(ab), b = T::from_bits(bb);
    const double x = oracle_value<Spec>(ab), y = oracle_value<Spec>(bb);
    // + - * are exact in double for two values of these formats (or round once to 53 bits,
    // which keeps > 2p+2 bits); / rounds once to 53 bits; then the oracle rounds to the format.
    const struct {
      char op;
      T got;
      double exact;
    } cases[] = {{'+', a + b, x + y}, {'-', a - b, x - y}, {'*', a * b, x * y}, {'/', a / b, x / y}};
    for (const auto& c : cases)
      if (!matches_value<Spec>(c.got.bits(), oracle_round<Spec>(c.exact)))
        f.add("%s %04x %c %04x = %04x, oracle %a", Spec::name, ab, c.op, bb, c.got.bits(), oracle_round<Spec>(c.exact));
    T acc = a;
    acc += b;
    if (acc.bits() != (a + b).bits()) f.add("%s +=", Spec::name);
    acc = a;
    acc -= b;
    if (acc.bits() != (a - b).bits()) f.add("%s -=", Spec::name);
    acc = a;
    acc *= b;
    if (acc.bits() != (a * b).bits()) f.add("%s *=", Spec::name);
    acc = a;
    acc /= b;
    if (acc.bits() != (a / b).bits()) f.add("%s /=", Spec::name);
    // Comparisons: IEEE on the exact values (NaN unordered, -0 == +0).
    if ((a == b) != (x == y) || (a != b) != (x != y) || (a < b) != (x < y) || (a <= b) != (x <= y) ||
        (a > b) != (x > y) || (a >= b) != (x >= y))
      f.add("%s comparisons of %04x and %04x", Spec::name, ab, bb);
  };
  for (auto a : specials)
    for (auto b : specials) check(a, b);
  for (int i = 0; i < 1000000; ++i) {
    const std::uint16_t a = std::uint16_t(rng());
    std::uint16_t b = std::uint16_t(rng());
    if (i % 2) b = std::uint16_t((a & 0xFF00u) ^ (b & 0x80FFu));  // same exponent region
    check(a, b);
  }
}

TEST_CASE("arithmetic rounds once from float; comparisons are IEEE") {
  auto rng = fuse::test::rng(4);
  failures f;
  check_arithmetic<half_spec>(rng, f);
  check_arithmetic<bf16_spec>(rng, f);
  CHECK_NO_FAILURES(f);

  const half max = std::numeric_limits<half>::max();
  CHECK((max + half(16.0f)).bits() == 0x7C00);  // 65520: tie, to even: overflow
  CHECK((max + half(8.0f)).bits() == 0x7BFF);   // 65512 rounds back down
  CHECK((max * half(2.0f)).bits() == 0x7C00);
  CHECK((-max - max).bits() == 0xFC00);
  CHECK((half(-0.0f) + half(-0.0f)).bits() == 0x8000);
  CHECK((half(0.0f) + half(-0.0f)).bits() == 0x0000);
  CHECK((half(1.0f) - half(1.0f)).bits() == 0x0000);
  CHECK((half(-1.0f) * half(0.0f)).bits() == 0x8000);
  CHECK((half(1.0f) / half(0.0f)).bits() == 0x7C00);
  CHECK((half(-1.0f) / half(0.0f)).bits() == 0xFC00);
  CHECK(fuse::isnan(half(0.0f) / half(0.0f)));
  CHECK(fuse::isnan(std::numeric_limits<half>::infinity() - std::numeric_limits<half>::infinity()));
  CHECK((half(0x1p-24f) * half(0.5f)).bits() == 0x0000);  // underflow, tie to even
  CHECK((half(0x1p-24f) * half(0.75f)).bits() == 0x0001);
  CHECK((-bfloat16(2.0f)).bits() == 0xC000);
  CHECK((bfloat16(1.0f) + bfloat16(0x1p-8f)).bits() == 0x3F80);  // tie, to even

  const half nan = std::numeric_limits<half>::quiet_NaN();
  CHECK_FALSE(nan == nan);
  CHECK(nan != nan);
  CHECK_FALSE(nan < half(1.0f));
  CHECK_FALSE(nan >= half(1.0f));
  CHECK(half(0.0f) == half(-0.0f));
  CHECK_FALSE(half(-0.0f) < half(0.0f));
  CHECK(half(-2.0f) < half(-1.0f));  // not a comparison of the bits
  CHECK(half(-1.0f) < half(0x1p-24f));
  CHECK(bfloat16(-3.0f) < bfloat16(-2.0f));

  // Mixed with float: the half converts exactly and the result is float.
  static_assert(std::is_same_v<decltype(half(1.0f) + 1.0f), float>);
  static_assert(std::is_same_v<decltype(half(1.0f) * 2.0), double>);
  CHECK(half(1.5f) * 2.0f == 3.0f);
  CHECK(std::exp(half(0.0f)) == 1.0f);
}

// ---- printing ---------------------------------------------------------------------------------

TEST_CASE("operator<< prints the shortest text that reads back as the same value") {
  auto text = [](auto x) {
    std::ostringstream out;
    out << x;
    return out.str();
  };
  CHECK(text(half(0.1f)) == "0.1");
  CHECK(text(half(65504.0f)) == "65504");
  CHECK(text(half(1.0f / 3.0f)) == "0.3333");
  CHECK(text(half(-2.5f)) == "-2.5");
  CHECK(text(bfloat16(3.14159f)) == "3.14");
  CHECK(text(bfloat16(1e10f)) == "1e+10");
  CHECK(text(std::numeric_limits<half>::infinity()) == "inf");
  CHECK(text(-std::numeric_limits<half>::infinity()) == "-inf");
  CHECK(text(std::numeric_limits<half>::quiet_NaN()) == "nan");
  CHECK(text(half(-0.0f)) == "-0");
  std::ostringstream fixed;
  fixed << std::fixed << std::setprecision(3) << bfloat16(3.14159f) << ' ' << std::setw(6) << half(2.0f);
  CHECK(fixed.str() == "3.141  2.000");
  // Every finite value reads back.
  for (std::uint32_t u = 0; u < 0x10000; ++u) {
    const half h = half::from_bits(std::uint16_t(u));
    const bfloat16 b = bfloat16::from_bits(std::uint16_t(u));
    if (fuse::isfinite(h) && half(std::strtod(text(h).c_str(), nullptr)).bits() != u) FAIL("half ", text(h));
    if (fuse::isfinite(b) && bfloat16(std::strtod(text(b).c_str(), nullptr)).bits() != u) FAIL("bfloat16 ", text(b));
  }
}

// ---- the full sweep (slow) ----------------------------------------------------------------------

TEST_CASE("every float pattern to half and bfloat16, scalar and SIMD" * doctest::test_suite("slow") * doctest::skip()) {
  failures f;
  std::vector<float> chunk(1 << 20);
  for (std::uint64_t base = 0; base < (std::uint64_t{1} << 32); base += chunk.size()) {
    for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = float_of(std::uint32_t(base + i));
    check_scalar_from_float(chunk, f);
    check_simd_stores_every_arch(scalar_conversions(chunk), f);
  }
  CHECK_NO_FAILURES(f);
}
