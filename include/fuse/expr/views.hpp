// Views: split, strided_slice, reshape, squeeze, expand_dims, transpose, broadcast_to,
// concatenate, take. Every one is an index map; none copies.
//
// Affine views (all but reshape, concatenate and take) are described by an `axis_map`: each
// child coordinate is offset + scale * (one output coordinate) or a constant. Applied to a
// tensor_view they simply make another tensor_view (new data pointer and strides); applied to
// any other node they make an `affine_view`, and an affine view of an affine view collapses
// into one. reshape, concatenate and take are nodes of their own; the executor folds reshape
// into strides whenever the memory layout allows (as NumPy's reshape without copy does).
//
// Semantics follow Relay's ops (attributes, negative axes, reshape's special codes); see
// docs/ops.md. Bad axes, sections or codes throw fuse::shape_error naming the op and shapes.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>
#include <tuple>
#include <utility>
#include <vector>

#include "fuse/core/error.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/expr/broadcast.hpp"
#include "fuse/expr/node.hpp"

namespace fuse {

/// child[d] = offset[d] + scale[d] * out[src[d]], or offset[d] when src[d] < 0.
template <std::size_t Rc>
struct axis_map {
  index_array<Rc> src{}, scale{}, offset{};
};

/// An affine index map applied to a node that is not a tensor_view.
template <class Child, std::size_t R>
struct affine_view {
  using child_type = Child;
  using value_type = typename Child::value_type;
  using shape_type = dynamic_shape<R>;
  static constexpr std::size_t rank = R;
  static constexpr bool is_fuse_expr = true;
  static constexpr node_kind kind_tag = node_kind::affine_view;

  Child child;
  shape_type shape_;
  axis_map<Child::rank> map;

  FUSE_HD constexpr shape_type shape() const { return shape_; }
  FUSE_HD constexpr tuple<const Child&> children() const { return tuple<const Child&>(child); }
  template <class C>
  auto with_children(C&& c) const {
    return affine_view<std::remove_cvref_t<C>, R>{static_cast<C&&>(c), shape_, map};
  }
};

/// Reshape of a node: row-major linear order is kept.
template <class Child, std::size_t R>
struct reshape_view {
  using child_type = Child;
  using value_type = typename Child::value_type;
  using shape_type = dynamic_shape<R>;
  static constexpr std::size_t rank = R;
  static constexpr bool is_fuse_expr = true;
  static constexpr node_kind kind_tag = node_kind::reshape_view;

  Child child;
  shape_type shape_;

  FUSE_HD constexpr shape_type shape() const { return shape_; }
  FUSE_HD constexpr tuple<const Child&> children() const { return tuple<const Child&>(child); }
  template <class C>
  auto with_children(C&& c) const {
    return reshape_view<std::remove_cvref_t<C>, R>{static_cast<C&&>(c), shape_};
  }
};

/// Children joined along `axis`; child i covers [offsets[i], offsets[i+1]) of that axis.
template <class... C>
struct concat_expr {
  using value_type = typename std::tuple_element_t<0, std::tuple<C...>>::value_type;
  static constexpr std::size_t rank = std::tuple_element_t<0, std::tuple<C...>>::rank;
  using shape_type = dynamic_shape<rank>;
  static constexpr bool is_fuse_expr = true;
  static constexpr std::size_t count = sizeof...(C);
  static constexpr node_kind kind_tag = node_kind::concatenate;

  tuple<C...> parts;
  shape_type shape_;
  index_t axis = 0;
  index_array<sizeof...(C) + 1> offsets{};

