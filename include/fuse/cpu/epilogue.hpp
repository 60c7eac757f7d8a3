// Contractions fused with the elementwise tree that consumes them (the epilogue): the seed's
// dense -> split -> sigmoid/tanh/exp -> multiply/add, an LSTM cell's four gates and two outputs,
// a GRU cell's two GEMMs and six gate blocks, in one blocked pass.
//
// The output is cut into blocks (rows of axis Q - 2 by columns of the last axis, one coordinate
// of each axis before them at a time: a batch_matmul's batch). For each block,
// binding the tree asks this context for every contraction leaf it meets, with the index map
// from the block's coordinates to the contraction's: when that map walks the contraction's rows
// and columns with unit steps (the identity, a split or strided_slice of columns, a broadcast),
// only the block of the contraction that the pass reads is computed, into a small buffer that
// stays in cache, and the elementwise loop runs over it at once. The full contraction result is
// never written to memory; each weight section is read once per row block.
//
// Operands are prepared once for all blocks: views are read in place (copied first when an
// output of the pass overlaps them, since earlier blocks write while later ones still read);
// an expression operand A of a dense/matmul (rank 2) or a batch_matmul is evaluated row block by
// row block (per batch) as the blocks read it (whole, first, when the pass writes what it
// reads). A batch_matmul block is one product per batch the block reads; a dense of rank 3 and
// above computes the block's rows of its flattened product. Contraction leaves the blocks cannot
// serve (a reshape or strided step of the result) and other nodes with kernels of their own
// (reductions) are evaluated whole, once, before the first block writes anything.
// Rows of A are packed once per block and shared by every product that reads them (the
// sections of one contraction; contractions of one operand, as Q, K and V of one X).
#pragma once

#include <algorithm>
#include <new>
#include <optional>
#include <type_traits>
#include <tuple>
#include <utility>

#include "fuse/core/small_vector.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/cpu/contract.hpp"
#include "fuse/cpu/options.hpp"
#include "fuse/cpu/pass.hpp"
#include "fuse/expr/node.hpp"
#include "fuse/expr/same_tree.hpp"

namespace fuse::cpu {

/// The bind context of the blocks of one blocked pass. Outer: the executor context of the eval
/// (fuse/cpu/eval.hpp's cpu::context): it evaluates whatever must be evaluated whole, holds the
/// block budget (fuse::epilogue_block) and counts what the pass does (fuse::eval_statistics).
template <class Outer, std::size_t Q>
struct epilogue_context {
  using math_mode = typename Outer::math_mode;
  Outer& outer;
  explicit epilogue_context(Outer& o) : outer(o) {}

