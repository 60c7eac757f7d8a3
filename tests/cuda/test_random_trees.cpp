// Random trees on the CUDA emulator: 10,000+ elementwise trees over views, broadcasts, casts,
// concatenations, takes and reshapes, in every numeric dtype, each ONE kernel whose emulated
// result equals the CPU's scalar lane bit for bit (any NaN matching any NaN).
//
// A tree's *shape* is one of a few skeletons (a C++ expression's type is fixed when it is
// compiled); everything else is drawn at run time: which op of the op table each node applies
// (`random_op`: every unary or binary op of fuse::ops::relay_elementwise that takes the dtype, no
// attribute, chosen by index), the output's extents (odd sizes, 1s), which operand axes
// broadcast, each leaf's transpose, slice offsets and steps, the concatenation axis, the take's
// axis, indices (out of range too) and mode, the reshape's factorisation, the values (with NaN,
// infinities and huge values among floats), and the thread order.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <random>
#include <string>
#include <type_traits>

#include <fuse/cuda.hpp>

#include "cuda/scalar_lane.hpp"
#include "support/random.hpp"

namespace {

using namespace fuse;

// ---- ops drawn at run time -------------------------------------------------------------------------

/// Integer ops left out: division by zero and shifts past the width are undefined in C++.
template <class Op>
inline constexpr bool integer_hazard =
    std::is_same_v<Op, ops::divide> || std::is_same_v<Op, ops::floor_divide> || std::is_same_v<Op, ops::floor_mod> ||
    std::is_same_v<Op, ops::trunc_divide> || std::is_same_v<Op, ops::trunc_mod> || std::is_same_v<Op, ops::power> ||
    std::is_same_v<Op, ops::right_shift> || std::is_same_v<Op, ops::left_shift>;

/// Whether op Op of arity A maps dtype T to T without attributes.
template <class Op, class T, int A>
constexpr bool drawable() {
  if constexpr (Op::arity != A || ops::has_attributes<Op> || ops::has_channel_operand<Op>) {
    return false;
  } else if constexpr (Op::kind == ops::rule_kind::numeric) {
    return is_floating_dtype<T> || !integer_hazard<Op>;
  } else if constexpr (Op::kind == ops::rule_kind::floating) {
    return is_floating_dtype<T>;
  } else if constexpr (Op::kind == ops::rule_kind::integer) {
    return is_integer_dtype<T> && !integer_hazard<Op>;
  } else {
    return false;  // bool results: comparisons, classification, logic
  }
}

template <class... Op>
struct op_pack {
  static constexpr int size = sizeof...(Op);
};
template <class T, int A, class Acc, class... Rest>
struct filter_ops {
  using type = Acc;
};
template <class T, int A, class... Kept, class Op, class... Rest>
struct filter_ops<T, A, op_pack<Kept...>, Op, Rest...> {
  using type =
      typename filter_ops<T, A, std::conditional_t<drawable<Op, T, A>(), op_pack<Kept..., Op>, op_pack<Kept...>>,
                          Rest...>::type;
};
template <class T, int A, class List>
struct ops_for;
template <class T, int A, class... Op>
struct ops_for<T, A, ops::op_list<Op...>> {
  using type = typename filter_ops<T, A, op_pack<>, Op...>::type;
};
template <class T, int A>
using drawable_ops = typename ops_for<T, A, ops::relay_elementwise>::type;

/// An op of the table chosen at run time: op number `which` of Pack. Scalar lanes only (the
/// lane families fall back to the scalar form lane by lane), so each lane computes exactly
/// what the chosen op's scalar form computes.
template <int A, class Pack>
struct random_op;
template <int A, class... Op>
struct random_op<A, op_pack<Op...>> : ops::numeric_rule {
  static constexpr const char* name = "random_op";
  static constexpr int arity = A;
  static constexpr op_pattern pattern = A == 1 ? op_pattern::elemwise : op_pattern::broadcast;
  int which = 0;
  template <class M, class V>
    requires(A == 1 && std::is_arithmetic_v<V>)
  V apply(V a) const {
    V r{};
    int i = 0;
    ((i++ == which ? (void)(r = static_cast<V>(Op{}.template apply<M>(a))) : (void)0), ...);
    return r;
  }
  template <class M, class V>
    requires(A == 2 && std::is_arithmetic_v<V>)
  V apply(V a, V b) const {
    V r{};
    int i = 0;
    ((i++ == which ? (void)(r = static_cast<V>(Op{}.template apply<M>(a, b))) : (void)0), ...);
    return r;
  }
};

template <class T>
using unary_t = random_op<1, drawable_ops<T, 1>>;
template <class T>
using binary_t = random_op<2, drawable_ops<T, 2>>;

// ---- a forest: the run-time draws and the memory the leaves view --------------------------------

template <class T>
struct forest {
  std::mt19937_64 g;
  std::deque<tensor<T, 3>> bases;  // (a deque: the views keep pointing at them)
  std::deque<tensor<std::int32_t, 1>> indices;
  index_array<3> out{};

