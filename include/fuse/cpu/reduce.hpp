// Row-reduction kernels of the CPU executor: sum/mean/max/min/prod over any axes, softmax,
// log_softmax and layer_norm. Each evaluates its input expression as it goes (one pass over the
// inputs; no temporary of the input's size).
//
//  - The input is bound in its own coordinates; when the innermost input axis is reduced, each
//    output element accumulates SIMD vectors along it; when it is kept, SIMD vectors run across
//    the kept axis and accumulate over the reduced ones.
//  - float data accumulates in double (sum, mean, prod), so long rows lose nothing to rounding;
//    double data uses compensated (Neumaier) sums; integers accumulate in int64 and wrap to the
//    dtype as Relay's sums do.
//  - softmax and layer_norm work row by row along their axis: the row of the input expression
//    is evaluated once into a buffer (L1/L2-resident), then max/sum (max-subtracted exp) or
//    mean/variance (two-pass, in double) and the normalised output.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "fuse/bind/bind.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/cpu/pass.hpp"
#include "fuse/cpu/vector_access.hpp"
#include "fuse/expr/reduce.hpp"

namespace fuse::cpu {

namespace detail {

template <class A>
simd::mask<A> first_lanes(int n) {
  return simd::from_bits<float, A>(n >= 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << n) - 1));
}

/// Accumulation for one reduce_kind over compute type C.
template <reduce_kind K, class C, class A>
struct accumulator {
  static constexpr bool float_data = std::is_same_v<C, float>;
  static constexpr bool is_sumlike = K == reduce_kind::sum || K == reduce_kind::mean || K == reduce_kind::prod;
  // What partial results are held in (expr/reduce.hpp).
  using S = reduce_partial_t<K, C>;
  using V = simd::vec<S, A>;
  using L = lanes<V>;

  V acc = L::splat(identity());
  V comp = L::splat(S(0));  // Neumaier compensation (double sums)

  static S identity() { return reduce_partial<K, S>::identity(); }

  static V widen(const simd::vec<C, A>& v) {
    if constexpr (std::is_same_v<S, C>) return v;
    else return simd::widen<A>(v);
  }

  FUSE_FORCE_INLINE void add(const simd::vec<C, A>& v) {
    const V w = widen(v);
    if constexpr (K == reduce_kind::max) acc = L::max(acc, w);
    else if constexpr (K == reduce_kind::min) acc = L::min(acc, w);
    else if constexpr (K == reduce_kind::prod) acc = L::mul(acc, w);
    else if constexpr (std::is_same_v<C, double>) {
      // Neumaier: keep the low-order part lost by each addition.
      const V t = L::add(acc, w);
      const V big = L::select(L::ge(L::abs(acc), L::abs(w)), acc, w);
      const V small = L::select(L::ge(L::abs(acc), L::abs(w)), w, acc);
      comp = L::add(comp, L::add(L::sub(big, t), small));
      acc = t;
    } else {
      acc = L::add(acc, w);
    }
  }
  /// Adds only the first n lanes of v.
  FUSE_FORCE_INLINE void add_n(const simd::vec<C, A>& v, int n) {
    using LC = lanes<simd::vec<C, A>>;
    if (FUSE_LIKELY(n == simd::width<A>)) add(v);
    else add(LC::select(first_lanes<A>(n), v, LC::splat(static_cast<C>(identity()))));
  }
  void merge(const accumulator& o) {
    if constexpr (K == reduce_kind::max) acc = L::max(acc, o.acc);
    else if constexpr (K == reduce_kind::min) acc = L::min(acc, o.acc);
    else if constexpr (K == reduce_kind::prod) acc = L::mul(acc, o.acc);
    else {
      acc = L::add(acc, o.acc);
      comp = L::add(comp, o.comp);
    }
  }
  /// All lanes folded into one partial result.
  S total() const {
    S a[simd::width<A>], c[simd::width<A>];
    simd::lane_io<S, A>::store(a, acc);
    simd::lane_io<S, A>::store(c, comp);
    S r = identity();
    for (int i = 0; i < simd::width<A>; ++i) r = combine(r, a[i]);
    if constexpr (is_sumlike && K != reduce_kind::prod && std::is_floating_point_v<S>) {
      S cc = 0;
      for (int i = 0; i < simd::width<A>; ++i) cc += c[i];
      r += cc;
    }
    return r;
  }
  static S combine(S a, S b) { return reduce_partial<K, S>::combine(a, b); }
};