  /// Per materialised leaf, in bind order (the same in every block): the node, its prepared
  /// operands and the storage its blocks (or its whole result) live in, typed by the node's
  /// type. The list holds them through this base, whose tag names the slot's type: as<N>()
  /// gives the typed slot back or null (a slot of another type at a leaf's place would be a bind
  /// order that changed between blocks: an error, never a misread). A tag compare, not a
  /// dynamic_cast: a tiny cell binds a few leaves per microsecond.
  struct slot_base {
    explicit slot_base(const char* t) : tag(t) {}
    virtual ~slot_base() = default;
    const char* tag;
    template <class N>
    auto* as() {
      return tag == &slot<N>::type_tag ? static_cast<slot<N>*>(this) : nullptr;
    }
  };
  template <class N>
  struct slot : slot_base {
    static constexpr char type_tag = 0;
    slot() : slot_base(&type_tag) {}
    using T = typename N::value_type;
    using Ops = std::conditional_t<kind_of<N> == node_kind::contraction, detail::contract_operands<N, Outer>, char>;
    using Whole = decltype(std::declval<Outer&>().materialize(std::declval<const N&>()));
    const N* node = nullptr;
    std::optional<Ops> own_ops;  ///< operands prepared by this slot
    const Ops* ops = nullptr;    ///< its own, or those of an earlier slot of the same contraction
    std::optional<Whole> whole;  ///< the whole result, when evaluated whole
    std::optional<tensor<T, 2>> heap_buffer;
    T* buffer = nullptr;  ///< the block buffer (in heap_buffer or in the arena)
    /// Capacity of the block buffer: `outer` blocks (one per outer coordinate) of rows x cols.
    index_t outer = 0, rows = 0, cols = 0;
    /// The buffer's strides as a node of rank R holding a block of extents len: its outer
    /// coordinates in row-major order, each a rows x cols block.
    template <std::size_t R>
    index_array<R> buffer_strides(const index_array<R>& len) const {
      index_array<R> st{};
      st[R - 1] = 1;
      st[R - 2] = cols;
      index_t step = rows * cols;
      for (std::size_t d = R - 2; d-- > 0;) st[d] = step, step *= len[d];
      return st;
    }
  };
  small_vector<slot_base*, 8> slots;  ///< in the arena when they fit, else on the heap
  std::size_t next = 0;
  /// Most axes of a contraction whose blocks a pass computes (its outer axes, rows, columns).
  static constexpr std::size_t max_block_rank = 6;
  /// Contraction blocks computed in the current block: a leaf that reads the same block of the
  /// same contraction (split sections used by both outputs of an LSTM cell) reuses it. lo and
  /// len per axis of the node (rank r): outer axes, then rows, then columns.
  struct computed {
    slot_base* slot;
    std::size_t rank;
    index_array<max_block_rank> lo, len;
  };
  small_vector<computed, 8> done;
  /// A's rows packed once per block for every product that reads them.
  detail::packed_rows_cache packed_rows;
  /// Slots (with their prepared operands) and block buffers of small cells live here, in the
  /// pass's own frame: a tiny cell (the seed's 1 x 10) would otherwise spend more on
  /// allocations than on its arithmetic.
  alignas(64) unsigned char arena[16384];
  std::size_t arena_used = 0;
  ~epilogue_context() {
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(slots[i]);
      if (p >= arena && p < arena + sizeof(arena)) slots[i]->~slot_base();
      else delete slots[i];
    }
  }
  epilogue_context(const epilogue_context&) = delete;
  epilogue_context& operator=(const epilogue_context&) = delete;
  index_array<Q> block{};       ///< extents of the current block
  detail::byte_ranges outputs;  ///< what the pass writes
  /// Binding only to learn the layout of the leaves (the aliasing check before the blocks):
  /// materialised leaves compute nothing and read one dummy element.
  bool probing = false;

  /// A contraction read through an affine map: its blocks can be computed alone (a dense or
  /// matmul's rows over its leading axes, a batch_matmul's per batch).
  template <class N, class Map>
  static constexpr bool blockable_contraction() {
    if constexpr (kind_of<N> == node_kind::contraction)
      return N::rank >= 2 && N::rank <= max_block_rank && bind::is_affine_map<Map>::value;
    else return false;
  }

  /// `bytes` at `align` in the arena, or null when they do not fit.
  void* arena_take(std::size_t bytes, std::size_t align) {
    const std::size_t at = (arena_used + align - 1) / align * align;
    if (align > 64 || at + bytes > sizeof(arena)) return nullptr;
    arena_used = at + bytes;
    return arena + at;
  }

  /// The slot of the next materialised leaf in bind order, made on the first block.
  template <class N>
  slot<N>& next_slot(const N& n) {
    if (next == slots.size()) {
      void* p = arena_take(sizeof(slot<N>), alignof(slot<N>));
      slots.push_back(p ? ::new (p) slot<N> : new slot<N>);
    }
    auto* s = slots[next++]->template as<N>();
    if (!s) throw error("eval: the blocked epilogue met its leaves in another order than in its first block");
    s->node = &n;
    return *s;
  }

