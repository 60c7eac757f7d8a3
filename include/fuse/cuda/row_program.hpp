// Row programs: how the CUDA executor binds a tree that holds row nodes (a reduction over the
// last axis, softmax, log_softmax, layer_norm) so that the whole tree is ONE kernel.
//
// A row node's value at an output element depends on a whole row of its input, so the CPU
// evaluates it first into a buffer. On the GPU one group of threads (a warp, or a block for long
// rows: fuse/cuda/row_kernel.hpp) owns each row of the iteration space and computes, before it
// writes anything, the row's values: the numbers each row node needs (a reduction's result;
// softmax's maximum and sum of shifted exponentials; layer norm's mean and variance). Each such
// value is one *phase*: a reduction of an evaluator along the row, combined across the group.
// Then the outputs' trees are evaluated along the row, each row node reading its values.
//
// Binding (bind() with this file's `row_binder` as its context): a row node becomes
//   - a reduction: `row_value_eval`, the phase's result broadcast along the row;
//   - softmax / log_softmax: `softmax_row_eval`, its input's evaluator plus its two values;
//   - layer_norm: `layer_norm_row_eval`, its input, gamma and beta plus its two values;
// and its phases are bound over the row of its input (`row_map`: its outer coordinates from the
// output row's, its last one running along the row). A row node inside another's input gives
// phases that come first (post-order), so every phase reads only values already computed.
//
// The values live after the coordinates in the array every evaluator's row(x) receives: x[0..Q)
// are the row's coordinates, x[Q + k] the bits of value k (`row_value`). Reading value k as a
// mask over every value keeps the array in registers (a run-time index would put it in local
// memory).
//
// The phases' types are known from the tree's type alone (`phase_list`), so a kernel's parameter
// holds them in a fuse::tuple; the binder fills that tuple in the same order.
//
// A row node may reduce or normalise any axis of its input: its phases walk that axis; its other
// coordinates must stay fixed along the iteration's last axis (the binder notes where they do
// not, and the executor then iterates with another axis last: `x - mean(x, 0)`). A reduction over
// several axes walks its last one so, and the others along iteration coordinates its kept axes
// leave free (`borrow_coordinates`), which its phase sets sub-row after sub-row and restores; the
// row nodes inside it must not move along those.
//
// Limits (errors, not silent): a reduction over several axes without coordinates enough for its
// block, row nodes that move along the axes a reduction around them walks, a row node read
// through a reshape (fuse/cuda/row_reshape.hpp rewrites the trees that allow it first), rows
// that no order of the iteration keeps apart, and more than `max_row_values` values per row.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "fuse/bind/bind.hpp"
#include "fuse/core/dtype.hpp"
#include "fuse/core/error.hpp"
#include "fuse/expr/node.hpp"
#include "fuse/expr/reduce.hpp"
#include "fuse/expr/same_tree.hpp"

namespace fuse::cuda {

/// Values a row program may compute per row (a reduction needs 1, softmax and layer norm 2).
inline constexpr int max_row_values = 8;

/// Nodes that a row program computes by phases.
template <class N>
inline constexpr bool is_row_node =
    kind_of<N> == node_kind::reduction || kind_of<N> == node_kind::softmax || kind_of<N> == node_kind::layer_norm;

/// Whether tree N holds a node for which pred<node type> holds (expr/node.hpp's walk).
template <template <class> class Pred, class N>
constexpr bool tree_has() {
  return tree_holds<Pred, N>();
}
template <class N>
struct row_node_pred : std::bool_constant<is_row_node<N>> {};
template <class N>
struct contraction_pred : std::bool_constant<kind_of<N> == node_kind::contraction> {};

// ---- the values after the coordinates --------------------------------------------------------

/// The bits of a value of up to 8 bytes, as an index_t of the coordinates-and-values array.
template <class V>
FUSE_HD index_t pack_row_value(V v) {
  static_assert(sizeof(V) <= sizeof(index_t), "a row value has at most 8 bytes");
  std::uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(V));
  return static_cast<index_t>(u);
}
/// Value `slot` of the array x of an iteration space of rank Q.
template <std::size_t Q, class V>
FUSE_HD V row_value(const index_t* x, int slot) {
  // Every value read at a constant index and masked: a branch or select per value would be
  // folded by the compiler into one load at a run-time index, which puts x in local memory.
  std::uint64_t u = 0;
  for (int k = 0; k < max_row_values; ++k)
    u |= static_cast<std::uint64_t>(x[Q + static_cast<std::size_t>(k)]) & (std::uint64_t{0} - (k == slot));
  V v;
  std::memcpy(&v, &u, sizeof(V));
  return v;
}

