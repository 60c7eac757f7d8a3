// Evaluates a contraction node (fuse/expr/contract.hpp) with the GEMMs of fuse/cpu/gemm.hpp
// (float, double; float16 and bfloat16 widened to float, fuse/cpu/gemm_half.hpp) and
// fuse/cpu/gemm_int8.hpp (int8, uint8). Operands that are tensors or views
// are read in place through their strides (transposes included), packed weights (fuse::pack) in
// their own layout; operands that are other expressions are evaluated into a contiguous buffer,
// whole, or, in a blocked pass (fuse/cpu/epilogue.hpp), row block by row block as the blocks
// read them. An output that overlaps an operand is computed into a temporary first. Operands
// are evaluated by the executor context the kernel is handed (fuse/cpu/eval.hpp's cpu::context):
// this file sits below eval.hpp and never calls up into it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <memory>
#include <utility>

#include "fuse/bind/evaluators.hpp"
#include "fuse/core/small_vector.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/cpu/gemm.hpp"
#include "fuse/cpu/gemm_bf16.hpp"
#include "fuse/cpu/gemm_int8.hpp"
#include "fuse/cpu/packed.hpp"
#include "fuse/cpu/pass.hpp"
#include "fuse/expr/contract.hpp"
#include "fuse/expr/view_pushdown.hpp"

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

using byte_ranges = small_vector<std::pair<const void*, const void*>, 8>;

/// Does [lo, hi) overlap any of `ranges`?
inline bool overlaps_any(const void* lo, const void* hi, const byte_ranges& ranges) {
  for (std::size_t i = 0; i < ranges.size(); ++i)
    if (bind::overlaps(lo, hi, ranges[i].first, ranges[i].second)) return true;
  return false;
}

/// The memory an expression evaluated by row blocks reads, as byte ranges of its tensor leaves;
/// false when it holds a node whose rows a block does not evaluate alone (a reduction, a
/// gather), whose inputs are not walked here. Softmax and layer norm are walked (a block's rows
/// of them are their own: fuse/expr/view_pushdown.hpp), and contractions where `chained` (an
/// operand holding a softmax: attention's probabilities, whose whole would cost a temporary and
/// a pass; a product alone under elementwise ops, dense -> GELU -> dense, measured slower by
/// blocks than whole: src/relay/plan.cpp). Packed weights are private memory.
template <bool chained = false, class E>
bool leaf_byte_ranges(const E& e, byte_ranges& out) {
  constexpr node_kind K = kind_of<E>;
  if constexpr (K == node_kind::leaf) {
    const void *l = nullptr, *h = nullptr;
    bind::detail::byte_range(e.data(), e.shape().array(), e.strides().data(), sizeof(typename E::value_type), l, h);
    out.push_back({l, h});
    return true;
  } else if constexpr (K == node_kind::constant || K == node_kind::packed_weights) {
    return true;
  } else if constexpr (K == node_kind::elementwise || K == node_kind::affine_view || K == node_kind::reshape_view ||
                       K == node_kind::concatenate || K == node_kind::softmax || K == node_kind::layer_norm ||
                       (chained && K == node_kind::contraction)) {
    bool all = true;
    for_each_child(e, [&](const auto& c) { all = leaf_byte_ranges<chained>(c, out) && all; });
    return all;
  } else {
    return false;
  }
}

/// Whether a block of rows of e (its axes before the last, one batch of a rank-3 operand)
/// passes down to every softmax and layer norm in it: each normalises the last axis and is
/// reached through elementwise ops (else a block would evaluate them whole).
template <class E>
bool rows_pass(const E& e) {
  if constexpr (!fuse::detail::holds_row_op<E>()) {
    return true;
  } else {
    constexpr std::size_t R = E::rank;
    axis_map<R> m{};
    auto rows = e.shape().array();
    for (std::size_t d = 0; d < R; ++d) m.src[d] = static_cast<index_t>(d), m.scale[d] = 1;
    for (std::size_t d = 0; d + 1 < R; ++d) rows[d] = rows[d] > 1 ? 1 : rows[d];  // a cut of every row axis
    return fuse::detail::slice_passes(e, m, rows);
  }
}

template <class N>
struct is_kernel_node : std::bool_constant<needs_own_kernel<N>> {};