  template <class M, std::size_t Qm, class N, class Map>
  auto leaf_for(const N& n, const Map& m) {
    static_assert(Qm == Q);
    using T = typename N::value_type;
    constexpr std::size_t R = N::rank;
    // A leaf over data whose element (0, 0, ...) is node coordinate `lo` (0 unless the map is
    // affine). It owns nothing: the slots of this context hold every buffer until the pass ends,
    // and evaluators never outlive the pass (no reference counting per leaf per block).
    const auto leaf_over = [&](const T* data, const index_array<R>& ext, const index_array<R>& str,
                               const index_array<R>& lo) {
      Map local = m;
      if constexpr (bind::is_affine_map<Map>::value)
        for (std::size_t d = 0; d < R; ++d) local.offset[d] -= lo[d];
      return bind::make_leaf<const T, Q>(data, ext, str, local);
    };
    if (probing) {
      static const T dummy{};
      return leaf_over(&dummy, index_array<R>{}, index_array<R>{}, index_array<R>{});
    }
    slot<N>& s = next_slot(n);
    if constexpr (blockable_contraction<N, Map>()) {
      // The part of the contraction this block reads: [lo, lo + len) per axis of the node (its
      // outer axes, a batch_matmul's batch or a dense's leading axes, then rows, then columns).
      constexpr std::size_t RO = R - 2;  // outer axes
      const index_array<R> ext = n.shape().array();
      index_array<R> lo{}, len{};
      bool unit = true;
      for (std::size_t d = 0; d < R; ++d) {
        lo[d] = m.offset[d];
        if (m.src[d] < 0) len[d] = 1;
        else if (m.scale[d] == 1) len[d] = block[static_cast<std::size_t>(m.src[d])];
        else unit = false;
      }
      if (unit) {
        // A block of this contraction computed already for these outer coordinates and rows and
        // (at least) these columns: the twin of a section read twice, or the whole width
        // computed below.
        for (std::size_t t = 0; t < done.size(); ++t) {
          const computed& c = done[t];
          bool same = c.rank == R && lo[R - 1] >= c.lo[R - 1] && lo[R - 1] + len[R - 1] <= c.lo[R - 1] + c.len[R - 1];
          for (std::size_t d = 0; d + 1 < R && same; ++d) same = c.lo[d] == lo[d] && c.len[d] == len[d];
          if (!same) continue;
          const auto* twin = c.slot->template as<N>();
          if (twin && same_tree(*twin->node, n)) {
            index_array<R> tlo{}, tlen{};
            for (std::size_t d = 0; d < R; ++d) tlo[d] = c.lo[d], tlen[d] = c.len[d];
            return leaf_over(twin->buffer, tlen, twin->template buffer_strides<R>(tlen), tlo);
          }
        }
        index_t outer_count = 1;  // outer coordinates in the block: a product each
        for (std::size_t d = 0; d < RO; ++d) outer_count *= len[d];
        // A small contraction read in sections (the seed's three gates of 10 columns): all its
        // columns for these rows in one product, which every section then reads, instead of
        // one tiny product per section, whose fixed cost would dominate. Not for big products:
        // a batch-1 LSTM streams W ~8% faster gate by gate than in one sweep (measured).
        const index_t width = ext[R - 1];
        if (len[R - 1] < width && width <= 8 * len[R - 1] &&
            outer_count * len[R - 2] * width <= outer.epilogue_block_elements &&
            outer_count * len[R - 2] * width * n.k <= 65536) {
          lo[R - 1] = 0;
          len[R - 1] = width;
        }
        if (!s.ops) {
          // Leaves of one contraction (the sections of a split) share its prepared operands.
          for (std::size_t o = 0; o + 1 < next && !s.ops; ++o)
            if (const auto* other = slots[o]->template as<N>(); other && other->ops && same_tree(*other->node, n))
              s.ops = other->ops;
          if (!s.ops) {
            s.own_ops.emplace(n, outer, &outputs);
            s.own_ops->shared_rows = &packed_rows;
            s.ops = &*s.own_ops;
          }
        }
        if (!s.buffer || s.outer < outer_count || s.rows < len[R - 2] || s.cols < len[R - 1]) {
          s.outer = std::max(s.outer, outer_count);
          s.rows = std::max(s.rows, len[R - 2]);
          s.cols = std::max(s.cols, len[R - 1]);
          const std::size_t bytes = (static_cast<std::size_t>(s.outer * s.rows * s.cols) * sizeof(T) + 63) / 64 * 64;
          if (void* p = arena_take(bytes, 64)) {
            s.heap_buffer.reset();
            s.buffer = static_cast<T*>(p);
          } else {
            s.heap_buffer.emplace(dynamic_shape<2>({s.outer * s.rows, s.cols}));
            s.buffer = s.heap_buffer->data();
          }
        }
        const std::size_t evaluated = s.ops->am.evaluations;
        // One product per outer coordinate of the block (in row-major order, as the buffer holds
        // them): a batch_matmul's batch, or a dense's rows flattened over its leading axes.
        index_array<R> at = lo;
        for (index_t o = 0; o < outer_count; ++o) {
          T* dst = s.buffer + o * s.rows * s.cols;
          if constexpr (N::kind == contract_kind::batch_matmul) {
            s.ops->template multiply<T>(n, at[0], lo[1], len[1], lo[2], len[2], dst, s.cols, 1);
          } else {
            index_t row = 0;
            for (std::size_t d = 0; d + 1 < R; ++d) row = row * ext[d] + (d < RO ? at[d] : lo[d]);
            s.ops->template multiply<T>(n, 0, row, len[R - 2], lo[R - 1], len[R - 1], dst, s.cols, 1);
          }
          for (std::size_t d = RO; d-- > 0;) {
            if (++at[d] < lo[d] + len[d]) break;
            at[d] = lo[d];
          }
        }
        outer.stats.prologue_row_blocks += s.ops->am.evaluations - evaluated;
        computed c{&s, R, {}, {}};
        for (std::size_t d = 0; d < R; ++d) c.lo[d] = lo[d], c.len[d] = len[d];
        done.push_back(c);
        ++outer.stats.partial_leaves;
        return leaf_over(s.buffer, len, s.template buffer_strides<R>(len), lo);
      }
    }
    // Whole, once: the first block binds before anything is written.
    if (!s.whole) {
      s.whole.emplace(outer.materialize(n));
      ++outer.stats.whole_leaves;
    }
    const auto v = std::as_const(*s.whole).view();
    return leaf_over(v.data(), v.shape().array(), v.strides(), index_array<R>{});
  }
};

