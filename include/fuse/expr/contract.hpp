// Contractions with Relay's semantics, as lazy nodes like any other:
//   fuse::dense(x, w)                  nn.dense: x [d..., K], w [N, K]        -> [d..., N]
//   fuse::matmul(a, b, ta, tb)         nn.matmul: a [d..., K] (or [K, M] when ta), b [K, N]
//                                      (or [N, K] when tb)                      -> [d..., N]
//   fuse::batch_matmul(a, b, ta, tb)   nn.batch_matmul: a [B, M, K] (or [B, K, M]), b [B, N, K]
//                                      (default tb = true, as in Relay; [B, K, N] when false);
//                                      a batch of 1 broadcasts                 -> [B, M, N]
//   fuse::bias_add(x, bias, axis)      nn.bias_add: x + bias along `axis` (an elementwise add)
//
// Element types: float32 (float32 accumulation and result), float64, float16 and bfloat16
// (float32 accumulation; the result is the operands' dtype, rounded once, or float32 as Relay's
// out_dtype="float32"), and int8/uint8 operands with an int32 result (Relay's out_dtype="int32";
// exact: the sum wraps like int32 arithmetic).
// The transposes may also be template arguments (`batch_matmul<false, true>(a, b)`): with static
// shapes every mismatch is then a compile-time error naming the op and both shapes; otherwise
// fuse::shape_error says the same at run time.
//
// Operands are expressions: a contraction of a transpose or a quantize chain is one node. The
// CPU executor evaluates a contraction with its own tiled kernel (fuse/cpu/contract.hpp); used
// inside a larger elementwise tree it runs block by block as that tree's blocked epilogue
// (fuse/cpu/epilogue.hpp, docs/fusion.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "fuse/core/error.hpp"
#include "fuse/expr/elementwise.hpp"
#include "fuse/expr/node.hpp"
#include "fuse/expr/views.hpp"

namespace fuse {

enum class contract_kind : std::uint8_t { dense, matmul, batch_matmul };

inline constexpr const char* contract_name(contract_kind k) {
  switch (k) {
    case contract_kind::dense: return "nn.dense";
    case contract_kind::matmul: return "nn.matmul";
    default: return "nn.batch_matmul";
  }
}

/// The result dtype of a contraction of A and B elements when none is asked for.
template <class A, class B>
using contract_default_out_t =
    std::conditional_t<(std::is_same_v<A, std::int8_t> || std::is_same_v<A, std::uint8_t>), std::int32_t, A>;

/// Named in compiler notes when the element types are not supported together: A, B, Out.
template <class A, class B, class Out>
inline constexpr bool contraction_dtypes_supported =
    (std::is_same_v<A, float> && std::is_same_v<B, float> && std::is_same_v<Out, float>) ||
    ((std::is_same_v<A, half> || std::is_same_v<A, bfloat16>)&&std::is_same_v<B, A> &&
     (std::is_same_v<Out, A> || std::is_same_v<Out, float>)) ||
    (std::is_same_v<A, double> && std::is_same_v<B, double> && std::is_same_v<Out, double>) ||
    ((std::is_same_v<A, std::int8_t> || std::is_same_v<A, std::uint8_t>)&&(
        std::is_same_v<B, std::int8_t> || std::is_same_v<B, std::uint8_t>)&&std::is_same_v<Out, std::int32_t>);

/// A matrix product. Logically A is [batch, M, K] and B is [batch, K, N]; `trans_a` says the
/// stored A is [.., K, M], `trans_b` that the stored B is [.., N, K]. For dense and matmul the
/// leading axes of A (all but the last) form M and stay in the result's shape.
template <contract_kind Kind, class A, class B, class Out, std::size_t R>
struct contract_expr {
  using a_type = A;
  using b_type = B;
  using value_type = Out;
  using shape_type = dynamic_shape<R>;
  static constexpr std::size_t rank = R;
  static constexpr bool is_fuse_expr = true;
  static constexpr node_kind kind_tag = node_kind::contraction;
  static constexpr contract_kind kind = Kind;

  A a;
  B b;
  bool trans_a = false;
  bool trans_b = false;
  index_t batch = 1, batch_a = 1, batch_b = 1;  ///< batch_matmul: a batch of 1 broadcasts
  index_t m = 0, n = 0, k = 0;
  shape_type shape_;

