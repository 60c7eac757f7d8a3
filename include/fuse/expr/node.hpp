// What an expression is, and how arguments become expressions.
//
// A node is a small value type: `value_type` (its dtype), `shape_type` (static or dynamic),
// `rank`, `shape()`, and `is_fuse_expr = true`; and the node protocol below: its kind
// (`kind_tag`), its children (`children()`) and a rebuild over other children
// (`with_children`). Nodes hold their children by value; leaves are tensor_views, so building an
// expression never allocates or computes, and copying one is cheap.
//
// `as_expr(x)` turns what users pass into a node: nodes stay as they are, tensors become const
// views (a temporary tensor is refused: the expression would outlive it), arithmetic scalars
// become `scalar_expr`, and any type with a `fuse::view_traits` specialisation (Eigen objects,
// see <fuse/eigen.hpp>) becomes a view of its memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "fuse/core/dtype.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/shape.hpp"
#include "fuse/core/tensor.hpp"

namespace fuse {

// ---- a tuple usable in device code (std::tuple's members are host-only) -------------------------
namespace detail {
template <std::size_t I, class T>
struct tuple_slot {
  T value;
};
template <class Seq, class... T>
struct tuple_base;
template <std::size_t... I, class... T>
struct tuple_base<std::index_sequence<I...>, T...> : tuple_slot<I, T>... {
  constexpr tuple_base() = default;
  // Forwarding, so that a child reaches its slot in one copy (a tree is rebuilt at every call
  // of a cell; by-value parameters copied each child twice per level).
  template <class... U>
    requires(sizeof...(U) == sizeof...(T) && (std::is_constructible_v<T, U&&> && ...))
  FUSE_HD constexpr tuple_base(U&&... v) : tuple_slot<I, T>{static_cast<U&&>(v)}... {}
};
}  // namespace detail

template <class... T>
struct tuple : detail::tuple_base<std::index_sequence_for<T...>, T...> {
  using detail::tuple_base<std::index_sequence_for<T...>, T...>::tuple_base;
  static constexpr std::size_t size = sizeof...(T);
};

template <std::size_t I, class T>
FUSE_HD constexpr T& get_slot(detail::tuple_slot<I, T>& s) {
  return s.value;
}
template <std::size_t I, class T>
FUSE_HD constexpr const T& get_slot(const detail::tuple_slot<I, T>& s) {
  return s.value;
}
template <std::size_t I, class... T>
FUSE_HD constexpr auto& get(tuple<T...>& t) {
  return get_slot<I>(t);
}
template <std::size_t I, class... T>
FUSE_HD constexpr const auto& get(const tuple<T...>& t) {
  return get_slot<I>(t);
}

// ---- the node concept ---------------------------------------------------------------------------

template <class E>
concept expression = requires {
  typename std::remove_cvref_t<E>::value_type;
  typename std::remove_cvref_t<E>::shape_type;
  requires std::remove_cvref_t<E>::is_fuse_expr;
};

// ---- the node protocol ----------------------------------------------------------------------------
//
// Every node type names its kind (`kind_tag`, or node_kind_of for the leaves defined outside
// expr/: tensor_view), lists its children (`children()`: a tuple of const references, in the
// order of its operands) and rebuilds itself over other children of the same shapes
// (`with_children(c...)`: the same parameters, new operands; the node type follows the
// children's). Walks that treat every node alike (does a tree hold a contraction? which memory
// does it read?) go through these and name no node type; code that does something different
// per kind (bind, the reference, the executors) dispatches on kind_of, one branch per kind.

/// The kinds of node.
enum class node_kind : std::uint8_t {
  leaf,            ///< tensor_view: memory read through strides
  constant,        ///< scalar_expr
  packed_weights,  ///< fuse::pack's weights: the B operand of a contraction only
  elementwise,     ///< map_expr: an op of the op table over broadcast operands
  affine_view,     ///< transpose, slices, split sections, broadcast_to, expand_dims...
  reshape_view,    ///< reshape (row-major order kept)
  concatenate,
  take,
  reduction,  ///< sum, mean, max, min, prod over axes
  softmax,    ///< softmax and log_softmax along an axis
  layer_norm,
  contraction,  ///< dense, matmul, batch_matmul
};

/// A C++ arithmetic value used as an operand (it adopts the dtype of the other operands).
template <class T>
concept arithmetic_scalar =
    std::is_arithmetic_v<std::remove_cvref_t<T>> || std::is_same_v<std::remove_cvref_t<T>, half> ||
    std::is_same_v<std::remove_cvref_t<T>, bfloat16>;

/// A constant of dtype T broadcast to any shape (rank 0).
template <element T>
struct scalar_expr {
  using value_type = T;
  using shape_type = ::fuse::shape<>;
  static constexpr std::size_t rank = 0;
  static constexpr bool is_fuse_expr = true;
  static constexpr node_kind kind_tag = node_kind::constant;
  T value{};
  FUSE_HD constexpr shape_type shape() const { return {}; }
};

template <class T>
struct is_scalar_expr : std::false_type {};
template <class T>
struct is_scalar_expr<scalar_expr<T>> : std::true_type {};

template <class N>
struct node_kind_of {
  static constexpr node_kind value = N::kind_tag;
};
template <class T, auto E, class M>
struct node_kind_of<tensor_view<T, E, M>> {
  static constexpr node_kind value = node_kind::leaf;
};

/// The kind of node type N.
template <class N>
inline constexpr node_kind kind_of = node_kind_of<std::remove_cvref_t<N>>::value;

/// Nodes that an executor runs with a kernel of their own (at the root of an eval) and
/// materialises first when they appear inside a larger tree.
template <class N>
inline constexpr bool needs_own_kernel = kind_of<N> == node_kind::reduction || kind_of<N> == node_kind::softmax ||
                                         kind_of<N> == node_kind::layer_norm || kind_of<N> == node_kind::contraction;

/// The memory spaces whose leaves a tree reads, as a mask (0: constants only). The executors
/// require host_read (fuse::eval, the CUDA emulator) or device_read (fuse::cuda::eval).
enum memory_read : unsigned { host_read = 1, device_read = 2 };
template <class N>
constexpr unsigned memory_read_by();

/// The children of node n, as a fuse::tuple of const references (empty for the leaf kinds).
template <class N>
FUSE_HD constexpr auto children(const N& n) {
  constexpr node_kind K = kind_of<N>;
  if constexpr (K == node_kind::leaf || K == node_kind::constant || K == node_kind::packed_weights) return tuple<>{};
  else return n.children();
}

/// A tuple of const references to the elements of t: children() of the nodes that hold their
/// operands in a tuple.
template <class... T>
FUSE_HD constexpr tuple<const T&...> refs_of(const tuple<T...>& t) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return tuple<const T&...>(fuse::get<I>(t)...);
  }(std::index_sequence_for<T...>{});
}

