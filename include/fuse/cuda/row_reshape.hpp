// Row nodes read through a reshape: the tree rewritten so that the row kernel iterates inside the
// reshape, where the row nodes' rows are.
//
// Group norm, as TVM's SimplifyInference writes it, normalises a reshape of its input and
// reshapes the result back:
//   xr = reshape(x, [N, G, C/G, H, W]);  m = mean(xr, [2, 3, 4], keepdims)
//   y  = reshape((xr - m) / sqrt(variance + eps), [N, C, H, W]) * gamma[C, 1, 1] + beta[C, 1, 1]
// A row of the output ([.., W]) is a piece of a group's row, so the row kernel cannot own the
// group's rows there (the CPU evaluates the mean into a buffer first; a CUDA eval allocates
// nothing). The same tree iterated over the shape inside the reshape has the group's rows as its
// own: the reshape is dropped, every part of the tree outside it that holds no row node is read
// through the inverse reshape (broadcast to the output's shape first: gamma), the ops between are
// rebuilt over the new operands, and the output is reshaped likewise (a view: its layout must
// allow it, as a contiguous output's does). Still one kernel, the same values element for element.
//
// What the rewrite takes: a tree whose row nodes all lie inside reshapes of one inner shape,
// which cover the whole output (not broadcast) and are reached from the root through elementwise
// ops only. Anything else is the error that names it.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "fuse/bind/index_map.hpp"
#include "fuse/core/error.hpp"
#include "fuse/expr/elementwise.hpp"
#include "fuse/expr/node.hpp"
#include "fuse/expr/views.hpp"
#include "fuse/cuda/row_program.hpp"

namespace fuse::cuda {

/// A reshape whose input holds row nodes.
template <class N>
constexpr bool is_reshape_of_rows() {
  if constexpr (kind_of<N> == node_kind::reshape_view) return tree_has<row_node_pred, typename N::child_type>();
  else return false;
}
template <class N>
struct reshape_of_rows_pred : std::bool_constant<is_reshape_of_rows<N>()> {};
/// The rank inside N when N is a reshape of rows, else 0.
template <class N>
constexpr std::size_t rank_inside_reshape_of_rows() {
  if constexpr (is_reshape_of_rows<N>()) return N::child_type::rank;
  else return 0;
}

namespace detail {

/// The rank inside the first reshape of rows in tree N (pre-order), 0 when there is none.
template <class N>
constexpr std::size_t rows_reshape_rank() {
  if constexpr (is_reshape_of_rows<N>()) {
    return rank_inside_reshape_of_rows<N>();
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      std::size_t r = 0;
      ((r = r != 0 ? r : rows_reshape_rank<child_t<I, N>>()), ...);
      return r;
    }(std::make_index_sequence<child_count<N>>{});
  }
}

/// The shape inside the first reshape of rows in n (Rr: its rank); false when there is none.
template <std::size_t Rr, class N>
bool find_rows_reshape_shape(const N& n, index_array<Rr>& shape) {
  if constexpr (is_reshape_of_rows<N>()) {
    if constexpr (N::child_type::rank == Rr) shape = n.child.shape().array();  // (the first one's rank is Rr)
    return true;
  } else {
    const auto c = children(n);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (find_rows_reshape_shape<Rr>(fuse::get<I>(c), shape) || ...);
    }(std::make_index_sequence<child_count<N>>{});
  }
}

/// Throws unless node n (rank Rn) has exactly the output's shape `outer`: the rewrite reads it in
/// the reshape's order element for element, which a broadcast would not allow.
template <std::size_t Rn, std::size_t R>
void require_output_shape(const index_array<Rn>& n, const index_array<R>& outer, const char* what) {
  if constexpr (Rn != R)
    throw_shape_error("fuse::cuda::eval: a reduction, softmax or layer norm read through a reshape runs on CUDA when ",
                      what, " covers the whole output (", outer, "), not when broadcast to it (rank ",
                      static_cast<index_t>(Rn), ")");
  else if (!(n == outer))
    throw_shape_error("fuse::cuda::eval: a reduction, softmax or layer norm read through a reshape runs on CUDA when ",
                      what, " covers the whole output (", outer, "), not when broadcast to it (", n, ")");
}

/// n, of the output's shape `outer` (after broadcasting), as a tree over `inner` (see the top).
template <std::size_t Rr, std::size_t R, class N>
auto hoist_rows_reshape(const N& n, const index_array<R>& outer, const index_array<Rr>& inner) {
  if constexpr (is_reshape_of_rows<N>() && rank_inside_reshape_of_rows<N>() != Rr) {
    static_assert(rank_inside_reshape_of_rows<N>() == Rr,
                  "fuse::cuda::eval: a reduction, softmax or layer norm read through a reshape runs on CUDA when "
                  "every such reshape reshapes one shape (these reshape tensors of two ranks)");
    return n;
  } else if constexpr (is_reshape_of_rows<N>()) {
    if (!(n.child.shape().array() == inner))
      throw_shape_error(
          "fuse::cuda::eval: a reduction, softmax or layer norm read through a reshape runs on CUDA "
          "when every such reshape reshapes one shape; ",
          n.child.shape().array(), " differs from ", inner);
    require_output_shape(n.shape().array(), outer, "the reshape");
    return n.child;
  } else if constexpr (!tree_has<row_node_pred, N>()) {
    if constexpr (N::rank == 0) {
      return n;  // a constant broadcasts to any shape
    } else {
      // Broadcast to the output's shape, then read in the reshape's order (folds into strides
      // wherever the layout allows: a per-channel gamma splits its axis).
      auto full = broadcast_to(n, outer.v);
      return reshape_view<decltype(full), Rr>{full, dynamic_shape<Rr>(inner)};
    }
  } else if constexpr (kind_of<N> == node_kind::elementwise) {
    require_output_shape(n.shape().array(), outer, "each op above it");
    const auto c = children(n);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return make_map(n.op, hoist_rows_reshape<Rr>(fuse::get<I>(c), outer, inner)...);
    }(std::make_index_sequence<child_count<N>>{});
  } else {
    static_assert(kind_of<N> == node_kind::elementwise,
                  "fuse::cuda::eval: a reduction, softmax or layer norm read through a reshape runs on CUDA when only "
                  "elementwise ops lie between the reshape and the root, and no other row node or view does: "
                  "evaluate the reshaped part first");
    return n;
  }
}

}  // namespace detail
}  // namespace fuse::cuda