/// A compute value as the CPU reads it back after storing it in dtype T.
template <class T>
FUSE_HD compute_t<T> as_stored(compute_t<T> v) {
  return to_compute<T>(to_storage<T>(canonical<T>(v)));
}

// ---- the evaluators of row nodes ---------------------------------------------------------------

/// A reduction inside a larger tree: its result for the current row, broadcast along the row
/// (a constant that row() sets: the rest of the protocol is the constant's).
template <class T, std::size_t Q>
struct row_value_eval : bind::scalar_eval<T, Q> {
  int slot = 0;
  FUSE_HD void row(const index_t* x) { this->value = row_value<Q, compute_t<T>>(x, slot); }
};

/// The vector side of a row evaluator D (rank Q) that has no vector form: its lanes one by one
/// through its get; it never folds into strides, so no executor transforms its loop.
template <class D, std::size_t Q>
struct lanes_by_get {
  template <class L, bool Fast = false>
  FUSE_HD auto load(index_t j, int n) const {
    return bind::load_by_lanes<L>(static_cast<const D&>(*this), j, n);
  }
  FUSE_HD bool all_folded() const { return false; }
  FUSE_HD bool contiguous_row() const { return false; }
  void retarget(const index_array<Q>&) {}
};

/// softmax or log_softmax: its input along the row and the row's maximum (value `slot`) and
/// sum of shifted exponentials (value `slot + 1`).
template <class Mode, row_op_kind K, class T, class Ev>
struct softmax_row_eval : lanes_by_get<softmax_row_eval<Mode, K, T, Ev>, Ev::rank> {
  using value_type = T;
  using compute_type = compute_t<T>;
  static constexpr std::size_t rank = Ev::rank;
  Ev child;
  int slot = 0;
  compute_type mx{}, factor{};  ///< the row's maximum; softmax's scale or log_softmax's shift

  FUSE_HD void row(const index_t* x) {
    child.row(x);
    mx = row_value<rank, compute_type>(x, slot);
    const double total = row_value<rank, double>(x, slot + 1);
    if constexpr (K == row_op_kind::softmax) factor = softmax_scale<compute_type>(total);
    else factor = log_softmax_shift<compute_type>(mx, total);
  }
  FUSE_HD compute_type of(compute_type v) const {
    if constexpr (K == row_op_kind::softmax) return as_stored<T>(softmax_shifted_exp<Mode>(v, mx) * factor);
    else return as_stored<T>(v - factor);
  }
  FUSE_HD compute_type at(const index_t* x) const { return of(child.at(x)); }
  FUSE_HD compute_type get(index_t j) const { return of(child.get(j)); }
  template <class F>
  void for_each_leaf(F&& f, const index_array<rank>& ext) const {
    child.for_each_leaf(f, ext);
  }
  template <class F>
  FUSE_HD void visit_row_leaves(F&& f) {
    bind::visit_row_leaves(child, f);
  }
};

/// layer_norm: its input, gamma and beta along the row and the row's mean (value `slot`) and
/// variance (value `slot + 1`).
template <class T, class XEv, class GEv, class BEv>
struct layer_norm_row_eval : lanes_by_get<layer_norm_row_eval<T, XEv, GEv, BEv>, XEv::rank> {
  using value_type = T;
  using compute_type = compute_t<T>;
  static constexpr std::size_t rank = XEv::rank;
  XEv x;
  GEv gamma;
  BEv beta;
  int slot = 0;
  double epsilon = 0;
  bool scale = true, center = true;
  double mean = 0, inv = 0;

