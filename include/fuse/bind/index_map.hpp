// Index maps from an executor's iteration space (the output's coordinates, rank Q) to the
// coordinates of a node inside the expression tree.
//
// Binding walks the tree from the root and composes, on the way down, each node's view of its
// children: broadcasting and the affine views give `affine_map`s; a reshape appends a
// `reshape_map` step (linearise in one shape, delinearise in another). At a leaf the composed
// map is folded into plain strides over the iteration space whenever the memory layout allows
// (always for affine maps; for reshapes when the strides merge and split as NumPy's reshape
// without copy requires). Only a leaf whose map cannot fold keeps the map and evaluates it per
// element.
//
// Device-ready (FUSE_HD): the CUDA executor walks the same maps.
#pragma once

#include <cstddef>
#include <type_traits>

#include "fuse/core/shape.hpp"
#include "fuse/expr/views.hpp"

namespace fuse::bind {

/// node[d] = offset[d] + scale[d] * x[src[d]] (src[d] < 0: offset[d]); x has rank Q.
template <std::size_t Q, std::size_t R>
struct affine_map {
  static constexpr std::size_t in_rank = Q;
  static constexpr std::size_t out_rank = R;
  index_array<R> src{}, scale{}, offset{};

  FUSE_HD void apply(const index_t* x, index_t* node) const {
    for (std::size_t d = 0; d < R; ++d) node[d] = offset[d] + (src[d] >= 0 ? scale[d] * x[src[d]] : 0);
  }
  /// Does node coordinate d move when input coordinate k does?
  FUSE_HD bool depends(std::size_t d, std::size_t k) const {
    return src[d] == static_cast<index_t>(k) && scale[d] != 0;
  }

  static affine_map identity() {
    affine_map m;
    for (std::size_t d = 0; d < R; ++d) m.src[d] = static_cast<index_t>(d), m.scale[d] = 1;
    return m;
  }
  /// Broadcasting a node of extents `from` (rank R) against an iteration space of extents `to`
  /// (rank Q >= R): trailing axes align, extent-1 axes stay at 0.
  static affine_map broadcast(const index_array<R>& from, const index_array<Q>& to) {
    affine_map m;
    for (std::size_t d = 0; d < R; ++d) {
      if (from[d] == 1) {
        m.src[d] = -1;
      } else {
        m.src[d] = static_cast<index_t>(Q - R + d);
        m.scale[d] = 1;
      }
    }
    (void)to;
    return m;
  }
};

/// x -> prev -> (coordinates of extents `mid`) -> row-major linear index -> coordinates of
/// extents `inner` -> post -> node.
template <class Prev, std::size_t Rm, std::size_t Rc, std::size_t R>
struct reshape_map {
  static constexpr std::size_t in_rank = Prev::in_rank;
  static constexpr std::size_t out_rank = R;
  Prev prev;
  index_array<Rm> mid{};
  index_array<Rc> inner{};
  affine_map<Rc, R> post;