/// The bytes that one step along each axis of e moves its leaves' reads, summed over the
/// leaves, when e is bound over its own shape; nullopt when some leaf's map does not fold into
/// strides, or e holds a node with a kernel of its own (which binding would evaluate).
template <class Ctx, class E>
std::optional<index_array<E::rank>> leaf_axis_bytes(const E& e, Ctx& ctx) {
  if constexpr (tree_holds<is_kernel_node, E>()) {
    return std::nullopt;
  } else {
    constexpr std::size_t R = E::rank;
    const auto ext = e.shape().array();
    const auto ev = bind::bind<typename Ctx::math_mode>(e, bind::affine_map<R, R>::broadcast(ext, ext), ctx);
    if (!ev.all_folded()) return std::nullopt;
    index_array<R> bytes{};
    const auto leaves = bind::leaves_of(ext, ev);
    for (std::size_t l = 0; l < leaves.size(); ++l)
      for (std::size_t k = 0; k < R; ++k) {
        const index_t s = leaves[l].stride[k];
        bytes[k] += (s < 0 ? -s : s) * static_cast<index_t>(leaves[l].elem_size);
      }
    return bytes;
  }
}

/// An operand's elements in memory: the operand's own view when it is one (and its first
/// `flatten` axes flatten to one stride), else a contiguous buffer holding its values: the
/// whole operand evaluated once, or (`by_rows`, the prologue of a blocked pass) only the rows a
/// block reads, evaluated when that block asks for them (rows()). Ctx: the executor context
/// that evaluates expression operands.
template <class E, class Ctx>
struct operand_memory {
  using T = typename E::value_type;
  static constexpr std::size_t R = E::rank;
  std::optional<tensor<T, static_cast<int>(R)>> owned;
  const T* data = nullptr;
  index_array<R> ext{}, str{};
  const void* lo = nullptr;  ///< the bytes it reads, for overlap checks
  const void* hi = nullptr;

  /// By rows: the expression, the rows [row0, row0 + nrows) now in `owned`, and the context
  /// that evaluates them (set only for a by-rows operand).
  std::optional<E> expr;
  Ctx* ctx = nullptr;
  index_t batch0 = -1, row0 = -1, nrows = 0;
  std::size_t evaluations = 0;  ///< row blocks evaluated so far

  /// Whether the operand is evaluated by rows, as blocks ask for them.
  bool lazy() const { return ctx != nullptr; }

  /// The rows [i0, i0 + m) (of batch bi, for a batch_matmul's operand of rank 3; a batch of one
  /// serves every batch) of a by-rows operand, contiguous (row stride: the last extent).
  const T* rows(index_t bi, index_t i0, index_t m) {
    if constexpr ((R == 2 || R == 3) && !is_tensor_view<E>::value) {
      const index_t b = R == 3 && ext[0] != 1 ? bi : 0;
      if (b != batch0 || i0 != row0 || m != nrows) {
        const index_t k = ext[R - 1];
        if (!owned || product(owned->shape().array()) < m * k) {
          if constexpr (R == 2) owned.emplace(dynamic_shape<2>({m, k}), uninitialized);
          else owned.emplace(dynamic_shape<3>({1, m, k}), uninitialized);
        }
        if constexpr (R == 2) {
          tensor_view<T, 2> dst(owned->data(), dynamic_shape<2>({m, k}), index_array<2>{k, 1});
          ctx->eval_into(dst, strided_slice(*expr, {i0, index_t{0}}, {i0 + m, k}));
        } else {
          tensor_view<T, 3> dst3(owned->data(), dynamic_shape<3>({1, m, k}), index_array<3>{m * k, k, 1});
          ctx->eval_into(dst3, strided_slice(*expr, {b, i0, index_t{0}}, {b + 1, i0 + m, k}));
        }
        ++evaluations;
        batch0 = b;
        row0 = i0;
        nrows = m;
      }
      return owned->data();
    } else {
      return data;
    }
  }
  /// A key of the rows [i0, ..) of batch bi, unique within the operand (for the packed rows'
  /// cache: one buffer holds different rows over time).
  index_t rows_key(index_t bi, index_t i0) const {
    if constexpr (R == 3) return (ext[0] != 1 ? bi : 0) * ext[1] + i0;
    else return i0;
  }

