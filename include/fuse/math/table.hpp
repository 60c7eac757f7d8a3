// Piecewise-polynomial tables: how tanh, sigmoid, erf and erfc reach ~1 ULP at Eigen's speed.
//
// A function f on [0, 15.5 w] is cut into 16 intervals centred at j*w (interval 0 is [0, w/2]).
// Interval j holds p_j(u) ~ f(j*w + u), |u| <= w/2, as rows c0_hi, c0_lo, c1, ..., cd of a
// [rows][16] table: one AVX-512 vpermps fetches a coefficient for 16 lanes at once, so a table
// costs about what a polynomial of the same degree costs, with none of the exp/divide chain the
// closed forms need. The coefficients come from tools/fit_math.py (centred tables) and
// tools/fit_math_tables.py (reference-point tables).
//
// Evaluation keeps the rounding error below half an ulp of the result plus a little:
//   p = c0_hi + small,   small = u^2 R(u) + (c1 u + c0_lo),   R = c2 + c3 u + ... (Estrin)
// The constant term is exact (two floats) and everything added to it is small; where f(0) = 0
// (tanh, erf) interval 0 has c0 = 0, so small is the result and keeps relative accuracy.
#pragma once

#include <fuse/math/prims.hpp>

#include <cstddef>

namespace fuse::math::detail {

// Each table exists once per program for the host (an inline variable) and, under nvcc, once
// per translation unit in device memory: device code cannot read host variables.
// FUSE_MATH_TABLE32 holds 32 intervals per row (one vpermt2ps per row on AVX-512).
#if defined(__CUDACC__)
#define FUSE_MATH_TABLE_N(name, rows, width, ...)                     \
  alignas(64) inline constexpr float name[rows][width] = __VA_ARGS__; \
  static __device__ constexpr float name##_device[rows][width] = __VA_ARGS__;
#else
#define FUSE_MATH_TABLE_N(name, rows, width, ...) alignas(64) inline constexpr float name[rows][width] = __VA_ARGS__;
#endif
#define FUSE_MATH_TABLE(name, rows, ...) FUSE_MATH_TABLE_N(name, rows, 16, __VA_ARGS__)
#define FUSE_MATH_TABLE32(name, rows, ...) FUSE_MATH_TABLE_N(name, rows, 32, __VA_ARGS__)

#if defined(__CUDA_ARCH__)
#define FUSE_MATH_TABLE_REF(name) (name##_device)
#else
#define FUSE_MATH_TABLE_REF(name) (name)
#endif

/// A table value c0_hi + small, kept apart so that callers can add it where it rounds least.
template <class V>
struct split_value {
  V hi, small;
  FUSE_HD FUSE_FORCE_INLINE V sum() const noexcept { return hi + small; }
};

/// Row r of a table of 8, 16 or 32 intervals at the interval index in k's low bits.
template <std::size_t Width, class V>
FUSE_HD FUSE_FORCE_INLINE V table_row(const float (*t)[Width], int r, V k) noexcept {
  static_assert(Width == 8 || Width == 16 || Width == 32, "fuse math tables hold 8, 16 or 32 intervals");
  if constexpr (Width == 8) {
    return prims<V>::lookup8(t[r], k);
  } else if constexpr (Width == 16) {
    return prims<V>::lookup16(t[r], k);
  } else {
    return prims<V>::lookup32(t[r], k);
  }
}

/// Evaluates table t (rows c0_hi, c0_lo, c1..c<Deg>, and c1_lo when SplitC1) at a >= 0
/// (a <= (Width - 1/2) w). inv_w ~ 1/w only has to pick an interval; u = a - j*w is exact
/// because j*w has few bits (w does) and lies within a factor 2 of a. SplitC1 carries c1 in
/// two floats too, for a function whose slope at 0 is not a float (erf: 2/sqrt(pi)).
template <int Deg, bool SplitC1 = false, std::size_t Width, class V>
FUSE_HD FUSE_FORCE_INLINE split_value<V> piecewise(const float (*t)[Width], V a, float w, float inv_w) noexcept {
  static_assert(Deg >= 6 && Deg <= 9, "piecewise: Estrin is spelled out for degrees 6 to 9");
  using P = prims<V>;
  const V k = P::fma(a, V(inv_w), V(round_shifter));
  const V u = P::fma(k - V(round_shifter), V(-w), a);
  const auto c = [&](int i) { return table_row(t, i + 1, k); };  // c(i) = c_i, i >= 1
  const V u2 = u * u;
  const V u4 = u2 * u2;
  const V p23 = P::fma(c(3), u, c(2));
  const V p45 = P::fma(c(5), u, c(4));
  V r = P::fma(u2, p45, p23);
  if constexpr (Deg == 6) {
    r = P::fma(u4, c(6), r);
  } else if constexpr (Deg == 7) {
    r = P::fma(u4, P::fma(c(7), u, c(6)), r);
  } else if constexpr (Deg == 8) {
    r = P::fma(u4, P::fma(u2, c(8), P::fma(c(7), u, c(6))), r);
  } else {
    r = P::fma(u4, P::fma(u2, P::fma(c(9), u, c(8)), P::fma(c(7), u, c(6))), r);
  }
  const V c0_lo = table_row(t, 1, k);
  if constexpr (SplitC1) {
    // c1 u + (u^2 R + (c1_lo u + c0_lo)): one rounding of the whole small part, which is the
    // result itself in interval 0, where c0 = 0.
    const V lo = P::fma(table_row(t, Deg + 2, k), u, c0_lo);
    return {table_row(t, 0, k), P::fma(c(1), u, P::fma(u2, r, lo))};
  } else {
    // u^2 R + (c1 u + c0_lo): one step shorter. c1 u is rounded on its own, which costs
    // nothing when c1 = 1 (tanh's interval 0) or c0 dominates (every other interval).
    return {table_row(t, 0, k), P::fma(u2, r, P::fma(c(1), u, c0_lo))};
  }
}

/// A reference-point table (rows t, c0, c1, ..., cd): interval j holds p_j(u) ~ f(t_j + u) with
/// u = a - t_j. Each t_j is a float near the interval, chosen (tools/fit_math_tables.py) so that
/// f(t_j) is a float to within 2^-11 of an ulp: c0 = f(t_j) needs no second float, and u is exact
/// (t_j lies within a factor 2 of every a of its interval). `k` holds the index in the low 4
/// (or 5) bits of its bit pattern (lookup16, lookup32). Returns u.
template <std::size_t Width, class V>
FUSE_HD FUSE_FORCE_INLINE V table_offset(const float (*t)[Width], V a, V k) noexcept {
  return a - table_row(t, 0, k);
}

/// c2 + c3 u + ... + cd u^(d-2) by Estrin's scheme, with u2 = u^2 (rows c0.. start at t[1]).
template <int Deg, std::size_t Width, class V>
FUSE_HD FUSE_FORCE_INLINE V table_tail(const float (*t)[Width], V k, V u, V u2) noexcept {
  static_assert(Deg >= 4 && Deg <= 7, "table_tail: Estrin is spelled out for degrees 4 to 7");
  using P = prims<V>;
  const auto c = [&](int i) { return table_row(t, i + 1, k); };
  const V p23 = P::fma(c(3), u, c(2));
  if constexpr (Deg == 4) {
    return P::fma(u2, c(4), p23);
  } else if constexpr (Deg == 5) {
    return P::fma(u2, P::fma(c(5), u, c(4)), p23);
  } else if constexpr (Deg == 6) {
    return P::fma(u2, P::fma(u2, c(6), P::fma(c(5), u, c(4))), p23);
  } else {
    return P::fma(u2, P::fma(u2, P::fma(c(7), u, c(6)), P::fma(c(5), u, c(4))), p23);
  }
}

}  // namespace fuse::math::detail