  FUSE_HD constexpr shape_type shape() const { return shape_; }
  FUSE_HD constexpr tuple<const C&...> children() const { return refs_of(parts); }
  template <class... N>
  auto with_children(N&&... c) const {
    return concat_expr<std::remove_cvref_t<N>...>{tuple<std::remove_cvref_t<N>...>(static_cast<N&&>(c)...), shape_,
                                                  axis, offsets};
  }
};

/// How take treats out-of-range indices (Relay's `mode`).
enum class take_mode : std::uint8_t {
  clip,  ///< clamp into [0, n-1] (Relay's default)
  wrap,  ///< index modulo n (negative indices count from the end)
  fast,  ///< Relay leaves out-of-range indices undefined; fuse clamps them as clip does
};

/// take(data, indices, axis): out[pre..., idx..., post...] = data[pre..., indices[idx...], post...].
template <class Data, class Indices>
struct take_expr {
  using value_type = typename Data::value_type;
  static constexpr std::size_t rank = Data::rank - 1 + Indices::rank;
  using shape_type = dynamic_shape<rank>;
  static constexpr bool is_fuse_expr = true;
  static constexpr node_kind kind_tag = node_kind::take;

  Data data;
  Indices indices;
  shape_type shape_;
  index_t axis = 0;
  take_mode mode = take_mode::clip;

  FUSE_HD constexpr shape_type shape() const { return shape_; }
  FUSE_HD constexpr tuple<const Data&, const Indices&> children() const {
    return tuple<const Data&, const Indices&>(data, indices);
  }
  template <class D, class I>
  auto with_children(D&& d, I&& i) const {
    return take_expr<std::remove_cvref_t<D>, std::remove_cvref_t<I>>{static_cast<D&&>(d), static_cast<I&&>(i), shape_,
                                                                     axis, mode};
  }
};

template <class T>
struct is_affine_view : std::false_type {};
template <class C, std::size_t R>
struct is_affine_view<affine_view<C, R>> : std::true_type {};
template <class T>
struct is_reshape_view : std::false_type {};
template <class C, std::size_t R>
struct is_reshape_view<reshape_view<C, R>> : std::true_type {};
template <class T>
struct is_concat_expr : std::false_type {};
template <class... C>
struct is_concat_expr<concat_expr<C...>> : std::true_type {};
template <class T>
struct is_take_expr : std::false_type {};
template <class D, class I>
struct is_take_expr<take_expr<D, I>> : std::true_type {};

// ---- applying an affine map ---------------------------------------------------------------------

namespace detail {

/// The node a view operand becomes: like as_expr, but a non-const tensor or view stays writable
/// (so that `fuse::transpose(out_view)` can be evaluated into).
template <class X>
decltype(auto) view_operand(X&& x) {
  using D = std::remove_cvref_t<X>;
  if constexpr (is_tensor<D>::value && std::is_lvalue_reference_v<X> && !std::is_const_v<std::remove_reference_t<X>>)
    return x.view();
  else if constexpr (is_tensor_view<D>::value) return D(x);
  else return as_expr(static_cast<X&&>(x));
}

template <class T, auto E, class M, std::size_t R>
tensor_view<T, static_cast<int>(R), M> map_view(const tensor_view<T, E, M>& v, const dynamic_shape<R>& out,
                                                const axis_map<tensor_view<T, E, M>::rank>& m) {
  constexpr std::size_t Rc = tensor_view<T, E, M>::rank;
  index_array<R> strides{};
  index_t offset = 0;
  for (std::size_t d = 0; d < Rc; ++d) {
    offset += m.offset[d] * v.stride(d);
    if (m.src[d] >= 0) strides[static_cast<std::size_t>(m.src[d])] += m.scale[d] * v.stride(d);
  }
  // An empty view never dereferences its pointer: do not form an out-of-range one.
  T* p = out.size() == 0 ? v.data() : v.data() + offset;
  return {p, out, strides};
}

}  // namespace detail

/// Applies `m` (from coordinates of shape `out` to coordinates of x) to node x.
template <expression X, std::size_t R>
auto apply_axis_map(const X& x, const dynamic_shape<R>& out, const axis_map<X::rank>& m) {
  if constexpr (is_tensor_view<X>::value) {
    return detail::map_view(x, out, m);
  } else if constexpr (is_affine_view<X>::value) {
    // Compose: x.child[d] = x.off[d] + x.scale[d] * xout[x.src[d]], xout[k] = m.off[k] + m.scale[k] * out[m.src[k]].
    using C = typename X::child_type;
    axis_map<C::rank> c{};
    for (std::size_t d = 0; d < C::rank; ++d) {
      const index_t k = x.map.src[d];
      c.offset[d] = x.map.offset[d];
      c.src[d] = -1;
      if (k < 0) continue;
      const auto kk = static_cast<std::size_t>(k);
      c.offset[d] += x.map.scale[d] * m.offset[kk];
      c.src[d] = m.src[kk];
      c.scale[d] = m.src[kk] >= 0 ? x.map.scale[d] * m.scale[kk] : 0;
    }
    return affine_view<C, R>{x.child, out, c};
  } else {
    return affine_view<X, R>{x, out, m};
  }
}

namespace detail {
template <std::size_t R>
index_t normalize_axis(index_t axis, const char* op, const index_array<R>& s, index_t rank_for_axis = R) {
  const index_t a = axis < 0 ? axis + rank_for_axis : axis;
  if (a < 0 || a >= rank_for_axis) throw_shape_error(op, ": axis ", axis, " is out of range for shape ", s);
  return a;
}
template <std::size_t Rc>
axis_map<Rc> identity_map() {
  axis_map<Rc> m{};
  for (std::size_t d = 0; d < Rc; ++d) m.src[d] = static_cast<index_t>(d), m.scale[d] = 1;
  return m;
}
}  // namespace detail

// ---- transpose -----------------------------------------------------------------------------------

/// transpose(x, axes): output axis k is input axis axes[k] (negative axes count from the end).
template <class X, std::size_t N>
  requires expr_operand<X>
auto transpose(X&& x_, const index_t (&axes)[N]) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using E = decltype(x);
  constexpr std::size_t R = E::rank;
  static_assert(N == R, "fuse::transpose: give one axis per dimension of the operand");
  const auto in = x.shape().array();
  axis_map<R> m{};
  dynamic_shape<R> out{};
  bool seen[R > 0 ? R : 1] = {};
  for (std::size_t k = 0; k < R; ++k) {
    const auto d = static_cast<std::size_t>(detail::normalize_axis(axes[k], "transpose", in));
    if (seen[d]) throw_shape_error("transpose: axes repeat axis ", axes[k], " for shape ", in);
    seen[d] = true;
    m.src[d] = static_cast<index_t>(k);
    m.scale[d] = 1;
    out[k] = in[d];
  }
  return apply_axis_map(x, out, m);
}
/// transpose(x): reverses the axes (Relay's axes=None).
template <class X>
  requires expr_operand<X>