/// Iterates an odometer over the axes flagged in `axes`, calling f(x) with the others fixed.
template <std::size_t R, class F>
void for_each_index(index_array<R>& x, const index_array<R>& ext, const bool* axes, F&& f) {
  for (std::size_t k = 0; k < R; ++k)
    if (axes[k]) {
      if (ext[k] == 0) return;
      x[k] = 0;
    }
  while (true) {
    f();
    std::size_t k = R;
    while (k-- > 0) {
      if (!axes[k]) continue;
      if (++x[k] < ext[k]) break;
      x[k] = 0;
    }
    if (k == static_cast<std::size_t>(-1)) return;
  }
}

/// Does any leaf of `ev` (bound over extents `ext`) read memory that `out` writes? Leaves that
/// read exactly the addresses written, in the same order (`same_strides`, over the same space),
/// are harmless to kernels that finish reading a row before writing it.
template <class Ev, std::size_t R, class T>
bool reads_output(const Ev& ev, const index_array<R>& ext, const void* out_lo, const void* out_hi, const T* out_base,
                  const index_t* same_strides) {
  bool clash = false;
  ev.for_each_leaf(
      [&](const bind::leaf_info& leaf) {
        if (!bind::overlaps(leaf.lo, leaf.hi, out_lo, out_hi)) return;
        bool same = same_strides && leaf.folded && leaf.base == static_cast<const void*>(out_base) &&
                    leaf.elem_size == sizeof(T);
        for (std::size_t k = 0; same && k < R; ++k)
          if (ext[k] != 1 && leaf.stride[k] != same_strides[k]) same = false;
        if (!same) clash = true;
      },
      ext);
  return clash;
}

/// Runs body(view) on `out`, or on a temporary copied into `out` afterwards when the kernel's
/// input reads the output's memory.
template <class T, std::size_t Q, class Body>
void with_safe_output(tensor_view<T, static_cast<int>(Q)> out, bool clash, Body&& body) {
  if (!clash) {
    body(out);
    return;
  }
  tensor<std::remove_cv_t<T>, static_cast<int>(Q)> tmp(dynamic_shape<Q>(out.shape().array()), uninitialized);
  body(tmp.view());
  copy_view<Q>(out, std::as_const(tmp).view());
}

template <class View>
void byte_range_of(const View& v, const void*& lo, const void*& hi) {
  bind::detail::byte_range(v.data(), v.shape().array(), v.strides().data(), sizeof(typename View::value_type), lo, hi);
}

}  // namespace detail

// ---- sum / mean / max / min / prod ---------------------------------------------------------------------------