  FUSE_HD void apply(const index_t* x, index_t* node) const {
    index_t m[Rm > 0 ? Rm : 1];
    prev.apply(x, m);
    index_t lin = 0;
    for (std::size_t i = 0; i < Rm; ++i) lin = lin * mid[i] + m[i];
    index_t c[Rc > 0 ? Rc : 1];
    for (std::size_t i = Rc; i-- > 0;) {
      c[i] = inner[i] ? lin % inner[i] : 0;
      lin = inner[i] ? lin / inner[i] : 0;
    }
    post.apply(c, node);
  }
  FUSE_HD bool depends(std::size_t, std::size_t) const { return true; }  // conservatively
};

template <class M>
struct is_affine_map : std::false_type {};
template <std::size_t Q, std::size_t R>
struct is_affine_map<affine_map<Q, R>> : std::true_type {};

// ---- composition ---------------------------------------------------------------------------------------

/// m followed by a view's axis_map `a` (from m's node coordinates to the child's).
template <std::size_t Q, std::size_t R, std::size_t Rc>
affine_map<Q, Rc> compose(const affine_map<Q, R>& m, const axis_map<Rc>& a) {
  affine_map<Q, Rc> c;
  for (std::size_t d = 0; d < Rc; ++d) {
    c.offset[d] = a.offset[d];
    c.src[d] = -1;
    const index_t k = a.src[d];
    if (k < 0) continue;
    const auto kk = static_cast<std::size_t>(k);
    c.offset[d] += a.scale[d] * m.offset[kk];
    if (m.src[kk] >= 0 && a.scale[d] * m.scale[kk] != 0) {
      c.src[d] = m.src[kk];
      c.scale[d] = a.scale[d] * m.scale[kk];
    }
  }
  return c;
}
template <class P, std::size_t Rm, std::size_t Rc, std::size_t R, std::size_t Rn>
reshape_map<P, Rm, Rc, Rn> compose(const reshape_map<P, Rm, Rc, R>& m, const axis_map<Rn>& a) {
  return {m.prev, m.mid, m.inner, compose(m.post, a)};
}

/// m followed by a reshape from extents `mid` (m's node) to extents `inner`.
template <class M, std::size_t Rc>
reshape_map<M, M::out_rank, Rc, Rc> then_reshape(const M& m, const index_array<M::out_rank>& mid,
                                                 const index_array<Rc>& inner) {
  return {m, mid, inner, affine_map<Rc, Rc>::identity()};
}

/// The axis_map that broadcasts an operand of extents `from` (rank Rc) inside a node of extents
/// `to` (rank R).
template <std::size_t Rc, std::size_t R>
axis_map<Rc> broadcast_axes(const index_array<Rc>& from, const index_array<R>& to) {
  const auto m = affine_map<R, Rc>::broadcast(from, to);
  return {m.src, m.scale, m.offset};
}

// ---- folding into strides ----------------------------------------------------------------------------------

/// Strides over some coordinates plus a base offset, all in elements.
template <std::size_t Q>
struct strided {
  bool ok = false;
  index_t offset = 0;
  index_array<Q> stride{};
};

namespace detail {

/// NumPy's reshape without copy: strides for extents `to` that address the same elements as
/// `from_stride` does for extents `from` (same row-major order), when they exist.
template <std::size_t F, std::size_t T>
bool reshape_strides(const index_array<F>& from, const index_array<F>& from_stride, const index_array<T>& to,
                     index_array<T>& to_stride) {
  to_stride = index_array<T>{};
  if (product(from) == 0) return true;  // nothing is ever addressed
  std::size_t i = 0, j = 0;
  while (i < F || j < T) {
    // Extent-1 axes take no part in the layout.
    if (i < F && from[i] == 1) {
      ++i;
      continue;
    }
    if (j < T && to[j] == 1) {
      to_stride[j++] = 0;
      continue;
    }
    if (i >= F || j >= T) return false;
    // Grow a group on each side until the products agree.
    std::size_t i0 = i, j0 = j;
    index_t pf = from[i++], pt = to[j++];
    while (pf != pt) {
      if (pf < pt) {
        if (i >= F) return false;
        pf *= from[i++];
      } else {
        if (j >= T) return false;
        pt *= to[j++];
      }
    }
    // The source group must be one contiguous run (skipping extent-1 axes).
    std::size_t last = i0;
    for (std::size_t k = i0 + 1; k < i; ++k) {
      if (from[k] == 1) continue;
      if (from_stride[last] != from_stride[k] * from[k]) return false;
      last = k;
    }
    // Its innermost stride steps the innermost target axis; outer ones follow.
    index_t s = from_stride[last];
    for (std::size_t k = j; k-- > j0;) {
      to_stride[k] = s;
      s *= to[k];
    }
  }
  return true;
}

/// A reshape (mid -> inner) some of whose `mid` coordinates are pinned (pinned[i]: coordinate
/// i is always at[i]), the others free anywhere in their extent, as strides over mid and an
/// offset, given strides over inner: when every free axis moves the inner digits without a
/// carry whatever the others do. A block of one batch of reshape(transpose(x)) so: the batch
/// index of [96, 384, 64] is pinned, its digits in [8, 12, 384, 64] are fixed, and rows and
/// columns step digits of their own (the whole reshape does not fold: 96 merges axes that are
/// not adjacent in memory).
template <std::size_t F, std::size_t T>
bool pinned_reshape_strides(const index_array<F>& mid, const bool* pinned, const index_array<F>& at,
                            const index_array<T>& inner, const index_array<T>& inner_stride, index_array<F>& mid_stride,
                            index_t& offset) {
  mid_stride = index_array<F>{};
  index_t mul[F > 0 ? F : 1], lin0 = 0;
  for (std::size_t i = F, m = 1; i-- > 0;) {
    mul[i] = static_cast<index_t>(m);
    m *= static_cast<std::size_t>(mid[i]);
    if (pinned[i]) lin0 += at[i] * mul[i];
  }
  index_t weight[T > 0 ? T : 1], digit[T > 0 ? T : 1], reach[T > 0 ? T : 1];
  for (std::size_t t = T, w = 1; t-- > 0;) {
    weight[t] = static_cast<index_t>(w);
    w *= static_cast<std::size_t>(inner[t]);
    digit[t] = inner[t] ? (lin0 / weight[t]) % inner[t] : 0;
    reach[t] = digit[t];  // the largest value the digit takes so far
  }
  offset = 0;
  for (std::size_t t = 0; t < T; ++t) offset += digit[t] * inner_stride[t];
  for (std::size_t i = 0; i < F; ++i) {
    if (pinned[i] || mid[i] <= 1) continue;
    // The finest digit whose weight divides the axis's step, stepped q at a time.
    bool placed = false;
    for (std::size_t t = T; t-- > 0 && !placed;) {
      if (mul[i] % weight[t] != 0 || mul[i] / weight[t] >= inner[t]) continue;  // (a coarser digit's step)
      const index_t q = mul[i] / weight[t];
      if (reach[t] + q * (mid[i] - 1) >= inner[t]) return false;
      reach[t] += q * (mid[i] - 1);
      mid_stride[i] = q * inner_stride[t];
      placed = true;
    }
    if (!placed) return false;
  }
  return true;
}

}  // namespace detail

/// Folds map `m` followed by strides `s` over its node coordinates into strides over m's input
/// coordinates; `ok` is false when a reshape step cannot be expressed with strides.
template <std::size_t Q, std::size_t R>
strided<Q> fold(const affine_map<Q, R>& m, const index_array<R>& s) {
  strided<Q> r;
  r.ok = true;
  for (std::size_t d = 0; d < R; ++d) {
    r.offset += m.offset[d] * s[d];
    if (m.src[d] >= 0) r.stride[static_cast<std::size_t>(m.src[d])] += m.scale[d] * s[d];
  }
  return r;
}
template <class P, std::size_t Rm, std::size_t Rc, std::size_t R>
strided<P::in_rank> fold(const reshape_map<P, Rm, Rc, R>& m, const index_array<R>& s) {
  const strided<Rc> post = fold(m.post, s);
  index_array<Rm> mid_stride{};
  index_t pinned_offset = 0;
  if (!detail::reshape_strides(m.inner, post.stride, m.mid, mid_stride)) {
    // Where the map before the reshape pins some coordinates (a block of one batch), the
    // reshape may still fold over the coordinates left free.
    if constexpr (!is_affine_map<P>::value) {
      return {};
    } else {
      bool pinned[Rm > 0 ? Rm : 1] = {};
      bool any = false;
      for (std::size_t i = 0; i < Rm; ++i) any = any || (pinned[i] = m.prev.src[i] < 0 || m.prev.scale[i] == 0);
      if (!any || !detail::pinned_reshape_strides(m.mid, pinned, m.prev.offset, m.inner, post.stride, mid_stride,
                                                  pinned_offset))
        return {};
    }
  }
  strided<P::in_rank> r = fold(m.prev, mid_stride);
  r.offset += post.offset + pinned_offset;
  return r;
}

// ---- runs: where an unfoldable map is still affine along a row --------------------------------------------

/// Elements x[Q-1] = j, j+1, ..., j+length-1 of a row lie at offset + i * stride.
struct run {
  index_t offset = 0, stride = 0, length = 1;
};

/// The general case: one element at a time.
template <class Map, std::size_t R>
FUSE_HD run row_run(const Map& m, const index_array<R>& s, const index_t* x) {
  index_t c[R > 0 ? R : 1];
  m.apply(x, c);
  run r;
  for (std::size_t d = 0; d < R; ++d) r.offset += c[d] * s[d];
  return r;
}

/// One reshape after an affine map (reshape(transpose(x)) and the like): along the row the
/// linear index moves by a constant dL, so the reshaped coordinates are affine until the digit
/// that dL moves wraps around.
template <std::size_t Q, std::size_t Rm, std::size_t Rc, std::size_t R>
FUSE_HD run row_run(const reshape_map<affine_map<Q, Rm>, Rm, Rc, R>& m, const index_array<R>& s, const index_t* x) {
  const strided<Rc> post = fold(m.post, s);
  index_t mid[Rm > 0 ? Rm : 1];
  m.prev.apply(x, mid);
  index_t lin = 0, dl = 0, mul = 1;
  for (std::size_t i = Rm; i-- > 0;) {
    lin += mid[i] * mul;
    if (m.prev.src[i] == static_cast<index_t>(Q - 1)) dl += m.prev.scale[i] * mul;
    mul *= m.mid[i];
  }
  index_t c[Rc > 0 ? Rc : 1];
  for (std::size_t t = Rc; t-- > 0;) {
    c[t] = m.inner[t] ? lin % m.inner[t] : 0;
    lin = m.inner[t] ? lin / m.inner[t] : 0;
  }
  run r;
  r.offset = post.offset;
  for (std::size_t t = 0; t < Rc; ++t) r.offset += c[t] * post.stride[t];
  if (dl == 0) {
    r.length = index_t{1} << 62;
    return r;
  }
  if (dl < 0) return r;
  index_t p = 1;  // product of the extents finer than digit t
  for (std::size_t t = Rc; t-- > 0;) {
    if (dl % p == 0 && dl / p < m.inner[t]) {
      const index_t q = dl / p;
      r.stride = q * post.stride[t];
      r.length = (m.inner[t] - 1 - c[t]) / q + 1;
      return r;
    }
    p *= m.inner[t];
  }
  return r;
}

}  // namespace fuse::bind