  FUSE_HD void row(const index_t* c) {
    x.row(c);
    gamma.row(c);
    beta.row(c);
    mean = row_value<rank, double>(c, slot);
    inv = layer_norm_inverse_deviation(row_value<rank, double>(c, slot + 1), epsilon);
  }
  FUSE_HD compute_type at(const index_t* c) const {
    return as_stored<T>(layer_norm_value(x.at(c), mean, inv, gamma.at(c), beta.at(c), scale, center));
  }
  FUSE_HD compute_type get(index_t j) const {
    return as_stored<T>(layer_norm_value(x.get(j), mean, inv, gamma.get(j), beta.get(j), scale, center));
  }
  template <class F>
  void for_each_leaf(F&& f, const index_array<rank>& ext) const {
    x.for_each_leaf(f, ext);
    gamma.for_each_leaf(f, ext);
    beta.for_each_leaf(f, ext);
  }
  template <class F>
  FUSE_HD void visit_row_leaves(F&& f) {
    bind::visit_row_leaves(x, f);
    bind::visit_row_leaves(gamma, f);
    bind::visit_row_leaves(beta, f);
  }
};

// ---- what phases reduce ------------------------------------------------------------------------

/// softmax's second phase: exp(x - max) of its input, the row's maximum being value `slot`.
template <class Mode, class Ev>
struct shifted_exp_eval {
  using compute_type = typename Ev::compute_type;
  static constexpr std::size_t rank = Ev::rank;
  Ev child;
  int slot = 0;
  compute_type mx{};
  FUSE_HD void row(const index_t* x) {
    child.row(x);
    mx = row_value<rank, compute_type>(x, slot);
  }
  FUSE_HD compute_type get(index_t j) const { return softmax_shifted_exp<Mode>(child.get(j), mx); }
  template <class F>
  void for_each_leaf(F&& f, const index_array<rank>& ext) const {
    child.for_each_leaf(f, ext);
  }
  template <class F>
  FUSE_HD void visit_row_leaves(F&& f) {
    bind::visit_row_leaves(child, f);
  }
};

/// layer_norm's second phase: (x - mean)^2 in double, the row's mean being value `slot`.
template <class Ev>
struct squared_deviation_eval {
  using compute_type = double;
  static constexpr std::size_t rank = Ev::rank;
  Ev child;
  int slot = 0;
  double mean = 0;
  FUSE_HD void row(const index_t* x) {
    child.row(x);
    mean = row_value<rank, double>(x, slot);
  }
  FUSE_HD double get(index_t j) const {
    const double d = static_cast<double>(child.get(j)) - mean;
    return d * d;
  }
  template <class F>
  void for_each_leaf(F&& f, const index_array<rank>& ext) const {
    child.for_each_leaf(f, ext);
  }
  template <class F>
  FUSE_HD void visit_row_leaves(F&& f) {
    bind::visit_row_leaves(child, f);
  }
};

/// What a phase's combined partial result becomes: the reduction's result as dtype T stores it
/// (a reduction node), the partial itself (softmax's max and sum), or it divided by the row's
/// length in double (layer norm's mean and variance).
enum class phase_result : std::uint8_t { dtype, partial, mean };

/// One value per row: `ev` (bound over the row, rank Q) reduced by kind K in partial type S
/// over the row's n elements.
template <reduce_kind K, class S, phase_result F, class T, class Ev>
struct row_phase {
  static constexpr reduce_kind kind = K;
  /// Only a reduction node's phase walks a block of sub-rows (`sub_mask`): softmax's and layer
  /// norm's walk their row, which the kernel then compiles without the block's walk.
  static constexpr bool walks_blocks = F == phase_result::dtype;
  static constexpr std::size_t rank = Ev::rank;
  using partial_type = S;
  using value_type = std::conditional_t<F == phase_result::dtype, compute_t<T>,
                                        std::conditional_t<F == phase_result::partial, S, double>>;
  Ev ev;
  index_t n = 0;
  /// >= 0: the same value as an earlier phase's (the same node over the same rows, met again:
  /// TVM's decomposed layer norm reads mean(x) twice), copied instead of computed.
  int copy_from = -1;
  /// A reduction over several axes: its row is a block of sub-rows. Its reduced axes but the
  /// walked one read iteration coordinates that its kept axes do not (bit k: coordinate k), which
  /// the phase sets itself, sub-row after sub-row (extents `sub_extent`), and restores; `count`
  /// is then the block's element count. (0: one row of n elements.)
  std::uint64_t sub_mask = 0;
  index_array<rank> sub_extent{};
  index_t count = 0;

  FUSE_HD value_type finish(S acc) const { return finish(acc, sub_mask ? count : n); }
  /// The result of `count` elements combined into acc.
  FUSE_HD value_type finish(S acc, index_t count) const {
    if constexpr (F == phase_result::dtype) return as_stored<T>(reduce_finish<K, T>(acc, count));
    else if constexpr (F == phase_result::partial) return acc;
    else return static_cast<double>(acc) / static_cast<double>(count);
  }
};