/// out = the reduction node; ctx: the executor context (the nodes inside its input that need a
/// kernel of their own are materialised by it).
template <std::size_t Q, class Ctx, class T, reduce_kind K, class Child, std::size_t R>
void run_reduce(Ctx& ctx, tensor_view<T, static_cast<int>(Q)> out, const reduce_expr<K, Child, R>& node) {
  using A = simd::default_arch;
  using V = std::remove_cv_t<T>;
  using C = compute_t<V>;
  constexpr std::size_t Rc = Child::rank;
  constexpr int W = simd::width<A>;
  static_assert(Q == R, "fuse::eval: a reduction's output must have the reduction's rank");
  if (!(out.shape().array() == node.shape().array()))
    throw_shape_error(reduce_name(K), ": output shape ", out.shape().array(), " differs from the result's ",
                      node.shape().array());

  using Mode = typename Ctx::math_mode;
  const index_array<Rc> ext = node.child.shape().array();
  auto ev = bind::bind<Mode>(node.child, bind::affine_map<Rc, Rc>::identity(), ctx);
  using Acc = detail::accumulator<K, C, A>;
  const void *olo, *ohi;
  detail::byte_range_of(out, olo, ohi);
  detail::with_safe_output<T, Q>(
      out, detail::reads_output(ev, ext, olo, ohi, out.data(), nullptr), [&](tensor_view<T, static_cast<int>(Q)> out) {
        bool red[Rc > 0 ? Rc : 1] = {}, kept[Rc > 0 ? Rc : 1] = {};
        index_t count = 1;
        for (std::size_t d = 0; d < Rc; ++d) {
          red[d] = node.reduced[d] != 0;
          kept[d] = !red[d];
          if (red[d]) count *= ext[d];
        }
        // Output element of child coordinates x (reduced axes ignored).
        const bool keep = Q == Rc;
        auto out_ptr = [&](const index_array<Rc>& x) {
          index_t off = 0;
          std::size_t k = 0;
          for (std::size_t d = 0; d < Rc; ++d) {
            if (red[d]) {
              if (keep) ++k;
              continue;
            }
            off += x[d] * out.stride(k++);
          }
          return out.data() + off;
        };
        auto write = [&](const index_array<Rc>& x, typename Acc::S r) {
          *out_ptr(x) = to_storage<V>(reduce_finish<K, V>(r, count));
        };

        index_array<Rc> x{};
        if constexpr (Rc == 0) {
          Acc acc;
          typename Acc::S r = Acc::identity();
          r = Acc::combine(r, static_cast<typename Acc::S>(ev.at(x.data())));
          (void)acc;
          *out.data() = to_storage<V>(reduce_finish<K, V>(r, 1));
          return;
        } else {
          constexpr std::size_t in = Rc - 1;
          const index_t n = ext[in];
          if (product(out.shape().array()) == 0) return;
          if (red[in]) {
            // Each output element: vectors along the inner axis, rows over the other reduced axes.
            bool outer_red[Rc] = {};
            for (std::size_t d = 0; d < in; ++d) outer_red[d] = red[d];
            detail::for_each_index(x, ext, kept, [&] {
              Acc acc;
              if (count != 0) {
                detail::for_each_index(x, ext, outer_red, [&] {
                  ev.row(x.data());
                  for (index_t j = 0; j < n; j += W) {
                    const int m = static_cast<int>(std::min<index_t>(W, n - j));
                    acc.add_n(ev.template load<simd_lanes<A>>(j, m), m);
                  }
                });
              }
              write(x, acc.total());
            });
          } else {
            // Vectors across the kept inner axis, accumulated over every reduced axis.
            bool outer_kept[Rc] = {};
            for (std::size_t d = 0; d < in; ++d) outer_kept[d] = kept[d];
            detail::for_each_index(x, ext, outer_kept, [&] {
              for (index_t j = 0; j < n; j += W) {
                const int m = static_cast<int>(std::min<index_t>(W, n - j));
                Acc acc;
                detail::for_each_index(x, ext, red, [&] {
                  ev.row(x.data());
                  acc.add_n(ev.template load<simd_lanes<A>>(j, m), m);
                });
                if (count == 0) {
                  for (std::size_t d = 0; d < Rc; ++d)
                    if (red[d]) x[d] = 0;
                }
                typename Acc::S lanes_[W], comp_[W];
                simd::lane_io<typename Acc::S, A>::store(lanes_, acc.acc);
                simd::lane_io<typename Acc::S, A>::store(comp_, acc.comp);
                for (int i = 0; i < m; ++i) {
                  x[in] = j + i;
                  typename Acc::S r = lanes_[i];
                  if constexpr (Acc::is_sumlike && K != reduce_kind::prod && std::is_floating_point_v<typename Acc::S>)
                    r += comp_[i];
                  write(x, r);
                }
                x[in] = 0;
              }
            });
          }
        }
      });
}

// ---- softmax / log_softmax and layer_norm: row by row along an axis ----------------------------------------------

