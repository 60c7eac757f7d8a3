// Evaluators: an expression tree bound to an iteration space of rank Q. Each node kind has ONE
// evaluator here, which produces its compute value
//   at(x)          at full iteration coordinates x (the general path),
//   get(j)         at element j of the current row, after row(x) fixed the outer coordinates
//                  (one lane: Eigen's coeff), and
//   load<L>(j, n)  at elements j .. j+n-1 of the row as one vector of the lane family L
//                  (Eigen's packet; n <= L::width, lanes past n unspecified). load<L, true> is
//                  the fast form for rows where every leaf is contiguous (contiguous_row()).
// A lane family is the executor's vocabulary of vectors (the CPU's: cpu::simd_lanes<A> in
// fuse/cpu/vector_access.hpp): vec<C>, width, load / load_partial / load_strided of a dtype,
// splat, from_array (lanes gathered one by one), map<Mode, T>(op, v...) and cast<To, From>(v).
// This file names none of them, so it stays free of any executor's headers; each node kind's
// vector access is decided here, beside its scalar one.
//
// Leaves hold a data pointer and strides over the iteration space (or, when their index map
// could not fold into strides, the map itself): they load contiguous memory when their inner
// stride is 1, splat when it is 0 and gather otherwise; elementwise nodes apply their op to
// their children's vectors; nodes without a vector form of their own (take; unfoldable leaves
// and concatenations whose child changes inside the vector) gather their lanes through get.
//
// Device-ready scalar paths (FUSE_HD); nothing here allocates except materialised reductions.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include "fuse/bind/index_map.hpp"
#include "fuse/core/dtype.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/expr/convert.hpp"
#include "fuse/expr/elementwise.hpp"
#include "fuse/expr/views.hpp"

namespace fuse::bind {

/// What an executor learns about a leaf: where its elements lie and how it walks them.
struct leaf_info {
  const void* lo = nullptr;  ///< first byte it may read
  const void* hi = nullptr;  ///< one past the last byte it may read
  bool folded = false;       ///< addresses are base + sum(x[k] * stride[k])
  const void* base = nullptr;
  const index_t* stride = nullptr;  ///< Q strides in elements when folded
  std::size_t elem_size = 0;
};

/// n lanes of ev from element j by its scalar get, as one vector of lane family L: the vector
/// form of nodes that have no other.
template <class L, class Ev>
FUSE_HD typename L::template vec<typename Ev::compute_type> load_by_lanes(const Ev& ev, index_t j, int n) {
  using C = typename Ev::compute_type;
  C lanes_[L::width] = {};
  for (int i = 0; i < n; ++i) lanes_[i] = ev.get(j + i);
  return L::template from_array<C>(lanes_);
}

namespace detail {
/// Byte range [lo, hi) touched by strides over extents from base (elements of size es).
template <std::size_t Q>
void byte_range(const void* base, const index_array<Q>& ext, const index_t* stride, std::size_t es, const void*& lo,
                const void*& hi) {
  index_t a = 0, b = 0;
  for (std::size_t k = 0; k < Q; ++k) {
    if (ext[k] == 0) {
      lo = hi = base;
      return;
    }
    const index_t span = (ext[k] - 1) * stride[k];
    (span < 0 ? a : b) += span;
  }
  const auto* p = static_cast<const unsigned char*>(base);
  lo = p + a * static_cast<index_t>(es);
  hi = p + (b + 1) * static_cast<index_t>(es);
}
}  // namespace detail

// ---- leaves ------------------------------------------------------------------------------------------------

/// offset0 + the leaf offset of iteration point x under any index map (the general form's
/// address), and the run along a row from x.
template <class Map, std::size_t R>
FUSE_HD index_t mapped_offset(const Map& map, const index_array<R>& stride, index_t offset0, const index_t* x) {
  index_t c[R > 0 ? R : 1];
  map.apply(x, c);
  index_t o = offset0;
  for (std::size_t d = 0; d < R; ++d) o += c[d] * stride[d];
  return o;
}
template <class Map, std::size_t R>
FUSE_HD run mapped_row(const Map& map, const index_array<R>& stride, index_t offset0, const index_t* x) {
  run r = row_run(map, stride, x);
  r.offset += offset0;
  return r;
}

/// How a leaf whose map did not fold finds its elements: offset = map(x) . stride + offset0.
template <class Map, std::size_t R = Map::out_rank>
struct general_form {
  Map map{};
  index_array<R> stride{};
  index_t offset0 = 0;