// ---- the phases of a tree, from its type ---------------------------------------------------------

template <class... P>
struct type_list {};
template <class... A, class... B>
type_list<A..., B...> operator+(type_list<A...>, type_list<B...>);

template <class Phases>
class row_binder;

/// The evaluator bind() makes of node N over map Map, with row nodes bound by a row_binder.
template <class Mode, class N, class Map>
using row_bound_t =
    decltype(bind::bind<Mode>(std::declval<const N&>(), std::declval<const Map&>(), std::declval<row_binder<void>&>()));

/// The map over the row of a row node's input (rank Rc) along its axis `a`, from the node's map
/// m (rank R: Rc, or Rc - 1 for a reduction without keepdims): the input's other coordinates as
/// m gives the node's, coordinate a running along the row (x[Q - 1]).
/// A reduction without keepdims drops its reduced axes (reduced[d] != 0; Rc - R of them): the
/// input's kept axes take the node's coordinates in order. Its other reduced axes are left
/// constant (0) here.
template <std::size_t Q, std::size_t R, std::size_t Rc>
bind::affine_map<Q, Rc> row_map(const bind::affine_map<Q, R>& m, std::size_t a, const index_array<Rc>& reduced) {
  static_assert(R <= Rc, "a row node keeps its input's rank, or drops its reduced axes");
  bind::affine_map<Q, Rc> c;
  for (std::size_t d = 0, k = 0; d < Rc; ++d) {
    if (d == a) {
      c.src[d] = static_cast<index_t>(Q - 1), c.scale[d] = 1, c.offset[d] = 0;
    } else if (R < Rc && reduced[d] != 0) {
      c.src[d] = -1, c.scale[d] = 0, c.offset[d] = 0;
    } else {
      c.src[d] = m.src[k], c.scale[d] = m.scale[k], c.offset[d] = m.offset[k];
    }
    if (R == Rc || reduced[d] == 0) ++k;  // the node's coordinate of the next axis
  }
  return c;
}
/// The same for a node that keeps its input's rank (softmax, layer norm, keepdims).
template <std::size_t Q, std::size_t R>
bind::affine_map<Q, R> row_map(const bind::affine_map<Q, R>& m, std::size_t a) {
  return row_map<Q, R, R>(m, a, index_array<R>{});
}

template <class Mode, std::size_t Q, class N, node_kind K = kind_of<N>>
struct phases_of;

/// The phases of tree N bound over an iteration space of rank Q, in the order bind() meets them.
template <class Mode, std::size_t Q, class N>
using phases_of_t = typename phases_of<Mode, Q, std::remove_cvref_t<N>>::type;

template <class Mode, std::size_t Q, class N, std::size_t... I>
auto children_phases(std::index_sequence<I...>)
    -> decltype((type_list<>{} + ... + phases_of_t<Mode, Q, child_t<I, N>>{}));

template <class Mode, std::size_t Q, class N, node_kind K>
struct phases_of {
  // Every other node: its children's, in bind()'s order (children() order).
  using type = decltype(children_phases<Mode, Q, N>(std::make_index_sequence<child_count<N>>{}));
};
template <class Mode, std::size_t Q, class N>
struct phases_of<Mode, Q, N, node_kind::take> {
  // bind() binds the data over its own coordinates: no row can lie along the output's.
  static_assert(!tree_has<row_node_pred, child_t<0, N>>(),
                "fuse::cuda::eval: a reduction, softmax or layer norm inside the data of a take does not run on "
                "CUDA");
  using type = phases_of_t<Mode, Q, child_t<1, N>>;
};
template <class Mode, std::size_t Q, class N>
struct phases_of<Mode, Q, N, node_kind::reduction> {
  using C = typename N::child_type;
  using T = typename N::value_type;
  using type = decltype(phases_of_t<Mode, Q, C>{} +
                        type_list<row_phase<N::kind, reduce_partial_t<N::kind, compute_t<T>>, phase_result::dtype, T,
                                            row_bound_t<Mode, C, bind::affine_map<Q, C::rank>>>>{});
};
template <class Mode, std::size_t Q, class N>
struct phases_of<Mode, Q, N, node_kind::softmax> {
  using C = typename N::child_type;
  using T = typename N::value_type;
  using Ev = row_bound_t<Mode, C, bind::affine_map<Q, C::rank>>;
  using type =
      decltype(phases_of_t<Mode, Q, C>{} +
               type_list<row_phase<reduce_kind::max, compute_t<T>, phase_result::partial, T, Ev>,
                         row_phase<reduce_kind::sum, double, phase_result::partial, T, shifted_exp_eval<Mode, Ev>>>{});
};
template <class Mode, std::size_t Q, class N>
struct phases_of<Mode, Q, N, node_kind::layer_norm> {
  using X = std::remove_cvref_t<decltype(std::declval<const N&>().x)>;
  using T = typename N::value_type;
  using Ev = row_bound_t<Mode, X, bind::affine_map<Q, X::rank>>;
  using type =
      decltype(phases_of_t<Mode, Q, X>{} +
               type_list<row_phase<reduce_kind::sum, double, phase_result::mean, T, Ev>,
                         row_phase<reduce_kind::sum, double, phase_result::mean, T, squared_deviation_eval<Ev>>>{});
};

