// Views: split, strided_slice, reshape (every Relay code), squeeze, expand_dims, transpose,
// broadcast_to, concatenate and take, alone and composed, under elementwise ops, as outputs,
// and their error messages.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "support/check.hpp"

using namespace fuse;
using fuse::test::expect_matches;

namespace {

/// Evaluates e into a fresh tensor and checks it against the reference; `abs` allows for the
/// float32 rounding of terms that cancel.
template <class E>
void check(const E& e, double max_ulps = 2, const char* what = "", double abs = 0) {
  test::expect_matches_reference(e, {0, abs}, max_ulps, what);
}

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const shape_error& e) {
    return e.what();
  }
  return "(no shape_error)";
}

}  // namespace

TEST_CASE("split into sections and at indices, views of the input") {
  auto a = test::random_tensor<float>({4, 30}, 1);
  auto s = split<3>(a, 1);
  static_assert(std::is_same_v<decltype(s[0]), tensor_view<float, 2>&>);
  CHECK(s[1].shape().array() == index_array<2>{{4, 10}});
  CHECK(s[2].data() == a.data() + 20);
  check(sigmoid(s[0]) + tanh(s[1]) * exp(s[2]), 4, "gate", 20 * 3e-7);
  auto p = split(a, {5, 12}, -1);
  CHECK(p[0].shape()[1] == 5);
  CHECK(p[1].shape()[1] == 7);
  CHECK(p[2].shape()[1] == 18);
  check(p[1] * 2.0f, 0);  // exact
  auto rows = split<2>(a, 0);
  check(rows[1] - rows[0], 1);
  CHECK_THROWS_WITH_AS(split<4>(a, 1), doctest::Contains("does not divide into 4"), shape_error);
  CHECK_THROWS_WITH_AS(split<2>(a, 2), doctest::Contains("axis 2 is out of range for shape (4, 30)"), shape_error);
  CHECK_THROWS_AS(split(a, {12, 5}, 1), shape_error);  // Relay: strictly increasing
  CHECK_THROWS_AS(split(a, {0, 5}, 1), shape_error);   // Relay: no empty section
}

TEST_CASE("strided_slice follows Relay's canonicalisation") {
  auto a = test::random_tensor<float>({3, 4, 3}, 2);
  // Relay's own test: begin [1,-1,0] end [4,-5,3] strides [2,-1,1] -> shape (1,4,3)
  auto s = strided_slice(a, {1, -1, 0}, {4, -5, 3}, {2, -1, 1});
  CHECK(s.shape().array() == index_array<3>{{1, 4, 3}});
  check(s + 0.0f, 0);  // exact
  // clamping: end 1000 -> extent
  auto c = strided_slice(a, {1, 1, 0}, {4, 1000, 3});
  CHECK(c.shape().array() == index_array<3>{{2, 3, 3}});
  check(c * c, 0.5);
  // slice_mode="size": sizes, -1 = to the end
  auto z = strided_slice(a, {1, 0, 0}, {-1, 2, 3}, {}, {}, true);
  CHECK(z.shape().array() == index_array<3>{{2, 2, 3}});
  check(-z, 0);
  // axes: only axis 2
  auto ax = strided_slice(a, {1}, {3}, {}, {2});
  CHECK(ax.shape().array() == index_array<3>{{3, 4, 2}});
  check(exp(ax), 2);
  CHECK_THROWS_WITH_AS(strided_slice(a, {2, 0, 0}, {1, 4, 3}), doctest::Contains("run against stride"), shape_error);
  CHECK_THROWS_WITH_AS(strided_slice(a, {0}, {3}, {0}), doctest::Contains("stride 0"), shape_error);
}