  static general_form make(const Map& m, const index_array<R>& s, index_t off) { return {m, s, off}; }
  FUSE_HD index_t offset(const index_t* x) const { return mapped_offset(map, stride, offset0, x); }
  FUSE_HD run row(const index_t* x) const { return mapped_row(map, stride, offset0, x); }
};

/// One reshape after an affine map, the common unfoldable case (reshape of a transposed view):
/// runs along a row as in row_run, with the reshape's strides folded once and its digits kept
/// from the previous row, so that a new row costs a few additions and carries instead of a
/// division per axis.
template <std::size_t Q, std::size_t Rm, std::size_t Rc, std::size_t R>
struct general_form<reshape_map<affine_map<Q, Rm>, Rm, Rc, R>, R> {
  using M = reshape_map<affine_map<Q, Rm>, Rm, Rc, R>;
  M map{};
  index_array<R> stride{};
  index_t offset0 = 0;
  strided<Rc> post{};     // strides over the reshape's inner coordinates
  index_array<Rm> mul{};  // row-major multipliers of the reshape's outer extents
  index_t dl = 0;         // linear step along the row
  int step_digit = -1;    // the digit dl moves (by step_q each element); -1: none
  index_t step_q = 0;
  mutable index_t last_lin = -1;
  mutable index_array<Rc> digits{};

  static general_form make(const M& m, const index_array<R>& s, index_t off) {
    general_form g;
    g.map = m;
    g.stride = s;
    g.offset0 = off;
    g.post = fold(m.post, s);
    index_t k = 1;
    for (std::size_t i = Rm; i-- > 0;) {
      g.mul[i] = k;
      if (m.prev.src[i] == static_cast<index_t>(Q - 1)) g.dl += m.prev.scale[i] * k;
      k *= m.mid[i];
    }
    // Which digit of the inner coordinates moves along a row, and by how much: constant per
    // evaluation, so the divisions happen here once.
    if (g.dl > 0) {
      index_t p = 1;  // product of the extents finer than digit t
      for (std::size_t t = Rc; t-- > 0;) {
        if (g.dl % p == 0 && g.dl / p < m.inner[t]) {
          g.step_digit = static_cast<int>(t);
          g.step_q = g.dl / p;
          break;
        }
        p *= m.inner[t];
      }
    }
    return g;
  }
  /// The reshape's inner coordinates of linear index lin, from the last ones when lin moved
  /// forward by less than the innermost extent times a few (the next row, typically).
  FUSE_HD void locate(index_t lin) const {
    index_t delta = lin - last_lin;
    if (last_lin >= 0 && delta >= 0 && Rc > 0 && delta <= 4 * map.inner[Rc - 1]) {
      digits[Rc - 1] += delta;
      for (std::size_t t = Rc - 1; t > 0; --t) {  // carries: a few subtractions, no division
        while (digits[t] >= map.inner[t]) {
          digits[t] -= map.inner[t];
          ++digits[t - 1];
        }
      }
    } else {
      index_t l = lin;
      for (std::size_t t = Rc; t-- > 0;) {
        digits[t] = map.inner[t] ? l % map.inner[t] : 0;
        l = map.inner[t] ? l / map.inner[t] : 0;
      }
    }
    last_lin = lin;
  }
  FUSE_HD index_t linear(const index_t* x) const {
    index_t mid[Rm > 0 ? Rm : 1];
    map.prev.apply(x, mid);
    index_t lin = 0;
    for (std::size_t i = 0; i < Rm; ++i) lin += mid[i] * mul[i];
    return lin;
  }
  FUSE_HD index_t offset(const index_t* x) const {
    locate(linear(x));
    index_t o = offset0 + post.offset;
    for (std::size_t t = 0; t < Rc; ++t) o += digits[t] * post.stride[t];
    return o;
  }
  FUSE_HD run row(const index_t* x) const {
    run r;
    r.offset = offset(x);
    if (dl == 0) {
      r.length = index_t{1} << 62;
      return r;
    }
    if (step_digit < 0) return r;
    const auto t = static_cast<std::size_t>(step_digit);
    r.stride = step_q * post.stride[t];
    const index_t left = map.inner[t] - 1 - digits[t];
    r.length = (step_q == 1 ? left : left / step_q) + 1;
    return r;
  }
};

/// A reshape step whose own reshape folds but whose earlier steps do not (reshape(transpose(
/// reshape(x))) with x contiguous: the inner reshape is free, the outer one is not): the leaf
/// is then addressed from the earlier steps' coordinates, where runs along a row can be found.
template <class P, std::size_t Rm, std::size_t Rc, std::size_t R>
struct general_form<reshape_map<P, Rm, Rc, R>, R> {
  using M = reshape_map<P, Rm, Rc, R>;
  M map{};
  index_array<R> stride{};
  index_t offset0 = 0;
  bool reduced = false;
  general_form<P> inner{};

