// Test helpers: random fills for every dtype, edge values, and comparison of a fused result
// against fuse::reference() with a tolerance that names the first mismatches it finds.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <fuse/core/half_io.hpp>
#include <fuse/fuse.hpp>
#include <fuse/reference.hpp>

#include "support/random.hpp"

namespace fuse::test {

/// The sizes every elementwise test runs: not multiples of any SIMD width or unroll.
inline const std::vector<index_t> odd_sizes = {0, 1, 7, 17, 1023, 4097};

template <class T>
T random_value(std::mt19937_64& g, double lo, double hi) {
  if constexpr (is_bool_dtype<T>) {
    return (g() & 1) != 0;
  } else if constexpr (is_integer_dtype<T>) {
    const double a = std::max(lo, static_cast<double>(std::numeric_limits<T>::lowest()));
    const double b = std::min(hi, static_cast<double>(std::numeric_limits<T>::max()));
    std::uniform_int_distribution<std::int64_t> d(static_cast<std::int64_t>(a), static_cast<std::int64_t>(b));
    return static_cast<T>(d(g));
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    return T(d(g));
  }
}

/// Fills every element of a (possibly strided) view with values from [lo, hi].
template <class View>
void fill(View v, std::mt19937_64& g, double lo = -4, double hi = 4) {
  using T = typename View::value_type;
  reference_detail::for_all(v.shape().array(), [&](const index_t* x) {
    index_array<View::rank> i{};
    for (std::size_t d = 0; d < View::rank; ++d) i[d] = x[d];
    v[i] = random_value<T>(g, lo, hi);
  });
  if constexpr (View::rank == 0) *v.data() = random_value<T>(g, lo, hi);
}

/// Special values of T: zeros, infinities, NaN, extremes, tiny values, int limits.
template <class T>
std::vector<T> edge_values() {
  if constexpr (is_bool_dtype<T>) {
    return {false, true};
  } else if constexpr (is_integer_dtype<T>) {
    using L = std::numeric_limits<T>;
    return {T(0),
            T(1),
            T(L::max()),
            T(L::lowest()),
            T(L::max() - 1),
            T(L::lowest() + 1),
            static_cast<T>(is_signed_dtype<T> ? -1 : 2)};
  } else {
    using L = std::numeric_limits<T>;
    return {T(0.0),         T(-0.0),  T(1.0),      T(-1.0),  L::infinity(),   T(-static_cast<double>(L::infinity())),
            L::quiet_NaN(), L::max(), L::lowest(), L::min(), L::denorm_min(), T(0.5),
            T(-0.5),        T(2.5),   T(-2.5),     T(1e-3),  T(100.0),        T(-100.0)};
  }
}

/// A tensor of the given extents filled from [lo, hi] with the stream of `salt`.
template <class T = float, std::size_t R>
tensor<T, static_cast<int>(R)> random_tensor(const index_t (&ext)[R], std::uint64_t salt, double lo = -3,
                                             double hi = 3) {
  index_array<R> e{};
  for (std::size_t i = 0; i < R; ++i) e[i] = ext[i];
  tensor<T, static_cast<int>(R)> t(e);
  auto g = rng(salt);
  fill(t.view(), g, lo, hi);
  return t;
}

/// Sprinkles edge values into a contiguous tensor (every k-th element).
template <class Tensor>
void sprinkle_edges(Tensor& t, std::mt19937_64& g) {
  using T = typename Tensor::value_type;
  const auto e = edge_values<T>();
  if (t.size() == 0) return;
  for (index_t i = 0; i < t.size(); i += 1 + static_cast<index_t>(g() % 5)) t.data()[i] = e[g() % e.size()];
}

struct tolerance {
  double rel = 0;      ///< relative to |reference|
  double abs = 0;      ///< absolute floor
  bool nan_ok = true;  ///< NaN in the reference accepts NaN only
};

/// Float GEMM tolerance: a K-term sum of products of values in [-1, 1] in float arithmetic.
inline tolerance gemm_tol(index_t k) { return {1e-6, 4e-7 * static_cast<double>(k + 1)}; }

/// Distance in units of the last place of T at the reference value.
template <class T>
double ulps(double got, double ref) {
  if (got == ref) return 0;
  const double a = std::fabs(ref);
  const int digits = std::numeric_limits<T>::digits;
  const int emin = std::numeric_limits<T>::min_exponent;
  int e = a == 0 ? emin : std::max(std::ilogb(a) + 1, emin);
  return std::fabs(got - ref) / std::ldexp(1.0, e - digits);
}

template <class T>
std::string show(T v) {
  std::ostringstream s;
  if constexpr (std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>) s << static_cast<int>(v);
  else s << v;
  return s.str();
}

/// Compares a fused result (any dtype) with its reference. Integers and bools must be exact;
/// floats must be within `tol` or `max_ulps` units of T's last place of the reference.
template <class Got, class Ref>
void expect_matches(const Got& got, const Ref& ref, tolerance tol = {}, double max_ulps = 4, const char* what = "") {
  using T = typename Got::value_type;
  REQUIRE(got.shape().array() == ref.shape().array());
  int shown = 0;
  index_t bad = 0;
  double worst = 0;
  reference_detail::for_all(got.shape().array(), [&](const index_t* x) {
    index_array<Got::rank> i{};
    for (std::size_t d = 0; d < Got::rank; ++d) i[d] = x[d];
    const auto r = ref[i];
    const T g = got[i];
    bool ok;
    if constexpr (is_floating_dtype<T>) {
      const double gv = static_cast<double>(to_compute<T>(g));
      const double rv = static_cast<double>(r);
      if (std::isnan(rv)) ok = std::isnan(gv);
      else if (std::isinf(rv) || std::isinf(gv)) ok = gv == rv;
      else {
        const double u = ulps<T>(gv, rv);
        worst = std::max(worst, u);
        ok = std::fabs(gv - rv) <= tol.abs + tol.rel * std::fabs(rv) || u <= max_ulps;
      }
    } else {
      ok = static_cast<std::int64_t>(g) == static_cast<std::int64_t>(r);
    }
    if (!ok) {
      ++bad;
      if (shown++ < 5) {
        std::string at = to_string(i);
        FAIL_CHECK(std::string(what) << " mismatch at " << at << ": got " << show(g) << ", reference " << show(r));
      }
    }
  });
  if (bad) FAIL_CHECK(std::string(what) << ": " << bad << " mismatching elements of " << got.size());
  CHECK(bad == 0);
}

/// Evaluates e into a fresh tensor with fuse::eval and compares it with fuse::reference(e).
template <class E>
void expect_matches_reference(const E& e, tolerance tol, double max_ulps, const char* what) {
  expect_matches(materialize(e), reference(e), tol, max_ulps, what);
}

}  // namespace fuse::test