/// The number of children of node type N.
template <class N>
inline constexpr std::size_t child_count = decltype(children(std::declval<const N&>()))::size;

/// The type of child I of node type N.
template <std::size_t I, class N>
using child_t = std::remove_cvref_t<decltype(fuse::get<I>(children(std::declval<const N&>())))>;

/// Whether tree N (itself included) holds a node type D for which Pred<D>::value holds: the one
/// walk over a tree's types that the executors' questions use (does it hold a row node, a node
/// with a kernel of its own...).
template <template <class> class Pred, class N>
constexpr bool tree_holds() {
  using D = std::remove_cvref_t<N>;
  if constexpr (Pred<D>::value) {
    return true;
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (tree_holds<Pred, child_t<I, D>>() || ...);
    }(std::make_index_sequence<child_count<D>>{});
  }
}

template <class N>
constexpr unsigned memory_read_by() {
  using D = std::remove_cvref_t<N>;
  constexpr node_kind K = kind_of<D>;
  if constexpr (K == node_kind::leaf) {
    return std::is_same_v<typename D::memory_space_type, device_memory> ? device_read : host_read;
  } else if constexpr (K == node_kind::packed_weights) {
    return host_read;
  } else if constexpr (K == node_kind::constant) {
    return 0;
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (0u | ... | memory_read_by<child_t<I, D>>());
    }(std::make_index_sequence<child_count<D>>{});
  }
}

