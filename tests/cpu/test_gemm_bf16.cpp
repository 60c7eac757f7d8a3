// The bfloat16 pair GEMM (fuse/cpu/gemm_bf16.hpp): its packing, blocking and tile edges through
// the widened pair kernel on every machine, and through vdpbf16ps where the CPU has it
// (compiled with AVX512_BF16), each against double sums with the float GEMM's bound; when the
// instruction may run (dpbf16_exact) and that gemm_bf16 keeps subnormal and tiny operands exact.
// fuse::eval's bfloat16 contractions, which take this kernel where the CPU has the instruction,
// are tested in test_contract_half.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fuse/cpu/gemm_bf16.hpp>

#include "support/check.hpp"

using namespace fuse;
namespace gm = fuse::cpu::gemm;

namespace {

/// A strided bfloat16 matrix in its own buffer (rows x cols, element (i, j) at
/// data[i * rs + j * cs]); `by_rows`: rows contiguous up to `step`, else columns.
struct matrix {
  std::vector<bfloat16> buf;
  index_t rows, cols, rs, cs;
  matrix(index_t r, index_t c, bool by_rows, index_t step, std::mt19937_64& g, double lo = -1, double hi = 1)
      : buf(static_cast<std::size_t>(std::max<index_t>(r * c * step, 1))),
        rows(r),
        cols(c),
        rs(by_rows ? c * step : step),
        cs(by_rows ? step : r * step) {
    for (auto& v : buf) v = test::random_value<bfloat16>(g, lo, hi);
  }
  gm::strided<bfloat16> view() const { return {buf.data(), rs, cs}; }
  bfloat16& at(index_t i, index_t j) { return buf[static_cast<std::size_t>(i * rs + j * cs)]; }
  double operator()(index_t i, index_t j) const {
    return static_cast<double>(static_cast<float>(buf[static_cast<std::size_t>(i * rs + j * cs)]));
  }
};

/// Element by element, got (m x n at c with strides rs, cs; Out float or bfloat16) against the
/// double sums of A B: the float GEMM's bound (test_contract_half.cpp, expect_within_bound):
/// |S_f - S| <= (gamma(K - 1, 2^-24) + gamma(K - 1, 2^-53)) sum |a b| + 2K 2^-150, a 16-bit result
/// being S_f rounded once; NaN and infinite sums exactly (NaN as NaN). Columns from column j0
/// of B. Returns the elements outside the bound (the first few reported).
template <class Out>
index_t outside_bound(const matrix& a, const matrix& b, index_t j0, const Out* c, index_t m, index_t n, index_t rs,
                      index_t cs, const std::string& what) {
  const double k = static_cast<double>(a.cols);
  const auto gamma = [&](double u) { return k <= 1 ? 0.0 : (k - 1) * u / (1 - (k - 1) * u); };
  const double g = gamma(0x1p-24) + gamma(0x1p-53);
  index_t bad = 0;
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (index_t kk = 0; kk < a.cols; ++kk) {
        const double p = a(i, kk) * b(kk, j0 + j);
        s += p;
        mag += std::fabs(p);
      }
      const double got = static_cast<double>(static_cast<float>(c[i * rs + j * cs]));
      bool ok;
      double lo = s, hi = s;
      if (std::isnan(s)) {
        ok = std::isnan(got);
      } else if (std::isinf(s)) {
        ok = got == s;
      } else {
        const double e = g * mag + 2 * k * 0x1p-150;
        lo = reference_detail::round_to<Out>(s - e);
        hi = reference_detail::round_to<Out>(s + e);
        ok = lo <= got && got <= hi;
      }
      if (!ok && bad++ < 4)
        FAIL_CHECK(what << ": (" << i << ", " << j << ") is " << got << ", not in [" << lo << ", " << hi << "] (sum "
                        << s << ")");
    }
  return bad;
}

std::string describe(index_t m, index_t n, index_t k, bool a_rows, bool b_kcontig, bool c_rows, index_t step) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (a_rows ? " A rows" : " A cols") +
         (b_kcontig ? " B k-contiguous" : " B n-contiguous") + (c_rows ? " C rows" : " C cols") + " step " +
         std::to_string(step);
}

