// The checks of the row-program suites (test_rows*.cpp): a tree on the CUDA emulator under every
// thread order, one launch of the expected kernel, against the double reference.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include <fuse/cuda.hpp>
#include <fuse/fuse.hpp>
#include <fuse/reference.hpp>

#include "support/check.hpp"
#include "support/random.hpp"

namespace fuse::test::rows {

using namespace fuse;

/// A layer norm's operands for `rows` rows of n: x in [-x_range, x_range], a residual in [-3, 3],
/// gamma in [0.5, 1.5], beta in [-1, 1] (salts salt to salt + 3).
struct norm_operands {
  tensor<float, 2> x, res;
  tensor<float, 1> gamma, beta;
};
inline norm_operands random_norm_operands(index_t rows, index_t n, std::uint64_t salt, double x_range) {
  return {random_tensor<float>({rows, n}, salt, -x_range, x_range), random_tensor<float>({rows, n}, salt + 1, -3, 3),
          random_tensor<float>({n}, salt + 2, 0.5, 1.5), random_tensor<float>({n}, salt + 3, -1, 1)};
}
using fuse::test::expect_matches;
using fuse::test::tolerance;

constexpr cuda::schedule schedules[] = {cuda::schedule::forward, cuda::schedule::reverse, cuda::schedule::shuffled};

/// Bitwise equality of two tensors of one shape (any NaN matches any NaN).
template <class A>
bool same_bits(const A& a, const A& b) {
  using T = typename A::value_type;
  for (index_t i = 0; i < a.size(); ++i) {
    const T x = a.data()[i], y = b.data()[i];
    if constexpr (std::is_floating_point_v<T>)
      if (x != x && y != y) continue;
    if (std::memcmp(&x, &y, sizeof(T)) != 0) return false;
  }
  return true;
}

/// e on the emulator under every schedule into a fresh tensor of e's shape (the output filled
/// with 0xA5 first): one launch of `kernel` each (none when the output is empty), the same bits
/// under every order. Returns the result.
template <class T, class E>
tensor<T, static_cast<int>(E::rank)> run_rows(const E& e, const char* kernel = "row") {
  constexpr std::size_t R = E::rank;
  const auto ext = e.shape().array();
  tensor<T, static_cast<int>(R)> first(ext);
  for (const auto order : schedules) {
    tensor<T, static_cast<int>(R)> out(ext);
    if (out.size()) std::memset(static_cast<void*>(out.data()), 0xA5, sizeof(T) * static_cast<std::size_t>(out.size()));
    cuda::launch_log log;
    cuda::eval(out, e, cuda::emulated(order), cuda::log_to(log));
    REQUIRE(log.size() == (out.size() == 0 ? 0u : 1u));
    if (log.size() == 1) CHECK(log.launches[0].kernel == kernel);
    if (order == cuda::schedule::forward) first = out;
    else CHECK_MESSAGE(same_bits(out, first), "the result depends on the threads' order");
  }
  return first;
}

/// run_rows against the double reference of e, or of `same` (the same function in another form:
/// a decomposed layer norm against the fused node's reference).
template <class E, class F = E>
void check_rows(const E& e, tolerance tol, double ulps, const char* what, const char* kernel = "row",
                const F* same = nullptr) {
  INFO(std::string(what));
  using T = typename E::value_type;
  const auto got = run_rows<T>(e, kernel);
  if (same) expect_matches(got, reference(*same), tol, ulps, what);
  else expect_matches(got, reference(e), tol, ulps, what);
}

}  // namespace fuse::test::rows