  FUSE_HD constexpr shape_type shape() const { return shape_; }
  FUSE_HD constexpr tuple<const A&, const B&> children() const { return tuple<const A&, const B&>(a, b); }
  template <class A2, class B2>
  auto with_children(A2&& a2, B2&& b2) const {
    return contract_expr<Kind, std::remove_cvref_t<A2>, std::remove_cvref_t<B2>, Out, R>{
        static_cast<A2&&>(a2), static_cast<B2&&>(b2), trans_a, trans_b, batch, batch_a, batch_b, m, n, k, shape_};
  }
};

template <class T>
struct is_contract_expr : std::false_type {};
template <contract_kind K, class A, class B, class O, std::size_t R>
struct is_contract_expr<contract_expr<K, A, B, O, R>> : std::true_type {};

/// Whether an elementwise tree reads a contraction as one of its leaves (directly or through
/// views, ops, concatenations, takes): such a tree runs as a blocked epilogue of the
/// contraction. Other nodes with kernels of their own (reductions) end the walk: their inputs
/// are theirs.
template <class N>
constexpr bool has_contraction_leaf() {
  using D = std::remove_cvref_t<N>;
  if constexpr (kind_of<D> == node_kind::contraction) {
    return true;
  } else if constexpr (needs_own_kernel<D>) {
    return false;
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (has_contraction_leaf<child_t<I, D>>() || ...);
    }(std::make_index_sequence<child_count<D>>{});
  }
}

// ---- compile-time checks of static shapes ------------------------------------------------------

namespace detail {
/// Whether the reduction extents of static shapes SA and SB agree (operand ranks already fit).
template <contract_kind Kind, bool TA, bool TB, class SA, class SB>
constexpr bool static_reduction_extents_agree() {
  constexpr auto a = SA::extents;
  constexpr auto b = SB::extents;
  constexpr std::size_t ra = SA::rank, rb = SB::rank;
  // A is [.., M, K] or [.., K, M]; B is [.., K, N] or [.., N, K].
  return (TA ? a[ra - 2] : a[ra - 1]) == (TB ? b[rb - 1] : b[rb - 2]);
}
}  // namespace detail

/// Named in compiler notes when static shapes do not contract: "'fuse::static_shapes_contract_in<
/// fuse::contract_kind::dense, false, true, fuse::shape<1, 10>, fuse::shape<30, 12>>' evaluates
/// to false" names the op, the transposes and both shapes.
template <contract_kind Kind, bool TA, bool TB, class SA, class SB>
inline constexpr bool static_shapes_contract_in = detail::static_reduction_extents_agree<Kind, TA, TB, SA, SB>();

/// Named when the operands' ranks do not fit the op (dense/matmul: A of rank >= 1, B of rank 2,
/// a transposed A of rank 2; batch_matmul: both rank 3).
template <contract_kind Kind, bool TA, std::size_t RA, std::size_t RB>
inline constexpr bool operand_ranks_fit =
    Kind == contract_kind::batch_matmul ? (RA == 3 && RB == 3) : (RA >= 1 && RB == 2 && (!TA || RA == 2));

/// Named when batch_matmul's static batch extents differ and neither is 1.
template <class SA, class SB>
inline constexpr bool batch_extents_broadcast =
    SA::extents[0] == SB::extents[0] || SA::extents[0] == 1 || SB::extents[0] == 1;

