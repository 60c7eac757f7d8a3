// fuse::cuda::eval through the host emulator (no GPU needed: every CI run): the elementwise
// kernel's body run over its whole grid, in three thread orders, must give BIT-IDENTICAL results
// to the CPU's scalar lane (each element evaluated alone by the same bound evaluators) and match
// the double reference; one eval must be one launch.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <fuse/cuda.hpp>

#include "cuda/scalar_lane.hpp"
#include "support/check.hpp"

namespace {

using namespace fuse;
using fuse::test::expect_matches;
using fuse::test::tolerance;

/// Trees of several rounded ops: within 1e-6 of the reference, relative or absolute (the terms
/// summed are at most ~1e3, each within a few float ulps).
constexpr tolerance composite{1e-6, 1e-6};

/// Do a (a contiguous tensor) and the scalar lane's values agree bit for bit (any NaN matching
/// any NaN)? Names the first difference.
template <class A>
bool same_as_lane(const A& a, const A& lane) {
  const auto n = static_cast<std::size_t>(lane.size());
  const std::size_t i = test::cuda::first_difference(a.data(), lane.data(), n);
  if (i < n)
    MESSAGE("first difference at element " << i << ": " << test::show(a.data()[i]) << " vs "
                                           << test::show(lane.data()[i]));
  return i == n;
}

constexpr cuda::schedule schedules[] = {cuda::schedule::forward, cuda::schedule::reverse, cuda::schedule::shuffled};

/// Runs e into a fresh tensor of shape ext under every schedule; checks one launch each, the
/// same bits as the scalar lane, and the double reference within max_ulps (or tol: trees of
/// several ops round at each, and a sum of rounded terms is judged against its terms' size).
template <class T, std::size_t R, class E>
void check_tree(const index_array<R>& ext, const E& e, double max_ulps, const char* what, tolerance tol = {}) {
  INFO(std::string(what));
  const auto lane = test::cuda::scalar_lane<accurate_math_t, T>(ext, e);
  for (const auto order : schedules) {
    tensor<T, static_cast<int>(R)> out(ext);
    std::memset(static_cast<void*>(out.data()), 0xA5, sizeof(T) * static_cast<std::size_t>(out.size()));
    cuda::launch_log log;
    cuda::eval(out, e, cuda::emulated(order), cuda::log_to(log));
    CHECK(log.size() == (product(ext) == 0 ? 0u : 1u));
    if (log.size() == 1) CHECK(log.launches[0].emulated);
    CHECK_MESSAGE(same_as_lane(out, lane), "differs from the CPU scalar lane");
  }
  tensor<T, static_cast<int>(R)> out(ext);
  cuda::eval(out, e, cuda::emulated);
  if constexpr (R == 0) {
    expect_matches(out, reference(e), tol, max_ulps, what);
  } else {
    index_t shape[R];
    for (std::size_t d = 0; d < R; ++d) shape[d] = ext[d];
    expect_matches(out, reference(broadcast_to(e, shape)), tol, max_ulps, what);
  }
}

}  // namespace

TEST_CASE("cuda emulated: the seed's gate tree (split, sigmoid/tanh/exp, broadcast bias) at odd sizes") {
  auto g = test::rng(11);
  for (index_t n : test::odd_sizes) {
    for (index_t rows : {index_t{1}, index_t{3}}) {
      CAPTURE(n);
      CAPTURE(rows);
      tensor<float, 2> x({rows, 4 * n}), bias({1, 4 * n});
      test::fill(x.view(), g, -6, 6);
      test::fill(bias.view(), g, -1, 1);
      test::sprinkle_edges(x, g);
      const auto s = split<4>(x.view() + bias.view(), 1);
      const auto tree = sigmoid(s[0]) * tanh(s[1]) + exp(s[2]) * sigmoid(s[3]);
      check_tree<float>(index_array<2>{{rows, n}}, tree, 4, "gates", composite);
      check_tree<half>(index_array<2>{{rows, n}}, cast<half>(tree), 1, "gates to half", composite);
    }
  }
}

