// The CPU executor's vectors: one `vec<C, A>` holds `width<A>` lanes of compute type C, the
// same lane count for every C so that a tree mixing dtypes moves through one loop in step:
//   float, int32  -> one xsimd batch
//   double, int64 -> a pair of xsimd batches (x86 batches of 64-bit lanes have half the lanes)
//   bool          -> xsimd::batch_bool<float, A>, the canonical mask
// and fuse::lanes<...> specialisations that give ops.hpp's vocabulary to each of them.
//
// CPU only (xsimd). A is the xsimd arch the translation unit is compiled for.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include "fuse/expr/lanes.hpp"
#include "fuse/simd/select.hpp"

#if defined(__SSE2__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace fuse::simd {

/// The arch this translation unit targets (set by -march / -m flags).
using default_arch = xsimd::default_arch;

/// Lanes in every vector of arch A: a float batch's.
template <class A>
inline constexpr int width = static_cast<int>(xsimd::batch<float, A>::size);

/// `width<A>` lanes of a 64-bit type: two batches.
template <class B>
struct pair {
  B lo, hi;
  static constexpr int half = static_cast<int>(B::size);
};

template <class C, class A>
struct vec_for;
template <class A>
struct vec_for<float, A> {
  using type = xsimd::batch<float, A>;
};
template <class A>
struct vec_for<std::int32_t, A> {
  using type = xsimd::batch<std::int32_t, A>;
};
template <class A>
struct vec_for<double, A> {
  using type = pair<xsimd::batch<double, A>>;
};
template <class A>
struct vec_for<std::int64_t, A> {
  using type = pair<xsimd::batch<std::int64_t, A>>;
};
template <class A>
struct vec_for<bool, A> {
  using type = xsimd::batch_bool<float, A>;
};

/// The vector of compute type C on arch A.
template <class C, class A>
using vec = typename vec_for<C, A>::type;

template <class A>
using mask = xsimd::batch_bool<float, A>;

// ---- masks as bit sets ---------------------------------------------------------------------------
// Moving a mask between lane types (float <-> double halves) goes through its bits. On AVX-512
// a mask register already is the bit set. (Which kind a register is, is told by its size: the
// vector type as a template argument would warn that its alignment attribute is ignored.)

template <class T, class A>
std::uint64_t to_bits(const xsimd::batch_bool<T, A>& m) {
  using R = typename xsimd::batch_bool<T, A>::register_type;
  if constexpr (sizeof(R) <= sizeof(std::uint64_t)) {
    return static_cast<std::uint64_t>(static_cast<R>(m));
  } else {
    // A vector register (SSE/AVX): its lanes as bools (xsimd 8 has no movemask accessor).
    alignas(64) bool lanes[xsimd::batch_bool<T, A>::size];
    m.store_aligned(lanes);
    std::uint64_t b = 0;
    for (std::size_t i = 0; i < xsimd::batch_bool<T, A>::size; ++i) b |= static_cast<std::uint64_t>(lanes[i]) << i;
    return b;
  }
}

template <class T, class A>
xsimd::batch_bool<T, A> from_bits(std::uint64_t bits) {
  using BB = xsimd::batch_bool<T, A>;
  using R = typename BB::register_type;
  if constexpr (sizeof(R) <= sizeof(std::uint64_t)) {
    return BB(static_cast<R>(bits));
  } else {
    using I = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
    using IB = xsimd::batch<I, A>;
    alignas(64) I lane_bit[IB::size];
    for (std::size_t i = 0; i < IB::size; ++i) lane_bit[i] = I(1) << i;
    const IB lb = IB::load_aligned(lane_bit);
    const auto is_set = (IB(static_cast<I>(bits)) & lb) != IB(0);
    if constexpr (std::is_same_v<T, I>) return is_set;
    else return xsimd::bool_cast(is_set);
  }
}

/// The float mask of a pair's two 64-bit-lane masks.
template <class T, class A>
mask<A> join_masks(const xsimd::batch_bool<T, A>& lo, const xsimd::batch_bool<T, A>& hi) {
  constexpr int h = static_cast<int>(xsimd::batch_bool<T, A>::size);
  return from_bits<float, A>(to_bits(lo) | (to_bits(hi) << h));
}
/// The 64-bit-lane halves of a float mask.
template <class T, class A>
pair<xsimd::batch_bool<T, A>> split_mask(const mask<A>& m) {
  constexpr int h = static_cast<int>(xsimd::batch_bool<T, A>::size);
  const std::uint64_t b = to_bits(m);
  return {from_bits<T, A>(b & ((std::uint64_t{1} << h) - 1)), from_bits<T, A>(b >> h)};
}

}  // namespace fuse::simd

