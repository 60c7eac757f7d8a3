// The fusion planner (fuse/relay/plan.hpp).

#include "fuse/relay/plan.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fuse/relay/attributes.hpp"
#include "fuse/relay/ops.hpp"

namespace fuse::relay {

namespace {

using plan_detail::is_call_of;

// The classes of ops come from the registry (fuse/relay/ops.hpp: op_def::kernel).
bool is_contraction(const expr* e) { return kernel_of(e) == op_kernel::contraction; }
bool is_reduction(const expr* e) { return kernel_of(e) == op_kernel::row_kernel; }
/// Nodes that pass their input through (no loop of their own).
bool is_transparent(const expr* e) { return kernel_of(e) == op_kernel::pass_through; }
/// Ops the emitter writes as a reshape view (fuse::reshape).
bool is_reshape_view(const expr* e) { return is_call_of(e, {"reshape", "squeeze", "expand_dims"}); }

/// The attributes of op call e, read through its op's registry entry.
op_call call_of(const module& m, const expr* e) {
  std::vector<type> at;
  for (const expr* a : e->args) at.push_back(a->checked);
  return op_call(m, *e, *find_op(e->callee->name), at);
}

/// On CUDA, how a row node runs: fused into the tree that reads it (the row kernel computes it
/// per row of the output; a reduction over one axis, or over several with keepdims, softmax or
/// layer norm along any axis), or only as the root of its own kernel (fuse/cuda/eval.hpp: a
/// reduction over several axes that drops them).
enum class cuda_row { none, in_tree, own_kernel };
/// The axes a row node walks (reduces or normalises), of its input (bit k: axis k); 0 for none.
std::uint64_t cuda_walked_axes(const module& m, const expr* e) {
  if (!is_reduction(e) || is_call_of(e, {"collapse_sum_like"}) || !e->args[0]->checked.is_tensor()) return 0;
  const auto rank = static_cast<std::int64_t>(e->args[0]->checked.shape.size());
  if (rank == 0 || rank > 64) return 0;
  const op_call c = call_of(m, e);
  if (is_call_of(e, {"nn.softmax", "nn.log_softmax", "nn.layer_norm"}))
    return std::uint64_t{1} << c.axis(c.integer("axis"), rank);
  const std::vector<bool> reduced = c.reduced_axes(rank);
  std::uint64_t axes = 0;
  for (std::int64_t k = 0; k < rank; ++k)
    if (reduced[static_cast<std::size_t>(k)]) axes |= std::uint64_t{1} << k;
  return axes;
}
/// The axis along which the row kernel walks a row node's rows (the last it walks: a reduction
/// over several axes walks the others as a block of sub-rows, along output axes its kept ones
/// leave free, which exist when it keeps its rank); -1 where it runs only at a kernel's root.
std::int64_t cuda_walked_axis(const module& m, const expr* e) {
  const std::uint64_t axes = cuda_walked_axes(m, e);
  if (axes == 0) return -1;
  const bool several = (axes & (axes - 1)) != 0;
  if (several && e->checked.shape.size() != e->args[0]->checked.shape.size()) return -1;
  std::int64_t last = 63;
  while (!((axes >> last) & 1)) --last;
  return last;
}
cuda_row cuda_row_form(const module& m, const expr* e) {
  if (!is_reduction(e)) return cuda_row::none;
  return cuda_walked_axis(m, e) >= 0 ? cuda_row::in_tree : cuda_row::own_kernel;
}
/// Whether a row node walks its input's last axis (then its rows lie along the output's rows
/// wherever the ops above it align last axes: the common case, always one kernel).
bool cuda_along_last(const module& m, const expr* e) {
  return cuda_walked_axis(m, e) == static_cast<std::int64_t>(e->args[0]->checked.shape.size()) - 1;
}
/// The values per row a row node takes in CUDA's row kernel (fuse/cuda/row_program.hpp): a
/// reduction its result; softmax its maximum and sum; layer norm its mean and variance.
int cuda_row_values(const expr* e) { return is_call_of(e, {"nn.softmax", "nn.log_softmax", "nn.layer_norm"}) ? 2 : 1; }
/// The most values per row one CUDA row kernel holds (fuse/cuda/row_program.hpp's max_row_values).
constexpr int cuda_max_row_values = 8;

/// The axes along which row node r's rows move (bit k: axis k of a tensor of rank `rank` whose
/// trailing axes r's align with): its axes of extent above 1 but the one it walks while keeping
/// its rank.
std::uint64_t cuda_moving_axes(const module& m, const expr* r, std::size_t rank) {
  const std::vector<std::int64_t>& shape = r->checked.shape;
  const std::int64_t walked = cuda_walked_axis(m, r);
  const bool kept_rank = shape.size() == r->args[0]->checked.shape.size();
  std::uint64_t mask = 0;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && !(kept_rank && static_cast<std::int64_t>(d) == walked) && rank >= shape.size())
      mask |= std::uint64_t{1} << (rank - shape.size() + d);
  return mask;
}

/// Whether, on CUDA, row node r, read (through the ops between) as argument `arg` of call u,
/// keeps its rows along u's rows: u is elementwise (its broadcasts align the last axes), a cast,
/// a bias_add, a broadcast_to, an annotation, or a row node reading it as its data along axes
/// r's rows do not move along (u walks them inside each of its rows, where r's values must stay
/// the same: `mean((x - mean(x, [2, 3])) ^ 2, [2, 3])`; a reduction at a kernel's root checks
/// the same in fuse/cuda/eval.hpp).
bool cuda_keeps_rows(const module& m, const expr* u, std::size_t arg, const expr* r) {
  if (u->kind != expr_kind::call || u->callee->kind != expr_kind::op) return false;
  if (is_transparent(u) || is_call_of(u, {"cast", "broadcast_to"})) return true;
  // A reshape: the kernel then iterates inside it, where the rows are, if its other ops allow
  // (cuda_reshaped_rows decides once the kernels are known).
  if (is_reshape_view(u)) return true;
  if (is_call_of(u, {"nn.bias_add", "broadcast_to_like"})) return arg == 0;
  if (with_elementwise_op(u->callee->name, [](auto) {})) return true;
  const std::uint64_t walked = cuda_walked_axes(m, u);
  if (walked == 0 || (arg != 0 && !is_call_of(u, {"variance"})))  // (layer norm's gamma and beta are read whole)
    return false;
  return (cuda_moving_axes(m, r, u->args[0]->checked.shape.size()) & walked) == 0;
}

/// On CUDA: the axes of a kernel's output (rank q) along which the other coordinates of the row
/// nodes in e's tree move (bit k: axis k), each row node's axes aligned with the output's last
/// ones; the row kernel walks last an axis outside them (fuse/cuda/eval.hpp, run_row_program).
/// Row nodes inside a reduction's input count only for its own rows (they are not read again by
/// the output's pass); inside softmax or layer norm they are.
template <class Stored>
std::uint64_t cuda_row_axes(const module& m, const expr* e, std::size_t q, const Stored& stored,
                            std::unordered_map<const expr*, std::uint64_t>& memo, bool root = true) {
  if (e->kind != expr_kind::call || (!root && stored(e))) return 0;
  if (auto it = memo.find(e); it != memo.end()) return it->second;  // (a shared node: the same axes)
  std::uint64_t& mask = memo[e];
  if (cuda_row_form(m, e) == cuda_row::in_tree) {
    mask = cuda_moving_axes(m, e, q);
    if (is_call_of(e, {"nn.softmax", "nn.log_softmax", "nn.layer_norm"}))
      mask |= cuda_row_axes(m, e->args[0], q, stored, memo, false);
    return mask;
  }
  // (an unordered_map's elements stay where they are as it grows: `mask` remains valid)
  for (const expr* a : e->args) mask |= cuda_row_axes(m, a, q, stored, memo, false);
  return mask;
}
/// On CUDA: the reshapes in the tree of kernel root `root` (stopping at stored nodes) whose inputs
/// hold row nodes of the tree, appended to `found`. The executor iterates such a kernel inside
/// them (fuse/cuda/row_reshape.hpp), which it can when only elementwise ops and casts of the
/// root's shape lie between them and the root, each covers the root's shape, all reshape one
/// shape, no row node of the tree lies outside them, and none holds another; false otherwise
/// (their row nodes are then stored).
template <class Stored>
bool cuda_reshaped_rows(const module& m, const expr* root, const Stored& stored, std::vector<const expr*>& found) {
  // One walk of the kernel's tree: whether each node's tree holds a row node, and a reshape of one.
  std::unordered_map<const expr*, bool> rows, reshaped;
  const auto of = [](const std::unordered_map<const expr*, bool>& in, const expr* x) {
    const auto it = in.find(x);  // (a stored node, not walked: another kernel's)
    return it != in.end() && it->second;
  };
  const auto is_reshape_of_rows = [&](const expr* x) { return is_reshape_view(x) && of(rows, x->args[0]); };
  walk_post_order(
      std::vector<const expr*>{root}, enter_all{}, [&](const expr*, const expr* c) { return !stored(c); },
      [&](const expr* x) {
        bool r = cuda_row_form(m, x) == cuda_row::in_tree, s = false;
        for (const expr* a : x->args) r = r || of(rows, a), s = s || of(reshaped, a);
        rows[x] = r;
        reshaped[x] = s || is_reshape_of_rows(x);
      });
  bool ok = true, rows_outside = false;
  std::vector<std::pair<const expr*, bool>> stack{{root, true}};  // (node, only elementwise ops above it)
  std::set<std::pair<const expr*, bool>> seen;
  while (!stack.empty()) {
    const auto [x, path_ok] = stack.back();
    stack.pop_back();
    if ((x != root && stored(x)) || x->kind != expr_kind::call || !seen.insert({x, path_ok}).second) continue;
    if (is_reshape_of_rows(x)) {
      if (std::find(found.begin(), found.end(), x) != found.end()) continue;
      // Its input is the space the kernel iterates: one more reshape of rows there is refused.
      ok = ok && path_ok && x->checked.shape == root->checked.shape && !of(reshaped, x->args[0]) &&
           (found.empty() || found[0]->args[0]->checked.shape == x->args[0]->checked.shape);
      found.push_back(x);
      continue;
    }
    if (cuda_row_form(m, x) == cuda_row::in_tree) rows_outside = true;
    const bool elementwise = is_call_of(x, {"cast"}) || with_elementwise_op(x->callee->name, [](auto) {});
    const bool through = path_ok && elementwise && x->checked.shape == root->checked.shape;
    for (const expr* a : x->args) stack.push_back({a, through});
  }
  return found.empty() || (ok && !rows_outside);
}

/// Whether some axis of an output of rank q lies outside mask.
bool cuda_has_free_axis(std::uint64_t mask, std::size_t q) {
  for (std::size_t k = 0; k < q; ++k)
    if (!((mask >> k) & 1)) return true;
  return q == 0;
}

}  // namespace

