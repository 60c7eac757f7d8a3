// The exhaustive check of fuse::math: every one of the 2^32 float bit patterns through every
// function in both modes, on the native SIMD batch, against a double-precision reference.
//
//   fuse_ulp_sweep --all                  every function (ctest `math_full_sweep`, label slow)
//   fuse_ulp_sweep tanh sigmoid           some functions
//   fuse_ulp_sweep --step 97 --all        every 97th pattern (a quick look)
//   fuse_ulp_sweep --threads 1 ...        (default: every hardware thread)
//   fuse_ulp_sweep --lanes 1 --all        compare the scalar path on every input (default: one
//                                         block of 4096 in 16; tests/math covers the rest)
//
// For each function and mode it prints the largest error in ULP and where, how many inputs
// are over 1 and 2 ULP, edge-rule violations (NaN, specials, range, saturation, sign of zero)
// and lanes where the scalar path disagrees with the SIMD one. Exit status 1 when accurate mode
// exceeds 2 ULP, a mode exceeds its stated bound, an edge rule is broken or lanes disagree.
#include <fuse/simd/math_batch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../tests/math/math_reference.hpp"

namespace {

using fuse::test::bits_of_float;
using fuse::test::float_of_bits;
using fuse::test::fn;
using accurate = fuse::accurate_math_t;
using fast = fuse::fast_math_t;
using batch = xsimd::batch<float>;

struct tally {
  double max_ulp = 0;
  float worst_x = 0, worst_y = 0;
  std::uint64_t checked = 0, over1 = 0, over2 = 0, over_bound = 0, outside_domain = 0;
  std::uint64_t edge_violations = 0, lane_mismatches = 0;
  float edge_x = 0, edge_y = 0;
  std::string edge_rule;
  float mismatch_x = 0;