/// One product by the kernel Kern and result dtype Out, through gemm_pairs (B packed on the fly)
/// and gemm_pairs_prepacked (B packed ahead, read from column j0), against the double sums.
template <gm::pair_kernel Kern, class Out>
void check_product(index_t m, index_t n, index_t k, int variant, std::uint64_t salt) {
  const bool a_rows = variant % 2 == 0, b_kcontig = variant / 2 % 2 == 0, c_rows = variant / 4 % 2 == 0;
  const index_t step = variant % 3 == 2 ? 2 : 1;
  auto g = test::rng(salt);
  const matrix a(m, k, a_rows, step, g);
  const index_t j0 = variant % 5;  // the prepacked product reads B from column j0
  const matrix b(k, n + j0, !b_kcontig, step, g);
  const std::string what = describe(m, n, k, a_rows, b_kcontig, c_rows, step) +
                           (std::is_same_v<Out, float> ? ", float C" : ", bfloat16 C") +
                           (Kern == gm::pair_kernel::dpbf16 ? ", vdpbf16ps" : ", widened pairs");
  CAPTURE(what);
  const index_t crs = c_rows ? n : 1, ccs = c_rows ? 1 : m;
  std::vector<Out> c(static_cast<std::size_t>(std::max<index_t>(m * n, 1)),
                     Out(std::numeric_limits<float>::quiet_NaN()));
  const gm::strided<bfloat16> bv{b.buf.data() + j0 * b.cs, b.rs, b.cs};
  gm::gemm_pairs<Kern>(m, n, k, a.view(), bv, c.data(), crs, ccs);
  CHECK(outside_bound(a, b, j0, c.data(), m, n, crs, ccs, what) == 0);

  const gm::detail::aligned_buffer<unsigned char> buffer(gm::packed_pairs_b_bytes(k, n + j0));  // 64-byte aligned
  void* aligned = buffer.p;
  const gm::packed_pairs_b packed = gm::pack_pairs_b_ahead(aligned, b.view(), k, n + j0);
  std::fill(c.begin(), c.end(), Out(std::numeric_limits<float>::quiet_NaN()));
  gm::gemm_pairs_prepacked<Kern>(m, n, a.view(), packed, j0, c.data(), crs, ccs);
  CHECK(outside_bound(a, b, j0, c.data(), m, n, crs, ccs, what + ", prepacked") == 0);
}

struct shape3 {
  index_t m, n, k;
};
// Tiles of MR x NR (12 x 32 with AVX-512, 6 x 16 with AVX2) and their 4- and 8-row panels, odd
// K (a zero-padded last pair), K across reduction blocks (KC = 2048: 4099 is three blocks of
// 1368 and 1363), rows across MC = 96, columns across NC = 4096.
const shape3 shapes[] = {{1, 1, 1},    {1, 33, 17},   {3, 17, 2},    {4, 32, 3},    {5, 70, 7},
                         {12, 33, 16}, {13, 1, 1023}, {37, 65, 100}, {100, 40, 33}, {9, 5, 4099},
                         {5, 4100, 3}, {0, 5, 3},     {5, 0, 3},     {5, 3, 0},     {8, 64, 2049}};

template <gm::pair_kernel Kern>
void check_all_shapes() {
  int variant = 0;
  for (const auto& s : shapes) {
    for (int v = 0; v < 2; ++v, ++variant) {
      check_product<Kern, float>(s.m, s.n, s.k, variant, static_cast<std::uint64_t>(variant * 7 + 1));
      check_product<Kern, bfloat16>(s.m, s.n, s.k, variant + 3, static_cast<std::uint64_t>(variant * 7 + 2));
    }
  }
}

constexpr std::uint16_t bits(float v) { return bfloat16(v).bits(); }

}  // namespace

TEST_CASE("bfloat16 pairs packed ahead read back as the matrix they were packed from") {
  for (const auto& [k, n] : {std::pair<index_t, index_t>{1, 1}, {3, 33}, {4099, 5}, {2048, 70}}) {
    CAPTURE(k);
    CAPTURE(n);
    auto g = test::rng(static_cast<std::uint64_t>(k * 100 + n));
    const matrix b(k, n, (k + n) % 2 == 0, 1, g);
    const gm::detail::aligned_buffer<unsigned char> buffer(gm::packed_pairs_b_bytes(k, n));  // 64-byte aligned
    void* aligned = buffer.p;
    const auto p = gm::pack_pairs_b_ahead(aligned, b.view(), k, n);
    CHECK(p.kc % 2 == 0);
    index_t bad = 0;
    for (index_t kk = 0; kk < k; ++kk)
      for (index_t j = 0; j < n; ++j) bad += p.element(kk, j).bits() != b.view()(kk, j).bits();
    CHECK(bad == 0);
    // The packing's padding is zero: an odd K's last pair, columns past n.
    const index_t kc_last = k - (k - 1) / p.kc * p.kc;
    const std::uint32_t* last = p.panel((k - 1) / p.kc * p.kc, 0);
    if (kc_last % 2) CHECK((last[(kc_last / 2) * gm::pair_blocking::NR] >> 16) == 0);
    if (n % gm::pair_blocking::NR)
      CHECK(p.panel(0, n / gm::pair_blocking::NR * gm::pair_blocking::NR)[n % gm::pair_blocking::NR] == 0);
  }
}