namespace detail {

/// Block extents: at most `elements` per contraction leaf's buffer, up to 256 rows (the weight
/// sections are read once per row block), the full width when it fits. Rows are along axis
/// Q - 2 (the axes before it are walked one coordinate at a time), columns along Q - 1.
template <std::size_t Q>
void block_extents(const index_array<Q>& ext, index_t elements, index_t& rows, index_t& cols) {
  const index_t budget = std::max<index_t>(1, elements);
  const index_t n = ext[Q - 1];
  const index_t m = Q >= 2 ? ext[Q - 2] : 1;
  rows = std::min<index_t>({m, 256, std::max<index_t>(1, budget / 64)});
  cols = budget / rows;
  // Whole GEMM panels (32 columns), so that packed weights are read from panel boundaries.
  cols = cols >= n ? n : (cols >= 64 ? cols / 32 * 32 : std::max<index_t>(8, cols / 8 * 8));
}

/// Calls f(origin, extents) for each block of rows of an iteration space `ext` (rank Q): one
/// coordinate of each axis before Q - 2 at a time (a batch_matmul's batch), rb rows of axis
/// Q - 2, every column of axis Q - 1. The walk of the blocked pass and of row nodes over
/// contractions (fuse/cpu/eval.hpp).
template <std::size_t Q, class F>
void for_each_row_block(const index_array<Q>& ext, index_t rb, F&& f) {
  constexpr std::size_t RA = Q >= 2 ? Q - 2 : 0;  // the row axis
  const index_t rows = Q >= 2 ? ext[RA] : 1;
  index_t outer = 1;
  for (std::size_t d = 0; d < RA; ++d) outer *= ext[d];
  index_array<Q> origin{};  // the block's outer coordinates, then its first row
  for (index_t ob = 0; ob < outer; ++ob) {
    if (ob > 0)
      for (std::size_t d = RA; d-- > 0;) {
        if (++origin[d] < ext[d]) break;
        origin[d] = 0;
      }
    for (index_t i0 = 0; i0 < rows; i0 += rb) {
      index_array<Q> bext = ext;
      for (std::size_t d = 0; d < RA; ++d) bext[d] = 1;
      if constexpr (Q >= 2) {
        origin[RA] = i0;
        bext[RA] = std::min(rb, rows - i0);
      }
      f(std::as_const(origin), bext);
    }
  }
}

/// The block of view v at `origin` with extents `ext` (v's strides).
template <std::size_t Q, class T>
tensor_view<T, static_cast<int>(Q)> block_of(const tensor_view<T, static_cast<int>(Q)>& v, const index_array<Q>& origin,
                                             const index_array<Q>& ext) {
  index_t off = 0;
  for (std::size_t d = 0; d < Q; ++d) off += origin[d] * v.strides()[d];
  return tensor_view<T, static_cast<int>(Q)>(v.data() + off, dynamic_shape<Q>(ext), v.strides());
}

}  // namespace detail