  static general_form make(const M& m, const index_array<R>& s, index_t off) {
    general_form g{m, s, off, false, {}};
    if constexpr (!is_affine_map<P>::value) {
      const strided<Rc> post = fold(m.post, s);
      index_array<Rm> mid{};
      if (detail::reshape_strides(m.inner, post.stride, m.mid, mid)) {
        g.reduced = true;
        g.inner = general_form<P>::make(m.prev, mid, off + post.offset);
      }
    }
    return g;
  }
  FUSE_HD index_t offset(const index_t* x) const {
    return reduced ? inner.offset(x) : mapped_offset(map, stride, offset0, x);
  }
  FUSE_HD run row(const index_t* x) const { return reduced ? inner.row(x) : mapped_row(map, stride, offset0, x); }
};

/// A tensor_view leaf under index map Map (iteration space -> the view's coordinates).
template <class T, std::size_t Q, class Map>
struct leaf_eval {
  using value_type = std::remove_cv_t<T>;
  using compute_type = compute_t<value_type>;
  static constexpr std::size_t rank = Q;
  static constexpr std::size_t node_rank = Map::out_rank;
  static constexpr bool may_be_general = !is_affine_map<Map>::value;

  // Folded form: address = base + sum(x[k] * stride[k]).
  const T* base = nullptr;
  index_array<Q> stride{};
  bool folded = true;
  // General form: address = data + gen.offset(x).
  [[no_unique_address]] std::conditional_t<may_be_general, general_form<Map>, char> gen{};
  const T* data = nullptr;
  index_array<node_rank> node_stride{};
  index_array<node_rank> node_extent{};
  // Row state.
  const T* row_ptr = nullptr;
  index_t inner = 0;
  index_array<Q> row_x{};
  // General form along the row: elements [run_begin, run_end) at run_ptr + (j - run_begin) * run_stride.
  mutable const T* run_ptr = nullptr;
  mutable index_t run_begin = 0, run_end = 0, run_stride = 0;

  /// Makes the current run of the general form cover element j of the row.
  FUSE_HD void ensure_run(index_t j) const {
    if (j >= run_begin && j < run_end) return;
    index_array<Q> x = row_x;
    x[Q - 1] = j;
    run r;
    if constexpr (may_be_general) r = gen.row(x.data());
    run_ptr = data + r.offset;
    run_stride = r.stride;
    run_begin = j;
    run_end = j + r.length;
  }