TEST_CASE("cuda emulated: views (transpose, strided slice, reshape, broadcast, concatenate, take)") {
  auto g = test::rng(12);
  tensor<float, 2> a({37, 46}), b({46, 37});
  test::fill(a.view(), g, -3, 3);
  test::fill(b.view(), g, -3, 3);
  test::sprinkle_edges(a, g);
  const auto t = transpose(a.view());
  check_tree<float>(index_array<2>{{46, 37}}, t * b.view() - erf(t), 4, "transpose", composite);
  const auto st = strided_slice(a.view(), {36, 1}, {-38, 46}, {-2, 3});  // reversed rows, every 3rd column
  check_tree<float>(st.shape().array(), tanh(st) + 1.5f, 4, "strided slice");
  check_tree<float>(index_array<3>{{37, 2, 23}}, reshape(a.view(), {37, 2, 23}), 0, "reshape");
  check_tree<float>(index_array<3>{{5, 37, 46}}, log(abs(a.view()) + 1.0f), 4, "broadcast to a higher rank", composite);
  tensor<float, 2> c({37, 5});
  test::fill(c.view(), g, -3, 3);
  check_tree<float>(index_array<2>{{37, 51}}, concatenate(std::tie(a, c), 1) * 2.0f, 0, "concatenate");
  tensor<std::int64_t, 1> idx({9});
  for (index_t i = 0; i < 9; ++i) idx.data()[i] = (i * 17) % 46 - (i % 2 ? 46 : 0);  // negative indices wrap
  check_tree<float>(index_array<2>{{37, 9}}, take(a.view(), idx.view(), 1), 0, "take");
}

TEST_CASE("cuda emulated: the vector path (contiguous rows) with aligned, unaligned and 1-, 2-, 8-byte elements") {
  auto g = test::rng(16);
  tensor<float, 2> x({5, 1024}), y({5, 1024});
  test::fill(x.view(), g, -5, 5);
  test::fill(y.view(), g, -5, 5);
  test::sprinkle_edges(x, g);
  const index_array<2> e{{5, 1024}};
  check_tree<float>(e, x.view() * y.view() + tanh(x.view()), 4, "aligned rows", composite);
  // Every row starts one element in: no 16-byte access is aligned, the lanes read one by one.
  const auto xs = strided_slice(x.view(), {0, 1}, {5, 1024});
  const auto ys = strided_slice(y.view(), {0, 1}, {5, 1024});
  check_tree<float>(index_array<2>{{5, 1023}}, sigmoid(xs) - ys, 4, "rows off by one", composite);
  check_tree<std::int8_t>(e, cast<std::int8_t>(x.view() * 32.0f), 0, "int8 stores");
  check_tree<half>(e, cast<half>(exp(x.view())), 1, "half stores");
  check_tree<double>(e, cast<double>(x.view()) * cast<double>(y.view()), 0.5, "double lanes");
  // A broadcast row (stride 0 along the columns is not contiguous: the element path) beside
  // contiguous ones, and a scalar.
  tensor<float, 2> col({5, 1});
  test::fill(col.view(), g, -1, 1);
  check_tree<float>(e, x.view() * col.view() + 0.5f, 1, "broadcast column", composite);
}

TEST_CASE("cuda emulated: every dtype and the casts between them") {
  auto g = test::rng(13);
  tensor<float, 1> f({1023});
  test::fill(f.view(), g, -300, 300);
  test::sprinkle_edges(f, g);
  const index_array<1> e{{1023}};
  check_tree<std::int8_t>(e, cast<std::int8_t>(f.view()), 0, "float to int8 (saturating)");
  check_tree<std::uint8_t>(e, cast<std::uint8_t>(f.view()), 0, "float to uint8");
  check_tree<std::int32_t>(e, cast<std::int32_t>(f.view() * 1048576.0f), 0, "float to int32");
  check_tree<double>(e, cast<double>(f.view()) * 3.0, 0, "float to double");
  check_tree<bfloat16>(e, cast<bfloat16>(f.view()), 0, "float to bfloat16");
  tensor<std::int8_t, 1> i8({1023});
  test::fill(i8.view(), g, -128, 127);
  check_tree<std::int8_t>(e, i8.view() + i8.view(), 0, "int8 wraps");
  check_tree<std::int32_t>(e, cast<std::int32_t>(i8.view()) * 3 - 7, 0, "int8 to int32");
  check_tree<bool>(e, f.view() > 0.5f, 0, "compare");
  check_tree<float>(e, where(f.view() > 0.0f, f.view(), -f.view()), 0, "where");
}