  /// `avoid`: byte ranges about to be written (outputs of a blocked pass); a view overlapping
  /// one is copied rather than read in place. `by_rows`: an expression operand of rank 2 may be
  /// evaluated block by block when nothing it reads is written by the pass.
  operand_memory(const E& e, std::size_t flatten, Ctx& context, const byte_ranges* avoid = nullptr,
                 bool by_rows = false)
      : ext(e.shape().array()) {
    if constexpr (!is_tensor_view<E>::value && (R == 2 || R == 3)) {
      byte_ranges reads;
      if (by_rows && avoid && leaf_byte_ranges<fuse::detail::holds_row_op<E>()>(e, reads) && rows_pass(e)) {
        bool clear = true;
        for (std::size_t i = 0; i < reads.size(); ++i)
          clear = clear && !overlaps_any(reads[i].first, reads[i].second, *avoid);
        if (clear) {
          expr.emplace(e);
          ctx = &context;
          // the rows buffer (of one batch, for rank 3)
          if constexpr (R == 2) str = index_array<R>{ext[R - 1], 1};
          else str = index_array<R>{0, ext[R - 1], 1};
          for (std::size_t i = 0; i < reads.size(); ++i) {
            if (reads[i].first == reads[i].second) continue;
            if (!lo || reads[i].first < lo) lo = reads[i].first;
            if (!hi || reads[i].second > hi) hi = reads[i].second;
          }
          return;
        }
      }
    }
    if constexpr (is_tensor_view<E>::value) {
      if (flat_stride(ext, e.strides(), flatten)) {
        data = e.data();
        str = e.strides();
        if (avoid) {
          const void *l = nullptr, *h = nullptr;
          bind::detail::byte_range(data, ext, str.data(), sizeof(T), l, h);
          if (overlaps_any(l, h, *avoid)) data = nullptr;
        }
      }
    }
    if (!data) evaluate_whole(e, flatten, context);
    bind::detail::byte_range(data, ext, str.data(), sizeof(T), lo, hi);
  }

 private:
  /// e into `owned`, its last two axes laid out in the order its leaves read them fastest (the
  /// kernels take either: V^T quantized from [8, 384, 12, 64] is written in V's order, read
  /// along the head's 64 floats, not across 384 rows 3 KB apart); a batch_matmul's operand
  /// whose batches do not fold into strides together (a reshape merging axes that are not
  /// adjacent in memory: attention's [B*H, S, D]) batch by batch, where each one does. Both
  /// fall back to e whole, row-major, when its leaves do not fold either way.
  void evaluate_whole(const E& e, std::size_t flatten, Ctx& context) {
    std::optional<index_array<R>> reads = leaf_axis_bytes(e, context);
    bool by_batch = false;
    if constexpr (R == 3) {
      // (batches too small to pay an eval each stay whole, through the general loads)
      if (!reads && ext[0] > 1 && ext[1] * ext[2] >= 1024) {
        reads = leaf_axis_bytes(one_batch(e, 0), context);
        by_batch = reads.has_value();
      }
    }
    str = row_major_strides(ext);
    // (the axes a dense flattens into rows stay row-major outside the last two)
    if constexpr (R >= 2) {
      if (reads && (*reads)[R - 2] < (*reads)[R - 1] && (flatten + 2 <= R || R == 2)) {
        str[R - 1] = ext[R - 2];
        str[R - 2] = 1;
      }
    }
    owned.emplace(dynamic_shape<R>(e.shape()), uninitialized);
    data = owned->data();
    if constexpr (R == 3) {
      if (by_batch) {
        for (index_t b = 0; b < ext[0]; ++b)
          context.eval_into(
              tensor_view<T, 3>(owned->data() + b * str[0], dynamic_shape<3>({index_t{1}, ext[1], ext[2]}), str),
              one_batch(e, b));
        return;
      }
    }
    context.eval_into(tensor_view<T, static_cast<int>(R)>(owned->data(), dynamic_shape<R>(e.shape()), str), e);
  }
  static auto one_batch(const E& e, index_t b) {
    return strided_slice(e, {b, index_t{0}, index_t{0}}, {b + 1, e.shape()[1], e.shape()[2]});
  }
};

/// Packed weights (fuse::pack) as B: read in place, in the GEMM's own layout; private memory
/// that no output can overlap.
template <class E>
struct packed_operand {
  E view;
  const void* lo = nullptr;
  const void* hi = nullptr;
  template <class Ctx>
  packed_operand(const E& e, std::size_t, Ctx&, const byte_ranges* = nullptr) : view(e) {}
};