TEST_CASE("the widened pair kernel: every size, layout and block edge against double sums") {
  check_all_shapes<gm::pair_kernel::widened>();
}

TEST_CASE("vdpbf16ps: every size, layout and block edge against double sums, and against the widened pair kernel") {
  if constexpr (!gm::has_dpbf16) {
    MESSAGE(
        "this build has no AVX512_BF16 (compile with -march=native on a CPU that has it): the instruction's kernel is "
        "compiled by dpbf16_compile.cpp only");
  } else {
    check_all_shapes<gm::pair_kernel::dpbf16>();
    // Where dpbf16_exact holds, the instruction's sums are the widened kernel's (the SDM's two
    // rounded steps per pair, odd k first). Reported, not required: a CPU that rounded once
    // per pair would still be within the bound checked above.
    index_t differ = 0, total = 0;
    for (const auto& s : {shape3{37, 65, 100}, shape3{100, 96, 1023}, shape3{4, 200, 4099}}) {
      auto g = test::rng(static_cast<std::uint64_t>(s.m + s.n + s.k));
      const matrix a(s.m, s.k, true, 1, g, -4, 4), b(s.k, s.n, false, 1, g, -4, 4);
      REQUIRE(gm::dpbf16_exact(gm::range_of(a.view(), s.m, s.k), gm::range_of(b.view(), s.k, s.n)));
      std::vector<float> c1(static_cast<std::size_t>(s.m * s.n)), c2(c1.size());
      gm::gemm_pairs<gm::pair_kernel::dpbf16>(s.m, s.n, s.k, a.view(), b.view(), c1.data(), s.n, 1);
      gm::gemm_pairs<gm::pair_kernel::widened>(s.m, s.n, s.k, a.view(), b.view(), c2.data(), s.n, 1);
      for (std::size_t i = 0; i < c1.size(); ++i) differ += std::memcmp(&c1[i], &c2[i], sizeof(float)) != 0;
      total += static_cast<index_t>(c1.size());
    }
    MESSAGE("vdpbf16ps vs the widened pair kernel: " << differ << " of " << total << " sums differ in any bit");
    WARN(differ == 0);
  }
}

TEST_CASE("bf16_range and dpbf16_exact: the instruction only where its DAZ and FTZ cannot act") {
  auto g = test::rng(5);
  for (bool by_rows : {true, false}) {
    matrix x(7, 9, by_rows, 2, g, 0.5, 1.5);
    for (index_t i = 0; i < 7; ++i)
      for (index_t j = 0; j < 9; ++j) x.at(i, j) = bfloat16(1.0f);
    x.at(3, 4) = bfloat16(-0x1p-20f);
    x.at(6, 8) = bfloat16(-0x1p40f);
    x.at(0, 0) = bfloat16(0.0f);
    x.at(1, 1) = std::numeric_limits<bfloat16>::infinity();
    x.at(2, 2) = std::numeric_limits<bfloat16>::quiet_NaN();
    const auto r = gm::range_of(x.view(), 7, 9);
    CHECK(r.least == bits(0x1p-20f));    // the sign dropped, zeros skipped
    CHECK(r.greatest == bits(0x1p40f));  // inf and NaN skipped
  }
  const auto range = [](float least, float greatest) { return gm::bf16_range{bits(least), bits(greatest)}; };
  const gm::bf16_range zeros{};
  CHECK(gm::dpbf16_exact(range(1, 2), range(0.5f, 4)));
  CHECK(gm::dpbf16_exact(zeros, range(0x1p-130f, 1)));              // an all-zero operand: every product 0
  CHECK_FALSE(gm::dpbf16_exact(range(0x1p-127f, 1), range(1, 1)));  // a subnormal: DAZ
  CHECK_FALSE(gm::dpbf16_exact(range(1, 1), range(0x1p-133f, 1)));
  CHECK(gm::dpbf16_exact(range(0x1p-126f, 1), range(0x1p24f, 0x1p24f)));  // 2^-102: the least allowed product
  CHECK_FALSE(gm::dpbf16_exact(range(0x1p-52f, 1), range(0x1p-51f, 1)));  // 2^-103 may sum to a subnormal
  CHECK(gm::dpbf16_exact(range(1, 0x1.fep61f), range(1, 0x1.fep61f)));    // products below 2^124
  CHECK(gm::dpbf16_exact(range(1, 0x1p62f), range(1, 0x1p62f)));          // below 2^126
  CHECK_FALSE(gm::dpbf16_exact(range(1, 0x1p63f), range(1, 0x1p62f)));    // up to 2^127: may overflow alone
}