TEST_CASE("cuda emulated: ranks 0, 1 and 4; rows beyond one grid's height") {
  auto g = test::rng(14);
  tensor<float, 0> s;
  s.data()[0] = 0.25f;
  check_tree<float>(index_array<0>{}, exp(s.view()), 1, "rank 0");
  tensor<float, 4> a({3, 1, 5, 7});
  test::fill(a.view(), g, -2, 2);
  check_tree<float>(index_array<4>{{3, 4, 5, 7}}, sigmoid(a.view()), 4, "rank 4, broadcast axis");
  // 70,000 rows of one column: more rows than blocks in y, so blocks stride over rows.
  tensor<float, 2> tall({70000, 1});
  test::fill(tall.view(), g, -2, 2);
  check_tree<float>(index_array<2>{{70000, 1}}, tall.view() * 2.0f + 1.0f, 1, "70000 rows");
  tensor<float, 2> none({0, 5});
  check_tree<float>(index_array<2>{{0, 5}}, none.view() * 2.0f, 0, "no rows");
}

TEST_CASE("cuda emulated: several outputs in one launch; outputs in place and strided") {
  auto g = test::rng(15);
  tensor<float, 2> x({17, 4 * 33}), c({17, 33});
  test::fill(x.view(), g, -4, 4);
  test::fill(c.view(), g, -4, 4);
  const auto s = split<4>(x.view(), 1);
  const auto c_new = sigmoid(s[1]) * c.view() + sigmoid(s[0]) * tanh(s[2]);
  const auto h_new = sigmoid(s[3]) * tanh(c_new);
  const auto c_ref = reference(c_new);
  const auto h_ref = reference(h_new);
  const tensor<float, 2> c0 = materialize(c.view());
  tensor<float, 2> h({17, 33});
  cuda::launch_log log;
  // c is read by both trees and overwritten in place: every element is read before it is
  // written, whichever output comes first.
  cuda::eval(outputs(h, c), h_new, c_new, cuda::emulated(cuda::schedule::shuffled), cuda::log_to(log));
  CHECK(log.size() == 1);
  expect_matches(c, c_ref, composite, 4, "c");
  expect_matches(h, h_ref, composite, 4, "h");
  eval(c, c0.view());
  cuda::eval(outputs(c, h), c_new, h_new, cuda::emulated, cuda::log_to(log));
  CHECK(log.size() == 2);
  expect_matches(c, c_ref, composite, 4, "c written first");
  expect_matches(h, h_ref, composite, 4, "h after c");

  // A transposed output view.
  tensor<float, 2> a({23, 31}), o({31, 23});
  test::fill(a.view(), g, -4, 4);
  cuda::eval(transpose(o.view()), a.view() * 3.0f, cuda::emulated);
  expect_matches(transpose(o.view()), reference(a.view() * 3.0f), tolerance{}, 0.5, "transposed output");
}

TEST_CASE("cuda emulated: errors are clear") {
  tensor<float, 2> a({4, 4}), b({4, 5});
  // An output read at other addresses (x = transpose(x)) would race on a GPU, and eval allocates nothing.
  CHECK_THROWS_WITH_AS(cuda::eval(a, transpose(a.view()), cuda::emulated), doctest::Contains("read at other addresses"),
                       memory_error);
  CHECK_THROWS_WITH_AS(cuda::eval(outputs(a, a), a.view() + 1.0f, a.view() * 2.0f, cuda::emulated),
                       doctest::Contains("overlap"), memory_error);
  CHECK_THROWS_WITH_AS(cuda::eval(a, b.view() + 1.0f, cuda::emulated), doctest::Contains("does not fit"), shape_error);
  // This file is compiled by the host compiler: it holds no kernel to launch.
  // (device views: a launch of host memory does not compile, tests/compile_fail; the pointer is
  // never dereferenced, the launch is refused first)
  const auto d = cuda::view(a.data(), {4, 4});
  CHECK_THROWS_WITH_AS(cuda::eval(d, d + 1.0f, cuda::on(nullptr)), doctest::Contains("not compiled by nvcc"), error);
  cuda::eval(a, a.view() + 1.0f, cuda::emulated);  // in place, same addresses: fine
}

