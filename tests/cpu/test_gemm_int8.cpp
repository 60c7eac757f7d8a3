// The int8 GEMM (fuse/cpu/gemm_int8.hpp) called directly, against an exact reference (an int64
// triple loop reduced modulo 2^32, as TVM's int32 arithmetic wraps): every pair of int8/uint8
// operands, sizes that are and are not multiples of the tiles and of the 4-wide k groups,
// transposed and strided operands, strided outputs (whose gaps must stay untouched), inputs
// at the limits of their types, sums that wrap, and shapes that cross every cache block.
// Whichever instruction set it was compiled for (the test is also built for other -march
// levels) must give the same bits.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fuse/cpu/gemm_int8.hpp>

#include "support/random.hpp"

using fuse::index_t;
namespace gemm = fuse::cpu::gemm;

namespace {

enum class fill { random, lowest, highest, extremes };

template <class T>
T draw(std::mt19937_64& g, fill f) {
  using L = std::numeric_limits<T>;
  switch (f) {
    case fill::lowest: return L::lowest();
    case fill::highest: return L::max();
    case fill::extremes: {
      const T v[] = {L::lowest(), L::max(), T(0), T(L::lowest() + 1), T(L::max() - 1)};
      return v[g() % 5];
    }
    default: return static_cast<T>(static_cast<int>(g() % 256) + L::lowest());
  }
}

/// The layouts an operand is tested in: row-major, column-major (a transposed operand), and
/// both with non-unit strides on both axes.
constexpr int layouts = 4;

template <class T>
struct matrix {
  index_t rows, cols, rs, cs;
  std::vector<T> buf;
  matrix(index_t r, index_t c, int layout) : rows(r), cols(c) {
    switch (layout) {
      case 0: rs = c, cs = 1; break;
      case 1: rs = 1, cs = r; break;
      case 2: rs = 2 * c + 3, cs = 2; break;
      default: rs = 3, cs = 3 * r + 1; break;
    }
    buf.assign(static_cast<std::size_t>(r > 0 && c > 0 ? (r - 1) * rs + (c - 1) * cs + 1 : 1), T(0));
  }
  T& operator()(index_t i, index_t j) { return buf[static_cast<std::size_t>(i * rs + j * cs)]; }
  gemm::strided<T> view() const { return {buf.data(), rs, cs}; }
};

constexpr std::int32_t sentinel = 0x5A5A5A5A;

/// Runs gemm_int8 on fresh operands and checks every output and every gap of a strided C.
/// Returns the exact (unwrapped) reference sum of C(0, 0), for the wrapping test.
template <class TA, class TB>
std::int64_t check_gemm(index_t m, index_t n, index_t k, int la, int lb, bool strided_c, fill fa, fill fb,
                        std::uint64_t salt) {
  auto g = fuse::test::rng(salt);
  matrix<TA> a(m, k, la);
  matrix<TB> b(k, n, lb);
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < k; ++j) a(i, j) = draw<TA>(g, fa);
  for (index_t i = 0; i < k; ++i)
    for (index_t j = 0; j < n; ++j) b(i, j) = draw<TB>(g, fb);
  const index_t crs = strided_c ? 2 * n + 3 : n, ccs = strided_c ? 2 : 1;
  std::vector<std::int32_t> c(static_cast<std::size_t>(m > 0 && n > 0 ? (m - 1) * crs + (n - 1) * ccs + 1 : 1),
                              sentinel);
  gemm::gemm_int8<TA, TB>(m, n, k, a.view(), b.view(), c.data(), crs, ccs);

  std::int64_t first = 0;
  index_t bad = 0;
  std::ostringstream what;
  std::vector<char> written(c.size(), 0);
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      std::int64_t s = 0;
      for (index_t t = 0; t < k; ++t) s += std::int64_t{a(i, t)} * std::int64_t{b(t, j)};
      if (i == 0 && j == 0) first = s;
      const auto want = static_cast<std::int32_t>(static_cast<std::uint32_t>(s));  // modulo 2^32
      const std::size_t at = static_cast<std::size_t>(i * crs + j * ccs);
      written[at] = 1;
      if (c[at] != want && bad++ < 3) what << " C(" << i << ", " << j << ") = " << c[at] << ", want " << want << ";";
    }
  for (std::size_t p = 0; p < c.size(); ++p)
    if (!written[p] && c[p] != sentinel && bad++ < 3) what << " gap " << p << " overwritten;";
  INFO(std::string(gemm::gemm_int8_isa) << " m=" << m << " n=" << n << " k=" << k << " layouts " << la << "/" << lb
                                        << (strided_c ? " strided C" : "") << ":" << what.str());
  CHECK(bad == 0);
  return first;
}

