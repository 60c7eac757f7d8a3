// What the CUDA executor's results are checked against, in the emulated suite and on a GPU: the
// CPU's scalar lane (every element evaluated alone by the evaluators bind() makes for the same
// tree), compared bit for bit except that any NaN matches any NaN (x86 keeps an operand's sign
// and payload, the GPU makes its own NaN).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>

#include <fuse/core/tensor.hpp>
#include <fuse/cuda/eval.hpp>

namespace fuse::test::cuda {

/// Whether this host build's scalar math is the device's algorithm: fused fmas and the wide
/// (32-interval) tables (fuse/math/prims.hpp). Without them (a build without -march, or a CPU
/// without AVX-512) the CPU computes the same functions by another sequence of roundings, so
/// the results agree within the ULP bounds but not bit for bit: tests then report the counts.
inline constexpr bool host_runs_device_algorithm = FUSE_MATH_FUSED_FMA && FUSE_MATH_WIDE_TABLES;

/// e at every coordinate of extents ext (e broadcast to them), as a row-major tensor.
template <class Mode = accurate_math_t, class T, std::size_t R, class E>
tensor<T, static_cast<int>(R)> scalar_lane(const index_array<R>& ext, const E& e) {
  tensor<T, static_cast<int>(R)> out(ext);
  fuse::cuda::detail::bind_context ctx;
  auto ev = bind::bind<Mode>(e, bind::affine_map<R, E::rank>::broadcast(e.shape().array(), ext), ctx);
  index_t x[R > 0 ? R : 1] = {};
  for (index_t i = 0; i < out.size(); ++i) {
    out.data()[i] = to_storage<T>(ev.at(x));
    for (std::size_t k = R; k-- > 0;) {  // odometer
      if (++x[k] < ext[k]) break;
      x[k] = 0;
    }
  }
  return out;
}

/// Whether a and b hold the same value bits (any NaN matching any NaN).
template <class T>
bool same_bits(const T& a, const T& b) {
  if constexpr (is_floating_dtype<T>) {
    if (std::isnan(static_cast<double>(to_compute<T>(a))) && std::isnan(static_cast<double>(to_compute<T>(b))))
      return true;
  }
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// The first index in [0, n) where a and b differ (same_bits), or n.
template <class T>
std::size_t first_difference(const T* a, const T* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!same_bits(a[i], b[i])) return i;
  return n;
}

/// How many of a[0, n) and b[0, n) differ (same_bits).
template <class T>
std::size_t count_differences(const T* a, const T* b, std::size_t n) {
  std::size_t d = 0;
  for (std::size_t i = 0; i < n; ++i) d += !same_bits(a[i], b[i]);
  return d;
}

}  // namespace fuse::test::cuda