TEST_CASE("reshape with every Relay newshape code") {
  auto a = test::random_tensor<float>({2, 3, 4}, 3);
  auto shape_of = [](const auto& e) { return to_string(e.shape().array()); };
  CHECK(shape_of(reshape(a, {4, 0, 2})) == "(4, 3, 2)");
  CHECK(shape_of(reshape(a, {2, 0, 0})) == "(2, 3, 4)");
  CHECK(shape_of(reshape(a, {0, -1})) == "(2, 12)");
  CHECK(shape_of(reshape(a, {-1, 0})) == "(8, 3)");  // -1 consumes an input axis
  CHECK(shape_of(reshape(a, {6, 1, -1})) == "(6, 1, 4)");
  CHECK(shape_of(reshape(a, {3, -1, 8})) == "(3, 1, 8)");
  CHECK(shape_of(reshape(a, {-1})) == "(24)");
  CHECK(shape_of(reshape<3>(a, {-2})) == "(2, 3, 4)");
  CHECK(shape_of(reshape<3>(a, {2, -2})) == "(2, 3, 4)");
  CHECK(shape_of(reshape<5>(a, {-2, 1, 1})) == "(2, 3, 4, 1, 1)");
  CHECK(shape_of(reshape(a, {-3, 4})) == "(6, 4)");
  CHECK(shape_of(reshape(a, {0, -3})) == "(2, 12)");
  CHECK(shape_of(reshape<2>(a, {-3, -2})) == "(6, 4)");
  CHECK(shape_of(reshape<4>(a, {-4, 1, 2, -2})) == "(1, 2, 3, 4)");
  CHECK(shape_of(reshape<4>(a, {2, -4, -1, 3, -2})) == "(2, 1, 3, 4)");
  auto b = test::random_tensor<float>({2, 3, 4, 5}, 4);
  CHECK(shape_of(reshape(b, {-3, -3})) == "(6, 20)");
  check(reshape(a, {4, 6}) * 3.0f, 0.5);
  CHECK_THROWS_WITH_AS(reshape(a, {5, -1}), doctest::Contains("cannot infer"), shape_error);
  CHECK_THROWS_WITH_AS(reshape(a, {-1, -1}), doctest::Contains("more than one -1"), shape_error);
  CHECK_THROWS_WITH_AS(reshape(a, {7}), doctest::Contains("has 7 elements where the input has 24"), shape_error);
  CHECK_THROWS_WITH_AS(reshape(a, {-5, 24}), doctest::Contains("unknown code -5"), shape_error);
  CHECK_THROWS_WITH_AS(reshape(a, {-2}), doctest::Contains("rank 3 where rank 1"), shape_error);
}

TEST_CASE("reshape of non-contiguous views: folded to strides when possible, index map otherwise") {
  auto a = test::random_tensor<float>({8, 12, 10}, 5);
  // A column slice keeps rows contiguous: merging the first two axes still folds.
  auto s = strided_slice(a, {0, 0, 2}, {8, 12, 9});
  check(reshape(s, {96, 7}) + 1.0f, 0.5, "foldable");
  // The seed's pattern: reshape(transpose) merges axes that are not adjacent in memory.
  auto b = test::random_tensor<float>({8, 384, 12, 16}, 6);
  auto t = reshape(transpose(b, {0, 2, 1, 3}), {96, 384, 16});
  check(t * 16.0f, 0, "transpose then reshape");  // exact: a power of two
  check(reshape(exp(transpose(a)), {-1}), 2, "reshape of an expression");
}

TEST_CASE("squeeze, expand_dims, transpose, broadcast_to") {
  auto a = test::random_tensor<float>({1, 5, 1, 7}, 7);
  auto q = squeeze(a, {0, 2});
  CHECK(to_string(q.shape().array()) == "(5, 7)");
  check(q * 2.0f, 0);  // exact
  CHECK_THROWS_WITH_AS(squeeze(a, {1}), doctest::Contains("has extent 5, not 1"), shape_error);
  tensor<float, fixed<1, 3, 1>> st;
  auto sq = squeeze(st);
  CHECK(to_string(sq.shape().array()) == "(3)");
  auto e = expand_dims<2>(q, 1);
  CHECK(to_string(e.shape().array()) == "(5, 1, 1, 7)");
  CHECK(to_string(expand_dims(q, -1).shape().array()) == "(5, 7, 1)");
  CHECK(to_string(expand_dims(q, -3).shape().array()) == "(1, 5, 7)");
  CHECK_THROWS_AS(expand_dims(q, 3), shape_error);
  auto t = transpose(a, {3, 1, 0, 2});
  CHECK(to_string(t.shape().array()) == "(7, 5, 1, 1)");
  check(t + 1.0f, 0.5);
  CHECK(to_string(transpose(q).shape().array()) == "(7, 5)");
  CHECK_THROWS_WITH_AS(transpose(a, {0, 1, 1, 2}), doctest::Contains("repeat"), shape_error);
  auto bias = test::random_tensor<float>({7}, 8);
  auto bc = broadcast_to(bias, {4, 5, 7});
  check(bc * 1.0f, 0);  // exact
  CHECK_THROWS_WITH_AS(broadcast_to(bias, {4, 6}), doctest::Contains("(7) does not broadcast to (4, 6)"), shape_error);
}