namespace detail {

/// Binds x so that the iteration space is x's coordinates with `axis` moved innermost; the row
/// loop then walks the axis.
template <std::size_t R>
bind::affine_map<R, R> axis_last_map(index_t axis) {
  bind::affine_map<R, R> m;
  const auto a = static_cast<std::size_t>(axis);
  for (std::size_t d = 0; d < R; ++d) {
    // x coordinate d comes from iteration axis: a -> R-1, d > a -> d-1, d < a -> d.
    m.src[d] = static_cast<index_t>(d == a ? R - 1 : (d > a ? d - 1 : d));
    m.scale[d] = 1;
  }
  return m;
}

template <std::size_t R>
index_array<R> axis_last_extents(const index_array<R>& e, index_t axis) {
  index_array<R> r{};
  const auto a = static_cast<std::size_t>(axis);
  std::size_t k = 0;
  for (std::size_t d = 0; d < R; ++d)
    if (d != a) r[k++] = e[d];
  r[R - 1] = e[a];
  return r;
}

/// Visits every row along the axis: f(row coordinates in the permuted space, pointer to the
/// output row, output stride along the axis).
template <class View, class F>
void for_each_row(const View& out, index_t axis, F&& f) {
  constexpr std::size_t R = View::rank;
  const auto ext = axis_last_extents(out.shape().array(), axis);
  const auto a = static_cast<std::size_t>(axis);
  index_array<R> x{};
  bool outer[R] = {};
  for (std::size_t k = 0; k + 1 < R; ++k) outer[k] = true;
  for_each_index(x, ext, outer, [&] {
    index_t off = 0;
    for (std::size_t d = 0, k = 0; d < R; ++d) {
      if (d == a) continue;
      off += x[k++] * out.stride(d);
    }
    f(x, out.data() + off, out.stride(a));
  });
}

/// Evaluates the current row of `ev` (n elements) into buf.
template <class A, class Ev, class C>
void row_to_buffer(const Ev& ev, index_t n, C* buf) {
  constexpr int W = simd::width<A>;
  // buf has room for a whole vector past n: the tail is stored whole, its extra lanes unused.
  for (index_t j = 0; j < n; j += W)
    simd::lane_io<C, A>::store(buf + j,
                               ev.template load<simd_lanes<A>>(j, static_cast<int>(std::min<index_t>(W, n - j))));
}

/// Writes n compute values from buf to an output row of dtype T with stride s.
template <class A, class T, class C>
void buffer_to_row(const C* buf, index_t n, T* p, index_t s) {
  constexpr int W = simd::width<A>;
  using VC = simd::vec<C, A>;
  index_t j = 0;
  for (; j + W <= n; j += W) {
    const VC v = simd::canonical<T, A>(simd::lane_io<C, A>::load(buf + j));
    if (s == 1) simd::store<T, A>(p + j, v);
    else simd::store_strided<T, A>(p + j * s, s, v);
  }
  for (; j < n; ++j) p[j * s] = to_storage<T>(canonical<T>(buf[j]));
}

/// The frame of the row kernels (softmax, layer_norm): for every row of `out` along `axis`,
/// the row of `ev` (bound with the axis innermost) is evaluated into `buf`, then
/// f(buf, output row pointer, output stride along the axis) finishes it. Overlap of the output
/// with the input is checked once: reading a whole row before writing it makes identical
/// addresses safe; anything else goes through a temporary.
template <class A, class View, class Ev, class C, class F>
void for_each_buffered_row(View out, index_t axis, Ev& ev, std::vector<C>& buf, F&& f) {
  using T = typename View::element_type;
  constexpr std::size_t Q = View::rank;
  const index_t n = out.extent(static_cast<std::size_t>(axis));
  buf.resize(static_cast<std::size_t>(n) + simd::width<A>);  // room for a whole vector past n
  const auto pext = axis_last_extents(out.shape().array(), axis);
  const auto pstr = axis_last_extents(out.strides(), axis);
  const void *olo, *ohi;
  byte_range_of(out, olo, ohi);
  with_safe_output<T, Q>(out, reads_output(ev, pext, olo, ohi, out.data(), pstr.data()),
                         [&](tensor_view<T, static_cast<int>(Q)> target) {
                           for_each_row(target, axis, [&](const index_array<Q>& x, std::remove_cv_t<T>* p, index_t s) {
                             ev.row(x.data());
                             row_to_buffer<A>(ev, n, buf.data());
                             f(buf.data(), p, s);
                           });
                         });
}

}  // namespace detail