template <class L>
struct phase_tuple;
template <class... P>
struct phase_tuple<type_list<P...>> {
  using type = tuple<P...>;
};
/// The kernel parameter's tuple of phases of trees E... over rank Q.
template <class Mode, std::size_t Q, class... E>
using phase_tuple_t = typename phase_tuple<decltype((type_list<>{} + ... + phases_of_t<Mode, Q, E>{}))>::type;

/// The evaluator a row node N becomes over an iteration space of rank Q.
template <class Mode, std::size_t Q, class N, node_kind K = kind_of<N>>
struct row_eval_of;
template <class Mode, std::size_t Q, class N>
struct row_eval_of<Mode, Q, N, node_kind::reduction> {
  using type = row_value_eval<typename N::value_type, Q>;
};
template <class Mode, std::size_t Q, class N>
struct row_eval_of<Mode, Q, N, node_kind::softmax> {
  using C = typename N::child_type;
  using type =
      softmax_row_eval<Mode, N::kind, typename N::value_type, row_bound_t<Mode, C, bind::affine_map<Q, C::rank>>>;
};
template <class Mode, std::size_t Q, class N>
struct row_eval_of<Mode, Q, N, node_kind::layer_norm> {
  template <class M>
  using member = std::remove_cvref_t<M>;
  using X = member<decltype(std::declval<const N&>().x)>;
  using G = member<decltype(std::declval<const N&>().gamma)>;
  using B = member<decltype(std::declval<const N&>().beta)>;
  using type =
      layer_norm_row_eval<typename N::value_type, row_bound_t<Mode, X, bind::affine_map<Q, X::rank>>,
                          row_bound_t<Mode, G, bind::affine_map<Q, 1>>, row_bound_t<Mode, B, bind::affine_map<Q, 1>>>;
};

// ---- the binder ----------------------------------------------------------------------------------

/// bind()'s context for a row program: row nodes become row evaluators, their phases are stored
/// in the tuple *phases in the order met. (Phases = void: a binder that only names types.)
template <class Phases>
class row_binder {
 public:
  explicit row_binder(Phases* phases = nullptr) : phases_(phases) {}