TEST_CASE("concatenate of views and expressions, along every axis") {
  auto a = test::random_tensor<float>({3, 5}, 9);
  auto b = test::random_tensor<float>({3, 4}, 10);
  auto c = test::random_tensor<float>({2, 5}, 11);
  check(concatenate(std::tie(a, b), 1) * 2.0f, 0, "axis 1");  // exact
  check(concatenate(std::forward_as_tuple(a, exp(c)), 0) + 1.0f, 2, "axis 0 with an expression");
  check(transpose(concatenate(std::tie(a, b), -1)), 0, "transposed");
  auto whole = test::random_tensor<float>({4, 9}, 12);
  auto parts = split<3>(whole, 1);
  check(concatenate(parts, 1), 0, "split then concatenate");
  CHECK_THROWS_WITH_AS(concatenate(std::tie(a, c), 1), doctest::Contains("differ outside axis 1"), shape_error);
  // every width, so the boundary falls inside and at the edge of vectors
  for (index_t w : {1, 7, 16, 17, 33}) {
    auto x = test::random_tensor<float>({2, 1}, 13);
    tensor<float, 2> y({2, w});
    auto g = test::rng(static_cast<std::uint64_t>(w));
    test::fill(y.view(), g);
    check(concatenate(std::tie(x, y, x), 1) - 0.5f, 0.5, "varied widths");
  }
}

TEST_CASE("take with clip and wrap, along an axis and flattened") {
  auto d = test::random_tensor<float>({4, 6, 3}, 14);
  tensor<std::int32_t, 2> idx({2, 5});
  const std::int32_t iv[10] = {0, 5, -1, 7, 2, -7, 3, 3, 100, 1};
  for (int i = 0; i < 10; ++i) idx.data()[i] = iv[i];
  auto t = take(d, idx, 1);
  CHECK(to_string(t.shape().array()) == "(4, 2, 5, 3)");
  check(t * 1.0f, 0, "clip");
  check(take(d, idx, 1, take_mode::wrap) + 0.0f, 0, "wrap");
  check(take(d, idx, -1) + 0.0f, 0, "last axis");
  check(take(d, idx) * 2.0f, 0, "flattened");
  // clip clamps negative indices to 0 (Relay and numpy's mode="clip")
  auto t2 = materialize(take(d, idx, 1));
  CHECK(t2(0, 0, 2, 0) == d(0, 0, 0));
  auto t3 = materialize(take(d, idx, 1, take_mode::wrap));
  CHECK(t3(0, 0, 2, 0) == d(0, 5, 0));
}

TEST_CASE("views compose and still fuse: split of reshape of transpose of concatenate") {
  auto a = test::random_tensor<float>({6, 4, 5}, 15);
  auto b = test::random_tensor<float>({6, 4, 3}, 16);
  auto cat = concatenate(std::tie(a, b), 2);  // (6, 4, 8)
  auto tr = transpose(cat, {1, 0, 2});        // (4, 6, 8)
  auto rs = reshape(tr, {4, 48});             // (4, 48)
  auto parts = split<3>(rs, 1);               // 3 x (4, 16)
  auto e = sigmoid(parts[0]) + tanh(parts[1]) * exp(parts[2] * 0.25f);
  check(e, 4, "composed", 20 * 3e-7);
  // and the seed's attention reshapes: split, squeeze, reshape, transpose, reshape, quantize
  auto qkv = test::random_tensor<float>({3, 24, 16}, 17);
  auto s = split<3>(qkv, 0);
  auto q = reshape(transpose(reshape(squeeze(s[0], {0}), {2, 12, 4, 4}), {0, 2, 1, 3}), {8, 12, 4});
  check(cast<std::int8_t>(clip(round(q * 16.0f), -127, 127)), 0, "seed");
}

