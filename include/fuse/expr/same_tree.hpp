// same_tree(a, b): whether two nodes of one type compute the same values from the same memory:
// the same leaves (data, shape, strides), constants of the same bits, ops with the same
// attributes, the same view, reduction and contraction parameters, all the way down.
//
// Nodes hold their children by value, so the sections of one split (`split<3>(dense(x, W), 1)`)
// hold three copies of the dense node: the blocked epilogue uses this to see that they are one
// contraction (one set of prepared operands, one block buffer per block) rather than comparing
// addresses or bytes.
#pragma once

#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "fuse/expr/contract.hpp"
#include "fuse/expr/elementwise.hpp"
#include "fuse/expr/node.hpp"
#include "fuse/expr/ops.hpp"
#include "fuse/expr/reduce.hpp"
#include "fuse/expr/views.hpp"

namespace fuse {

namespace detail {

/// Two values of an attribute or constant: equal bits (a NaN constant equals itself).
template <class T>
bool same_bits(const T& a, const T& b) {
  static_assert(std::is_trivially_copyable_v<T>);
  if constexpr (std::is_arithmetic_v<T>) {
    if constexpr (std::is_floating_point_v<T>)
      return (a == b && std::signbit(a) == std::signbit(b)) || (a != a && b != b);
    else return a == b;
  } else {
    return std::memcmp(&a, &b, sizeof(T)) == 0;  // half, bfloat16: a 16-bit pattern, no padding
  }
}

/// Whether ops a and b are the same function: every attribute equal. An op's state is its
/// attributes (checked: an op without attributes is an empty struct).
template <class Op>
bool same_op(const Op& a, const Op& b) {
  if constexpr (ops::has_attributes<Op>) {
    static_assert(ops::attribute_count<Op>() <= 8, "fuse::same_tree: room for eight attributes");
    double va[8] = {}, vb[8] = {};
    int n = 0, m = 0;
    Op::attributes(a, [&](ops::attribute, const double& v) { va[n++] = v; });
    Op::attributes(b, [&](ops::attribute, const double& v) { vb[m++] = v; });
    for (int i = 0; i < n; ++i)
      if (!same_bits(va[i], vb[i])) return false;
    return true;
  } else {
    static_assert(std::is_empty_v<Op>, "fuse::same_tree: an op without attributes must hold no state");
    return true;
  }
}

}  // namespace detail

/// Whether a and b (nodes of one type) compute the same values from the same memory.
template <class N>
bool same_tree(const N& a, const N& b) {
  constexpr node_kind K = kind_of<N>;
  bool same = true;  // (set by every kind that reaches the children)
  if constexpr (K == node_kind::leaf) {
    return a.data() == b.data() && a.shape().array() == b.shape().array() && a.strides() == b.strides();
  } else if constexpr (K == node_kind::constant) {
    return detail::same_bits(a.value, b.value);
  } else if constexpr (K == node_kind::packed_weights) {
    return a.same_as(b);
  } else if constexpr (K == node_kind::elementwise) {
    same = detail::same_op(a.op, b.op);
  } else if constexpr (K == node_kind::affine_view) {
    same = a.map.src == b.map.src && a.map.scale == b.map.scale && a.map.offset == b.map.offset;
  } else if constexpr (K == node_kind::reshape_view) {
    same = true;  // the shape says it all
  } else if constexpr (K == node_kind::concatenate) {
    same = a.axis == b.axis && a.offsets == b.offsets;
  } else if constexpr (K == node_kind::take) {
    same = a.axis == b.axis && a.mode == b.mode;
  } else if constexpr (K == node_kind::reduction) {
    same = a.reduced == b.reduced;
  } else if constexpr (K == node_kind::softmax) {
    same = a.axis == b.axis;
  } else if constexpr (K == node_kind::layer_norm) {
    same = a.axis == b.axis && detail::same_bits(a.epsilon, b.epsilon) && a.center == b.center && a.scale == b.scale;
  } else {
    static_assert(K == node_kind::contraction, "fuse::same_tree: a node kind without a comparison");
    same = a.trans_a == b.trans_a && a.trans_b == b.trans_b && a.batch == b.batch && a.batch_a == b.batch_a &&
           a.batch_b == b.batch_b && a.m == b.m && a.n == b.n && a.k == b.k;
  }
  if (!same || !(a.shape().array() == b.shape().array())) return false;
  const auto ca = children(a);
  const auto cb = children(b);
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return (same_tree(fuse::get<I>(ca), fuse::get<I>(cb)) && ...);
  }(std::make_index_sequence<child_count<N>>{});
}

}  // namespace fuse