auto transpose(X&& x_) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  constexpr std::size_t R = decltype(x)::rank;
  index_t axes[R > 0 ? R : 1];
  for (std::size_t k = 0; k < R; ++k) axes[k] = static_cast<index_t>(R - 1 - k);
  if constexpr (R == 0) return x;
  else return transpose(x, reinterpret_cast<const index_t(&)[R]>(axes));
}

// ---- strided_slice and split ---------------------------------------------------------------------

/// One axis of a slice after Relay's canonicalisation: first index, step, count.
struct slice_axis {
  index_t begin = 0, stride = 1, count = 0;
};

namespace detail {
/// Relay's slicing of one axis of extent n (topi's CanonicalizeIndex): a negative begin or end
/// counts from the end, then both are clamped to [0, n] (stride > 0) or [-1, n-1] (stride < 0).
/// A range that runs against the stride is an error in Relay, and here too. Size mode (Relay's
/// slice_mode="size"): `end` is a count (negative: to the end) and the stride is 1; unlike TVM,
/// which adds the size to the un-normalised begin, fuse adds it to the normalised one, so
/// begin=-1, size=1 takes the last element instead of failing.
template <std::size_t R>
slice_axis canonical_slice(index_t n, index_t begin, index_t end, index_t stride, bool end_is_size, std::size_t axis,
                           const index_array<R>& in) {
  slice_axis s{};
  if (end_is_size) {
    if (begin < 0) begin += n;
    begin = begin < 0 ? 0 : (begin > n ? n : begin);
    const index_t stop = (end < 0 || end > n - begin) ? n : begin + end;
    return slice_axis{stop > begin ? begin : 0, 1, stop - begin};
  }
  auto canon = [&](index_t i) {
    if (i < 0) i += n;
    if (stride > 0) return i < 0 ? index_t{0} : (i > n ? n : i);
    return i < -1 ? index_t{-1} : (i > n - 1 ? n - 1 : i);
  };
  const index_t b = canon(begin), e = canon(end);
  if ((stride > 0 && b > e) || (stride < 0 && e > b))
    throw_shape_error("strided_slice: begin ", begin, " and end ", end, " run against stride ", stride, " on axis ",
                      static_cast<index_t>(axis), " of shape ", in);
  s.stride = stride;
  const index_t span = stride > 0 ? e - b : b - e;
  const index_t step = stride > 0 ? stride : -stride;
  s.count = (span + step - 1) / step;
  s.begin = s.count ? b : 0;
  return s;
}

template <class E, std::size_t R>
auto slice_axes(const E& x, const slice_axis (&sl)[R]) {
  axis_map<R> m{};
  dynamic_shape<R> out{};
  for (std::size_t d = 0; d < R; ++d) {
    m.src[d] = static_cast<index_t>(d);
    m.scale[d] = sl[d].stride;
    m.offset[d] = sl[d].begin;
    out[d] = sl[d].count;
  }
  return apply_axis_map(x, out, m);
}
}  // namespace detail