  void merge(const tally& o) {
    if (o.max_ulp > max_ulp) {
      max_ulp = o.max_ulp;
      worst_x = o.worst_x;
      worst_y = o.worst_y;
    }
    checked += o.checked;
    over1 += o.over1;
    over2 += o.over2;
    over_bound += o.over_bound;
    outside_domain += o.outside_domain;
    if (o.edge_violations && !edge_violations) {
      edge_x = o.edge_x;
      edge_y = o.edge_y;
      edge_rule = o.edge_rule;
    }
    edge_violations += o.edge_violations;
    if (o.lane_mismatches && !lane_mismatches) mismatch_x = o.mismatch_x;
    lane_mismatches += o.lane_mismatches;
  }
};

template <class Mode>
void account(tally& t, fn f, float x, float y, double ref, float scalar_y) {
  if (bits_of_float(scalar_y) != bits_of_float(y) && t.lane_mismatches++ == 0) t.mismatch_x = x;
  if (const char* rule = fuse::test::edge_violation(f, x, y, ref)) {
    if (t.edge_violations++ == 0) {
      t.edge_x = x;
      t.edge_y = y;
      t.edge_rule = rule;
    }
    return;
  }
  if (x != x) return;
  if (fuse::test::outside_ulp_bound_domain<Mode>(f, x)) {
    ++t.outside_domain;
    return;
  }
  const double e = fuse::test::ulp_error(y, ref);
  ++t.checked;
  t.over1 += e > 1.0;
  t.over2 += e > 2.0;
  t.over_bound += e > fuse::test::ulp_bound<Mode>(f);
  if (e > t.max_ulp) {
    t.max_ulp = e;
    t.worst_x = x;
    t.worst_y = y;
  }
}

/// Sweeps bit patterns [begin, end) with the given step; both modes share each reference.
/// The scalar path (several times slower than the whole rest) is compared with the SIMD lanes
/// in one block out of lane_every.
void sweep_range(fn f, std::uint64_t begin, std::uint64_t end, std::uint64_t step, unsigned lane_every, tally& acc,
                 tally& fst) {
  constexpr std::size_t block = 4096;
  alignas(64) float xs[block], ya[block], yf[block], sa[block], sf[block];
  for (std::uint64_t u = begin, b = 0; u < end; ++b) {
    std::size_t n = 0;
    for (; n < block && u < end; ++n, u += step) xs[n] = float_of_bits(static_cast<std::uint32_t>(u));
    const std::size_t whole = n - n % batch::size;
    for (std::size_t i = 0; i < whole; i += batch::size) {
      const batch x = batch::load_aligned(xs + i);
      fuse::test::evaluate<accurate>(f, x).store_aligned(ya + i);
      fuse::test::evaluate<fast>(f, x).store_aligned(yf + i);
    }
    for (std::size_t i = whole; i < n; ++i) {  // a short last block: the scalar path stands in
      ya[i] = fuse::test::evaluate<accurate>(f, xs[i]);
      yf[i] = fuse::test::evaluate<fast>(f, xs[i]);
    }
    const bool lanes = b % lane_every == 0;
    for (std::size_t i = 0; i < n; ++i) {
      sa[i] = lanes ? fuse::test::evaluate<accurate>(f, xs[i]) : ya[i];
      sf[i] = lanes ? fuse::test::evaluate<fast>(f, xs[i]) : yf[i];
    }
    for (std::size_t i = 0; i < n; ++i) {
      const float x = xs[i];
      const double ref = fuse::test::reference(f, x);
      account<accurate>(acc, f, x, ya[i], ref, sa[i]);
      account<fast>(fst, f, x, yf[i], ref, sf[i]);
    }
  }
}

bool report(fn f, const char* mode, const tally& t, double bound, double seconds) {
  std::printf("%-8s %-8s max %9.4f ULP at x = %-16a -> %-16a  >1: %-10llu >2: %-9llu", fuse::test::name(f), mode,
              t.max_ulp, static_cast<double>(t.worst_x), static_cast<double>(t.worst_y),
              static_cast<unsigned long long>(t.over1), static_cast<unsigned long long>(t.over2));
  std::printf(" edge: %llu  lanes: %llu  (%.0f s)\n", static_cast<unsigned long long>(t.edge_violations),
              static_cast<unsigned long long>(t.lane_mismatches), seconds);
  if (t.outside_domain)
    std::printf("         %-8s %llu inputs in the documented flush range (result 0, true value < 4.2e-39)\n", "",
                static_cast<unsigned long long>(t.outside_domain));
  if (t.edge_violations)
    std::printf("         first edge violation: %s at x = %a -> %a\n", t.edge_rule.c_str(),
                static_cast<double>(t.edge_x), static_cast<double>(t.edge_y));
  if (t.lane_mismatches)
    std::printf("         first scalar/SIMD mismatch at x = %a\n", static_cast<double>(t.mismatch_x));
  const bool ok = t.max_ulp <= bound && t.over_bound == 0 && t.edge_violations == 0 && t.lane_mismatches == 0;
  if (!ok) std::printf("         FAILED (bound %.1f ULP)\n", bound);
  return ok;
}

int usage() {
  std::fprintf(
      stderr,
      "usage: fuse_ulp_sweep [--threads N] [--step K] [--lanes K] (--all | exp expm1 log tanh sigmoid erf erfc ...)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fn> fns;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::uint64_t step = 1;
  unsigned lane_every = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--all") {
      fns.assign(std::begin(fuse::test::all_fns), std::end(fuse::test::all_fns));
    } else if (a == "--threads" && i + 1 < argc) {
      threads = static_cast<unsigned>(std::max(1, std::atoi(argv[++i])));
    } else if (a == "--lanes" && i + 1 < argc) {
      lane_every = static_cast<unsigned>(std::max(1, std::atoi(argv[++i])));
    } else if (a == "--step" && i + 1 < argc) {
      step = static_cast<std::uint64_t>(std::max(1, std::atoi(argv[++i])));
    } else {
      bool found = false;
      for (fn f : fuse::test::all_fns)
        if (a == fuse::test::name(f)) {
          fns.push_back(f);
          found = true;
        }
      if (!found) return usage();
    }
  }
  if (fns.empty()) return usage();

  std::printf(
      "fuse_ulp_sweep: %s patterns, %u threads, batch %s (%zu lanes), fma %s, scalar lanes "
      "checked in 1 block of %u\n",
      step == 1 ? "all 2^32" : ("every " + std::to_string(step) + "th of 2^32").c_str(), threads,
      xsimd::default_arch::name(), batch::size, FUSE_MATH_FUSED_FMA ? "fused" : "unfused", lane_every);
  bool ok = true;
  for (fn f : fns) {
    const auto start = std::chrono::steady_clock::now();
    // Threads take interleaved chunks so that each gets a share of the expensive ranges.
    constexpr std::uint64_t chunk = std::uint64_t{1} << 22;
    const std::uint64_t total = std::uint64_t{1} << 32;
    std::vector<tally> acc(threads), fst(threads);
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (std::uint64_t c = std::uint64_t{t} * chunk; c < total; c += std::uint64_t{threads} * chunk) {
          const std::uint64_t first = (c + step - 1) / step * step;
          sweep_range(f, first, std::min(c + chunk, total), step, lane_every, acc[t], fst[t]);
        }
      });
    for (auto& th : pool) th.join();
    tally a, q;
    for (unsigned t = 0; t < threads; ++t) {
      a.merge(acc[t]);
      q.merge(fst[t]);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ok &= report(f, "accurate", a, fuse::test::ulp_bound<accurate>(f), secs);
    ok &= report(f, "fast", q, fuse::test::ulp_bound<fast>(f), secs);
    std::fflush(stdout);
  }
  std::printf("%s\n", ok ? "all within bounds" : "FAILED");
  return ok ? 0 : 1;
}