namespace detail {

/// Builds the node; checks every shape rule at run time (static shapes were checked already).
template <contract_kind Kind, class Out, class AE, class BE>
auto make_contract(const AE& a, const BE& b, bool ta, bool tb) {
  using TA_ = typename AE::value_type;
  using TB_ = typename BE::value_type;
  static_assert(contraction_dtypes_supported<TA_, TB_, Out>,
                "fuse: contractions take float x float -> float, double x double -> double, float16 x float16 "
                "-> float16 or float, bfloat16 x bfloat16 -> bfloat16 or float, or int8/uint8 x int8/uint8 -> "
                "int32 (the note below names the element types: a, b, result)");
  constexpr std::size_t R = Kind == contract_kind::batch_matmul ? 3 : AE::rank;
  const char* name = contract_name(Kind);
  if constexpr (kind_of<AE> == node_kind::packed_weights)
    static_assert(sizeof(AE) == 0,
                  "fuse: packed weights (fuse::pack) are the second (weight) operand of a contraction");
  if constexpr (kind_of<BE> == node_kind::packed_weights) {
    static_assert(Kind != contract_kind::batch_matmul,
                  "fuse::batch_matmul: packed weights (fuse::pack) are for nn.dense and nn.matmul");
    if (!tb)
      throw_shape_error(name, ": packed weights are [N, K] (nn.dense's layout), read with transpose_b; got a ",
                        "matmul without transpose_b over packed ", b.shape().array());
  }
  const auto as = a.shape().array();
  const auto bs = b.shape().array();
  contract_expr<Kind, AE, BE, Out, R> e{a, b, ta, tb, 1, 1, 1, 0, 0, 0, {}};
  if constexpr (Kind == contract_kind::batch_matmul) {
    static_assert(AE::rank == 3 && BE::rank == 3, "fuse::batch_matmul: both operands must have rank 3");
    e.batch_a = as[0];
    e.batch_b = bs[0];
    if (as[0] != bs[0] && as[0] != 1 && bs[0] != 1)
      throw_shape_error(name, ": batch extents of ", as, " and ", bs, " differ and neither is 1");
    e.batch = as[0] == 1 ? bs[0] : as[0];
    e.m = ta ? as[2] : as[1];
    e.k = ta ? as[1] : as[2];
    e.n = tb ? bs[1] : bs[2];
    const index_t kb = tb ? bs[2] : bs[1];
    if (kb != e.k)
      throw_shape_error(name, ": the reduction extents differ: ", e.k, " in a ", as, (ta ? " (transposed)" : ""),
                        " and ", kb, " in b ", bs, (tb ? " (transposed)" : ""));
    e.shape_ = dynamic_shape<3>({e.batch, e.m, e.n});
  } else {
    static_assert(BE::rank == 2, "fuse::dense / fuse::matmul: the weight must have rank 2");
    static_assert(AE::rank >= 1, "fuse::dense / fuse::matmul: the data must have rank >= 1");
    if (ta && AE::rank != 2) throw_shape_error(name, ": a transposed data operand must have rank 2, got ", as);
    index_t mm = 1;
    for (std::size_t i = 0; i + 1 < AE::rank; ++i) mm *= as[i];
    e.m = ta ? as[1] : mm;
    e.k = ta ? as[0] : as[AE::rank - 1];
    e.n = tb ? bs[0] : bs[1];
    const index_t kb = tb ? bs[1] : bs[0];
    if (kb != e.k)
      throw_shape_error(name, ": the reduction extents differ: ", e.k, " in the data ", as, (ta ? " (transposed)" : ""),
                        " and ", kb, " in the weight ", bs,
                        (tb && Kind == contract_kind::matmul ? " (transposed)" : ""));
    index_array<R> out{};
    if (ta) {
      out[0] = e.m;
    } else {
      for (std::size_t i = 0; i + 1 < R; ++i) out[i] = as[i];
    }
    out[R - 1] = e.n;
    e.shape_ = dynamic_shape<R>(out);
  }
  return e;
}

template <contract_kind Kind, bool TA, bool TB, class AE, class BE>
constexpr void check_static_contract() {
  static_assert(operand_ranks_fit<Kind, TA, AE::rank, BE::rank>,
                "fuse: the operands' ranks do not fit the contraction (the note below names the op and ranks)");
  if constexpr (operand_ranks_fit<Kind, TA, AE::rank, BE::rank> && AE::shape_type::is_static &&
                BE::shape_type::is_static) {
    static_assert(static_shapes_contract_in<Kind, TA, TB, typename AE::shape_type, typename BE::shape_type>,
                  "fuse: the reduction extents of the contraction's static shapes differ (the note below names "
                  "the op, the transposes and the shapes)");
    if constexpr (Kind == contract_kind::batch_matmul)
      static_assert(batch_extents_broadcast<typename AE::shape_type, typename BE::shape_type>,
                    "fuse::batch_matmul: the static batch extents differ and neither is 1 (see the note below)");
  }
}

}  // namespace detail