/// The blocked pass: outs (one shape, rank Q) = exprs, block by block. outer: the executor
/// context of the eval (see epilogue_context).
template <std::size_t Q, class Outer, class... T, class... E>
void run_epilogue_blocks(Outer& outer, std::tuple<tensor_view<T, static_cast<int>(Q)>...> outs,
                         const std::tuple<E...>& exprs, streaming_stores streaming) {
  using Mode = typename Outer::math_mode;
  const index_array<Q> ext = std::get<0>(outs).shape().array();
  epilogue_context<Outer, Q> ctx(outer);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (([&] {
       const auto& o = std::get<I>(outs);
       const void *lo = nullptr, *hi = nullptr;
       bind::detail::byte_range(o.data(), ext, o.strides().data(), sizeof(T), lo, hi);
       ctx.outputs.push_back({lo, hi});
     }()),
     ...);
  }(std::index_sequence_for<T...>{});
  index_t rb = 1, cb = 1;
  detail::block_extents(ext, outer.epilogue_block_elements, rb, cb);
  // Blocks: each coordinate of the axes before Q - 2 (a batch_matmul's batch, attention's heads)
  // by rb rows of axis Q - 2 by cb columns of axis Q - 1.
  constexpr std::size_t RA = Q >= 2 ? Q - 2 : 0;  // the row axis
  const index_t rows = Q >= 2 ? ext[RA] : 1;
  index_t outer_count = 1;
  for (std::size_t d = 0; d < RA; ++d) outer_count *= ext[d];
  // Earlier blocks write while later ones read: an input of the elementwise part that shares
  // memory with an output other than element for element (the rule of a single pass, applied
  // to the whole iteration space) sends the outputs through temporaries. A single block is a
  // single pass, whose own plan handles that. Contraction operands are prepared before any
  // write (copied when an output overlaps them).
  bool hazard = false;
  if (outer_count > 1 || rows > rb || ext[Q - 1] > cb) {
    ctx.probing = true;
    const auto layout = detail::plan_for<Q>(outs, detail::bind_pass<Mode, Q>(ctx, exprs, ext, index_array<Q>{}), ext);
    ctx.probing = false;
    for (std::size_t o = 0; o < layout.through_temp.size(); ++o) hazard = hazard || layout.through_temp[o];
  }
  ++outer.stats.passes;
  if (hazard) {
    ++outer.stats.through_temporaries;
    // Through temporaries, copied into the real outputs at the end.
    std::tuple<tensor<std::remove_cv_t<T>, static_cast<int>(Q)>...> temps{
        tensor<std::remove_cv_t<T>, static_cast<int>(Q)>(dynamic_shape<Q>(ext))...};
    auto tviews =
        std::apply([](auto&... t) { return std::make_tuple(tensor_view<T, static_cast<int>(Q)>(t.view())...); }, temps);
    run_epilogue_blocks<Q>(outer, tviews, exprs, streaming);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (copy_view<Q>(std::get<I>(outs), std::as_const(std::get<I>(temps)).view(), streaming), ...);
    }(std::index_sequence_for<T...>{});
    return;
  }

  detail::for_each_row_block<Q>(ext, rb, [&](const index_array<Q>& row_origin, const index_array<Q>& row_ext) {
    for (index_t j0 = 0; j0 < ext[Q - 1]; j0 += cb) {
      index_array<Q> origin = row_origin, bext = row_ext;
      origin[Q - 1] = j0;
      bext[Q - 1] = std::min(cb, ext[Q - 1] - j0);
      auto block_outs = [&]<std::size_t... I>(std::index_sequence<I...>) {
        return std::make_tuple(detail::block_of<Q>(std::get<I>(outs), origin, bext)...);
      }(std::index_sequence_for<T...>{});
      ctx.block = bext;
      ctx.next = 0;
      ctx.done.clear();
      ++outer.stats.blocks;
      run_pass<Mode, Q>(ctx, block_outs, exprs, streaming, ext, origin);
    }
  });
  outer.stats.row_packings += ctx.packed_rows.packings;
}

}  // namespace fuse::cpu