namespace fuse {

/// float lanes: NaN-propagating min/max, explicit rounding modes. (xsimd's operator!= is the
/// *ordered* not-equal on AVX and AVX-512, false for NaN; fuse's ne and is_nan are written with
/// == so that NaN != x holds on every arch.)
template <class A>
struct lanes<xsimd::batch<float, A>> {
  using V = xsimd::batch<float, A>;
  using scalar = float;
  using mask = xsimd::batch_bool<float, A>;
  static constexpr int size = static_cast<int>(V::size);

  static V splat(float x) { return V(x); }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V neg(V a) { return -a; }
  static V abs(V a) { return xsimd::abs(a); }
  static V fma(V a, V b, V c) { return xsimd::fma(a, b, c); }
  // x86 max/min return the second operand when either is NaN: put a NaN first operand back.
  static V max(V a, V b) { return xsimd::select(~(a == a), a, xsimd::max(a, b)); }
  static V min(V a, V b) { return xsimd::select(~(a == a), a, xsimd::min(a, b)); }
  static V sqrt(V a) { return xsimd::sqrt(a); }
  static V floor(V a) { return xsimd::floor(a); }
  static V ceil(V a) { return xsimd::ceil(a); }
  static V trunc(V a) { return xsimd::trunc(a); }
  static V round_even(V a) {
    // 2^23 + copysign: adding and subtracting it rounds to an integer in the default mode.
    const V big(8388608.0f);
    const V r = (xsimd::abs(a) + big) - big;
    return xsimd::select(xsimd::abs(a) < big, xsimd::copysign(r, a), a);
  }
  static V round_away(V a) {
    const V t = xsimd::trunc(a);
    const V r = t + xsimd::select(xsimd::abs(a - t) >= V(0.5f), xsimd::copysign(V(1.0f), a), V(0.0f));
    return xsimd::copysign(r, a);
  }
  static mask eq(V a, V b) { return a == b; }
  static mask ne(V a, V b) { return ~(a == b); }
  static mask lt(V a, V b) { return a < b; }
  static mask le(V a, V b) { return a <= b; }
  static mask gt(V a, V b) { return a > b; }
  static mask ge(V a, V b) { return a >= b; }
  static mask is_nan(V a) { return ~(a == a); }
  static V select(mask m, V a, V b) { return xsimd::select(m, a, b); }
};

/// int32 lanes: wrapping arithmetic; comparisons give the canonical float mask.
template <class A>
struct lanes<xsimd::batch<std::int32_t, A>> {
  using V = xsimd::batch<std::int32_t, A>;
  using scalar = std::int32_t;
  using mask = xsimd::batch_bool<float, A>;
  static constexpr int size = static_cast<int>(V::size);

  static V splat(std::int32_t x) { return V(x); }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V neg(V a) { return V(0) - a; }
  static V abs(V a) { return simd::select(a < V(0), V(0) - a, a); }
  static V max(V a, V b) { return xsimd::max(a, b); }
  static V min(V a, V b) { return xsimd::min(a, b); }
  static mask eq(V a, V b) { return xsimd::bool_cast(a == b); }
  static mask ne(V a, V b) { return xsimd::bool_cast(a != b); }
  static mask lt(V a, V b) { return xsimd::bool_cast(a < b); }
  static mask le(V a, V b) { return xsimd::bool_cast(a <= b); }
  static mask gt(V a, V b) { return xsimd::bool_cast(a > b); }
  static mask ge(V a, V b) { return xsimd::bool_cast(a >= b); }
  static V select(mask m, V a, V b) { return simd::select(xsimd::bool_cast(m), a, b); }
};

/// 64-bit lanes (double, int64) as pairs of batches.
template <class B>
struct lanes<simd::pair<B>> {
  using V = simd::pair<B>;
  using scalar = typename B::value_type;
  using A = typename B::arch_type;
  using mask = xsimd::batch_bool<float, A>;
  using half_lanes = lanes<B>;
  static constexpr int size = 2 * static_cast<int>(B::size);
  static constexpr bool is_float = std::is_floating_point_v<scalar>;