  FUSE_HD index_t general_offset(const index_t* x) const {
    if constexpr (may_be_general) return gen.offset(x);
    else return 0;
  }
  FUSE_HD compute_type at(const index_t* x) const {
    if (!may_be_general || folded) {
      index_t o = 0;
      for (std::size_t k = 0; k < Q; ++k) o += x[k] * stride[k];
      return to_compute<value_type>(base[o]);
    }
    return to_compute<value_type>(data[general_offset(x)]);
  }
  FUSE_HD void row(const index_t* x) {
    if (!may_be_general || folded) {
      index_t o = 0;
      for (std::size_t k = 0; k + 1 < Q; ++k) o += x[k] * stride[k];
      row_ptr = base + o;
      inner = Q ? stride[Q - 1] : 0;
    } else {
      for (std::size_t k = 0; k < Q; ++k) row_x[k] = x[k];
      run_begin = run_end = 0;
    }
  }
  FUSE_HD compute_type get(index_t j) const {
    if (!may_be_general || folded) return to_compute<value_type>(row_ptr[j * inner]);
    ensure_run(j);
    return to_compute<value_type>(run_ptr[(j - run_begin) * run_stride]);
  }
  template <class L, bool Fast = false>
  FUSE_HD FUSE_FORCE_INLINE typename L::template vec<compute_type> load(index_t j, int n) const {
    if constexpr (Fast) return L::template load<value_type>(row_ptr + j);
    if (FUSE_LIKELY(all_folded() && inner == 1 && n == L::width)) return L::template load<value_type>(row_ptr + j);
    if (!all_folded()) return load_general<L>(j, n);
    return load_strided<L>(row_ptr + j * inner, inner, n);
  }
  FUSE_HD bool all_folded() const { return !may_be_general || folded; }
  /// Does the current row read contiguous memory (the executor's fastest loop)?
  FUSE_HD bool contiguous_row() const { return all_folded() && inner == 1; }
  /// f(*this): the leaves a row kernel may stage in shared memory (fuse/cuda/row_staging.hpp).
  template <class F>
  FUSE_HD void visit_row_leaves(F&& f) {
    f(*this);
  }
  template <class F>
  void for_each_leaf(F&& f, const index_array<Q>& ext) const {
    leaf_info info;
    info.elem_size = sizeof(T);
    info.folded = all_folded();
    if (info.folded) {
      info.base = base;
      info.stride = stride.data();
      detail::byte_range(base, ext, stride.data(), sizeof(T), info.lo, info.hi);
    } else {
      detail::byte_range(data, node_extent, node_stride.data(), sizeof(T), info.lo, info.hi);
    }
    f(info);
  }
  /// Re-expresses the folded strides over a transformed iteration space: new axis k walks the
  /// old axis pick[k] (or nothing when pick[k] < 0).
  void retarget(const index_array<Q>& pick) {
    index_array<Q> s{};
    for (std::size_t k = 0; k < Q; ++k) s[k] = pick[k] >= 0 ? stride[static_cast<std::size_t>(pick[k])] : 0;
    stride = s;
  }

 private:
  template <class L>
  FUSE_HD static typename L::template vec<compute_type> load_strided(const T* p, index_t step, int n) {
    if (step == 1) return n == L::width ? L::template load<value_type>(p) : L::template load_partial<value_type>(p, n);
    if (step == 0) return L::template splat<compute_type>(to_compute<value_type>(*p));
    return L::template load_strided<value_type>(p, step, n);
  }
  /// A leaf whose map did not fold: whole vectors while they fit in the current run.
  template <class L>
  FUSE_HD typename L::template vec<compute_type> load_general(index_t j, int n) const {
    ensure_run(j);
    if (j + n <= run_end) return load_strided<L>(run_ptr + (j - run_begin) * run_stride, run_stride, n);
    return load_by_lanes<L>(*this, j, n);
  }
};

template <class T, std::size_t Q, class Map>
leaf_eval<T, Q, Map> make_leaf(const T* data, const index_array<Map::out_rank>& extents,
                               const index_array<Map::out_rank>& strides, const Map& m) {
  leaf_eval<T, Q, Map> e;
  const strided<Q> f = fold(m, strides);
  e.folded = f.ok;
  e.data = data;
  e.node_stride = strides;
  e.node_extent = extents;
  if (f.ok) {
    e.base = data + f.offset;
    e.stride = f.stride;
  } else {
    if constexpr (leaf_eval<T, Q, Map>::may_be_general) e.gen = general_form<Map>::make(m, strides, 0);
  }
  return e;
}

/// A leaf that owns its storage: a reduction (or other node) evaluated ahead of the loop. The
/// storage (whatever the executor's context made it in) is shared, so copies of the evaluator
/// keep pointing at live memory.
template <class T, std::size_t Q, class Map>
struct owned_leaf_eval : leaf_eval<T, Q, Map> {
  std::shared_ptr<const void> storage;
};

/// A constant.
template <class T, std::size_t Q>
struct scalar_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  static constexpr std::size_t rank = Q;
  compute_type value{};
  FUSE_HD compute_type at(const index_t*) const { return value; }
  FUSE_HD void row(const index_t*) {}
  FUSE_HD compute_type get(index_t) const { return value; }
  template <class L, bool Fast = false>
  FUSE_HD FUSE_FORCE_INLINE typename L::template vec<compute_type> load(index_t, int) const {
    return L::template splat<compute_type>(value);
  }
  FUSE_HD bool all_folded() const { return true; }
  FUSE_HD bool contiguous_row() const { return true; }
  template <class F>
  void for_each_leaf(F&&, const index_array<Q>&) const {}
  void retarget(const index_array<Q>&) {}
};