/// Relay's strided_slice attributes. Unlisted axes (and axes beyond the begin/end lists) take
/// the whole extent. `slice_mode_size`: `end` holds sizes (-1: to the end) and strides are 1.
template <std::size_t N>
struct slice_spec {
  index_t begin[N];
  index_t end[N];
};

/// strided_slice(x, begin, end, strides, axes) as Relay defines it.
/// `strides` may be shorter than begin (missing strides are 1); `axes`, when given, names the
/// axes that begin/end/strides apply to. Throws shape_error on a zero stride or bad axis.
template <class X, std::size_t N>
  requires expr_operand<X>
auto strided_slice(X&& x_, const index_t (&begin)[N], const index_t (&end)[N],
                   std::initializer_list<index_t> strides = {}, std::initializer_list<index_t> axes = {},
                   bool slice_mode_size = false) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using E = decltype(x);
  constexpr std::size_t R = E::rank;
  const auto in = x.shape().array();
  if (axes.size() != 0 && axes.size() != N)
    throw_shape_error("strided_slice: ", static_cast<index_t>(axes.size()), " axes given for ", N,
                      " begin values on shape ", in);
  if (strides.size() > N)
    throw_shape_error("strided_slice: ", static_cast<index_t>(strides.size()), " strides given for ", N,
                      " begin values");
  if (axes.size() == 0 && N > R) throw_shape_error("strided_slice: ", N, " begin values given for shape ", in);
  slice_axis sl[R > 0 ? R : 1];
  for (std::size_t d = 0; d < R; ++d) sl[d] = slice_axis{0, 1, in[d]};
  for (std::size_t i = 0; i < N; ++i) {
    const std::size_t d =
        axes.size() ? static_cast<std::size_t>(detail::normalize_axis(axes.begin()[i], "strided_slice", in)) : i;
    const index_t st = i < strides.size() ? strides.begin()[i] : 1;
    if (st == 0) throw_shape_error("strided_slice: stride 0 on axis ", static_cast<index_t>(d), " of shape ", in);
    sl[d] = detail::canonical_slice(in[d], begin[i], end[i], slice_mode_size ? 1 : st, slice_mode_size, d, in);
  }
  if constexpr (R == 0) return x;
  else return detail::slice_axes(x, reinterpret_cast<const slice_axis(&)[R]>(sl));
}

/// split(x, sections, axis): N equal parts (Relay's indices_or_sections=N).
template <std::size_t N, class X>
  requires expr_operand<X>