TEST_CASE("cuda memory spaces: device views keep their space through every view; the trees say what they read") {
  float* p = nullptr;  // never dereferenced here: only types and shapes are checked
  const auto dv = cuda::view(p, {4, 6});
  static_assert(std::is_same_v<decltype(dv)::memory_space_type, device_memory>);
  static_assert(std::is_same_v<decltype(cuda::view(p, {4, 6}, {1, 4}))::memory_space_type, device_memory>);
  CHECK(dv.shape().array() == index_array<2>{{4, 6}});
  CHECK(dv.strides() == index_array<2>{{6, 1}});
  CHECK(cuda::view(p, {4, 6}, {1, 4}).strides() == index_array<2>{{1, 4}});
  CHECK_THROWS_WITH_AS(cuda::view(p, {2, -1}), doctest::Contains("cuda::view: negative extent"), shape_error);
  // Views of a device view are device views (the CPU executor refuses them: tests/compile_fail).
  static_assert(std::is_same_v<decltype(transpose(dv))::memory_space_type, device_memory>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(split<2>(dv, 1)[0])>::memory_space_type, device_memory>);
  static_assert(std::is_same_v<decltype(strided_slice(dv, {0, 0}, {4, 6}, {2, 3}))::memory_space_type, device_memory>);
  static_assert(std::is_same_v<decltype(as_output(reshape(dv, {24})))::memory_space_type, device_memory>);
  static_assert(std::is_same_v<expr_t<decltype(dv)>::memory_space_type, device_memory>);
  // What a tree reads: host, device, both, or nothing (constants).
  tensor<float, 2> h({4, 6});
  static_assert(memory_read_by<decltype(exp(dv) + 1.0f)>() == device_read);
  static_assert(memory_read_by<decltype(exp(h.view()) + 1.0f)>() == host_read);
  static_assert(memory_read_by<decltype(dv + h.view())>() == (host_read | device_read));
  static_assert(memory_read_by<decltype(as_expr(2.0f))>() == 0);
  static_assert(memory_read_by<decltype(concatenate(std::tie(dv, dv), 0) * 2.0f)>() == device_read);
}

namespace {

/// e (a reduction over the last axis) on the emulator under every schedule: one row_reduce
/// launch each, the same result under all of them, and the double reference within tol/ulps.
template <class E>
void check_row_reduce(const E& e, tolerance tol, double ulps, const char* what) {
  INFO(std::string(what));
  using T = typename E::value_type;
  constexpr std::size_t R = E::rank;
  const auto ext = e.shape().array();
  tensor<T, static_cast<int>(R)> first(ext);
  for (const auto order : schedules) {
    tensor<T, static_cast<int>(R)> out(ext);
    std::memset(static_cast<void*>(out.data()), 0xA5, sizeof(T) * static_cast<std::size_t>(out.size()));
    cuda::launch_log log;
    cuda::eval(out, e, cuda::emulated(order), cuda::log_to(log));
    REQUIRE(log.size() == (out.size() == 0 ? 0u : 1u));
    if (log.size() == 1) CHECK(log.launches[0].kernel == "row_reduce");
    if (order == cuda::schedule::forward) first = out;
    else CHECK(test::cuda::count_differences(out.data(), first.data(), static_cast<std::size_t>(out.size())) == 0);
  }
  expect_matches(first, reference(e), tol, ulps, what);
}

template <class T>
void row_reductions_of(std::uint64_t salt) {
  const double lo = is_integer_dtype<T> ? -100 : -2, hi = is_integer_dtype<T> ? 100 : 2;
  const tolerance tol = is_floating_dtype<T> ? tolerance{1e-6, 1e-6} : tolerance{};
  const double u = std::is_same_v<T, half> ? 1 : 2;
  for (index_t n : {index_t{0}, index_t{1}, index_t{7}, index_t{33}, index_t{1023}}) {
    CAPTURE(n);
    auto a = test::random_tensor<T>({3, 5, n}, salt + static_cast<std::uint64_t>(n), lo, hi);
    check_row_reduce(sum(a, -1), tol, u, "sum last axis");
    check_row_reduce(mean(a, 2, keepdims), tol, u, "mean keepdims");
    check_row_reduce(max(a, -1), tol, 0, "max");
    check_row_reduce(min(a, 2), tol, 0, "min");
    if constexpr (is_floating_dtype<T>) check_row_reduce(prod(a * T(0.5) + T(1), -1), {1e-5, 1e-6}, 4, "prod");
    else check_row_reduce(prod(a, -1), tol, 0, "prod");
  }
}

}  // namespace

TEST_CASE("cuda emulated: sum/mean/max/min/prod over the last axis, one warp a row, every dtype") {
  row_reductions_of<float>(21);
  row_reductions_of<double>(22);
  row_reductions_of<half>(23);
  row_reductions_of<std::int8_t>(24);
  row_reductions_of<std::int32_t>(25);
  row_reductions_of<std::int64_t>(26);
}