/// out = softmax or log_softmax of the node's input along its axis.
template <std::size_t Q, class Ctx, class T, row_op_kind K, class Child>
void run_softmax(Ctx& ctx, tensor_view<T, static_cast<int>(Q)> out, const softmax_expr<K, Child>& node) {
  using A = simd::default_arch;
  using V = std::remove_cv_t<T>;
  using C = compute_t<V>;
  using VC = simd::vec<C, A>;
  using L = lanes<VC>;
  constexpr int W = simd::width<A>;
  const char* name = K == row_op_kind::softmax ? "nn.softmax" : "nn.log_softmax";
  if (!(out.shape().array() == node.shape().array()))
    throw_shape_error(name, ": output shape ", out.shape().array(), " differs from the input's ", node.shape().array());
  if (product(out.shape().array()) == 0) return;
  using Mode = typename Ctx::math_mode;
  auto ev = bind::bind<Mode>(node.child, detail::axis_last_map<Q>(node.axis), ctx);
  const index_t n = out.extent(static_cast<std::size_t>(node.axis));
  std::vector<C> buf;
  detail::for_each_buffered_row<A>(out, node.axis, ev, buf, [&](C* row, V* p, index_t s) {
    // max (NaN propagates), then sum of exp(x - max) in double.
    VC m = L::splat(-std::numeric_limits<C>::infinity());
    index_t j = 0;
    for (; j + W <= n; j += W) m = L::max(m, simd::lane_io<C, A>::load(row + j));
    C mx = -std::numeric_limits<C>::infinity();
    {
      C t[W];
      simd::lane_io<C, A>::store(t, m);
      for (int i = 0; i < W; ++i) mx = lanes<C>::max(mx, t[i]);
      for (index_t i = j; i < n; ++i) mx = lanes<C>::max(mx, row[i]);
    }
    // exp(x - max): the subtraction's rounding error e (recovered exactly by TwoSum) would be
    // multiplied by |x - max| inside exp; exp(d + e) = exp(d) (1 + e) puts it back.
    const VC vm = L::splat(mx);
    const ops::exp expo{};
    auto shifted_exp = [&](VC x) {
      const VC d = L::sub(x, vm);
      const VC bb = L::sub(d, x);
      const VC err0 = L::sub(L::sub(x, L::sub(d, bb)), L::add(vm, bb));
      const VC err = L::select(L::eq(err0, err0), err0, L::splat(C(0)));  // x = -inf: no correction
      const VC e = invoke<Mode, A>(expo, d);
      return L::add(e, L::mul(e, err));
    };
    simd::vec<double, A> sum = lanes<simd::vec<double, A>>::splat(0.0);
    double sum_tail = 0;
    j = 0;
    for (; j + W <= n; j += W) {
      const VC e = shifted_exp(simd::lane_io<C, A>::load(row + j));
      if constexpr (K == row_op_kind::softmax) simd::lane_io<C, A>::store(row + j, e);
      sum = lanes<simd::vec<double, A>>::add(sum, simd::convert<double, C, A>(e));
    }
    for (; j < n; ++j) {
      const C e = softmax_shifted_exp<Mode>(row[j], mx);
      if constexpr (K == row_op_kind::softmax) row[j] = e;
      sum_tail += static_cast<double>(e);
    }
    double total = sum_tail;
    {
      double t[W];
      simd::lane_io<double, A>::store(t, sum);
      for (int i = 0; i < W; ++i) total += t[i];
    }
    if constexpr (K == row_op_kind::softmax) {
      const C inv = softmax_scale<C>(total);
      for (j = 0; j + W <= n; j += W)
        simd::lane_io<C, A>::store(row + j, L::mul(simd::lane_io<C, A>::load(row + j), L::splat(inv)));
      for (; j < n; ++j) row[j] *= inv;
    } else {
      const C shift = log_softmax_shift<C>(mx, total);
      for (j = 0; j + W <= n; j += W)
        simd::lane_io<C, A>::store(row + j, L::sub(simd::lane_io<C, A>::load(row + j), L::splat(shift)));
      for (; j < n; ++j) row[j] -= shift;
    }
    detail::buffer_to_row<A>(row, n, p, s);
  });
}

/// out = layer_norm of the node's input along its axis.
template <std::size_t Q, class Ctx, class T, class X, class G, class B>
void run_layer_norm(Ctx& ctx, tensor_view<T, static_cast<int>(Q)> out, const layer_norm_expr<X, G, B>& node) {
  using A = simd::default_arch;
  using V = std::remove_cv_t<T>;
  using C = compute_t<V>;
  if (!(out.shape().array() == node.shape().array()))
    throw_shape_error("nn.layer_norm: output shape ", out.shape().array(), " differs from the input's ",
                      node.shape().array());
  if (product(out.shape().array()) == 0) return;
  const index_t n = out.extent(static_cast<std::size_t>(node.axis));
  // gamma and beta: small 1-D operands, evaluated once.
  auto g = ctx.materialize(node.gamma);
  auto b = ctx.materialize(node.beta);
  using Mode = typename Ctx::math_mode;
  auto ev = bind::bind<Mode>(node.x, detail::axis_last_map<Q>(node.axis), ctx);
  std::vector<C> buf;
  detail::for_each_buffered_row<A>(out, node.axis, ev, buf, [&](C* row, V* p, index_t s) {
    double mean = 0;
    for (index_t j = 0; j < n; ++j) mean += static_cast<double>(row[j]);
    mean /= static_cast<double>(n);
    double var = 0;
    for (index_t j = 0; j < n; ++j) {
      const double d = static_cast<double>(row[j]) - mean;
      var += d * d;
    }
    var /= static_cast<double>(n);
    const double inv = layer_norm_inverse_deviation(var, node.epsilon);
    for (index_t j = 0; j < n; ++j)
      row[j] = layer_norm_value(row[j], mean, inv, to_compute<V>(g.data()[j]), to_compute<V>(b.data()[j]), node.scale,
                                node.center);
    detail::buffer_to_row<A>(row, n, p, s);
  });
}

}  // namespace fuse::cpu