TEST_CASE("writing through views: into a transposed view, a slice and a reshape") {
  auto a = test::random_tensor<float>({5, 7}, 18);
  tensor<float, 2> out({7, 5});
  eval(transpose(out.view()), a * 2.0f);
  for (index_t i = 0; i < 5; ++i)
    for (index_t j = 0; j < 7; ++j) CHECK(out(j, i) == a(i, j) * 2.0f);
  tensor<float, 2> big({5, 14});
  eval(strided_slice(big.view(), {0, 1}, {5, 14}, {1, 2}), a + 1.0f);
  CHECK(big(3, 5) == a(3, 2) + 1.0f);
  CHECK(big(3, 4) == 0.0f);
  tensor<float, 1> flat({35});
  eval(reshape(flat.view(), {5, 7}), a);
  CHECK(flat(15) == a(2, 1));
  CHECK_THROWS_WITH_AS(eval(reshape(transpose(out.view()), {35}), reshape(a, {35})),
                       doctest::Contains("cannot be expressed with strides"), shape_error);
}

TEST_CASE("a reshape at the root is evaluated as the output's, in the child's coordinates") {
  // seed 002's output: [B * H, S, D] heads back to [B * S, H * D]
  const index_t B = 2, H = 3, S = 7, D = 5;
  auto pv = test::random_tensor({B * H, S, D}, 97);
  auto back = reshape(transpose(reshape(pv, {B, H, S, D}), {0, 2, 1, 3}), {B * S, H * D});
  check(back * 1.0f, 0, "an expression under the root");
  tensor<float, 2> out({B * S, H * D});
  eval(out.view(), back);  // the root itself a reshape: out seen as [B, S, H, D]
  for (index_t b = 0; b < B; ++b)
    for (index_t h = 0; h < H; ++h)
      for (index_t s = 0; s < S; ++s)
        for (index_t d = 0; d < D; ++d) CHECK(out(b * S + s, h * D + d) == pv(b * H + h, s, d));
  // an output that cannot be seen in the child's shape (a transposed view): the reshape stays
  tensor<float, 2> outt({H * D, B * S});
  eval(transpose(outt.view()), back);
  for (index_t r = 0; r < B * S; ++r)
    for (index_t c = 0; c < H * D; ++c) CHECK(outt(c, r) == out(r, c));
  // a contraction under a root reshape, and one whose output overlaps what it reads
  auto x = test::random_tensor({4, 6, 9}, 98, -1, 1);
  auto w = test::random_tensor({10, 9}, 99, -1, 1);
  check(reshape(dense(x, w) + 1.0f, {24, 10}), 2, "reshape of dense + bias", 1e-5);
  tensor<float, 2> sq({6, 6});
  for (index_t i = 0; i < 36; ++i) sq.data()[i] = static_cast<float>(i);
  eval(sq.view(), reshape(transpose(reshape(std::as_const(sq).view(), {36})), {6, 6}));
  for (index_t i = 0; i < 36; ++i) CHECK(sq.data()[i] == static_cast<float>(i));  // x = reshape(reshape(x))
  eval(sq.view(), reshape(transpose(std::as_const(sq).view()), {6, 6}));
  CHECK(sq(0, 1) == 6.0f);
  CHECK(sq(1, 0) == 1.0f);
}

TEST_CASE("shape errors name the op and both shapes") {
  tensor<float, 2> a({2, 3}), b({4, 5});
  CHECK(message_of([&] { (void)(a + b); }) == "add: shapes (2, 3) and (4, 5) do not broadcast");
  CHECK(message_of([&] { (void)where(a > 0, a, b); }) == "where: shapes (2, 3), (2, 3) and (4, 5) do not broadcast");
  tensor<float, 2> out({3, 3});
  CHECK(message_of([&] { eval(out, a * 2.0f); }) ==
        "eval: the expression of shape (2, 3) does not fit the output of shape (3, 3)");
  CHECK(message_of([&] { (void)tensor<float, 2>({1, 2, 3}); }) == "tensor: 3 values given for rank 2");
  CHECK(message_of([&] { (void)clip(a, 2, 1); }).find("clip: a_min") == 0);
}

