// The host reference for every fused tree: fuse::reference(expr) evaluates an expression node
// by node, element by element, in double precision (floating dtypes) or exact int64 arithmetic
// wrapped to the node's width (integer dtypes), using each op's `reference` from the op table.
// It shares nothing with the executors but the op table's reference functions and the index
// semantics written down in docs/ops.md, so a fused result checked against it is checked
// against an independent evaluation.
//
// Rounding to the dtype happens where the dtype cannot hold the double: after each float16 or
// bfloat16 op (as the fused code rounds), and at casts. float32 nodes keep double precision, so
// the reference of a float32 tree is the tree computed exactly in double.
//
// Slow on purpose (no vectors, recursion per element): for tests and for checking generated code.
// Within one call it computes each row of a row node and each element of a reduction once (a
// memo), so a softmax or x - mean(x) costs what the row costs, not the row's length squared.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <type_traits>
#include <vector>

#include "fuse/core/tensor.hpp"
#include "fuse/expr/elementwise.hpp"
#include "fuse/expr/contract.hpp"
#include "fuse/expr/reduce.hpp"
#include "fuse/expr/views.hpp"

namespace fuse {

/// The type reference values of dtype T are held in.
template <class T>
using ref_t =
    std::conditional_t<is_floating_dtype<T>, double, std::conditional_t<is_bool_dtype<T>, bool, std::int64_t>>;

namespace reference_detail {

/// A double value held in dtype T: rounded for float16/bfloat16; for float32 kept in double
/// precision but not in double range (what float32 rounds to infinity is infinite).
template <class T>
double round_to(double v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return static_cast<double>(static_cast<float>(T(v)));
  } else if constexpr (std::is_same_v<T, float>) {
    constexpr double overflow = 0x1.ffffffp127;  // FLT_MAX + half an ULP: rounds to infinity
    if (v >= overflow) return std::numeric_limits<double>::infinity();
    if (v <= -overflow) return -std::numeric_limits<double>::infinity();
    return v;
  } else {
    return v;
  }
}

/// A reference value as the argument type of an op's reference(): double or int64.
template <class T>
auto arg(ref_t<T> v) {
  if constexpr (is_floating_dtype<T>) return v;
  else return static_cast<std::int64_t>(v);
}

template <class T, class R>
ref_t<T> result(R v) {
  if constexpr (is_bool_dtype<T>) return static_cast<bool>(v);
  else if constexpr (is_floating_dtype<T>) return round_to<T>(static_cast<double>(v));
  else return ops::detail::wrap_to<T>(static_cast<std::int64_t>(v));
}

/// cast semantics on reference values (see fuse/expr/convert.hpp).
template <class To, class From>
ref_t<To> cast_ref(ref_t<From> v) {
  if constexpr (is_bool_dtype<To>) {
    return v != ref_t<From>(0);
  } else if constexpr (is_bool_dtype<From>) {
    return v ? ref_t<To>(1) : ref_t<To>(0);
  } else if constexpr (is_integer_dtype<To> && is_floating_dtype<From>) {
    if (std::isnan(v)) return 0;
    const double lo = static_cast<double>(std::numeric_limits<To>::lowest());
    const double hi = static_cast<double>(std::numeric_limits<To>::max());
    const double t = std::trunc(v);
    return static_cast<std::int64_t>(t <= lo ? lo : (t >= hi ? hi : t));
  } else if constexpr (is_integer_dtype<To>) {
    return ops::detail::wrap_to<To>(v);
  } else if constexpr (std::is_same_v<To, float>) {
    return static_cast<double>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, double>) {
    return static_cast<double>(v);
  } else {
    // float16 / bfloat16: round once, from the exact value.
    if constexpr (is_integer_dtype<From>) return static_cast<double>(convert_value<To, std::int64_t>(v));
    else return static_cast<double>(static_cast<float>(To(static_cast<double>(v))));
  }
}

/// What one fuse::reference call computes once, keyed by node and coordinates: the rows of its
/// row nodes (softmax, log_softmax, layer_norm: a row's values and statistics) and the elements
/// of its reductions. Element by element, every element of a row node would otherwise recompute
/// its whole row, and every element that reads a reduction through a broadcast (x - mean(x))
/// the whole reduction: quadratic in the row's length (test_cuda_emulated's softmax rows of 3001:
/// most of that suite's time). The tree and its operands do not change during one call.
struct memo {
  /// A node is its address and its type: a node and its first member (a reduction of a
  /// reduction) share an address, never a type.
  struct key {
    const void* node;
    const void* type;
    std::vector<index_t> x;
    bool operator<(const key& o) const {
      if (node != o.node) return std::less<>{}(node, o.node);
      if (type != o.type) return std::less<>{}(type, o.type);
      return x < o.x;
    }
  };
  /// A row's values and two statistics (softmax: max and sum of exponentials; layer_norm: mean
  /// and variance), and whether a value is NaN.
  struct row {
    std::vector<double> v;
    double a = 0, b = 0;
    bool nan = false;
  };
  std::map<key, row> rows;
  std::map<key, double> floats;  // reductions of floating dtype
  std::map<key, std::int64_t> ints;
};

/// One address per node type: the type half of a memo key.
template <class E>
inline constexpr char type_tag = 0;

/// The memo key of node e at coordinates x.
template <class E>
memo::key key_of(const E& e, const index_t* x) {
  return {&e, &type_tag<E>, std::vector<index_t>(x, x + E::rank)};
}

/// table[k], made by make() the first time (make may fill the table with other keys).
template <class Table, class F>
const typename Table::mapped_type& memoized(Table& table, memo::key&& k, F&& make) {
  auto it = table.find(k);
  if (it == table.end()) it = table.emplace(std::move(k), make()).first;
  return it->second;
}

template <class E>
ref_t<typename E::value_type> at(const E& e, const index_t* x, memo& m);

template <std::size_t R>
index_t linear(const index_array<R>& ext, const index_t* x) {
  index_t l = 0;
  for (std::size_t d = 0; d < R; ++d) l = l * ext[d] + x[d];
  return l;
}
template <std::size_t R>
void delinear(const index_array<R>& ext, index_t l, index_t* x) {
  for (std::size_t d = R; d-- > 0;) {
    x[d] = ext[d] ? l % ext[d] : 0;
    l = ext[d] ? l / ext[d] : 0;
  }
}

/// Calls f(x) for every coordinate of extents ext.
template <std::size_t R, class F>
void for_all(const index_array<R>& ext, F&& f) {
  if (product(ext) == 0) return;
  index_t x[R > 0 ? R : 1] = {};
  while (true) {
    f(static_cast<const index_t*>(x));
    std::size_t d = R;
    while (d-- > 0) {
      if (++x[d] < ext[d]) break;
      x[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

/// The coordinates of an operand of extents `from` broadcast inside extents `to`.
template <std::size_t F, std::size_t T>
void broadcast_coords(const index_array<F>& from, const index_t* x, index_t* y) {
  for (std::size_t d = 0; d < F; ++d) y[d] = from[d] == 1 ? 0 : x[T - F + d];
}

template <class E>
auto map_at(const E& e, const index_t* x, memo& m) {
  using T = typename E::value_type;
  constexpr std::size_t R = E::rank;
  return [&]<std::size_t... I>(std::index_sequence<I...>) -> ref_t<T> {
    auto child = [&](const auto& c) {
      using C = std::remove_cvref_t<decltype(c)>;
      index_t y[C::rank > 0 ? C::rank : 1];
      broadcast_coords<C::rank, R>(c.shape().array(), x, y);
      return at(c, y, m);
    };
    using Op = typename E::op_type;
    if constexpr (ops::is_cast<Op>) {
      using From =
          typename std::tuple_element_t<0,
                                        std::tuple<std::remove_cvref_t<decltype(fuse::get<I>(e.args))>...>>::value_type;
      return cast_ref<typename Op::to, From>(child(fuse::get<0>(e.args)));
    } else {
      return result<T>(e.op.reference(arg<typename std::remove_cvref_t<decltype(fuse::get<I>(e.args))>::value_type>(
          child(fuse::get<I>(e.args)))...));
    }
  }(std::make_index_sequence<decltype(e.args)::size>{});
}

template <reduce_kind K, class C, std::size_t R>
ref_t<typename C::value_type> reduce_at(const reduce_expr<K, C, R>& e, const index_t* x, memo& m) {
  using T = typename C::value_type;
  constexpr std::size_t Rc = C::rank;
  const auto ext = e.child.shape().array();
  index_array<Rc> sub{};  // extents of the reduced axes (1 elsewhere)
  index_t base[Rc > 0 ? Rc : 1] = {};
  std::size_t k = 0;
  const bool keep = R == Rc;
  for (std::size_t d = 0; d < Rc; ++d) {
    if (e.reduced[d]) {
      sub[d] = ext[d];
      if (keep) ++k;
    } else {
      sub[d] = 1;
      base[d] = x[k++];
    }
  }
  double acc = K == reduce_kind::prod ? 1.0 : 0.0;
  std::int64_t iacc = K == reduce_kind::prod ? 1 : 0;
  bool first = true;
  double fext = 0;
  std::int64_t iext = 0;
  index_t count = 0;
  for_all(sub, [&](const index_t* y) {
    index_t c[Rc > 0 ? Rc : 1];
    for (std::size_t d = 0; d < Rc; ++d) c[d] = e.reduced[d] ? y[d] : base[d];
    const auto v = at(e.child, c, m);
    ++count;
    if constexpr (is_floating_dtype<T>) {
      if (K == reduce_kind::sum || K == reduce_kind::mean) acc += v;
      else if (K == reduce_kind::prod) acc *= v;
      else {
        const bool better = K == reduce_kind::max ? v > fext : v < fext;
        if (first || std::isnan(v) || (!std::isnan(fext) && better)) fext = v;
      }
    } else {
      const auto iv = static_cast<std::int64_t>(v);
      if (K == reduce_kind::sum || K == reduce_kind::mean) iacc = fuse::detail::wrap_add(iacc, iv);
      else if (K == reduce_kind::prod) iacc = fuse::detail::wrap_mul(iacc, iv);
      else if (first || (K == reduce_kind::max ? iv > iext : iv < iext)) iext = iv;
    }
    first = false;
  });
  if constexpr (is_floating_dtype<T>) {
    if (K == reduce_kind::max || K == reduce_kind::min) {
      if (count == 0)
        return K == reduce_kind::max ? -static_cast<double>(std::numeric_limits<float>::infinity())
                                     : static_cast<double>(std::numeric_limits<float>::infinity());
      return fext;
    }
    if (K == reduce_kind::mean) acc /= static_cast<double>(count);
    return round_to<T>(acc);
  } else {
    if (K == reduce_kind::max || K == reduce_kind::min) {
      if (count == 0)
        return K == reduce_kind::max ? static_cast<std::int64_t>(std::numeric_limits<T>::lowest())
                                     : static_cast<std::int64_t>(std::numeric_limits<T>::max());
      return iext;
    }
    iacc = ops::detail::wrap_to<T>(iacc);
    if (K == reduce_kind::mean) iacc = count ? iacc / count : 0;
    return iacc;
  }
}

/// The values of the row through x along `axis` of expression c.
template <class C>
std::vector<double> row_values(const C& c, const index_t* x, index_t axis, memo& m) {
  constexpr std::size_t R = C::rank;
  const index_t n = c.shape()[static_cast<std::size_t>(axis)];
  std::vector<double> v(static_cast<std::size_t>(n));
  index_t y[R];
  for (std::size_t d = 0; d < R; ++d) y[d] = x[d];
  for (index_t j = 0; j < n; ++j) {
    y[axis] = j;
    v[static_cast<std::size_t>(j)] = static_cast<double>(at(c, y, m));
  }
  return v;
}

/// The row of row node e through x along `axis`, from the memo or made by `make` (a memo::row)
/// and kept there.
template <class E, class F>
const memo::row& row_of(const E& e, const index_t* x, index_t axis, memo& m, F&& make) {
  memo::key k = key_of(e, x);
  k.x[static_cast<std::size_t>(axis)] = 0;
  return memoized(m.rows, std::move(k), make);
}

/// A stored value of dtype T as the reference computes with it.
template <class T>
ref_t<T> ref_value(T v) {
  if constexpr (is_floating_dtype<T>) return static_cast<double>(to_compute<T>(v));
  else if constexpr (is_bool_dtype<T>) return v;
  else return static_cast<std::int64_t>(v);
}

/// One element of a contraction: the sum over k in double (floating dtypes: float16 and
/// bfloat16 operands read as their exact values, the sum rounded once to a 16-bit result dtype,
/// kept in double for float32) or int64 wrapped to the result dtype (integers).
template <contract_kind K, class A, class B, class Out, std::size_t R>
ref_t<Out> contract_at(const contract_expr<K, A, B, Out, R>& e, const index_t* x, memo& m) {
  index_t ya[A::rank > 0 ? A::rank : 1] = {};
  index_t yb[2 + (K == contract_kind::batch_matmul)] = {};
  index_t ka = 0, kb = 0;  // where k goes in ya and yb
  if constexpr (K == contract_kind::batch_matmul) {
    ya[0] = e.batch_a == 1 ? 0 : x[0];
    yb[0] = e.batch_b == 1 ? 0 : x[0];
    ya[e.trans_a ? 2 : 1] = x[1];
    ka = e.trans_a ? 1 : 2;
    yb[e.trans_b ? 1 : 2] = x[2];
    kb = e.trans_b ? 2 : 1;
  } else {
    if (e.trans_a) {
      ya[1] = x[0];
      ka = 0;
    } else {
      for (std::size_t d = 0; d + 1 < A::rank; ++d) ya[d] = x[d];
      ka = static_cast<index_t>(A::rank) - 1;
    }
    yb[e.trans_b ? 0 : 1] = x[R - 1];
    kb = e.trans_b ? 1 : 0;
  }
  double fs = 0;
  std::int64_t is = 0;
  for (index_t k = 0; k < e.k; ++k) {
    ya[ka] = k;
    yb[kb] = k;
    const auto va = at(e.a, ya, m);
    const auto vb = at(e.b, yb, m);
    if constexpr (is_floating_dtype<Out>) fs += static_cast<double>(va) * static_cast<double>(vb);
    else is += static_cast<std::int64_t>(va) * static_cast<std::int64_t>(vb);
  }
  if constexpr (is_floating_dtype<Out>) return round_to<Out>(fs);
  else return static_cast<std::int64_t>(static_cast<Out>(static_cast<std::make_unsigned_t<Out>>(is)));
}

template <class E>
ref_t<typename E::value_type> at(const E& e, const index_t* x, memo& m) {
  using T = typename E::value_type;
  constexpr node_kind K = kind_of<E>;  // one branch per node kind (fuse/expr/node.hpp)
  if constexpr (K == node_kind::leaf) {
    index_t o = 0;
    for (std::size_t d = 0; d < E::rank; ++d) o += x[d] * e.stride(d);
    return ref_value<T>(e.data()[o]);
  } else if constexpr (K == node_kind::constant) {
    return ref_value<T>(e.value);
  } else if constexpr (K == node_kind::elementwise) {
    return map_at(e, x, m);
  } else if constexpr (K == node_kind::affine_view) {
    using C = typename E::child_type;
    index_t y[C::rank > 0 ? C::rank : 1];
    for (std::size_t d = 0; d < C::rank; ++d)
      y[d] = e.map.offset[d] + (e.map.src[d] >= 0 ? e.map.scale[d] * x[e.map.src[d]] : 0);
    return at(e.child, y, m);
  } else if constexpr (K == node_kind::reshape_view) {
    using C = typename E::child_type;
    index_t y[C::rank > 0 ? C::rank : 1];
    delinear(e.child.shape().array(), linear(e.shape().array(), x), y);
    return at(e.child, y, m);
  } else if constexpr (K == node_kind::concatenate) {
    const auto a = static_cast<std::size_t>(e.axis);
    ref_t<T> r{};
    bool done = false;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      auto try_child = [&](const auto& c, index_t lo, index_t hi) {
        if (done || x[a] < lo || x[a] >= hi) return;
        index_t y[E::rank];
        for (std::size_t d = 0; d < E::rank; ++d) y[d] = x[d];
        y[a] -= lo;
        r = at(c, y, m);
        done = true;
      };
      (try_child(fuse::get<I>(e.parts), e.offsets[I], e.offsets[I + 1]), ...);
    }(std::make_index_sequence<E::count>{});
    return r;
  } else if constexpr (K == node_kind::take) {
    using D = decltype(e.data);
    using I = decltype(e.indices);
    const auto a = static_cast<std::size_t>(e.axis);
    index_t iy[I::rank > 0 ? I::rank : 1];
    for (std::size_t d = 0; d < I::rank; ++d) iy[d] = x[a + d];
    std::int64_t i = static_cast<std::int64_t>(at(e.indices, iy, m));
    const index_t n = e.data.shape()[a];
    if (e.mode == take_mode::wrap) i = ((i % n) + n) % n;
    else i = i < 0 ? 0 : (i >= n ? n - 1 : i);
    index_t y[D::rank];
    for (std::size_t d = 0; d < a; ++d) y[d] = x[d];
    y[a] = i;
    for (std::size_t d = a + 1; d < D::rank; ++d) y[d] = x[d - 1 + I::rank];
    return at(e.data, y, m);
  } else if constexpr (K == node_kind::contraction) {
    return contract_at(e, x, m);
  } else if constexpr (K == node_kind::packed_weights) {
    return ref_value<T>(e.element(x[0], x[1]));
  } else if constexpr (K == node_kind::reduction) {
    if constexpr (is_floating_dtype<T>)
      return memoized(m.floats, key_of(e, x), [&] { return static_cast<double>(reduce_at(e, x, m)); });
    else
      return static_cast<ref_t<T>>(
          memoized(m.ints, key_of(e, x), [&] { return static_cast<std::int64_t>(reduce_at(e, x, m)); }));
  } else if constexpr (K == node_kind::layer_norm) {
    const memo::row& r = row_of(e, x, e.axis, m, [&] {
      memo::row n{row_values(e.x, x, e.axis, m)};
      for (double t : n.v) n.a += t;
      n.a /= static_cast<double>(n.v.size());
      for (double t : n.v) n.b += (t - n.a) * (t - n.a);
      n.b /= static_cast<double>(n.v.size());
      return n;
    });
    const index_t j = x[e.axis];
    const index_t g[1] = {j};
    double y =
        (r.v[static_cast<std::size_t>(j)] - r.a) / std::sqrt(r.b + static_cast<double>(static_cast<float>(e.epsilon)));
    if (e.scale) y *= static_cast<double>(at(e.gamma, g, m));
    if (e.center) y += static_cast<double>(at(e.beta, g, m));
    return round_to<T>(y);
  } else {
    static_assert(K == node_kind::softmax, "fuse::reference: a node kind without a reference");
    // a: the row's maximum; b: the sum of exp(v - a).
    const memo::row& r = row_of(e, x, e.axis, m, [&] {
      memo::row n{row_values(e.child, x, e.axis, m)};
      n.a = -std::numeric_limits<double>::infinity();
      for (double t : n.v) {
        n.nan = n.nan || std::isnan(t);
        n.a = t > n.a ? t : n.a;
      }
      for (double t : n.v) n.b += std::exp(t - n.a);
      return n;
    });
    if (r.nan) return std::numeric_limits<double>::quiet_NaN();
    const double xv = r.v[static_cast<std::size_t>(x[e.axis])];
    if constexpr (E::kind == row_op_kind::softmax) return round_to<T>(std::exp(xv - r.a) / r.b);
    else return round_to<T>(xv - r.a - std::log(r.b));
  }
}

}  // namespace reference_detail

/// Evaluates `expr` with the reference semantics into a tensor of ref_t values.
template <class Expr>
  requires expression<expr_t<Expr>>
auto reference(Expr&& expr_) {
  auto e = as_expr(static_cast<Expr&&>(expr_));
  using E = decltype(e);
  using T = typename E::value_type;
  constexpr std::size_t R = E::rank;
  tensor<ref_t<T>, static_cast<int>(R)> out(e.shape().array());
  reference_detail::memo m;
  // A reduction at the root: each element is computed once anyway, so it skips the memo.
  const auto root = [&](const index_t* x) {
    if constexpr (kind_of<E> == node_kind::reduction) return reference_detail::reduce_at(e, x, m);
    else return reference_detail::at(e, x, m);
  };
  if constexpr (R == 0) {
    *out.data() = root(nullptr);
  } else {
    reference_detail::for_all(out.shape().array(), [&](const index_t* x) {
      index_array<R> idx{};
      for (std::size_t d = 0; d < R; ++d) idx[d] = x[d];
      out[idx] = root(x);
    });
  }
  return out;
}

}  // namespace fuse