/// Rows of A packed for the GEMM (gemm::pack_a_ahead), kept for the products of one block that
/// read the same rows: a few entries, each keyed by the rows' memory, layout and extents, the
/// oldest replaced first (a GRU alternates between x's rows and h's).
class packed_rows_cache {
 public:
  /// The packing of the m x k rows at `data` (strides rs, cs), made by pack(dst) on a miss.
  /// Null when it would be too big to keep (then the GEMM packs block by block).
  template <class T, class TA, class Pack>
  const T* rows(const TA* data, index_t tag, index_t rs, index_t cs, index_t m, index_t k, Pack&& pack) {
    const index_t elems = gemm::packed_a_size<T>(m, k);
    const std::size_t bytes = static_cast<std::size_t>(elems) * sizeof(T);
    if (bytes > (std::size_t{4} << 20)) return nullptr;
    const key want{data, tag, rs, cs, m, k, sizeof(T)};
    for (entry& e : entries_)
      if (e.buf && e.k == want) return reinterpret_cast<const T*>(e.buf->p);
    entry& e = entries_[next_];
    next_ = (next_ + 1) % count;
    if (!e.buf || e.capacity < bytes) {
      e.buf = std::make_unique<gemm::detail::aligned_buffer<unsigned char>>(bytes);
      e.capacity = bytes;
    }
    e.k = want;
    pack(reinterpret_cast<T*>(e.buf->p));
    ++packings;
    return reinterpret_cast<const T*>(e.buf->p);
  }
  std::size_t packings = 0;  ///< misses: how many times rows were packed

 private:
  struct key {
    const void* data;
    index_t tag;  ///< the row origin of a buffer that holds different rows over time, else -1
    index_t rs, cs, m, k;
    std::size_t elem;
    bool operator==(const key&) const = default;
  };
  struct entry {
    key k{};
    std::unique_ptr<gemm::detail::aligned_buffer<unsigned char>> buf;
    std::size_t capacity = 0;
  };
  static constexpr std::size_t count = 4;
  entry entries_[count];
  std::size_t next_ = 0;
};

/// A contraction's operands in memory with A read as [M, K] and B as [K, N] (per batch):
/// element (i, k) of batch b at a_data + b * a_bs + i * a_rs + k * a_cs, and likewise for B.
/// Expression operands are evaluated by the executor context ctx.
template <class Node, class Ctx>
struct contract_operands {
  using A = typename Node::a_type;
  using B = typename Node::b_type;
  static constexpr contract_kind K = Node::kind;
  static constexpr bool packed_b = is_packed_view<B>::value;
  mutable operand_memory<A, Ctx> am;  // mutable: a by-rows operand evaluates its rows on demand
  std::conditional_t<packed_b, packed_operand<B>, operand_memory<B, Ctx>> bm;
  index_t a_rs = 0, a_cs = 0, a_bs = 0, b_ks = 0, b_ns = 0, b_bs = 0;

  /// A read by row blocks (attention's probabilities, chained): B of one batch packed once for
  /// all the row blocks of that batch, not once per block (float operands).
  mutable std::unique_ptr<gemm::detail::aligned_buffer<unsigned char>> b_pack;
  mutable gemm::packed_b<float> b_packed{};
  mutable index_t b_packed_batch = -1;

  /// Set when several products read the same rows of A (the gate blocks of a fused cell; the
  /// Q, K and V projections of one X): A's rows are packed once per row block into this cache
  /// and reused by every product that reads them, instead of once per product.
  packed_rows_cache* shared_rows = nullptr;

  contract_operands(const Node& node, Ctx& ctx, const byte_ranges* avoid = nullptr)
      // dense/matmul read A as [M, K] with its leading axes flattened into M.
      // An expression A of a dense/matmul in a blocked pass is evaluated by row blocks (the
      // prologue): only the rows a block reads, when it reads them.
      : am(node.a, K == contract_kind::batch_matmul || node.trans_a ? 0 : A::rank - 1, ctx, avoid,
           !node.trans_a && (K == contract_kind::batch_matmul || A::rank == 2)),
        bm(node.b, 0, ctx, avoid) {
    if constexpr (K == contract_kind::batch_matmul) {
      a_bs = node.batch_a == 1 ? 0 : am.str[0];
      a_rs = node.trans_a ? am.str[2] : am.str[1];
      a_cs = node.trans_a ? am.str[1] : am.str[2];
      b_bs = node.batch_b == 1 ? 0 : bm.str[0];
      b_ks = node.trans_b ? bm.str[2] : bm.str[1];
      b_ns = node.trans_b ? bm.str[1] : bm.str[2];
    } else {
      if (node.trans_a) {
        a_rs = am.str[1];
        a_cs = am.str[0];
      } else {
        a_rs = *flat_stride(am.ext, am.str, A::rank - 1);
        a_cs = am.str[A::rank - 1];
      }
      if constexpr (!packed_b) {
        b_ks = node.trans_b ? bm.str[1] : bm.str[0];
        b_ns = node.trans_b ? bm.str[0] : bm.str[1];
      }
    }
  }