  static V splat(scalar x) { return {B(x), B(x)}; }
  static V add(V a, V b) { return {a.lo + b.lo, a.hi + b.hi}; }
  static V sub(V a, V b) { return {a.lo - b.lo, a.hi - b.hi}; }
  static V mul(V a, V b) { return {a.lo * b.lo, a.hi * b.hi}; }
  static V div(V a, V b)
    requires is_float
  {
    return {a.lo / b.lo, a.hi / b.hi};
  }
  static V neg(V a) { return {B(scalar(0)) - a.lo, B(scalar(0)) - a.hi}; }
  static V abs(V a) {
    if constexpr (is_float) return {xsimd::abs(a.lo), xsimd::abs(a.hi)};
    else return {simd::select(a.lo < B(0), B(0) - a.lo, a.lo), simd::select(a.hi < B(0), B(0) - a.hi, a.hi)};
  }
  static V max(V a, V b) { return {max1(a.lo, b.lo), max1(a.hi, b.hi)}; }
  static V min(V a, V b) { return {min1(a.lo, b.lo), min1(a.hi, b.hi)}; }
  static V sqrt(V a)
    requires is_float
  {
    return {xsimd::sqrt(a.lo), xsimd::sqrt(a.hi)};
  }
  static V floor(V a)
    requires is_float
  {
    return {xsimd::floor(a.lo), xsimd::floor(a.hi)};
  }
  static V ceil(V a)
    requires is_float
  {
    return {xsimd::ceil(a.lo), xsimd::ceil(a.hi)};
  }
  static V trunc(V a)
    requires is_float
  {
    return {xsimd::trunc(a.lo), xsimd::trunc(a.hi)};
  }
  static V round_away(V a)
    requires is_float
  {
    return {round_away1(a.lo), round_away1(a.hi)};
  }
  static V round_even(V a)
    requires is_float
  {
    return {round_even1(a.lo), round_even1(a.hi)};
  }
  static mask eq(V a, V b) { return simd::join_masks(a.lo == b.lo, a.hi == b.hi); }
  static mask ne(V a, V b) { return simd::join_masks(~(a.lo == b.lo), ~(a.hi == b.hi)); }
  static mask lt(V a, V b) { return simd::join_masks(a.lo < b.lo, a.hi < b.hi); }
  static mask le(V a, V b) { return simd::join_masks(a.lo <= b.lo, a.hi <= b.hi); }
  static mask gt(V a, V b) { return simd::join_masks(a.lo > b.lo, a.hi > b.hi); }
  static mask ge(V a, V b) { return simd::join_masks(a.lo >= b.lo, a.hi >= b.hi); }
  static mask is_nan(V a)
    requires is_float
  {
    return simd::join_masks(~(a.lo == a.lo), ~(a.hi == a.hi));
  }
  static V select(mask m, V a, V b) {
    const auto h = simd::split_mask<scalar, A>(m);
    return {simd::select(h.lo, a.lo, b.lo), simd::select(h.hi, a.hi, b.hi)};
  }

 private:
  static B max1(B a, B b) {
    if constexpr (is_float) return xsimd::select(~(a == a), a, xsimd::max(a, b));
    else return simd::select(a < b, b, a);
  }
  static B min1(B a, B b) {
    if constexpr (is_float) return xsimd::select(~(a == a), a, xsimd::min(a, b));
    else return simd::select(b < a, b, a);
  }
  static B round_away1(B a) {
    const B t = xsimd::trunc(a);
    const B r = t + xsimd::select(xsimd::abs(a - t) >= B(0.5), xsimd::copysign(B(1.0), a), B(0.0));
    return xsimd::copysign(r, a);
  }
  static B round_even1(B a) {
    const B big(4503599627370496.0);  // 2^52
    const B r = (xsimd::abs(a) + big) - big;
    return xsimd::select(xsimd::abs(a) < big, xsimd::copysign(r, a), a);
  }
};

/// Mask lanes (bool values). xsimd 8.1's AVX-512 mask xor is an or, so xor is written with
/// and, or and not.
template <class A>
struct lanes<xsimd::batch_bool<float, A>> {
  using V = xsimd::batch_bool<float, A>;
  using scalar = bool;
  using mask = V;
  static constexpr int size = static_cast<int>(V::size);

  static V splat(bool x) { return V(x); }
  static V logical_and(V a, V b) { return a & b; }
  static V logical_or(V a, V b) { return a | b; }
  static V logical_xor(V a, V b) { return (a | b) & ~(a & b); }
  static V logical_not(V a) { return ~a; }
  static V eq(V a, V b) { return ~logical_xor(a, b); }
  static V ne(V a, V b) { return logical_xor(a, b); }
  static V lt(V a, V b) { return ~a & b; }
  static V le(V a, V b) { return ~a | b; }
  static V gt(V a, V b) { return a & ~b; }
  static V ge(V a, V b) { return a | ~b; }
  static V select(V m, V a, V b) { return (m & a) | (~m & b); }
};

}  // namespace fuse