// ---- elementwise -----------------------------------------------------------------------------------------------

/// Applies op to scalar compute values (every op has a scalar form for every compute type).
template <class Mode, class Op, class... C>
FUSE_HD auto apply_scalar(const Op& op, C... c) {
  return op.template apply<Mode>(c...);
}

/// Calls f(leaf) for each leaf evaluator of ev that reads along the row at the row's own
/// positions: itself if a leaf, through elementwise ops and casts, and through the row nodes'
/// evaluators (fuse/cuda/row_program.hpp). An evaluator without a visit_row_leaves member
/// (concatenate, take, a constant) is opaque. The CUDA row kernel stages these leaves' rows in
/// shared memory and points them there (fuse/cuda/row_staging.hpp).
template <class Ev, class F>
FUSE_HD void visit_row_leaves(Ev& ev, F&& f) {
  if constexpr (requires { ev.visit_row_leaves(f); }) ev.visit_row_leaves(f);
}

/// An elementwise op over child evaluators; `Mode` is the math mode (accurate / fast).
template <class Mode, class Op, class T, class... Ch>
struct map_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  using op_type = Op;
  static constexpr std::size_t rank = std::tuple_element_t<0, std::tuple<Ch...>>::rank;
  [[no_unique_address]] Op op;
  tuple<Ch...> ch;

  FUSE_HD compute_type at(const index_t* x) const {
    return eval_with([&](const auto& c) FUSE_LAMBDA_INLINE { return c.at(x); });
  }
  FUSE_HD void row(const index_t* x) {
    [&]<std::size_t... I>(std::index_sequence<I...>)
        FUSE_LAMBDA_INLINE { (fuse::get<I>(ch).row(x), ...); }(std::index_sequence_for<Ch...>{});
  }
  FUSE_HD compute_type get(index_t j) const {
    return eval_with([&](const auto& c) FUSE_LAMBDA_INLINE { return c.get(j); });
  }
  /// The op over its children's vectors: the lane family's vector form of the op, or its scalar
  /// form lane by lane where the op has none for these lanes (L::map decides).
  template <class L, bool Fast = false>
  FUSE_HD FUSE_FORCE_INLINE typename L::template vec<compute_type> load(index_t j, int n) const {
    return [&]<std::size_t... I>(std::index_sequence<I...>) FUSE_LAMBDA_INLINE ->
           typename L::template vec<compute_type> {
             if constexpr (ops::is_cast<Op>) {
               using From = typename std::tuple_element_t<0, std::tuple<Ch...>>::value_type;
               return L::template cast<typename Op::to, From>(fuse::get<0>(ch).template load<L, Fast>(j, n));
             } else {
               return L::template map<Mode, T>(op, fuse::get<I>(ch).template load<L, Fast>(j, n)...);
             }
           }(std::index_sequence_for<Ch...>{});
  }
  FUSE_HD bool all_folded() const {
    return [&]<std::size_t... I>(std::index_sequence<I...>)
               FUSE_LAMBDA_INLINE { return (fuse::get<I>(ch).all_folded() && ...); }(std::index_sequence_for<Ch...>{});
  }
  FUSE_HD bool contiguous_row() const {
    return [&]<std::size_t... I>(std::index_sequence<I...>) FUSE_LAMBDA_INLINE {
      return (fuse::get<I>(ch).contiguous_row() && ...);
    }(std::index_sequence_for<Ch...>{});
  }
  template <class F>
  void for_each_leaf(F&& f, const index_array<rank>& ext) const {
    [&]<std::size_t... I>(std::index_sequence<I...>)
        FUSE_LAMBDA_INLINE { (fuse::get<I>(ch).for_each_leaf(f, ext), ...); }(std::index_sequence_for<Ch...>{});
  }
  /// The children's: an op reads its operands at its own positions.
  template <class F>
  FUSE_HD void visit_row_leaves(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>)
        FUSE_LAMBDA_INLINE { (bind::visit_row_leaves(fuse::get<I>(ch), f), ...); }(std::index_sequence_for<Ch...>{});
  }
  void retarget(const index_array<rank>& pick) {
    [&]<std::size_t... I>(std::index_sequence<I...>)
        FUSE_LAMBDA_INLINE { (fuse::get<I>(ch).retarget(pick), ...); }(std::index_sequence_for<Ch...>{});
  }

 private:
  template <class F>
  FUSE_HD compute_type eval_with(F&& value_of) const {
    return [&]<std::size_t... I>(std::index_sequence<I...>) FUSE_LAMBDA_INLINE -> compute_type {
      if constexpr (ops::is_cast<Op>) {
        using From = typename std::tuple_element_t<0, std::tuple<Ch...>>::value_type;
        return convert_value<typename Op::to, From>(value_of(fuse::get<0>(ch)));
      } else {
        return canonical<T>(static_cast<compute_type>(apply_scalar<Mode>(op, value_of(fuse::get<I>(ch))...)));
      }
    }(std::index_sequence_for<Ch...>{});
  }
};