plan make_plan(const module& m, const std::string& name, const plan_options& options) {
  const definition* d = m.find(name);
  if (!d) throw relay::error("the module has no @" + name);
  plan p;
  p.fn = d->fn;
  const expr* body = d->fn->body;

  // Post-order of the nodes reachable from the body (iterative), and each node's consumers. Not
  // the shared walk: it takes a node's args last first, and the kernel order depends on it.
  std::vector<const expr*> order;
  std::unordered_map<const expr*, int> users;
  std::unordered_map<const expr*, const expr*> a_user;  // one of each node's consumers
  {
    std::unordered_set<const expr*> seen;
    std::vector<std::pair<const expr*, bool>> stack{{body, false}};
    while (!stack.empty()) {
      auto [e, expanded] = stack.back();
      stack.pop_back();
      if (expanded) {
        order.push_back(e);
        continue;
      }
      if (!seen.insert(e).second) continue;
      if (e->kind == expr_kind::call && e->callee->kind != expr_kind::op)
        throw m.error_at(e->at, "the planner runs one function of op calls: inline the functions it calls first");
      if (e->kind == expr_kind::if_else)
        throw m.error_at(
            e->at,
            "an if is compiled only over a 0-d bool condition and tensor branches of one type (as a where), not " +
                e->checked.str());
      if (e->kind == expr_kind::let || e->kind == expr_kind::function)
        throw m.error_at(
            e->at, "the planner runs one function of op calls: inline lets and closures first (prepare_for_planning)");
      stack.push_back({e, true});
      for (const expr* c : e->args) {
        ++users[c];
        a_user[c] = e;
        stack.push_back({c, false});
      }
    }
  }

  // Results: the body, or the fields of a result tuple.
  std::vector<const expr*> results;
  if (body->kind == expr_kind::tuple)
    for (const expr* f : body->args) results.push_back(f);
  else results.push_back(body);
  for (const expr* r : results) {
    if (!r->checked.is_tensor()) throw m.error_at(r->at, "a result must be a tensor, not " + r->checked.str());
    p.materialized.insert(r);
  }
  p.results = results;
  for (const expr* e : options.store)
    if ((e->kind == expr_kind::call || e->kind == expr_kind::tuple_get) && e->checked.is_tensor())
      p.materialized.insert(e);

  // Tree size of each node within its kernel (materialized nodes and leaves count 0), to decide
  // whether a shared node is recomputed or stored, and to bound a kernel's expression depth.
  std::unordered_map<const expr*, int> size, depth;
  std::unordered_map<const expr*, int> stored_depth;               // a materialized node's own tree depth
  constexpr int shared_inline_limit = 8;                           // ops recomputed per extra consumer at most
  constexpr int max_tree_depth = 48;                               // deeper trees are cut (compile time of the header)
  constexpr std::size_t max_pass_outputs = 8, max_pass_ops = 512;  // what one merged pass may hold
  // The size and depth of e's tree over its inputs that are not stored.
  const auto measure = [&](const expr* e, int own) {
    int s = own, dp = 0;
    for (const expr* c : e->args)
      if (!p.materialized.count(c)) s += size[c], dp = std::max(dp, depth[c]);
    size[e] = s;
    depth[e] = dp + own;
  };
  const bool cuda = options.target == plan_target::cuda;
  // On CUDA: the row values each node's tree holds (a node read twice counts twice: the tree is
  // bound once per read), to keep a row kernel within its 8.
  std::unordered_map<const expr*, int> row_values;
  const auto count_values = [&](const expr* e) {
    int v = cuda_row_form(m, e) == cuda_row::in_tree ? cuda_row_values(e) : 0;
    for (const expr* c : e->args)
      if (!p.materialized.count(c)) v += row_values[c];
    return row_values[e] = v;
  };
  // Attention's probabilities, chained (CPU): a softmax along the last axis whose one reader
  // chain (elementwise ops, a requantize, reshapes that keep the last two axes) ends in the A
  // operand of a batch_matmul stays in that product's tree, and so does the batch_matmul of
  // scores it normalises: the executor evaluates the softmax by blocks of rows inside the second
  // product (fuse/cpu/contract.hpp), the scores' blocks inside it (fuse/expr/view_pushdown.hpp),
  // so that neither the scores nor the probabilities are ever stored whole. One kernel instead
  // of three, as fast as the three where a batch's scores are large (Zen 3, head dimension 64,
  // 2026-11-28: 94.1 ms against 94.8 at 96 heads x 384 x 384, 12.7-12.9 against 12.6 at 12 x
  // 384 x 384), slower where they are small (1.53 ms against 1.30 at 12 x 128 x 128: the
  // blocks' own costs), hence chained from 256 x 256 scores a batch.
  constexpr std::int64_t chained_scores_at_least = 256 * 256;
  const auto keeps_last_two = [](const expr* x) {
    const auto& in = x->args[0]->checked.shape;
    const auto& out = x->checked.shape;
    return in.size() >= 2 && out.size() >= 2 && in[in.size() - 1] == out[out.size() - 1] &&
           in[in.size() - 2] == out[out.size() - 2];
  };
  const auto chained_softmax = [&](const expr* e) {
    if (cuda || !is_call_of(e, {"nn.softmax", "nn.log_softmax"}) || !e->checked.is_tensor()) return false;
    const auto rank = static_cast<std::int64_t>(e->checked.shape.size());
    const op_call c = call_of(m, e);
    if (rank < 2 || c.axis(c.integer("axis"), rank) != rank - 1) return false;
    const auto& shape = e->checked.shape;
    if (shape[shape.size() - 1] * shape[shape.size() - 2] < chained_scores_at_least) return false;
    for (const expr* x = e; users[x] == 1 && !p.materialized.count(x);) {
      const expr* u = a_user[x];
      if (u->kind != expr_kind::call || u->callee->kind != expr_kind::op || !u->checked.is_tensor()) return false;
      if (is_call_of(u, {"nn.batch_matmul"})) return u->args[0] == x && !call_of(m, u).boolean("transpose_a");
      const bool view = is_reshape_view(u) || is_call_of(u, {"broadcast_to"});
      if (view ? !keeps_last_two(u) || (is_call_of(u, {"broadcast_to"}) && u->checked.shape != x->checked.shape)
               : kernel_of(u) != op_kernel::loop || find_op(u->callee->name)->pattern > op_pattern::broadcast ||
                     u->checked.shape != x->checked.shape)
        return false;
      x = u;
    }
    return false;
  };
  std::unordered_set<const expr*> chained;  // softmaxes kept in the product that reads them
  for (const expr* e : order)
    if (chained_softmax(e)) chained.insert(e);

  // A batch_matmul fuses into the tree that reads it (its blocks computed per batch: scale,
  // mask, requantize). Where its value flows, within one tree, into a row node (softmax, a
  // reduction), that kernel would evaluate it whole before its loop: it is stored instead, so
  // that a kernel counted here is one pass over the product (until chained contractions fuse
  // them). Flowing into another contraction's operand stores any contraction (below).
  const auto feeds_whole_reader = [&](const expr* e) {
    for (const expr* x = e; users[x] == 1 && !p.materialized.count(x);) {
      const expr* u = a_user[x];
      if (u->kind != expr_kind::call || u->callee->kind != expr_kind::op) return false;
      if (is_reduction(u)) return !chained.count(u);
      x = u;
    }
    return false;
  };
  // Whether a contraction reads each node's value through views, elementwise ops and a split's
  // sections (not through a row node or a reduction, always the root of a kernel of its own
  // here, nor a result or a node stored by request). A contraction inside another's operand is
  // evaluated whole within the reader's kernel (not by blocks): two readers would each compute
  // it (the Q, K and V sections of one combined projection read by QK^T and by PV: the
  // projection three times), and with one reader it measured slower than stored (BERT's FFN,
  // dense -> GELU -> dense: 178-190 ms against 125 for the two kernels, one layer at batch 1,
  // sequence 384), so such a contraction is stored. Consumers come after their operands in
  // `order`: one backward sweep.
  // Each node's consumers, with the argument position it is read at.
  std::unordered_map<const expr*, std::vector<std::pair<const expr*, std::size_t>>> consumers;
  for (const expr* e : order)
    for (std::size_t i = 0; i < e->args.size(); ++i) consumers[e->args[i]].emplace_back(e, i);
  std::unordered_set<const expr*> read_by_contraction;
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    for (const auto& [u, arg] : consumers[*it])
      if (is_contraction(u) || (!is_reduction(u) && !p.materialized.count(u) && read_by_contraction.count(u))) {
        read_by_contraction.insert(*it);
        break;
      }
  for (const expr* e : order) {
    const int own = e->kind == expr_kind::call ? 1 : 0;  // tuples and projections cost nothing
    if (cuda && is_contraction(e))
      throw m.error_at(e->at, e->callee->name +
                                  ": contractions on CUDA: not yet (dense, matmul and batch_matmul run on the CPU: "
                                  "compile for --target cpu)");
    if (cuda && e->kind == expr_kind::call) {
      // Too many row values: store the inputs that hold the most until the tree fits.
      while (count_values(e) > cuda_max_row_values) {
        const expr* most = nullptr;
        for (const expr* c : e->args)
          if (!p.materialized.count(c) && c->kind == expr_kind::call && (!most || row_values[c] > row_values[most]))
            most = c;
        if (!most || row_values[most] == 0) break;  // the node's own values: it is a root, and fits
        p.materialized.insert(most);
        stored_depth[most] = depth[most], size[most] = 0, depth[most] = 0;
      }
    }
    measure(e, own);
    if (depth[e] > max_tree_depth) {
      // Store the deepest input and measure again.
      const expr* deepest = nullptr;
      for (const expr* c : e->args)
        if (!p.materialized.count(c) && c->kind == expr_kind::call && (!deepest || depth[c] > depth[deepest]))
          deepest = c;
      if (deepest) p.materialized.insert(deepest);
      measure(e, own);
    }
    if (e->kind != expr_kind::call) continue;
    const int s = size[e];
    const int u = users[e];
    const bool tensor = e->checked.is_tensor();
    // On CUDA a row node along the last axis stays in the tree that reads it (decided below,
    // once every consumer's kernel is known).
    const bool row_in_tree = cuda && cuda_row_form(m, e) == cuda_row::in_tree;
    if (tensor && ((is_reduction(e) && !row_in_tree && !chained.count(e)) || (is_contraction(e) && u > 1) ||
                   (is_call_of(e, {"nn.batch_matmul"}) && feeds_whole_reader(e)) ||
                   (is_contraction(e) && read_by_contraction.count(e)) ||
                   (u > 1 && !is_transparent(e) && !row_in_tree && s > shared_inline_limit)))
      p.materialized.insert(e);
    if (p.materialized.count(e)) stored_depth[e] = depth[e], size[e] = 0, depth[e] = 0;
  }

  // CUDA kernels iterated inside reshapes (one output each), with the inputs of those reshapes.
  std::unordered_map<const expr*, std::vector<const expr*>> iterated_inside;
  if (cuda) {
    // A row node fused into a tree must keep its rows along the rows of every kernel that
    // reads it, through every op on the way, and be read by one kernel only (else each would
    // compute it): otherwise it is stored, the root of its own kernel. Consumers first, so
    // that the kernels above a node are settled when it is judged.
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const expr* r = *it;
      if (p.materialized.count(r) || cuda_row_form(m, r) != cuda_row::in_tree) continue;
      std::unordered_set<const expr*> roots, seen;
      bool keeps = true;
      std::vector<const expr*> stack{r};
      while (keeps && !stack.empty()) {
        const expr* x = stack.back();
        stack.pop_back();
        if (!seen.insert(x).second) continue;
        for (const auto& [u, arg] : consumers[x]) {
          if (!cuda_keeps_rows(m, u, arg, r)) {
            keeps = false;
            break;
          }
          if (p.materialized.count(u)) roots.insert(u);
          else stack.push_back(u);
        }
      }
      if (!keeps || roots.size() > 1) p.materialized.insert(r), stored_depth[r] = depth[r];
    }
    const auto stored = [&](const expr* x) { return p.materialized.count(x) > 0; };
    // Row nodes read through a reshape: the kernel iterates inside it where its tree allows,
    // else they are stored. Roots last first, so that a row node stored here, a root of its own,
    // is judged after the kernel that reads it.
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const expr* root = *it;
      if (!p.materialized.count(root) || root->kind != expr_kind::call || !root->checked.is_tensor()) continue;
      std::vector<const expr*> found;
      if (cuda_reshaped_rows(m, root, stored, found)) {
        if (found.empty()) continue;
        for (const expr*& x : found) x = x->args[0];
        iterated_inside.emplace(root, std::move(found));
        continue;
      }
      for (const expr* x : found)
        walk_post_order(
            std::vector<const expr*>{x->args[0]}, enter_all{}, [&](const expr*, const expr* c) { return !stored(c); },
            [&](const expr* y) {
              if (!stored(y) && cuda_row_form(m, y) == cuda_row::in_tree)
                p.materialized.insert(y), stored_depth[y] = depth[y];
            });
    }
    // A kernel whose row nodes' rows cover every axis of its output (`mean(x, 0) * mean(x, 1)`;
    // `sum(x, -1) * 2`, whose output lines would cross the sum's rows) has no axis to walk last:
    // its row nodes along other axes than their last are stored, then, if that is not enough,
    // all of them. A kernel iterated inside reshapes is judged there.
    for (const expr* root : order) {
      if (!p.materialized.count(root) || root->kind != expr_kind::call || !root->checked.is_tensor()) continue;
      const auto inside = iterated_inside.find(root);
      const std::vector<const expr*> spaces = inside != iterated_inside.end() ? inside->second : std::vector{root};
      const std::size_t q = spaces[0]->checked.shape.size();
      for (const bool all : {false, true}) {
        std::unordered_map<const expr*, std::uint64_t> memo;
        std::uint64_t mask = 0;
        for (const expr* x : spaces) mask |= cuda_row_axes(m, x, q, stored, memo);
        if (cuda_has_free_axis(mask, q)) break;
        // (the root of the space iterated stays: a row node there is the kernel's root)
        const expr* space_root = spaces.size() == 1 ? spaces[0] : root;
        std::vector<const expr*> rows;
        walk_post_order(
            std::vector<const expr*>{root}, enter_all{}, [&](const expr*, const expr* c) { return !stored(c); },
            [&](const expr* x) {
              if (x != root && x != space_root && cuda_row_form(m, x) == cuda_row::in_tree &&
                  (all || !cuda_along_last(m, x)))
                rows.push_back(x);
            });
        for (const expr* x : rows) p.materialized.insert(x), stored_depth[x] = depth[x];
      }
    }
  }

  std::unordered_map<const expr*, std::size_t> position;
  for (std::size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  // Kernels: one per materialized node, in dependency order; then results of one shape that
  // read the same contraction merge into one multi-output pass.
  for (const expr* e : order) {
    if (!p.materialized.count(e) || e->kind == expr_kind::var || e->kind == expr_kind::constant) continue;
    kernel k;
    k.outputs.push_back(e);
    // The ops of its tree (stopping at materialized nodes), in evaluation order.
    walk_post_order(
        std::vector<const expr*>{e}, enter_all{}, [&](const expr*, const expr* c) { return !p.materialized.count(c); },
        [&](const expr* x) {
          if (x->kind == expr_kind::call) k.ops.push_back(x);
        });
    std::sort(k.ops.begin(), k.ops.end(),
              [&](const expr* a, const expr* b) { return position.at(a) < position.at(b); });  // producers first
    p.kernels.push_back(std::move(k));
  }
  // Horizontal merge: two kernels whose outputs have one shape and that read a common
  // contraction run as one pass (the contraction is then computed once, in blocks). The pass
  // takes the later kernel's place, so it is legal when no kernel in between reads the earlier
  // one's outputs. Each kernel merges into the first later kernel that qualifies; candidates come
  // from indexes (who reads a node, who computes a contraction), so planning stays near-linear
  // in the program's size (an unrolled 100k-op model has thousands of kernels).
  std::unordered_map<const expr*, std::set<std::size_t>> readers;  // node -> kernels whose ops read it
  std::unordered_map<const expr*, std::set<std::size_t>> holders;  // contraction -> kernels computing it
  const auto index_kernel = [&](const kernel& k, std::size_t at) {
    for (const expr* x : k.ops) {
      if (is_contraction(x)) holders[x].insert(at);
      for (const expr* c : x->args) readers[c].insert(at);
    }
  };
  for (std::size_t k = 0; k < p.kernels.size(); ++k) index_kernel(p.kernels[k], k);
  // Kernels whose outputs are elementwise trees (not a reduction, softmax or contraction at the
  // root, which have kernels of their own) can share a pass.
  const auto is_tree_kernel = [&](const kernel& k) {
    for (const expr* o : k.outputs)
      if (is_reduction(o) || is_contraction(o)) return false;
    return true;
  };
  const auto is_result = [&](const expr* e) { return std::find(results.begin(), results.end(), e) != results.end(); };
  // Whether an op of b under a contraction's operands (within b's tree) reads a's outputs.
  const auto reads_under_contraction = [&](const kernel& b, const kernel& a) {
    const std::unordered_set<const expr*> own(b.ops.begin(), b.ops.end());
    const std::unordered_set<const expr*> outs(a.outputs.begin(), a.outputs.end());
    std::vector<const expr*> stack;
    for (const expr* x : b.ops)
      if (is_contraction(x)) stack.insert(stack.end(), x->args.begin(), x->args.end());
    std::unordered_set<const expr*> seen;
    while (!stack.empty()) {  // a search that stops at the first hit, not a whole walk
      const expr* x = stack.back();
      stack.pop_back();
      if (outs.count(x)) return true;
      if (!own.count(x) || !seen.insert(x).second) continue;
      stack.insert(stack.end(), x->args.begin(), x->args.end());
    }
    return false;
  };
  // Whether b's ops read any of a's outputs.
  const auto reads_outputs = [&](const kernel& b, const kernel& a) {
    const std::unordered_set<const expr*> outs(a.outputs.begin(), a.outputs.end());
    for (const expr* x : b.ops)
      for (const expr* c : x->args)
        if (outs.count(c)) return true;
    return false;
  };
  // The ops one pass of a's and b's outputs evaluates, counted with multiplicity: inside the
  // pass a node is evaluated once per read (the library evaluates a tree per output and a shared
  // subtree per reader), a's outputs included where b reads them. A contraction counts once
  // wherever it is read (the blocked epilogue computes each block of it once).
  const auto merged_work = [&](const kernel& a, const kernel& b) {
    std::unordered_set<const expr*> outs(a.outputs.begin(), a.outputs.end());
    outs.insert(b.outputs.begin(), b.outputs.end());
    std::unordered_map<const expr*, std::size_t> memo;
    const auto work = [&](const auto& self, const expr* x) -> std::size_t {
      if (x->kind == expr_kind::var || x->kind == expr_kind::constant || x->kind == expr_kind::op) return 0;
      if (p.materialized.count(x) && !outs.count(x)) return 0;  // read from memory
      if (auto it = memo.find(x); it != memo.end()) return it->second;
      std::size_t w = x->kind == expr_kind::call && !is_contraction(x) ? 1 : 0;
      for (const expr* c : x->args) w += self(self, c);
      if (is_contraction(x)) w = std::min<std::size_t>(w, 1);
      return memo[x] = w;
    };
    std::size_t total = 0;
    for (const expr* o : outs) total += work(work, o);
    return total;
  };
  // On CUDA: the row values one pass of a's and b's outputs holds (counted as count_values does).
  const auto merged_row_values = [&](const kernel& a, const kernel& b) {
    std::unordered_set<const expr*> outs(a.outputs.begin(), a.outputs.end());
    outs.insert(b.outputs.begin(), b.outputs.end());
    std::unordered_map<const expr*, int> memo;
    const auto values = [&](const auto& self, const expr* x) -> int {
      if (x->kind == expr_kind::var || x->kind == expr_kind::constant || x->kind == expr_kind::op) return 0;
      if (p.materialized.count(x) && !outs.count(x)) return 0;
      if (auto it = memo.find(x); it != memo.end()) return it->second;
      int v = cuda_row_form(m, x) == cuda_row::in_tree ? cuda_row_values(x) : 0;
      for (const expr* c : x->args) v += self(self, c);
      return memo[x] = v;
    };
    int total = 0;
    for (const expr* o : outs) total += values(values, o);
    return total;
  };
  for (std::size_t a = 0; options.merge_siblings && a < p.kernels.size(); ++a) {
    kernel& ka = p.kernels[a];
    if (ka.outputs.empty() || !is_tree_kernel(ka)) continue;
    // The first later kernel that reads a's outputs: no pass beyond it may take a's place.
    std::size_t first_reader = p.kernels.size();
    for (const expr* o : ka.outputs)
      if (auto it = readers.find(o); it != readers.end())
        if (auto r = it->second.upper_bound(a); r != it->second.end()) first_reader = std::min(first_reader, *r);
    // Candidates up to it: sharing a contraction or a read input or stored value (worth one
    // pass), or reading a's outputs (an LSTM's h' reads c'; a dequantized result reads the
    // quantized one: in the merged pass it reads their trees, which the pass computes anyway).
    std::set<std::size_t> candidates;
    const auto collect = [&](const std::set<std::size_t>& from) {
      for (auto it = from.upper_bound(a); it != from.end() && *it <= first_reader && *it < p.kernels.size(); ++it)
        candidates.insert(*it);
    };
    for (const expr* x : ka.ops) {
      if (is_contraction(x)) collect(holders[x]);
      for (const expr* c : x->args)
        if (c->kind != expr_kind::call || p.materialized.count(c)) collect(readers[c]);
    }
    for (const expr* o : ka.outputs) collect(readers[o]);
    for (const std::size_t b : candidates) {
      kernel& kb = p.kernels[b];
      if (kb.outputs.empty() || ka.outputs[0]->checked.shape != kb.outputs[0]->checked.shape)
        continue;  // dtypes may differ
      if (!is_tree_kernel(kb)) continue;
      // One pass of bounded size: a fuse::eval of a few outputs (the header's compile time).
      if (ka.outputs.size() + kb.outputs.size() > max_pass_outputs || ka.ops.size() + kb.ops.size() > max_pass_ops)
        continue;
      // b may read a's outputs elementwise (h' reads c'), not as a contraction's operand: there
      // the merged pass would compute a's tree again inside b's prologue (step t + 1 of an
      // unrolled RNN reads h_t through its dense).
      if (reads_under_contraction(kb, ka)) continue;
      // Reading a's outputs: the merged pass reads their trees where b read the stored values,
      // so only for results (stored anyway), not for nodes stored to cut a deep tree, only while
      // the trees together stay within the depth bound, and only while recomputing them at most
      // doubles the pass's work (a value read twice in b would be computed twice, and chains of
      // such merges would grow exponentially: TVM's 1555-add chain, each add reading the two
      // before it).
      if (reads_outputs(kb, ka)) {
        int da = 0, db = 0;
        for (const expr* o : ka.outputs)
          da = std::max(is_result(o) ? 0 : max_tree_depth + 1, std::max(da, stored_depth[o]));
        for (const expr* o : kb.outputs) db = std::max(db, stored_depth[o]);
        if (da + db > max_tree_depth) continue;
        if (merged_work(ka, kb) > 2 * (ka.ops.size() + kb.ops.size()) + 16) continue;
      }
      if (cuda && merged_row_values(ka, kb) > cuda_max_row_values) continue;
      // (a kernel iterated inside reshapes has one output: fuse/cuda/row_reshape.hpp)
      if (cuda && (iterated_inside.count(ka.outputs[0]) || iterated_inside.count(kb.outputs[0]))) continue;
      if (cuda) {
        // One iteration for both: some axis must lie outside every output's row axes. (Where b
        // reads a's outputs the pass reads their trees: their row nodes count too.)
        const std::size_t q = ka.outputs[0]->checked.shape.size();
        std::unordered_set<const expr*> outs(ka.outputs.begin(), ka.outputs.end());
        const auto stored_apart = [&](const expr* x) { return p.materialized.count(x) > 0 && !outs.count(x); };
        std::uint64_t mask = 0;
        for (const kernel* k : {&ka, &kb})
          for (const expr* o : k->outputs) {
            std::unordered_map<const expr*, std::uint64_t> memo;
            mask |= cuda_row_axes(m, o, q, stored_apart, memo);
          }
        if (!cuda_has_free_axis(mask, q)) continue;
      }
      kb.outputs.insert(kb.outputs.begin(), ka.outputs.begin(), ka.outputs.end());
      std::vector<const expr*> ops = ka.ops;
      std::unordered_set<const expr*> in(ops.begin(), ops.end());
      for (const expr* x : kb.ops)
        if (in.insert(x).second) ops.push_back(x);
      kb.ops = std::move(ops);
      index_kernel(ka, b);
      ka.outputs.clear();
      ka.ops.clear();
      break;
    }
  }
  p.kernels.erase(std::remove_if(p.kernels.begin(), p.kernels.end(), [](const kernel& k) { return k.outputs.empty(); }),
                  p.kernels.end());
  return p;
}

plan_options op_by_op_options(const module& m, const std::string& name) {
  const definition* d = m.find(name);
  if (!d) throw relay::error("the module has no @" + name);
  plan_options o;
  o.merge_siblings = false;
  for (const expr* e : post_order(std::vector<const expr*>{d->fn->body}))
    if ((e->kind == expr_kind::call && e->callee->kind == expr_kind::op) || e->kind == expr_kind::tuple_get)
      o.store.insert(e);  // make_plan keeps those of tensor type
  return o;
}

}  // namespace fuse::relay