  explicit forest(std::uint64_t salt) : g(test::rng(salt)) {}

  index_t pick(index_t n) { return static_cast<index_t>(g() % static_cast<std::uint64_t>(n)); }
  index_t extent() {
    static constexpr index_t sizes[] = {1, 2, 3, 5, 7, 16, 17, 33};
    return sizes[pick(8)];
  }
  unary_t<T> unary() { return {{}, static_cast<int>(pick(drawable_ops<T, 1>::size))}; }
  binary_t<T> binary() { return {{}, static_cast<int>(pick(drawable_ops<T, 2>::size))}; }

  T value() {
    if constexpr (is_floating_dtype<T>) {
      const auto r = pick(64);
      if (r == 0) return T(std::numeric_limits<float>::quiet_NaN());
      if (r == 1) return T(std::numeric_limits<float>::infinity());
      if (r == 2) return T(-std::numeric_limits<float>::infinity());
      if (r == 3) return T(std::is_same_v<T, half> ? 60000.0 : 3e38);
      std::uniform_real_distribution<double> d(-4, 4);
      return T(d(g));
    } else {
      std::uniform_int_distribution<std::int64_t> d(lowest_of<T>(), highest_of<T>());
      // Mostly small values (so that sums and products stay interesting), some of any size.
      return static_cast<T>(pick(4) == 0 ? d(g) : static_cast<std::int64_t>(pick(41)) - 20);
    }
  }