auto split(X&& x_, index_t axis = 0) {
  static_assert(N >= 1, "fuse::split: at least one section");
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using E = decltype(x);
  constexpr std::size_t R = E::rank;
  static_assert(R >= 1, "fuse::split: cannot split a rank-0 expression");
  const auto in = x.shape().array();
  const auto a = static_cast<std::size_t>(detail::normalize_axis(axis, "split", in));
  if (in[a] % static_cast<index_t>(N) != 0)
    throw_shape_error("split: axis ", axis, " of shape ", in, " (extent ", in[a], ") does not divide into ", N,
                      " equal sections");
  const index_t part = in[a] / static_cast<index_t>(N);
  // Each part built in place (a cell rebuilds its split at every call; default-constructing
  // the array and assigning copied every part once more).
  const auto make_part = [&](std::size_t i) {
    slice_axis sl[R];
    for (std::size_t d = 0; d < R; ++d) sl[d] = slice_axis{0, 1, in[d]};
    sl[a] = slice_axis{static_cast<index_t>(i) * part, 1, part};
    return detail::slice_axes(x, sl);
  };
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<decltype(make_part(0)), N>{make_part(I)...};
  }(std::make_index_sequence<N>{});
}

/// split(x, indices, axis): N+1 parts cut before each index (Relay's indices_or_sections=[...]).
/// As in Relay, the indices must be strictly increasing and inside (0, extent): no empty part.
template <class X, std::size_t N>
  requires expr_operand<X>
auto split(X&& x_, const index_t (&indices)[N], index_t axis = 0) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using E = decltype(x);
  constexpr std::size_t R = E::rank;
  static_assert(R >= 1, "fuse::split: cannot split a rank-0 expression");
  const auto in = x.shape().array();
  const auto a = static_cast<std::size_t>(detail::normalize_axis(axis, "split", in));
  using V = decltype(detail::slice_axes(x, std::declval<const slice_axis(&)[R]>()));
  std::array<V, N + 1> parts;
  index_t prev = 0;
  for (std::size_t i = 0; i <= N; ++i) {
    const index_t cut = i < N ? indices[i] : in[a];
    if (i < N && (cut <= prev || cut >= in[a]))
      throw_shape_error("split: indices must increase strictly inside (0, ", in[a], ") on axis ", axis, " of shape ",
                        in, "; index ", cut, " does not");
    slice_axis sl[R];
    for (std::size_t d = 0; d < R; ++d) sl[d] = slice_axis{0, 1, in[d]};
    sl[a] = slice_axis{prev, 1, cut - prev};
    parts[i] = detail::slice_axes(x, sl);
    prev = cut;
  }
  return parts;
}

// ---- squeeze, expand_dims, broadcast_to ----------------------------------------------------------

/// squeeze(x, axes): removes the listed axes, which must have extent 1.
template <class X, std::size_t N>
  requires expr_operand<X>
auto squeeze(X&& x_, const index_t (&axes)[N]) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using E = decltype(x);
  constexpr std::size_t R = E::rank;
  static_assert(N <= R, "fuse::squeeze: more axes than dimensions");
  const auto in = x.shape().array();
  bool drop[R > 0 ? R : 1] = {};
  for (std::size_t i = 0; i < N; ++i) {
    const auto d = static_cast<std::size_t>(detail::normalize_axis(axes[i], "squeeze", in));
    if (drop[d]) throw_shape_error("squeeze: axis ", axes[i], " is listed twice for shape ", in);
    if (in[d] != 1) throw_shape_error("squeeze: axis ", axes[i], " of shape ", in, " has extent ", in[d], ", not 1");
    drop[d] = true;
  }
  axis_map<R> m{};
  dynamic_shape<R - N> out{};
  std::size_t k = 0;
  for (std::size_t d = 0; d < R; ++d) {
    if (drop[d]) {
      m.src[d] = -1;
      continue;
    }
    m.src[d] = static_cast<index_t>(k);
    m.scale[d] = 1;
    out[k++] = in[d];
  }
  return apply_axis_map(x, out, m);
}

/// squeeze(x): removes every extent-1 axis (Relay's axis=None). The result's rank depends on the
/// extents, so the operand's shape must be static.
template <class X>
  requires expr_operand<X>