  /// A row node read through map m (iteration rank Q).
  template <class Mode, std::size_t Q, class N, class Map>
    requires is_row_node<N>
  typename row_eval_of<Mode, Q, N>::type leaf_for(const N& n, const Map& m) {
    constexpr node_kind K = kind_of<N>;
    using T = typename N::value_type;
    if constexpr (!bind::is_affine_map<Map>::value) {
      static_assert(bind::is_affine_map<Map>::value,
                    "fuse::cuda::eval: a reduction, softmax or layer norm read through a reshape runs on CUDA in an "
                    "eval of one output whose root is not a reduction (fuse/cuda/row_reshape.hpp): evaluate the "
                    "reshaped part first");
      return {};  // (nothing more to say: no further errors)
    } else if constexpr (K == node_kind::reduction) {
      using Child = typename N::child_type;
      constexpr std::size_t Rc = Child::rank;
      static_assert(Rc >= 1, "a reduction of a rank-0 tree is the tree itself");
      std::size_t a = Rc, count = 0;
      for (std::size_t d = 0; d < Rc; ++d)
        if (n.reduced[d] != 0) a = d, ++count;
      if (count == 0)
        throw error(std::string("fuse::cuda::eval: ") + reduce_name(N::kind) +
                    " over no axis, inside a larger tree, does not run on CUDA (it is its input: drop it)");
      const auto in = n.child.shape().array();
      // The walked axis is the last reduced one (the innermost in memory, usually: coalesced).
      std::uint64_t walked = 0;  // the node's coordinates of its reduced axes (none without keepdims)
      if constexpr (N::rank == Rc)
        for (std::size_t d = 0; d < Rc; ++d)
          if (n.reduced[d] != 0) walked |= std::uint64_t{1} << d;
      note_rows<Q>(m, walked);
      auto rows = row_map<Q, N::rank, Rc>(m, a, n.reduced);
      // The other reduced axes read coordinates the kept ones leave alone, which the phase walks.
      std::uint64_t sub_mask = 0;
      index_array<Q> sub_extent{};
      if (count > 1) sub_mask = borrow_coordinates<Q>(rows, n.reduced, in, a, sub_extent, reduce_name(N::kind), count);
      const int earlier = seen_before(n, rows);
      const std::uint64_t was = borrowed_;
      borrowed_ |= sub_mask;
      auto ev = bind::bind<Mode>(n.child, rows, *this);
      borrowed_ = was;
      const int slot = take_values(1);
      using P = row_phase<N::kind, reduce_partial_t<N::kind, compute_t<T>>, phase_result::dtype, T, decltype(ev)>;
      P phase{ev, in[a], earlier, sub_mask, sub_extent, 1};
      for (std::size_t d = 0; d < Rc; ++d)
        if (n.reduced[d] != 0) phase.count *= in[d];
      if (phase.count == 0) phase.n = 0, phase.sub_mask = 0;  // an empty block: nothing to walk
      store(slot, phase);
      remember(n, rows, slot);
      return row_value_eval<T, Q>{{}, slot};
    } else if constexpr (K == node_kind::softmax) {
      const auto [slot, child] =
          bind_two_values<Mode, Q>(n, n.child, m, [&](const auto& ev, int at, index_t len, int earlier) {
            using E = std::remove_cvref_t<decltype(ev)>;
            return std::pair{row_phase<reduce_kind::max, compute_t<T>, phase_result::partial, T, E>{ev, len, earlier},
                             row_phase<reduce_kind::sum, double, phase_result::partial, T, shifted_exp_eval<Mode, E>>{
                                 {ev, at, {}}, len, earlier < 0 ? -1 : earlier + 1}};
          });
      return {{}, child, slot, {}, {}};
    } else {
      static_assert(!tree_has<row_node_pred, decltype(n.gamma)>() && !tree_has<row_node_pred, decltype(n.beta)>(),
                    "fuse::cuda::eval: a reduction, softmax or layer norm inside layer_norm's gamma or beta does not "
                    "run on CUDA");
      const auto [slot, x] = bind_two_values<Mode, Q>(n, n.x, m, [&](const auto& ev, int at, index_t len, int earlier) {
        using E = std::remove_cvref_t<decltype(ev)>;
        return std::pair{row_phase<reduce_kind::sum, double, phase_result::mean, T, E>{ev, len, earlier},
                         row_phase<reduce_kind::sum, double, phase_result::mean, T, squared_deviation_eval<E>>{
                             {ev, at, 0}, len, earlier < 0 ? -1 : earlier + 1}};
      });
      // gamma and beta are 1-D along the normalised axis: their coordinate is the node's.
      const auto a = static_cast<std::size_t>(n.axis);
      bind::affine_map<Q, 1> gm;
      gm.src[0] = m.src[a], gm.scale[0] = m.scale[a], gm.offset[0] = m.offset[a];
      auto g = bind::bind<Mode>(n.gamma, gm, *this);
      auto b = bind::bind<Mode>(n.beta, gm, *this);
      return {{}, x, g, b, slot, n.epsilon, n.scale, n.center, 0, 0};
    }
  }