TEST_CASE("compile-time view parameters keep static shapes") {
  tensor<float, fixed<2, 30>> a;
  auto g = test::rng(80);
  test::fill(a.view(), g);
  auto s = split<3>(a, axis<1>);
  static_assert(std::is_same_v<std::remove_reference_t<decltype(s[0])>::shape_type, shape<2, 10>>);
  CHECK(s[2].data() == a.data() + 20);
  auto t = transpose<1, 0>(a);
  static_assert(std::is_same_v<decltype(t)::shape_type, shape<30, 2>>);
  CHECK(t(7, 1) == a(1, 7));
  auto e = expand_dims<2>(a, axis<-1>);
  static_assert(std::is_same_v<decltype(e)::shape_type, shape<2, 30, 1, 1>>);
  auto q = squeeze<2, 3>(e);
  static_assert(std::is_same_v<decltype(q)::shape_type, shape<2, 30>>);
  auto r = reshape<-1, 0>(a);  // -1 consumes axis 0, 0 copies axis 1
  CHECK(to_string(r.shape().array()) == "(2, 30)");
  auto r2 = reshape<0, -4, 3, -1>(a);
  CHECK(to_string(r2.shape().array()) == "(2, 3, 10)");
  tensor<float, fixed<2, 10>> out;
  eval(out, sigmoid(s[0]) + tanh(s[1]) * exp(s[2]));  // every shape checked at compile time
  expect_matches(out, reference(sigmoid(s[0]) + tanh(s[1]) * exp(s[2])), {1e-6, 20 * 3e-7}, 4, "static gate");
  // the same calls on dynamic shapes check at run time
  tensor<float, 2> d({2, 30});
  CHECK_THROWS_AS(split<4>(d, axis<1>), shape_error);
  auto bad_reshape = [&] { return reshape<7, -1>(d); };  // 60 elements
  CHECK_THROWS_AS(bad_reshape(), shape_error);
}

TEST_CASE("reshapes that cannot fold: runs, carries and every step of the linear index") {
  // reshape(transpose(reshape(x))) with odd extents: the inner reshape folds, the outer does
  // not; the general form walks runs and carries digits from row to row.
  auto x = test::random_tensor({35, 42}, 90);
  auto t = transpose(reshape(x, {5, 7, 6, 7}), {0, 2, 1, 3});  // (5, 6, 7, 7)
  check(reshape(t, {30, 49}) * 2.0f, 0, "merge of non-adjacent axes");
  check(reshape(t, {30, 7, 7}) + 0.0f, 0, "merge of the outer axes");
  check(reshape(t, {5, 294}) - 1.0f, 0.5, "runs shorter than the row");
  check(reshape<3>(t, {-1, 3, 7}) * 1.0f, 0, "splitting across digits");
  // the row walks a non-innermost digit (linear step > 1), and backwards (a reversed view)
  check(transpose(reshape(t, {30, 49})) * 1.0f, 0, "column-wise walk");
  auto r = strided_slice(t, {4, 5, 6, 6}, {-6, -7, -8, -8}, {-1, -1, -1, -1});
  check(reshape(r, {30, 49}) * 1.0f, 0, "reversed");
  check(reshape(strided_slice(t, {0, 0, 0, 1}, {5, 6, 7, 7}, {1, 2, 1, 2}), {-1}) * 1.0f, 0, "strided then flattened");
}

TEST_CASE("a block of one batch of reshape(transpose(reshape(x))) folds into strides") {
  // [B * H, S, D] heads of x [B, S, H * D]: the whole does not fold (B * H merges axes that
  // are not adjacent in memory), one batch of it does, and a block of several batches does not.
  const index_t B = 3, S = 7, H = 5, D = 4;
  auto x = test::random_tensor({B, S, H * D}, 95);
  auto heads = reshape(transpose(reshape(x, {B, S, H, D}), {0, 2, 1, 3}), {B * H, S, D});
  const auto folded = [](const auto& e) {
    constexpr std::size_t R = std::remove_cvref_t<decltype(e)>::rank;
    int no_context = 0;  // (a tree of views: binding evaluates nothing)
    const auto ext = e.shape().array();
    return bind::bind<accurate_math_t>(e, bind::affine_map<R, R>::broadcast(ext, ext), no_context).all_folded();
  };
  CHECK_FALSE(folded(heads));
  for (index_t b : {index_t{0}, index_t{6}, B * H - 1}) {
    CAPTURE(b);
    auto one = strided_slice(heads, {b, 0, 0}, {b + 1, S, D});
    CHECK(folded(one));
    check(one * 1.0f, 0, "one batch");
    check(transpose(one, {0, 2, 1}) * 1.0f, 0, "one batch, transposed");
    auto rows = strided_slice(heads, {b, 2, 1}, {b + 1, 6, 4});
    CHECK(folded(rows));
    check(rows * 1.0f, 0, "a block of rows and columns of one batch");
  }
  CHECK_FALSE(folded(strided_slice(heads, {4, 0, 0}, {6, S, D})));
  check(strided_slice(heads, {4, 0, 0}, {6, S, D}) * 1.0f, 0, "two batches across a carry: the general form");
  // Pinned digits that leave a free axis spanning a carry never fold: [6, 10] -> [3, 2, 5, 2]
  // with the first index pinned at 1 puts the free axis across the last two digits.
  auto v = test::random_tensor({6, 10}, 96);
  auto r = reshape(transpose(reshape(v, {3, 2, 5, 2}), {0, 1, 3, 2}), {6, 10});
  auto pinned = strided_slice(r, {1, 0}, {2, 10});
  check(pinned * 1.0f, 0, "pinned, free axis across two digits");
  check(strided_slice(r, {4, 3}, {5, 9}) * 1.0f, 0, "pinned, a column block");
}