TEST_CASE("gemm_bf16 keeps subnormal and tiny bfloat16 operands exact; inf and NaN as the reference") {
  index_t nans = 0, infs = 0;  // NaN and infinite sums seen
  for (const auto& s : {shape3{37, 40, 33}, shape3{100, 70, 300}}) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    auto g = test::rng(static_cast<std::uint64_t>(s.m * 1000 + s.k));
    struct form {
      const char* what;
      double lo, hi, b_lo, b_hi;
    };
    // Subnormal A (DAZ would read zero) against large B: normal products. Tiny A and B: products
    // near 2^-128, below float's normal range (FTZ would flush them). Ordinary values.
    for (const form f : {form{"subnormal A", -0x1p-127, 0x1p-127, -0x1p100, 0x1p100},
                         form{"tiny A and B", -0x1p-63, 0x1p-63, -0x1p-63, 0x1p-63}, form{"ordinary", -2, 2, -2, 2}}) {
      CAPTURE(f.what);
      const matrix a(s.m, s.k, true, 1, g, f.lo, f.hi), b(s.k, s.n, false, 1, g, f.b_lo, f.b_hi);
      const bool exact = gm::dpbf16_exact(gm::range_of(a.view(), s.m, s.k), gm::range_of(b.view(), s.k, s.n));
      CHECK(exact == (std::string(f.what) == "ordinary"));
      std::vector<float> c(static_cast<std::size_t>(s.m * s.n));
      gm::gemm_bf16<float>(s.m, s.n, s.k, a.view(), b.view(), c.data(), s.n, 1);
      CHECK(outside_bound(a, b, 0, c.data(), s.m, s.n, s.n, 1, f.what) == 0);
      std::vector<bfloat16> cb(c.size());
      gm::gemm_bf16<bfloat16>(s.m, s.n, s.k, a.view(), b.view(), cb.data(), s.n, 1);
      CHECK(outside_bound(a, b, 0, cb.data(), s.m, s.n, s.n, 1, std::string(f.what) + ", bfloat16 C") == 0);
      // Weights packed in pairs: the kernel gemm_bf16_prepacked picks for these operands.
      const gm::detail::aligned_buffer<unsigned char> buffer(gm::packed_pairs_b_bytes(s.k, s.n));  // 64-byte aligned
      void* aligned = buffer.p;
      const auto packed = gm::pack_pairs_b_ahead(aligned, b.view(), s.k, s.n);
      gm::gemm_bf16_prepacked<float>(s.m, s.n, a.view(), packed, 0, c.data(), s.n, 1);
      CHECK(outside_bound(a, b, 0, c.data(), s.m, s.n, s.n, 1, std::string(f.what) + ", prepacked") == 0);
    }
    // inf, -inf and NaN sprinkled into both operands.
    matrix a(s.m, s.k, true, 1, g), b(s.k, s.n, false, 1, g);
    const bfloat16 specials[] = {std::numeric_limits<bfloat16>::infinity(),
                                 bfloat16(-std::numeric_limits<float>::infinity()),
                                 std::numeric_limits<bfloat16>::quiet_NaN()};
    for (std::size_t i = 0; i < a.buf.size(); i += 7 + g() % 60) a.buf[i] = specials[g() % 3];
    for (std::size_t i = 0; i < b.buf.size(); i += 11 + g() % 120) b.buf[i] = specials[g() % 3];
    std::vector<float> c(static_cast<std::size_t>(s.m * s.n));
    gm::gemm_bf16<float>(s.m, s.n, s.k, a.view(), b.view(), c.data(), s.n, 1);
    CHECK(outside_bound(a, b, 0, c.data(), s.m, s.n, s.n, 1, "inf and NaN") == 0);
    gm::gemm_pairs<gm::pair_kernel::widened>(s.m, s.n, s.k, a.view(), b.view(), c.data(), s.n, 1);
    CHECK(outside_bound(a, b, 0, c.data(), s.m, s.n, s.n, 1, "inf and NaN, widened pairs") == 0);
    for (float v : c) nans += std::isnan(v), infs += std::isinf(v);
  }
  CHECK(nans > 0);  // the cases exercise both
  CHECK(infs > 0);
}