  /// What softmax and layer norm share: their input `in` bound over the node's rows along its
  /// axis, the two phases `make(ev, slot, length, earlier)` gives stored as values slot and
  /// slot + 1 (or copied from an equal node's), then `in` bound again over the node's own map m
  /// (its row nodes replayed). Returns the slot and that second binding.
  template <class Mode, std::size_t Q, class N, class In, class Map, class Make>
  auto bind_two_values(const N& n, const In& in, const Map& m, Make&& make) {
    constexpr std::size_t R = N::rank;
    const auto a = static_cast<std::size_t>(n.axis);
    note_rows<Q>(m, std::uint64_t{1} << a);
    const int first = next_;
    const auto rows = row_map<Q, R>(m, a);
    const int earlier = seen_before(n, rows);
    auto ev = bind::bind<Mode>(in, rows, *this);
    const int slot = take_values(2);
    const auto phases = make(ev, slot, n.shape()[a], earlier);
    store(slot, phases.first);
    store(slot + 1, phases.second);
    remember(n, rows, slot);
    return std::pair{slot, replaying(first, slot, [&] { return bind::bind<Mode>(in, m, *this); })};
  }

  /// Nodes with no row form (contractions).
  template <class N>
  int materialize(const N&) {
    static_assert(sizeof(N) == 0, "fuse::cuda::eval: contractions do not run on CUDA yet");
    return 0;
  }

  /// Iteration coordinates (bit k: coordinate k) that the kernel walks inside each row (a root
  /// reduction's reduced axes but the last): no row node may move along them.
  void walk_inside_rows(std::uint64_t coordinates) { borrowed_ |= coordinates; }
  /// Values taken so far (after binding: the number of phases).
  int values() const { return next_; }
  /// Whether a row node's rows run along the iteration's last axis (its coordinates other than
  /// the one it reduces or normalises move along it): the binding is then wrong, and the
  /// iteration must put another axis last, one of those `row_axes` leaves free.
  bool rows_across() const { return rows_across_; }
  /// The iteration axes the row nodes' other coordinates move along (bit k: axis k).
  std::uint64_t row_axes() const { return row_axes_; }
  /// Whether every phase of the tuple was stored.
  bool complete() const {
    if constexpr (std::is_void_v<Phases>) return true;
    else return next_ == static_cast<int>(Phases::size) && stored_ == (1u << Phases::size) - 1;
  }