auto squeeze(X&& x_) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using S = typename decltype(x)::shape_type;
  static_assert(S::is_static,
                "fuse::squeeze without axes needs a static shape (the result's rank depends on the extents); "
                "name the axes: fuse::squeeze(x, {0, 2})");
  if constexpr (S::is_static) {
    constexpr std::size_t ones = [] {
      std::size_t n = 0;
      for (std::size_t d = 0; d < S::rank; ++d) n += S::extents[d] == 1;
      return n;
    }();
    index_t axes[ones > 0 ? ones : 1];
    std::size_t i = 0;
    for (std::size_t d = 0; d < S::rank; ++d)
      if (S::extents[d] == 1) axes[i++] = static_cast<index_t>(d);
    return squeeze(x, reinterpret_cast<const index_t(&)[ones]>(axes));
  }
}

/// expand_dims<num_newaxis>(x, axis): inserts num_newaxis extent-1 axes at `axis` (which ranges
/// over [-rank-1, rank], as in Relay).
template <std::size_t NumNew = 1, class X>
  requires expr_operand<X>
auto expand_dims(X&& x_, index_t axis) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using E = decltype(x);
  constexpr std::size_t R = E::rank;
  const auto in = x.shape().array();
  const index_t a = axis < 0 ? axis + static_cast<index_t>(R) + 1 : axis;
  if (a < 0 || a > static_cast<index_t>(R))
    throw_shape_error("expand_dims: axis ", axis, " is out of range for shape ", in);
  axis_map<R> m{};
  dynamic_shape<R + NumNew> out{};
  for (std::size_t k = 0; k < R + NumNew; ++k) out[k] = 1;
  for (std::size_t d = 0; d < R; ++d) {
    const std::size_t k = static_cast<index_t>(d) < a ? d : d + NumNew;
    m.src[d] = static_cast<index_t>(k);
    m.scale[d] = 1;
    out[k] = in[d];
  }
  return apply_axis_map(x, out, m);
}

/// broadcast_to(x, shape): NumPy broadcasting of x to exactly `shape`.
template <class X, std::size_t N>
  requires expr_operand<X>
auto broadcast_to(X&& x_, const index_t (&shape)[N]) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using E = decltype(x);
  constexpr std::size_t R = E::rank;
  const auto in = x.shape().array();
  dynamic_shape<N> out{};
  for (std::size_t k = 0; k < N; ++k) {
    if (shape[k] < 0) throw_shape_error("broadcast_to: negative extent in target shape ", out.array());
    out[k] = shape[k];
  }
  if (!broadcastable_to(in, out.array()))
    throw_shape_error("broadcast_to: shape ", in, " does not broadcast to ", out.array());
  axis_map<R> m{};
  for (std::size_t d = 0; d < R; ++d) {
    const std::size_t k = N - R + d;
    if (in[d] == 1 && out[k] != 1) {
      m.src[d] = -1;
    } else {
      m.src[d] = static_cast<index_t>(k);
      m.scale[d] = 1;
    }
  }
  return apply_axis_map(x, out, m);
}

// ---- reshape ---------------------------------------------------------------------------------------