// ---- the node protocol -----------------------------------------------------------------------------

namespace {

/// The tree n with every leaf replaced by f(leaf), rebuilt through the protocol alone.
template <class N, class F>
auto map_leaves(const N& n, F&& f) {
  if constexpr (child_count<N> == 0) {
    return f(n);
  } else {
    const auto ch = children(n);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return with_children(n, map_leaves(fuse::get<I>(ch), f)...);
    }(std::make_index_sequence<child_count<N>>{});
  }
}

/// A leaf mapper for map_leaves: leaves that view all of `from` as it is (read-only views, or
/// the writable views that reshapes keep) become the same views of `to`; others stay.
bool same_view(const auto& leaf, const tensor<float, 2>& t) {
  return leaf.data() == t.data() && leaf.shape().array() == t.view().shape().array() &&
         leaf.strides() == t.view().strides();
}
auto replacing(tensor<float, 2>& from, tensor<float, 2>& to) {
  return [&from, &to](const auto& leaf) {
    using L = std::remove_cvref_t<decltype(leaf)>;
    if constexpr (std::is_same_v<L, decltype(std::as_const(from).view())>)
      return same_view(leaf, from) ? std::as_const(to).view() : leaf;
    else if constexpr (std::is_same_v<L, decltype(from.view())>) return leaf.data() == from.data() ? to.view() : leaf;
    else return leaf;
  };
}

/// How many nodes of each kind the tree of n holds, by the generic walk.
template <class N>
void count_kinds(const N& n, std::map<node_kind, int>& counts) {
  ++counts[kind_of<N>];
  for_each_child(n, [&](const auto& c) { count_kinds(c, counts); });
}

}  // namespace

