// Evaluates a contraction node (fuse/expr/contract.hpp) into an output view with the GEMM of
// fuse/cpu/gemm.hpp. Operands that are tensors or views are read in place through their strides
// (transposes included); operands that are other expressions are evaluated first into a
// contiguous buffer (prologue fusion into the packing comes with the fused contraction kernel).
// An output that overlaps an operand is computed into a temporary first.
#pragma once

#include <cstdint>
#include <optional>

#include "fuse/bind/evaluators.hpp"
#include "fuse/cpu/gemm.hpp"
#include "fuse/expr/contract.hpp"

namespace fuse::cpu {

namespace detail {

/// The stride that walks axes [0, n) of `ext` as one flattened axis, or nullopt if they do not
/// flatten (extent-1 axes are ignored; an empty range flattens with stride 0).
template <std::size_t R>
std::optional<index_t> flat_stride(const index_array<R>& ext, const index_array<R>& str, std::size_t n) {
  std::optional<index_t> inner;
  index_t expect = 0;
  for (std::size_t d = n; d-- > 0;) {
    if (ext[d] == 1) continue;
    if (inner && str[d] != expect) return std::nullopt;
    if (!inner) inner = str[d];
    expect = str[d] * ext[d];
  }
  return inner ? inner : std::optional<index_t>(0);
}

/// An operand's elements in memory: the operand's own view when it is one (and its first
/// `flatten` axes flatten to one stride), else a contiguous buffer holding its values.
template <class E>
struct operand_memory {
  using T = typename E::value_type;
  static constexpr std::size_t R = E::rank;
  std::optional<tensor<T, static_cast<int>(R)>> owned;
  const T* data = nullptr;
  index_array<R> ext{}, str{};
  const void* lo = nullptr;  ///< the bytes it reads, for overlap checks
  const void* hi = nullptr;

  template <class Mode>
  operand_memory(const E& e, std::size_t flatten, Mode) : ext(e.shape().array()) {
    if constexpr (is_tensor_view<E>::value) {
      if (flat_stride(ext, e.strides(), flatten)) {
        data = e.data();
        str = e.strides();
      }
    }
    if (!data) {
      owned.emplace(dynamic_shape<R>(e.shape()));
      fuse::detail::eval_one(*owned, e, Mode{});
      data = owned->data();
      str = owned->strides();
    }
    bind::detail::byte_range(data, ext, str.data(), sizeof(T), lo, hi);
  }
};

}  // namespace detail

template <class Mode, class T, std::size_t Q, contract_kind K, class A, class B, class Out, std::size_t R>
void run_contract(tensor_view<T, static_cast<int>(Q)> out, const contract_expr<K, A, B, Out, R>& node) {
  static_assert(std::is_same_v<std::remove_const_t<T>, Out>, "fuse: the contraction's output dtype");
  // dense/matmul read A as [M, K] with its leading axes flattened into M.
  const std::size_t a_flatten = K == contract_kind::batch_matmul || node.trans_a ? 0 : A::rank - 1;
  detail::operand_memory<A> am(node.a, a_flatten, Mode{});
  detail::operand_memory<B> bm(node.b, 0, Mode{});
  const auto oext = out.shape().array();
  const auto ostr = out.strides();

  // Rows of the output as one axis (dense/matmul: every axis but the last; batch_matmul: axis 1).
  const auto out_rows = K == contract_kind::batch_matmul ? std::optional<index_t>(ostr[1])
                                                         : detail::flat_stride(oext, ostr, R - 1);
  const void *olo = nullptr, *ohi = nullptr;
  bind::detail::byte_range(out.data(), oext, ostr.data(), sizeof(T), olo, ohi);
  const auto overlaps = [&](const void* lo, const void* hi) { return olo != ohi && lo != hi && olo < hi && lo < ohi; };
  if (!out_rows || overlaps(am.lo, am.hi) || overlaps(bm.lo, bm.hi)) {
    // Through a contiguous temporary, then copied by the elementwise executor.
    tensor<Out, static_cast<int>(R)> tmp(dynamic_shape<R>(node.shape()));
    run_contract<Mode, Out, R>(tmp.view(), node);
    fuse::detail::eval_one(out, tmp, Mode{});
    return;
  }

  // A as [M, K] (per batch), B as [K, N].
  index_t a_rs = 0, a_cs = 0, a_bs = 0;
  if constexpr (K == contract_kind::batch_matmul) {
    a_bs = node.batch_a == 1 ? 0 : am.str[0];
    a_rs = node.trans_a ? am.str[2] : am.str[1];
    a_cs = node.trans_a ? am.str[1] : am.str[2];
  } else if (node.trans_a) {
    a_rs = am.str[1];
    a_cs = am.str[0];
  } else {
    a_rs = *detail::flat_stride(am.ext, am.str, A::rank - 1);
    a_cs = am.str[A::rank - 1];
  }
  index_t b_ks = 0, b_ns = 0, b_bs = 0;
  if constexpr (K == contract_kind::batch_matmul) {
    b_bs = node.batch_b == 1 ? 0 : bm.str[0];
    b_ks = node.trans_b ? bm.str[2] : bm.str[1];
    b_ns = node.trans_b ? bm.str[1] : bm.str[2];
  } else {
    b_ks = node.trans_b ? bm.str[1] : bm.str[0];
    b_ns = node.trans_b ? bm.str[0] : bm.str[1];
  }
  const index_t batches = K == contract_kind::batch_matmul ? node.batch : 1;
  const index_t o_bs = K == contract_kind::batch_matmul ? ostr[0] : 0;
  for (index_t bi = 0; bi < batches; ++bi) {
    gemm::gemm<Out>(node.m, node.n, node.k, gemm::strided<typename A::value_type>{am.data + bi * a_bs, a_rs, a_cs},
                    gemm::strided<typename B::value_type>{bm.data + bi * b_bs, b_ks, b_ns},
                    out.data() + bi * o_bs, *out_rows, ostr[R - 1]);
  }
}

}  // namespace fuse::cpu