template <class TA, class TB>
void sweep_sizes(std::uint64_t salt) {
  const index_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 17, 64, 100, 257};
  int layout = 0;
  for (index_t m : sizes)
    for (index_t n : sizes)
      for (index_t k : sizes) {
        if (m * n * k > 300000) continue;  // the reference is a triple loop
        ++layout;
        check_gemm<TA, TB>(m, n, k, layout % layouts, (layout / layouts) % layouts, layout % 3 == 0, fill::random,
                           fill::random, ++salt);
      }
}

template <class TA, class TB>
void limits(std::uint64_t salt) {
  const fill fills[] = {fill::lowest, fill::highest, fill::extremes, fill::random};
  struct {
    index_t m, n, k;
  } shapes[] = {{17, 33, 100}, {5, 7, 1027}, {12, 32, 4}, {13, 35, 6}};
  for (fill fa : fills)
    for (fill fb : fills)
      for (auto s : shapes) {
        ++salt;
        check_gemm<TA, TB>(s.m, s.n, s.k, int(salt % layouts), int(salt / 3 % layouts), salt % 2 == 0, fa, fb, salt);
      }
}

}  // namespace

TEST_CASE("gemm_int8: the instruction set it was compiled for") {
  MESSAGE("gemm_int8 kernel: " << std::string(gemm::gemm_int8_isa));
}

TEST_CASE("gemm_int8 over sizes, layouts and every operand dtype pair") {
  sweep_sizes<std::uint8_t, std::int8_t>(1000);
  sweep_sizes<std::int8_t, std::int8_t>(3000);
  sweep_sizes<std::int8_t, std::uint8_t>(5000);
  sweep_sizes<std::uint8_t, std::uint8_t>(7000);
}

TEST_CASE("gemm_int8 at the limits of the operand types (-128, 127, 0, 255, mixed)") {
  limits<std::uint8_t, std::int8_t>(11000);
  limits<std::int8_t, std::int8_t>(12000);
  limits<std::int8_t, std::uint8_t>(13000);
  limits<std::uint8_t, std::uint8_t>(14000);
}

TEST_CASE("gemm_int8 wraps int32 sums as TVM does") {
  // 255 * 127 * 140000 = 4.5e9 and the other extremes all leave int32: the results must be the
  // sums modulo 2^32 (vpdpbusd, vpmaddwd and the corrections all wrap; nothing saturates).
  constexpr index_t K = 140000;
  const auto out_of_int32 = [](std::int64_t s) {
    return s > std::numeric_limits<std::int32_t>::max() || s < std::numeric_limits<std::int32_t>::min();
  };
  CHECK(out_of_int32(check_gemm<std::uint8_t, std::int8_t>(3, 5, K, 0, 1, false, fill::highest, fill::highest, 1)));
  CHECK(out_of_int32(check_gemm<std::uint8_t, std::int8_t>(2, 3, K, 1, 0, true, fill::highest, fill::lowest, 2)));
  CHECK(out_of_int32(check_gemm<std::int8_t, std::int8_t>(3, 4, K, 0, 1, false, fill::lowest, fill::lowest, 3)));
  CHECK(out_of_int32(check_gemm<std::int8_t, std::uint8_t>(4, 3, K, 0, 1, false, fill::lowest, fill::highest, 4)));
  CHECK(out_of_int32(check_gemm<std::uint8_t, std::uint8_t>(3, 3, K, 0, 1, true, fill::highest, fill::highest, 5)));
  check_gemm<std::int8_t, std::int8_t>(2, 17, K + 3, 2, 3, false, fill::extremes, fill::extremes, 6);
}

TEST_CASE("gemm_int8 across every cache block (k, m and n blocks, tails of each)") {
  // Past KC (reduction blocks accumulate into C), MC (several A blocks) and NC (several B blocks)
  // of every instruction set, with k not a multiple of 4.
  check_gemm<std::int8_t, std::int8_t>(13, 70, 2103, 0, 1, false, fill::random, fill::random, 21);
  check_gemm<std::uint8_t, std::int8_t>(7, 40, 2103, 1, 0, true, fill::random, fill::random, 22);
  check_gemm<std::uint8_t, std::uint8_t>(401, 37, 1030, 0, 1, false, fill::random, fill::random, 23);
  check_gemm<std::int8_t, std::uint8_t>(390, 2100, 9, 0, 0, false, fill::random, fill::random, 24);
  check_gemm<std::int8_t, std::int8_t>(25, 2061, 37, 1, 1, true, fill::extremes, fill::extremes, 25);
}