// ---- concatenate and take ---------------------------------------------------------------------------------------

/// Children of a concatenate; `Map` gives the concatenate's coordinates (to find the child).
template <class T, std::size_t Q, class Map, class... Ch>
struct concat_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  static constexpr std::size_t rank = Q;
  static constexpr std::size_t count = sizeof...(Ch);
  tuple<Ch...> ch;
  Map map;
  index_t axis = 0;
  index_array<count + 1> offsets{};
  // Under an affine map the concatenated coordinate is axis_base + sum_k axis_coef[k] * x[k]
  // (set by bind): computed from x at constant indices, where map.apply followed by c[axis]
  // would index arrays by a run-time value, which puts them in local memory in a kernel.
  index_array<Q> axis_coef{};
  index_t axis_base = 0;
  // Row state: the child every element of the row falls in, or -1 when it varies along the row.
  int row_child = -1;
  index_array<Q> row_x{};

  FUSE_HD index_t axis_coordinate(const index_t* x) const {
    if constexpr (is_affine_map<Map>::value) {
      index_t a = axis_base;
      for (std::size_t k = 0; k < Q; ++k) a += axis_coef[k] * x[k];
      return a;
    } else {
      index_t c[Map::out_rank];
      map.apply(x, c);
      return c[axis];
    }
  }
  /// Does the concatenated coordinate move along the row (the last iteration axis)?
  FUSE_HD bool axis_moves_along_row() const {
    if constexpr (Q == 0) return false;
    else if constexpr (is_affine_map<Map>::value) return axis_coef[Q - 1] != 0;
    else return map.depends(static_cast<std::size_t>(axis), Q - 1);
  }
  FUSE_HD int child_of(const index_t* x) const {
    const index_t a = axis_coordinate(x);
    // The last child whose offset a reaches (offsets ascend), by a loop of constant bounds: an
    // index found by a while loop would put `offsets` in local memory in a kernel.
    int i = 0;
    for (std::size_t k = 1; k < count; ++k)
      if (a >= offsets[k]) i = static_cast<int>(k);
    return i;
  }
  template <class F>
  FUSE_HD compute_type dispatch(int i, F&& f) const {
    compute_type r{};
    [&]<std::size_t... I>(std::index_sequence<I...>) FUSE_LAMBDA_INLINE {
      ((static_cast<int>(I) == i ? (void)(r = f(fuse::get<I>(ch))) : (void)0), ...);
    }(std::index_sequence_for<Ch...>{});
    return r;
  }
  FUSE_HD compute_type at(const index_t* x) const {
    return dispatch(child_of(x), [&](const auto& c) FUSE_LAMBDA_INLINE { return c.at(x); });
  }
  FUSE_HD void row(const index_t* x) {
    [&]<std::size_t... I>(std::index_sequence<I...>)
        FUSE_LAMBDA_INLINE { (fuse::get<I>(ch).row(x), ...); }(std::index_sequence_for<Ch...>{});
    for (std::size_t k = 0; k < Q; ++k) row_x[k] = x[k];
    row_child = axis_moves_along_row() ? -1 : child_of(x);
  }
  FUSE_HD int child_at(index_t j) const {
    if (row_child >= 0) return row_child;
    index_array<Q> x = row_x;
    x[Q - 1] = j;
    return child_of(x.data());
  }
  FUSE_HD compute_type get(index_t j) const {
    return dispatch(child_at(j), [&](const auto& c) FUSE_LAMBDA_INLINE { return c.get(j); });
  }
  /// The child's vector when the whole vector lies in one child, else lane by lane.
  template <class L, bool Fast = false>
  FUSE_HD typename L::template vec<compute_type> load(index_t j, int n) const {
    const int first = child_at(j);
    // Along the row the concatenated axis moves monotonically under an affine map, so equal
    // children at both ends mean one child throughout; under a reshape it may not.
    if (row_child < 0 && (!is_affine_map<Map>::value || child_at(j + n - 1) != first))
      return load_by_lanes<L>(*this, j, n);
    typename L::template vec<compute_type> r{};
    [&]<std::size_t... I>(std::index_sequence<I...>) FUSE_LAMBDA_INLINE {
      ((static_cast<int>(I) == first ? (void)(r = fuse::get<I>(ch).template load<L>(j, n)) : (void)0), ...);
    }(std::index_sequence_for<Ch...>{});
    return r;
  }
  FUSE_HD bool all_folded() const { return false; }  // keeps the iteration space as it is
  FUSE_HD bool contiguous_row() const { return false; }
  /// Each child's leaves over the part of the iteration space that reads it: over all of it,
  /// a child's folded leaf would seem to reach memory before and after its own (its map is
  /// shifted by the child's offset), which the executors would take for an overlap with an
  /// output. Under a reshape, or where the concatenated coordinate moves with several axes,
  /// every child over all of it (an overlap is then assumed where there may be none).
  template <class F>
  void for_each_leaf(F&& f, const index_array<Q>& ext) const {
    int moving = -1, movers = 0;
    if constexpr (is_affine_map<Map>::value)
      for (std::size_t k = 0; k < Q; ++k)
        if (axis_coef[k] != 0 && ext[k] > 1) moving = static_cast<int>(k), ++movers;
    if (!is_affine_map<Map>::value || movers > 1) {
      [&]<std::size_t... I>(std::index_sequence<I...>)
          FUSE_LAMBDA_INLINE { (fuse::get<I>(ch).for_each_leaf(f, ext), ...); }(std::index_sequence_for<Ch...>{});
      return;
    }
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&](const auto& child, std::size_t i) {
            // The iteration points [first, first + count) of the moving axis that read child i.
            index_t first = 0, count = 1;
            if (moving < 0) {
              count = (product(ext) > 0 && child_of(index_array<Q>{}.data()) == static_cast<int>(i)) ? 1 : 0;
            } else {
              const index_t c = axis_coef[static_cast<std::size_t>(moving)], n = ext[static_cast<std::size_t>(moving)];
              const index_t lo = offsets[i] - axis_base, hi = offsets[i + 1] - axis_base;
              auto floor_div = [](index_t u, index_t v) { return u / v - ((u % v != 0) && ((u < 0) != (v < 0))); };
              // c * x in [lo, hi): x in [ceil(lo / c), ceil(hi / c)) for c > 0; for c < 0,
              // x in (-hi / |c|, -lo / |c|], that is [floor(-hi / |c|) + 1, floor(-lo / |c|) + 1).
              index_t a = c > 0 ? -floor_div(-lo, c) : floor_div(-hi, -c) + 1;
              index_t b = c > 0 ? -floor_div(-hi, c) : floor_div(-lo, -c) + 1;
              a = a < 0 ? 0 : (a > n ? n : a);
              b = b < a ? a : (b > n ? n : b);
              first = a;
              count = b - a;
            }
            if (count == 0) return;
            index_array<Q> sub = ext;
            if (moving >= 0) sub[static_cast<std::size_t>(moving)] = count;
            // (the child is asked over all of ext, its own coordinates; a folded leaf's range is
            // then narrowed to this part: a concatenation inside reports its parts' leaves, whose
            // ranges this only widens to child i's part)
            child.for_each_leaf(
                [&](leaf_info l) {
                  if (l.folded && moving >= 0) {
                    const auto* b = static_cast<const unsigned char*>(l.base) +
                                    first * l.stride[moving] * static_cast<index_t>(l.elem_size);
                    detail::byte_range(b, sub, l.stride, l.elem_size, l.lo, l.hi);
                  }
                  f(l);
                },
                ext);
          }(fuse::get<I>(ch), I),
          ...);
    }(std::index_sequence_for<Ch...>{});
  }
  void retarget(const index_array<Q>&) {}
};