namespace detail {
/// The node of a contraction of x and w: the result dtype Out (void: the default), and the
/// static shape checks when the transposes are template arguments (Static).
template <contract_kind Kind, class Out, bool Static, bool TA, bool TB, class X, class W>
auto build_contract(X&& x, W&& w, bool ta, bool tb) {
  auto a = as_expr(static_cast<X&&>(x));
  auto b = as_expr(static_cast<W&&>(w));
  using AE = decltype(a);
  using BE = decltype(b);
  using O = std::conditional_t<std::is_void_v<Out>,
                               contract_default_out_t<typename AE::value_type, typename BE::value_type>, Out>;
  if constexpr (Static) check_static_contract<Kind, TA, TB, AE, BE>();  // make_contract checks the ranks
  return make_contract<Kind, O>(a, b, ta, tb);
}
}  // namespace detail

/// nn.dense(x, w): x [d..., K] times w [N, K] transposed -> [d..., N]. Out: the result dtype
/// (by default the operands' for floating ones, int32 for int8/uint8 ones; float for 16-bit
/// operands is Relay's out_dtype="float32").
template <class Out = void, expr_operand X, expr_operand W>
auto dense(X&& x, W&& w) {
  return detail::build_contract<contract_kind::dense, Out, true, false, true>(static_cast<X&&>(x), static_cast<W&&>(w),
                                                                              false, true);
}

/// nn.matmul(a, b, transpose_a, transpose_b), transposes fixed at compile time.
template <bool TransA, bool TransB, class Out = void, expr_operand X, expr_operand W>
auto matmul(X&& x, W&& w) {
  return detail::build_contract<contract_kind::matmul, Out, true, TransA, TransB>(static_cast<X&&>(x),
                                                                                  static_cast<W&&>(w), TransA, TransB);
}

/// nn.matmul(a, b, transpose_a=false, transpose_b=false) with the transposes known at run time.
template <class Out = void, expr_operand X, expr_operand W>
auto matmul(X&& x, W&& w, bool transpose_a = false, bool transpose_b = false) {
  return detail::build_contract<contract_kind::matmul, Out, false, false, false>(
      static_cast<X&&>(x), static_cast<W&&>(w), transpose_a, transpose_b);
}

/// nn.batch_matmul(a, b, transpose_a, transpose_b), transposes fixed at compile time.
template <bool TransA, bool TransB, class Out = void, expr_operand X, expr_operand W>
auto batch_matmul(X&& x, W&& w) {
  return detail::build_contract<contract_kind::batch_matmul, Out, true, TransA, TransB>(
      static_cast<X&&>(x), static_cast<W&&>(w), TransA, TransB);
}

/// nn.batch_matmul(a, b, transpose_a=false, transpose_b=true) with run-time transposes.
template <class Out = void, expr_operand X, expr_operand W>
auto batch_matmul(X&& x, W&& w, bool transpose_a = false, bool transpose_b = true) {
  return detail::build_contract<contract_kind::batch_matmul, Out, false, false, true>(
      static_cast<X&&>(x), static_cast<W&&>(w), transpose_a, transpose_b);
}

/// nn.bias_add(x, bias, axis=1): bias (1-D, the extent of `axis`) added along `axis` of x.
template <expr_operand X, expr_operand Bias>
auto bias_add(X&& x, Bias&& bias, index_t axis = 1) {
  auto xe = as_expr(static_cast<X&&>(x));
  auto be = as_expr(static_cast<Bias&&>(bias));
  using XE = decltype(xe);
  using BE = decltype(be);
  static_assert(BE::rank == 1, "fuse::bias_add: the bias must be 1-D");
  static_assert(XE::rank >= 1, "fuse::bias_add: x must have rank >= 1");
  const auto xs = xe.shape().array();
  const auto a = static_cast<std::size_t>(detail::normalize_axis(axis, "nn.bias_add", xs));
  if (be.shape()[0] != xs[a])
    throw_shape_error("nn.bias_add: the bias ", be.shape().array(), " must have the extent of axis ", axis, " of x ",
                      xs);
  // The bias seen as rank R with its extent at `axis` and 1 elsewhere: then it broadcasts.
  axis_map<1> m{};
  m.src[0] = static_cast<index_t>(a);
  m.scale[0] = 1;
  dynamic_shape<XE::rank> shape{};
  for (std::size_t d = 0; d < XE::rank; ++d) shape[d] = d == a ? xs[a] : 1;
  return add(xe, apply_axis_map(be, shape, m));
}

}  // namespace fuse