namespace detail {

/// Relay's newshape codes: 0 copies the input extent at the same position, -1 is inferred, -2
/// copies all remaining input extents, -3 merges the next two input extents, -4 splits the
/// next input extent into the two values that follow it (one of which may be -1).
template <std::size_t R>
inline std::vector<index_t> resolve_reshape(const index_array<R>& in, const index_t* codes, std::size_t n) {
  std::vector<index_t> out;
  std::size_t src = 0;
  std::ptrdiff_t infer = -1;
  auto fail = [&](auto... why) {
    std::string c = "[";
    for (std::size_t i = 0; i < n; ++i) c += (i ? ", " : "") + std::to_string(codes[i]);
    throw_shape_error("reshape: newshape ", c, "] ", why..., " for shape ", in);
  };
  auto need_input = [&](std::size_t k) {
    if (src + k > R) fail("uses more input dimensions than there are");
  };
  for (std::size_t i = 0; i < n; ++i) {
    const index_t c = codes[i];
    if (c > 0) {
      out.push_back(c);
      ++src;
    } else if (c == 0) {
      need_input(1);
      out.push_back(in[src++]);
    } else if (c == -1) {
      if (infer >= 0) fail("has more than one -1");
      infer = static_cast<std::ptrdiff_t>(out.size());
      out.push_back(-1);
      ++src;
    } else if (c == -2) {
      while (src < R) out.push_back(in[src++]);
    } else if (c == -3) {
      need_input(2);
      out.push_back(in[src] * in[src + 1]);
      src += 2;
    } else if (c == -4) {
      if (i + 2 >= n) fail("ends before the two values that follow -4");
      need_input(1);
      const index_t d0 = in[src++];
      index_t d1 = codes[++i], d2 = codes[++i];
      if (d1 < -1 || d2 < -1 || d1 == 0 || d2 == 0 || (d1 == -1 && d2 == -1)) fail("has bad values after -4");
      if (d1 == -1) {
        if (d2 == 0 || d0 % d2) fail("cannot split extent ", d0, " by ", d2);
        d1 = d0 / d2;
      } else if (d2 == -1) {
        if (d0 % d1) fail("cannot split extent ", d0, " by ", d1);
        d2 = d0 / d1;
      }
      if (d1 * d2 != d0) fail("splits extent ", d0, " into ", d1, " x ", d2);
      out.push_back(d1);
      out.push_back(d2);
    } else {
      fail("has the unknown code ", c);
    }
  }
  const index_t total = product(in);
  if (infer >= 0) {
    index_t known = 1;
    for (std::size_t k = 0; k < out.size(); ++k)
      if (static_cast<std::ptrdiff_t>(k) != infer) known *= out[k];
    if (known == 0 || total % known != 0) fail("cannot infer the -1 extent");
    out[static_cast<std::size_t>(infer)] = total / known;
  }
  index_t got = 1;
  for (index_t e : out) got *= e;
  if (got != total) fail("has ", got, " elements where the input has ", total);
  return out;
}

}  // namespace detail

/// reshape<R>(x, newshape): Relay's reshape, output rank R given explicitly (needed when the
/// codes -2, -3 or -4 make the rank differ from the number of codes).
template <std::size_t R, class X, std::size_t N>
  requires expr_operand<X>
auto reshape(X&& x_, const index_t (&newshape)[N]) {
  auto x = detail::view_operand(static_cast<X&&>(x_));
  using E = decltype(x);
  const auto in = x.shape().array();
  const auto out = detail::resolve_reshape(in, newshape, N);
  if (out.size() != R)
    throw_shape_error("reshape: newshape gives rank ", static_cast<index_t>(out.size()), " where rank ", R,
                      " was asked, for shape ", in);
  dynamic_shape<R> s{};
  for (std::size_t k = 0; k < R; ++k) s[k] = out[k];
  return reshape_view<E, R>{x, s};
}
/// reshape(x, newshape): output rank = number of codes (no -2/-3/-4 codes that change it).
template <class X, std::size_t N>
  requires expr_operand<X>
auto reshape(X&& x, const index_t (&newshape)[N]) {
  return reshape<N>(static_cast<X&&>(x), newshape);
}

// ---- concatenate -------------------------------------------------------------------------------------

template <class T>
inline constexpr bool is_std_array_of_operands = false;
template <class X, std::size_t N>
inline constexpr bool is_std_array_of_operands<std::array<X, N>> = expr_operand<X>;

namespace detail {
template <class... C, std::size_t... I>
auto make_concat(index_t axis, std::index_sequence<I...>, const C&... c) {
  using Node = concat_expr<C...>;
  constexpr std::size_t R = Node::rank;
  static_assert(((C::rank == R) && ...), "fuse::concatenate: every operand must have the same rank");
  static_assert((std::is_same_v<typename C::value_type, typename Node::value_type> && ...),
                "fuse::concatenate: every operand must have the same dtype");
  static_assert(R >= 1, "fuse::concatenate: operands must have rank >= 1");
  const index_array<R> s0 = get<0>(tuple<C...>(c...)).shape().array();
  const auto a = static_cast<std::size_t>(normalize_axis(axis, "concatenate", s0));
  Node node{tuple<C...>(c...), dynamic_shape<R>(s0), static_cast<index_t>(a), {}};  // parts, shape, axis, offsets
  index_t off = 0;
  auto add = [&](std::size_t i, const index_array<R>& s) {
    for (std::size_t d = 0; d < R; ++d)
      if (d != a && s[d] != s0[d])
        throw_shape_error("concatenate: shapes ", s0, " and ", s, " differ outside axis ", axis);
    node.offsets[i] = off;
    off += s[a];
  };
  (add(I, c.shape().array()), ...);
  node.offsets[sizeof...(C)] = off;
  node.shape_[a] = off;
  return node;
}
}  // namespace detail