  /// C[rows i0.., columns j0..] of batch bi, an m x n block, into c with strides (rs, cs).
  /// float16/bfloat16 operands are widened to float as they are packed and accumulate in
  /// float (bfloat16 pairs by vdpbf16ps where the CPU has it, fuse/cpu/gemm_bf16.hpp); a 16-bit
  /// C is rounded once per element as it is stored.
  template <class Out>
  void multiply(const Node& node, index_t bi, index_t i0, index_t m, index_t j0, index_t n, Out* c, index_t rs,
                index_t cs) const {
    using TA = typename A::value_type;
    using Acc = gemm::accumulator_t<TA, Out>;
    const gemm::strided<TA> a{am.lazy() ? am.rows(bi, i0, m) : am.data + bi * a_bs + i0 * a_rs, a_rs, a_cs};
    const Acc* a_packed = nullptr;
    // (Not for bfloat16 where the CPU has vdpbf16ps: its pair kernel packs A in pairs itself.)
    if constexpr (std::is_floating_point_v<Acc> && (std::is_same_v<TA, Acc> || gemm::is_float16_dtype<TA>)&&!(
                                                       gemm::has_dpbf16 && std::is_same_v<TA, bfloat16>)) {
      // Shared rows, when the product is not one the direct (unpacked) form takes and the
      // packing stays within a few MiB. A by-rows operand reuses one buffer for every row
      // block: its origin tells them apart.
      if (shared_rows && m > 4 && m * n * node.k > 32768)
        a_packed = shared_rows->template rows<Acc>(a.data, am.lazy() ? am.rows_key(bi, i0) : -1, a.rs, a.cs, m, node.k,
                                                   [&](Acc* dst) { gemm::pack_a_ahead<Acc>(dst, a, m, node.k); });
    }
    constexpr bool rounded = gemm::is_float16_dtype<Out>;  // a 16-bit result: float sums rounded once
    if constexpr (packed_b) {
      // 8-bit weights packed for the VNNI kernel (vpmaddwd where the CPU lacks VNNI).
      if constexpr (sizeof(typename B::value_type) == 1)
        gemm::gemm_int8_prepacked(m, n, node.k, a, bm.view.packed, j0, c, rs, cs);
      else if constexpr (fuse::detail::is_pair_weight<typename B::value_type>)
        gemm::gemm_bf16_prepacked(m, n, a, bm.view.packed, j0, c, rs, cs);
      else if constexpr (rounded)
        gemm::gemm_prepacked_rounded(m, n, node.k, a, bm.view.packed, j0, c, rs, cs, a_packed);
      else gemm::gemm_prepacked(m, n, node.k, a, bm.view.packed, j0, c, rs, cs, a_packed);
    } else {
      using TB = typename B::value_type;
      if constexpr (std::is_same_v<Out, float> && std::is_same_v<TA, float> && std::is_same_v<TB, float>) {
        if (am.lazy() && j0 == 0 && n == node.n) {
          const index_t key = b_bs == 0 ? 0 : bi;
          if (key != b_packed_batch) {
            if (!b_pack)
              b_pack = std::make_unique<gemm::detail::aligned_buffer<unsigned char>>(
                  gemm::packed_b_bytes<float>(node.k, node.n));
            b_packed = gemm::pack_b_ahead<float>(b_pack->p, gemm::strided<float>{bm.data + bi * b_bs, b_ks, b_ns},
                                                 node.k, node.n);
            b_packed_batch = key;
          }
          gemm::gemm_prepacked(m, n, node.k, a, b_packed, 0, c, rs, cs, a_packed);
          return;
        }
      }
      const gemm::strided<TB> b{bm.data + bi * b_bs + j0 * b_ns, b_ks, b_ns};
      // 8-bit operands: the VNNI kernel (vpmaddwd where the CPU lacks VNNI).
      if constexpr (std::is_same_v<Out, std::int32_t> && sizeof(TA) == 1 && sizeof(TB) == 1)
        gemm::gemm_int8<TA, TB>(m, n, node.k, a, b, c, rs, cs);
      else if constexpr (std::is_same_v<TA, bfloat16> && std::is_same_v<TB, bfloat16>)
        gemm::gemm_bf16(m, n, node.k, a, b, c, rs, cs, a_packed);  // vdpbf16ps where it can
      else if constexpr (rounded) gemm::gemm_rounded(m, n, node.k, a, b, c, rs, cs, a_packed);
      else gemm::gemm<Out>(m, n, node.k, a, b, c, rs, cs, a_packed);
    }
  }
};

}  // namespace detail