TEST_CASE("the node protocol: kinds, children, and trees rebuilt over other leaves") {
  auto a = test::random_tensor({5, 7}, 11, -1, 1);
  auto b = test::random_tensor({7}, 12, -1, 1);
  auto c = test::random_tensor({5, 7}, 13, -1, 1);
  auto w = test::random_tensor({3, 7}, 14, -1, 1);
  auto w2 = test::random_tensor({3, 7}, 15, -1, 1);
  auto g = test::random_tensor({3}, 17, -1, 1);
  auto idx = tensor<std::int32_t, 1>({2});
  idx.data()[0] = 4, idx.data()[1] = 0;
  const auto swap_a = replacing(a, c);
  const auto swap_w = replacing(w, w2);

  auto bt = test::random_tensor({5}, 18, -1, 1);
  const auto e = transpose(exp(a)) * 2.0f + bt;
  std::map<node_kind, int> counts;
  count_kinds(e, counts);
  CHECK(counts[node_kind::elementwise] == 3);
  CHECK(counts[node_kind::affine_view] == 1);
  CHECK(counts[node_kind::leaf] == 2);
  CHECK(counts[node_kind::constant] == 1);
  CHECK(child_count<decltype(e)> == 2);
  // The same tree over c instead of a: every node rebuilt with its own parameters.
  const auto e_c = map_leaves(e, swap_a);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(e_c)>, std::remove_cvref_t<decltype(e)>>);
  expect_matches(materialize(e_c), reference(transpose(exp(c)) * 2.0f + bt), {0, 1e-6}, 2, "rebuilt over c");

  // The other kinds: reshape, concatenate, take, layer norm, contraction, softmax, reduction.
  const auto t = take(concatenate(std::make_tuple(reshape<7, 5>(a), reshape<7, 5>(b * a)), 0), idx, 0);
  count_kinds(t, counts = {});
  CHECK(counts[node_kind::take] == 1);
  CHECK(counts[node_kind::concatenate] == 1);
  CHECK(counts[node_kind::reshape_view] == 2);
  CHECK(!needs_own_kernel<decltype(t)>);
  expect_matches(materialize(map_leaves(t, swap_a)),
                 reference(take(concatenate(std::make_tuple(reshape<7, 5>(c), reshape<7, 5>(b * c)), 0), idx, 0)), {},
                 0, "take of a concatenation of reshapes, rebuilt over c");
  const auto ln = layer_norm(dense(a, w), g, g, -1, 1e-5);
  CHECK(kind_of<decltype(ln)> == node_kind::layer_norm);
  CHECK(child_count<decltype(ln)> == 3);
  expect_matches(materialize(map_leaves(ln, swap_w)), reference(layer_norm(dense(a, w2), g, g, -1, 1e-5)), {1e-5, 1e-5},
                 8, "layer_norm of a dense, rebuilt over other weights");
  const auto st = sum(softmax(dense(a, w), -1) + 1.0f, -1, keepdims);
  count_kinds(st, counts = {});
  CHECK(counts[node_kind::reduction] == 1);
  CHECK(counts[node_kind::softmax] == 1);
  CHECK(counts[node_kind::contraction] == 1);
  CHECK(needs_own_kernel<decltype(st)>);
  expect_matches(materialize(map_leaves(st, swap_w)), reference(sum(softmax(dense(a, w2), -1) + 1.0f, -1, keepdims)),
                 {1e-6, 1e-6}, 4, "a reduction of a softmax of a dense, rebuilt over other weights");

  // A new child of another shape is refused, naming both.
  auto other = test::random_tensor({7, 5}, 16, -1, 1);
  const std::string msg = message_of([&] { (void)with_children(exp(a), std::as_const(other).view()); });
  CHECK(msg.find("with_children: child 0 of shape (7, 5) replaces one of shape (5, 7)") != std::string::npos);
}

TEST_CASE("same_tree: the same leaves, constants, op attributes and parameters all the way down") {
  auto a = test::random_tensor({4, 6}, 21, -1, 1);
  auto a2 = test::random_tensor({4, 6}, 22, -1, 1);
  auto w = test::random_tensor({5, 6}, 23, -1, 1);
  CHECK(same_tree(exp(a) + 1.0f, exp(a) + 1.0f));
  CHECK(!same_tree(exp(a) + 1.0f, exp(a) + 2.0f));         // another constant
  CHECK(!same_tree(exp(a) + 1.0f, exp(a2) + 1.0f));        // another leaf
  CHECK(same_tree(a + std::nanf(""), a + std::nanf("")));  // a NaN constant is itself
  CHECK(!same_tree(a + 0.0f, a + -0.0f));                  // zeros of two signs
  CHECK(same_tree(clip(a, -0.5, 0.5), clip(a, -0.5, 0.5)));
  CHECK(!same_tree(clip(a, -0.5, 0.5), clip(a, -0.5, 0.25)));  // an op attribute
  // Views of the same memory in another layout, and other view parameters.
  const tensor_view<const float, 2> rows(a.data(), dynamic_shape<2>({4, 6}));
  const tensor_view<const float, 2> cols(a.data(), dynamic_shape<2>({4, 6}), index_array<2>{1, 4});
  CHECK(same_tree(rows, std::as_const(a).view()));
  CHECK(!same_tree(rows, cols));
  CHECK(same_tree(split<2>(exp(a), 1)[0], split<2>(exp(a), 1)[0]));
  CHECK(!same_tree(split<2>(exp(a), 1)[0], split<2>(exp(a), 1)[1]));
  // Copies of one contraction (the sections of a split), and contractions that differ.
  const auto s = split<5>(dense(a, w), 1);
  CHECK(same_tree(s[0].child, s[4].child));
  CHECK(!same_tree(dense(a, w), dense(a2, w)));
  CHECK(same_tree(sum(dense(a, w), -1), sum(dense(a, w), -1)));
  CHECK(!same_tree(sum(dense(a, w), -1), sum(dense(a, w), 0)));
}