  /// A leaf of extents `shape` (an extent may be 1, to broadcast): a strided slice of a
  /// transposed base tensor.
  auto leaf(const index_array<3>& shape) {
    index_t perm[3] = {0, 1, 2};
    std::shuffle(perm, perm + 3, g);
    index_t lo[3], hi[3], step[3];
    index_array<3> full{};  // the transposed base's extents
    for (std::size_t d = 0; d < 3; ++d) {
      step[d] = 1 + pick(3);
      lo[d] = pick(3);
      hi[d] = lo[d] + (shape[d] - 1) * step[d] + 1;
      full[d] = hi[d] + pick(2);
    }
    index_array<3> base_ext{};
    index_t inverse[3];
    for (std::size_t d = 0; d < 3; ++d) base_ext[static_cast<std::size_t>(perm[d])] = full[d];
    for (std::size_t d = 0; d < 3; ++d) inverse[d] = perm[d];
    auto& b = bases.emplace_back(base_ext);
    for (auto& v : b) v = value();
    return strided_slice(transpose(b.view(), inverse), lo, hi, {step[0], step[1], step[2]});
  }
  /// Extents that broadcast to `to`: each axis 1 one time in four.
  index_array<3> broadcasting(const index_array<3>& to) {
    index_array<3> s = to;
    for (std::size_t d = 0; d < 3; ++d)
      if (pick(4) == 0) s[d] = 1;
    return s;
  }
  auto operand() { return leaf(broadcasting(out)); }
};

// ---- the skeletons -------------------------------------------------------------------------------------

/// Runs tree e (whose shape is f.out) on the emulator and compares it with the scalar lane.
template <class T, class E>
bool agrees(forest<T>& f, const E& e, int& launches) {
  using V = typename E::value_type;
  const auto ext = e.shape().array();
  const auto lane = test::cuda::scalar_lane<accurate_math_t, V>(ext, e);
  tensor<V, 3> got(ext);
  static constexpr cuda::schedule orders[] = {cuda::schedule::forward, cuda::schedule::reverse,
                                              cuda::schedule::shuffled};
  cuda::launch_log log;
  cuda::eval(got, e, cuda::emulated(orders[f.pick(3)]), cuda::log_to(log));
  launches += static_cast<int>(log.size());
  const auto n = static_cast<std::size_t>(got.size());
  const std::size_t i = test::cuda::first_difference(got.data(), lane.data(), n);
  if (i < n)
    MESSAGE("element " << i << " of " << n << ": " << test::show(got.data()[i]) << " vs the scalar lane's "
                       << test::show(lane.data()[i]));
  return i == n;
}

/// Other dtype a tree of dtype T casts through.
template <class T>
using other_t = std::conditional_t<is_floating_dtype<T>, std::int32_t, float>;

/// One tree of skeleton k over dtype T; counts trees, disagreements and launches.
template <class T>
void grow(forest<T>& f, int k, int& trees, int& wrong, int& launches) {
  for (std::size_t d = 0; d < 3; ++d) f.out[d] = f.extent();
  const auto o = f.out;
  bool ok = true;
  switch (k) {
    case 0:  // u(b(x, y))
      ok = agrees(f, make_map(f.unary(), make_map(f.binary(), f.operand(), f.operand())), launches);
      break;
    case 1:  // b(u(x), b(y, u(z)))
      ok = agrees(f,
                  make_map(f.binary(), make_map(f.unary(), f.operand()),
                           make_map(f.binary(), f.operand(), make_map(f.unary(), f.operand()))),
                  launches);
      break;
    case 2:  // cast back from another dtype: cast<T>(u'(cast<T'>(b(x, y))))
      ok = agrees(f,
                  cast<T>(make_map(
                      random_op<1, drawable_ops<other_t<T>, 1>>{
                          {}, static_cast<int>(f.pick(drawable_ops<other_t<T>, 1>::size))},
                      cast<other_t<T>>(make_map(f.binary(), f.operand(), f.operand())))),
                  launches);
      break;
    case 3: {  // concatenate(u(x), b(y, z)) along a random axis
      const auto axis = static_cast<std::size_t>(f.pick(3));
      index_array<3> first = o;
      first[axis] = f.extent();
      auto x = f.leaf(first);
      ok = agrees(f,
                  concatenate(std::make_tuple(make_map(f.unary(), x), make_map(f.binary(), f.leaf(o), f.operand())),
                              static_cast<index_t>(axis)),
                  launches);
      break;
    }
    case 4: {  // u(take(x, indices, axis)) + y: indices out of range too, clip or wrap
      const auto axis = f.pick(3);
      index_array<3> data = o;
      const index_t m = o[static_cast<std::size_t>(axis)];
      data[static_cast<std::size_t>(axis)] = f.extent();
      auto& idx = f.indices.emplace_back(index_array<1>{{m}});
      for (auto& v : idx) v = static_cast<std::int32_t>(f.pick(2 * data[static_cast<std::size_t>(axis)] + 3)) - 2;
      const take_mode mode = f.pick(2) ? take_mode::clip : take_mode::wrap;
      ok = agrees(f, make_map(f.binary(), make_map(f.unary(), take(f.leaf(data), idx.view(), axis, mode)), f.operand()),
                  launches);
      break;
    }
    default: {  // reshape(b(x, y)) to another factorisation of its elements, then u
      const index_t n = o[0] * o[1] * o[2];
      index_t shapes[3][3] = {{o[0] * o[1], o[2], 1}, {o[0], 1, o[1] * o[2]}, {1, n, 1}};
      const auto& s = shapes[f.pick(3)];
      f.out = {s[0], s[1], s[2]};
      ok = agrees(f, make_map(f.unary(), reshape(make_map(f.binary(), f.leaf(o), f.leaf(o)), s)), launches);
      break;
    }
  }
  ++trees;
  wrong += !ok;
}

template <class T>
void grow_forest(std::uint64_t salt, int count, int& trees, int& wrong, int& launches) {
  forest<T> f(salt);
  for (int i = 0; i < count; ++i) {
    grow(f, i % 6, trees, wrong, launches);
    f.bases.clear();
    f.indices.clear();
  }
}

}  // namespace

TEST_CASE("cuda emulated: 10,000 random trees, every numeric dtype, one kernel each, the scalar lane's bits") {
  int trees = 0, wrong = 0, launches = 0;
  grow_forest<float>(1, 1800, trees, wrong, launches);
  grow_forest<double>(2, 1500, trees, wrong, launches);
  grow_forest<half>(3, 1500, trees, wrong, launches);
  grow_forest<std::int8_t>(4, 1200, trees, wrong, launches);
  grow_forest<std::uint8_t>(5, 1200, trees, wrong, launches);
  grow_forest<std::int32_t>(6, 1500, trees, wrong, launches);
  grow_forest<std::int64_t>(7, 1500, trees, wrong, launches);
  MESSAGE(trees << " random trees, " << wrong << " differ from the scalar lane, " << launches << " launches");
  CHECK(trees >= 10000);
  CHECK(wrong == 0);
  CHECK(launches == trees);  // every tree has elements: one launch each
}