template <class X>
inline constexpr bool tuple_element_would_dangle =
    is_tensor<std::remove_cvref_t<X>>::value && !std::is_lvalue_reference_v<X>;

/// concatenate((a, b, ...), axis): Relay takes a tuple; here a std::tuple of operands. Tensors
/// must be in it by reference (std::tie(a, b), std::forward_as_tuple(a, f(b))): a tuple holding
/// a copy of a tensor would leave the expression viewing memory freed with the tuple.
template <class... X>
  requires(expr_operand<X> && ...)
auto concatenate(const std::tuple<X...>& parts, index_t axis = 0) {
  static_assert(!(tuple_element_would_dangle<X> || ...),
                "fuse::concatenate: the tuple holds a copy of a tensor, which dies with the tuple; "
                "pass std::tie(a, b), std::forward_as_tuple(a, expr) or views");
  return std::apply(
      [&](const auto&... p) { return detail::make_concat(axis, std::index_sequence_for<X...>{}, as_expr(p)...); },
      parts);
}
/// concatenate(array, axis): e.g. the parts that split returned.
template <class Arr>
  requires(is_std_array_of_operands<std::remove_cvref_t<Arr>>)
auto concatenate(Arr&& parts, index_t axis = 0) {
  using X = typename std::remove_cvref_t<Arr>::value_type;
  static_assert(!(is_tensor<X>::value && !std::is_lvalue_reference_v<Arr>),
                "fuse::concatenate: a temporary array of tensors dies before the expression is evaluated");
  constexpr std::size_t N = std::tuple_size_v<std::remove_cvref_t<Arr>>;
  return std::apply(
      [&](const auto&... p) { return detail::make_concat(axis, std::make_index_sequence<N>{}, as_expr(p)...); }, parts);
}

// ---- take -------------------------------------------------------------------------------------------

/// take(data, indices, axis, mode): gathers slices of data along axis at integer indices.
template <class D, class I>
  requires(expr_operand<D> && expr_operand<I>)
auto take(D&& data_, I&& indices_, index_t axis, take_mode mode = take_mode::clip) {
  auto data = as_expr(static_cast<D&&>(data_));
  auto indices = as_expr(static_cast<I&&>(indices_));
  using DN = decltype(data);
  using IN = decltype(indices);
  static_assert(is_integer_dtype<typename IN::value_type>, "fuse::take: indices must have an integer dtype");
  static_assert(DN::rank >= 1, "fuse::take: data must have rank >= 1");
  const auto ds = data.shape().array();
  const auto is = indices.shape().array();
  const auto a = static_cast<std::size_t>(detail::normalize_axis(axis, "take", ds));
  using Node = take_expr<DN, IN>;
  dynamic_shape<Node::rank> out{};
  std::size_t k = 0;
  for (std::size_t d = 0; d < a; ++d) out[k++] = ds[d];
  for (std::size_t d = 0; d < IN::rank; ++d) out[k++] = is[d];
  for (std::size_t d = a + 1; d < DN::rank; ++d) out[k++] = ds[d];
  if (ds[a] == 0 && out.size() != 0)
    throw_shape_error("take: axis ", axis, " of data shape ", ds, " is empty, so no index is valid");
  return Node{data, indices, out, static_cast<index_t>(a), mode};
}
/// take(data, indices): Relay's axis=None, indexing the flattened data.
template <class D, class I>
  requires(expr_operand<D> && expr_operand<I>)
auto take(D&& data_, I&& indices, take_mode mode = take_mode::clip) {
  auto data = as_expr(static_cast<D&&>(data_));
  return take(reshape<1>(data, {-1}), static_cast<I&&>(indices), 0, mode);
}

}  // namespace fuse