 private:
  /// Notes the iteration axes the node's coordinates other than `walked` (its reduced or
  /// normalised one; R for none) move along: one group of threads computes a row's values for
  /// one output row, so none of them may move along the iteration's last axis.
  template <std::size_t Q, std::size_t R>
  void note_rows(const bind::affine_map<Q, R>& m, std::uint64_t walked) {
    static_assert(Q >= 1, "a row program iterates over rank 1 or more");
    for (std::size_t d = 0; d < R; ++d)
      if (!((walked >> d) & 1) && m.src[d] >= 0 && m.scale[d] != 0) {
        if ((borrowed_ >> m.src[d]) & 1)
          throw error(
              "fuse::cuda::eval: a reduction, softmax or layer norm inside a reduction over several axes, whose rows "
              "move along the axes that reduction walks, does not run on CUDA: evaluate it first");
        row_axes_ |= std::uint64_t{1} << m.src[d];
        rows_across_ = rows_across_ || m.depends(d, Q - 1);
      }
  }
  /// For a reduction over several axes, its map `rows` over its input (the walked axis `a` along
  /// the iteration's last coordinate): each other reduced axis gets an iteration coordinate
  /// before the last that no kept axis reads (the later the axis, the later the coordinate: the
  /// phase then walks its block in memory order), with that axis's extent in `sub_extent`.
  /// Returns those coordinates (bit k: coordinate k).
  template <std::size_t Q, std::size_t Rc, class Reduced>
  static std::uint64_t borrow_coordinates(bind::affine_map<Q, Rc>& rows, const Reduced& reduced,
                                          const index_array<Rc>& in, std::size_t a, index_array<Q>& sub_extent,
                                          const char* name, std::size_t count) {
    static_assert(Q <= 64, "coordinates are bits of a 64-bit mask");
    std::uint64_t used = 0, taken = 0;
    for (std::size_t d = 0; d < Rc; ++d)
      if (!reduced[d] && rows.src[d] >= 0 && rows.scale[d] != 0) used |= std::uint64_t{1} << rows.src[d];
    std::size_t k = Q - 1;  // candidates: k - 1, k - 2, ..., 0
    for (std::size_t d = Rc; d-- > 0;) {
      if (!reduced[d] || d == a) continue;
      if (in[d] == 1) {  // nothing to walk: coordinate 0
        rows.src[d] = -1, rows.scale[d] = 0, rows.offset[d] = 0;
        continue;
      }
      while (k > 0 && ((used >> (k - 1)) & 1)) --k;
      if (k == 0)
        throw error(std::string("fuse::cuda::eval: ") + name + " over " + std::to_string(count) +
                    " axes inside a larger tree needs as many output axes, less one, that its kept axes do not "
                    "follow (it walks its block of sub-rows along them): keep its reduced axes (keepdims) or "
                    "evaluate it first");
      --k;
      rows.src[d] = static_cast<index_t>(k), rows.scale[d] = 1, rows.offset[d] = 0;
      taken |= std::uint64_t{1} << k;
      sub_extent[k] = in[d];
    }
    return taken;
  }
  int take_values(int count) {
    const int first = next_;
    next_ += count;
    if (next_ > max_row_values)
      throw error("fuse::cuda::eval: the tree needs more than " + std::to_string(max_row_values) +
                  " values per row (reductions count 1, softmax and layer norm 2): evaluate part of it first");
    return first;
  }
  /// f() binds the input of the row node whose own values start at `own` a second time, over
  /// the node's own map: its row nodes take the values already taken (from `first`) again,
  /// without storing their phases twice.
  template <class F>
  auto replaying(int first, int own, F&& f) {
    const int next = next_;
    const bool was = replay_;
    next_ = first;
    replay_ = true;
    auto r = f();
    if (next_ != own) throw error("fuse::cuda::eval: internal error: a row node's input bound differently twice");
    next_ = next;
    replay_ = was;
    return r;
  }
  /// A row node met before binding: the node, how to compare it with another of its type, the
  /// rows it was read over (its input's map but the last coordinate), its first value.
  struct met {
    const void* node;
    bool (*same)(const void*, const void*);
    std::vector<index_t> rows;
    int slot;
  };
  template <std::size_t Q, std::size_t R>
  static std::vector<index_t> rows_of(const bind::affine_map<Q, R>& rows) {
    // (every coordinate: the walked one is the same in all maps, but where it lies is not)
    std::vector<index_t> v(3 * R);
    for (std::size_t d = 0; d < R; ++d)
      v[3 * d] = rows.src[d], v[3 * d + 1] = rows.scale[d], v[3 * d + 2] = rows.offset[d];
    return v;
  }
  template <class N>
  static bool same_node(const void* a, const void* b) {
    return same_tree(*static_cast<const N*>(a), *static_cast<const N*>(b));
  }
  /// The first value of an equal node met over the same rows, or -1. (Not while replaying:
  /// the values are then taken again by count.)
  template <class N, std::size_t Q, std::size_t R>
  int seen_before(const N& n, const bind::affine_map<Q, R>& rows) const {
    if (replay_) return -1;
    const auto r = rows_of(rows);
    for (const met& e : met_)
      if (e.same == &same_node<N> && e.rows == r && e.same(e.node, &n)) return e.slot;
    return -1;
  }
  template <class N, std::size_t Q, std::size_t R>
  void remember(const N& n, const bind::affine_map<Q, R>& rows, int slot) {
    if (!replay_) met_.push_back(met{&n, &same_node<N>, rows_of(rows), slot});
  }

  template <class P>
  void store(int slot, const P& p) {
    if constexpr (!std::is_void_v<Phases>) {
      if (replay_) return;
      bool done = false;
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (
            [&] {
              if constexpr (std::is_same_v<std::remove_cvref_t<decltype(fuse::get<I>(*phases_))>, P>)
                if (static_cast<int>(I) == slot) fuse::get<I>(*phases_) = p, done = true, stored_ |= 1u << I;
            }(),
            ...);
      }(std::make_index_sequence<Phases::size>{});
      if (!done) throw error("fuse::cuda::eval: internal error: a phase met out of the order of its type");
    } else {
      (void)slot, (void)p;
    }
  }

  Phases* phases_ = nullptr;
  /// Coordinates that the phase of an enclosing reduction over several axes walks itself.
  std::uint64_t borrowed_ = 0;
  bool rows_across_ = false;
  std::uint64_t row_axes_ = 0;
  std::vector<met> met_;
  int next_ = 0;
  bool replay_ = false;
  unsigned stored_ = 0;
};

}  // namespace fuse::cuda