/// f(child) for each child of n, in order.
template <class N, class F>
FUSE_HD constexpr void for_each_child(const N& n, F&& f) {
  const auto c = children(n);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(fuse::get<I>(c)), ...);
  }(std::make_index_sequence<decltype(c)::size>{});
}

/// n over new children of the same shapes as its own (a leaf, which has none, is returned as
/// it is). Throws a shape error when a new child's shape differs.
template <class N, class... C>
constexpr auto with_children(const N& n, C&&... c) {
  static_assert(sizeof...(C) == child_count<N>, "fuse::with_children: give one new child per child of the node");
  if constexpr (sizeof...(C) == 0) {
    return n;
  } else {
    const auto old = children(n);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      static_assert(((child_t<I, N>::rank == std::remove_cvref_t<C>::rank) && ...),
                    "fuse::with_children: a new child must have the rank of the child it replaces");
      ((fuse::get<I>(old).shape().array() == c.shape().array()
            ? (void)0
            : throw_shape_error("with_children: child ", I, " of shape ", c.shape().array(), " replaces one of shape ",
                                fuse::get<I>(old).shape().array())),
       ...);
    }(std::index_sequence_for<C...>{});
    return n.with_children(static_cast<C&&>(c)...);
  }
}

/// Specialise for a foreign container type X to let fuse view its memory without copying:
///   static auto view(X&)  -> fuse::tensor_view<...>
/// (see <fuse/eigen.hpp> for Eigen's Matrix, Array, Map, Tensor and TensorMap).
template <class X>
struct view_traits;

template <class X>
concept foreign_viewable = requires(X& x) { view_traits<std::remove_cvref_t<X>>::view(x); };

namespace detail {
template <class T>
inline constexpr bool expression_would_dangle = false;
}

/// The node an argument becomes.
template <class X>
FUSE_HD constexpr decltype(auto) as_expr(X&& x) {
  using D = std::remove_cvref_t<X>;
  if constexpr (is_tensor_view<D>::value) {
    return tensor_view<const typename D::value_type, shape_param_v<typename D::shape_type>,
                       typename D::memory_space_type>(x);
  } else if constexpr (expression<D>) {
    return D(x);
  } else if constexpr (is_tensor<D>::value) {
    static_assert(std::is_lvalue_reference_v<X>,
                  "fuse: a temporary tensor cannot be an operand: the expression would keep a view of "
                  "memory that is freed at the end of the statement; store the tensor in a variable first");
    return static_cast<const D&>(x).view();  // (not std::as_const: host-only for nvcc)
  } else if constexpr (requires { typename D::packed_view_type; }) {
    static_assert(std::is_lvalue_reference_v<X>,
                  "fuse: temporary packed weights cannot be an operand: the expression would keep a view of "
                  "memory that is freed at the end of the statement; store fuse::pack(W) in a variable first");
    return x.view();
  } else if constexpr (foreign_viewable<X>) {
    return as_expr(view_traits<D>::view(x));
  } else if constexpr (arithmetic_scalar<D>) {
    return scalar_expr<D>{x};
  } else {
    static_assert(detail::expression_would_dangle<D>,
                  "fuse: this argument is not an expression, tensor, tensor_view, viewable container or scalar");
  }
}

/// An argument as a node without copying it: an expression node passes through as the
/// reference it came as (a caller storing it copies it once; eval reads it in place: a cell's
/// tree rebuilt at every call must not be copied level by level); anything else is converted
/// by as_expr.
template <class X>
FUSE_HD constexpr decltype(auto) as_node(X&& x) {
  using D = std::remove_cvref_t<X>;
  if constexpr (expression<D> && !is_tensor_view<D>::value) return static_cast<X&&>(x);
  else return as_expr(static_cast<X&&>(x));
}

/// What as_expr makes of an argument of type X.
template <class X>
using expr_t = std::remove_cvref_t<decltype(as_expr(std::declval<X>()))>;

/// An argument that as_expr accepts and that is not a plain C++ scalar.
template <class X>
concept expr_operand = expression<std::remove_cvref_t<X>> || is_tensor<std::remove_cvref_t<X>>::value ||
                       foreign_viewable<X> || requires { typename std::remove_cvref_t<X>::packed_view_type; };

}  // namespace fuse