TEST_CASE("cuda emulated: a row reduction fuses the tree it reads; rank 1 and 4; NaN; errors") {
  auto g = test::rng(31);
  tensor<float, 2> x({70, 300}), bias({1, 300});
  test::fill(x.view(), g, -3, 3);
  test::fill(bias.view(), g, -1, 1);
  // The tree feeding the reduction is evaluated in the kernel: exp of a broadcast sum, a
  // transposed strided view.
  check_row_reduce(sum(exp(x.view() + bias.view()) * 0.5f, -1), {1e-6, 1e-6}, 2, "sum of a fused tree");
  check_row_reduce(max(transpose(strided_slice(x.view(), {0, 0}, {70, 300}, {1, 3})), -1), {}, 0,
                   "max over a transposed strided view");
  tensor<float, 1> v({1023});
  test::fill(v.view(), g, -1, 1);
  check_row_reduce(mean(v.view(), 0), {1e-6, 1e-6}, 2, "rank 1");
  tensor<float, 4> w({2, 3, 4, 37});
  test::fill(w.view(), g, -1, 1);
  check_row_reduce(sum(w.view() * w.view(), -1, keepdims), {1e-6, 1e-6}, 2, "rank 4 keepdims");
  // NaN propagates through max and min; an empty row gives the identity (mean: NaN).
  x(5, 17) = std::numeric_limits<float>::quiet_NaN();
  tensor<float, 1> m({70});
  cuda::eval(m, max(x.view(), -1), cuda::emulated);
  CHECK(std::isnan(m(5)));
  CHECK_FALSE(std::isnan(m(4)));
  tensor<float, 2> empty({4, 0});
  tensor<float, 1> e4({4});
  cuda::eval(e4, mean(empty.view(), -1), cuda::emulated);
  CHECK(std::isnan(e4(0)));
  cuda::eval(e4, max(empty.view(), -1), cuda::emulated);
  CHECK(e4(3) == -std::numeric_limits<float>::infinity());
  // Errors: a wrong output shape, an output the tree reads.
  tensor<float, 1> r300({300});
  CHECK_THROWS_WITH_AS(cuda::eval(r300, sum(x.view(), -1), cuda::emulated), doctest::Contains("differs"), shape_error);
  auto col = strided_slice(x.view(), {0, 0}, {70, 1}, {1, 1});
  CHECK_THROWS_AS(cuda::eval(reshape(col, {70}), sum(x.view(), -1), cuda::emulated), memory_error);
}

TEST_CASE("cuda emulated: a concatenation's parts are checked for overlap over the rows that read them") {
  // Rows 5..9 of one buffer = rows 0..2 and 3..4 of it: apart (each part over all ten output
  // rows would seem to reach rows 5..9, a false overlap that refused this eval).
  tensor<float, 2> buf({10, 4});
  auto g = test::rng(61);
  test::fill(buf.view(), g, -1, 1);
  const tensor<float, 2> before = buf;
  auto rows = [&](index_t a, index_t b) { return strided_slice(buf.view(), {a, 0}, {b, 4}, {1, 1}); };
  cuda::eval(rows(5, 10), concatenate(std::make_tuple(rows(0, 3), rows(3, 5)), 0) * 2.0f, cuda::emulated);
  for (index_t i = 0; i < 5; ++i)
    for (index_t j = 0; j < 4; ++j) CHECK(buf(5 + i, j) == before(i, j) * 2.0f);
  // A part that does lie in the output, read at other addresses: refused.
  CHECK_THROWS_AS(
      cuda::eval(rows(5, 10), concatenate(std::make_tuple(rows(0, 3), rows(6, 8)), 0) * 2.0f, cuda::emulated),
      memory_error);
  // The same on the CPU, which sends such an output through a temporary and is right either way.
  tensor<float, 2> cpu = before;
  fuse::eval(strided_slice(cpu.view(), {5, 0}, {10, 4}, {1, 1}),
             concatenate(std::make_tuple(strided_slice(cpu.view(), {0, 0}, {3, 4}, {1, 1}),
                                         strided_slice(cpu.view(), {6, 0}, {8, 4}, {1, 1})),
                         0) *
                 2.0f);
  for (index_t j = 0; j < 4; ++j) CHECK(cpu(8, j) == before(6, j) * 2.0f);
}