/// take: `idx` is bound in the iteration space (it is an ordinary operand); `data` is bound in
/// its own coordinates and read at (pre..., index, post...).
template <class T, std::size_t Q, class Map, class DataEv, class IdxEv>
struct take_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  static constexpr std::size_t rank = Q;
  static constexpr std::size_t node_rank = Map::out_rank;
  static constexpr std::size_t data_rank = DataEv::rank;
  static constexpr std::size_t idx_rank = node_rank + 1 - data_rank;
  DataEv data;
  IdxEv idx;
  Map map;
  index_t axis = 0;
  index_t extent = 0;  // of data along axis
  index_array<data_rank> data_extent{};
  take_mode mode = take_mode::clip;
  index_array<Q> row_x{};

  FUSE_HD index_t normalize(index_t i) const {
    if (mode == take_mode::wrap) {
      i %= extent;
      return i < 0 ? i + extent : i;
    }
    return i < 0 ? 0 : (i >= extent ? extent - 1 : i);
  }
  FUSE_HD compute_type read(const index_t* x, index_t i) const {
    index_t t[node_rank > 0 ? node_rank : 1];
    map.apply(x, t);
    index_t dc[data_rank];
    const auto a = static_cast<std::size_t>(axis);
    for (std::size_t d = 0; d < a; ++d) dc[d] = t[d];
    dc[a] = normalize(i);
    for (std::size_t d = a + 1; d < data_rank; ++d) dc[d] = t[d - 1 + idx_rank];
    return data.at(dc);
  }
  FUSE_HD compute_type at(const index_t* x) const { return read(x, static_cast<index_t>(idx.at(x))); }
  FUSE_HD void row(const index_t* x) {
    idx.row(x);
    for (std::size_t k = 0; k < Q; ++k) row_x[k] = x[k];
  }
  FUSE_HD compute_type get(index_t j) const {
    index_array<Q> x = row_x;
    x[Q - 1] = j;
    return read(x.data(), static_cast<index_t>(idx.get(j)));
  }
  /// A gather through the data's own coordinates: lane by lane.
  template <class L, bool Fast = false>
  FUSE_HD typename L::template vec<compute_type> load(index_t j, int n) const {
    return load_by_lanes<L>(*this, j, n);
  }
  FUSE_HD bool all_folded() const { return false; }
  FUSE_HD bool contiguous_row() const { return false; }
  template <class F>
  void for_each_leaf(F&& f, const index_array<Q>& ext) const {
    idx.for_each_leaf(f, ext);
    data.for_each_leaf(f, data_extent);
  }
  void retarget(const index_array<Q>&) {}
};

}  // namespace fuse::bind