/// out = the contraction node, its operands evaluated (when they are expressions) by ctx.
template <std::size_t Q, class Ctx, class T, contract_kind K, class A, class B, class Out, std::size_t R>
void run_contract(Ctx& ctx, tensor_view<T, static_cast<int>(Q)> out, const contract_expr<K, A, B, Out, R>& node) {
  static_assert(std::is_same_v<std::remove_const_t<T>, Out>, "fuse: the contraction's output dtype");
  using Node = contract_expr<K, A, B, Out, R>;
  const auto oext = out.shape().array();
  const auto ostr = out.strides();
  // A batch_matmul's A holding a softmax or a layer norm (attention's probabilities, chained
  // into this product) that reads none of the output's bytes is evaluated by row blocks: never
  // whole. (Not a dense's: its weights, packed again for each block of rows, cost more than the
  // temporary saves: dense(layer_norm(x), W) at 384 x 768 x 768, 19.5 ms by blocks, 15.5 whole.)
  const void *olo = nullptr, *ohi = nullptr;
  bind::detail::byte_range(out.data(), oext, ostr.data(), sizeof(T), olo, ohi);
  constexpr bool chained = K == contract_kind::batch_matmul && fuse::detail::holds_row_op<A>();
  detail::byte_ranges written;
  if constexpr (chained) written.push_back({olo, ohi});
  const detail::contract_operands<Node, Ctx> ops(node, ctx, chained ? &written : nullptr);

  // Rows of the output as one axis (dense/matmul: every axis but the last; batch_matmul: axis 1).
  const auto out_rows =
      K == contract_kind::batch_matmul ? std::optional<index_t>(ostr[1]) : detail::flat_stride(oext, ostr, R - 1);
  // (a by-rows A was checked leaf by leaf against the output; its [lo, hi) spans every leaf)
  if (!out_rows || (!ops.am.lazy() && bind::overlaps(olo, ohi, ops.am.lo, ops.am.hi)) ||
      bind::overlaps(olo, ohi, ops.bm.lo, ops.bm.hi)) {
    // Through a contiguous temporary, then copied by the elementwise executor.
    tensor<Out, static_cast<int>(R)> tmp(dynamic_shape<R>(node.shape()), uninitialized);
    run_contract<R>(ctx, tmp.view(), node);
    ctx.eval_into(out, std::as_const(tmp).view());
    return;
  }
  const index_t batches = K == contract_kind::batch_matmul ? node.batch : 1;
  const index_t o_bs = K == contract_kind::batch_matmul ? ostr[0] : 0;
  // An A evaluated by rows (attention's probabilities: softmax of a product, chained into this
  // one) is evaluated a block of rows at a time, in cache when the product reads it.
  // Blocks of at most 8 times the epilogue's budget (of the probabilities, and of the scores
  // they are computed from: at the default, a whole head of BERT's 384 x 384, which L2 does not
  // hold), cut evenly: each block evaluates and packs the scores' B (K) again. Seed 002's block
  // (Zen 3, best of 60 runs): 85 rows a block 5-10% slower than 128, 128 rows 118.7 ms, 192
  // rows 115.4, 384 rows 107.9.
  const index_t all_rows = std::max<index_t>(node.m, 1);
  const index_t most = std::clamp<index_t>(8 * ctx.epilogue_block_elements / std::max<index_t>(node.k, 1),
                                           std::min<index_t>(16, all_rows), all_rows);
  const index_t blocks = (all_rows + most - 1) / most;
  const index_t mb = ops.am.lazy() ? (all_rows + blocks - 1) / blocks : all_rows;
  for (index_t bi = 0; bi < batches; ++bi)
    for (index_t i0 = 0; i0 < node.m; i0 += mb)
      ops.template multiply<Out>(node, bi, i0, std::min(mb, node.m - i0), 0, node.n,
                                 out.data() + bi * o_bs + i0 * *out_rows, *out_rows, ostr[R - 1]);
  ctx.stats.prologue_row_blocks += ops.am.evaluations;
}

}  // namespace fuse::cpu
