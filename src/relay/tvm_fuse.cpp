// TVM v0.19 FuseOps' grouping of a Relay program (fuse/relay/tvm_fuse.hpp): the rules are in the
// header's comment.

#include "fuse/relay/tvm_fuse.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/ops.hpp"
#include "fuse/relay/plan.hpp"

namespace fuse::relay {

namespace detail::tvm {
namespace {

/// Already fused (Primitive=1) or handed to external codegen (Compiler="..."): TVM's graph
/// creator skips Compiler functions and its rewrite skips Primitive ones.
bool is_opaque_function(const expr& fn) {
  const attr_value* c = fn.attributes.find("Compiler");
  return has_flag(fn, "Primitive") || (c && c->k == attr_value::kind::string && !c->s.empty());
}
/// PlanDevices removes on_device before FuseOps: look through it.
const expr* through_on_device(const expr* e) {
  while (is_op_call(e, "on_device") && !e->args.empty()) e = e->args[0];
  return e;
}
op_pattern max_pattern(op_pattern a, op_pattern b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }
bool le(op_pattern a, op_pattern b) { return static_cast<int>(a) <= static_cast<int>(b); }

/// FuseOps on one function (a definition's): graph, post-dominator tree, groups, phases.
class partitioner {
 public:
  partitioner(const module& m, const expr* fn, int max_depth) : m_(m), fn_(fn), max_depth_(max_depth) {}

  /// Appends this function's kernels to `plan`; the globals it calls go to `globals`.
  void run(tvm_plan& plan, std::vector<std::string>& globals) {
    order();
    build(plan, globals);
    post_dominators();
    groups_init();
    for (int phase = 0; phase < 3; ++phase) fuse(phase);
    collect(plan);
  }

 private:
  struct edge {
    int node;
    op_pattern pattern;
  };
  struct gnode {
    const expr* ref = nullptr;
    op_pattern pattern = op_pattern::opaque;  // vars, lets, ifs and closure calls stay opaque
    bool extern_ref = false;
    std::vector<edge> outputs;
  };

  // ---- 1. the dataflow graph (2.3.1) -----------------------------------------------------------

  /// Whether `e` is a node of the graph: ops, globals and functions are not (TVM never gives
  /// them a post-DFS index), and on_device is looked through.
  static bool is_node(const expr* e) {
    switch (e->kind) {
      case expr_kind::op:
      case expr_kind::global:
      case expr_kind::function: return false;
      case expr_kind::call: return !is_op_call(e, "on_device");
      default: return true;
    }
  }

  /// The children in the order TVM's visitor takes them: a call's callee (when not an op)
  /// before its arguments, a function's parameters before its body, a let's var and value
  /// before its body. An existing primitive function is not entered.
  static void children(const expr* e, std::vector<const expr*>& out) {
    out.clear();
    switch (e->kind) {
      case expr_kind::call:
        if (e->callee && e->callee->kind != expr_kind::op) out.push_back(e->callee);
        out.insert(out.end(), e->args.begin(), e->args.end());
        break;
      case expr_kind::function:
        if (is_opaque_function(*e)) break;
        out.insert(out.end(), e->args.begin(), e->args.end());
        if (e->body) out.push_back(e->body);
        break;
      case expr_kind::tuple:
      case expr_kind::tuple_get:
      case expr_kind::let:
      case expr_kind::if_else: out.insert(out.end(), e->args.begin(), e->args.end()); break;
      default: break;
    }
  }

  /// Post-DFS numbering with an explicit stack (memoized: a shared node is visited once). Not
  /// the shared walk (ir.hpp): TVM's visitor also visits a global callee, which is no child there.
  void order() {
    std::unordered_set<const expr*> seen;
    std::vector<std::pair<const expr*, bool>> stack{{fn_, false}};
    std::vector<const expr*> kids;
    while (!stack.empty()) {
      auto [e, expanded] = stack.back();
      stack.pop_back();
      if (expanded) {
        if (is_node(e)) {
          index_.emplace(e, static_cast<int>(nodes_.size()));
          nodes_.push_back(gnode{e, op_pattern::opaque, false, {}});
        } else if (e->kind == expr_kind::function) {
          functions_.push_back(e);
        } else if (e->kind == expr_kind::global) {
          globals_.push_back(e->name);
        }
        continue;
      }
      if (!seen.insert(e).second) continue;
      stack.push_back({e, true});
      children(e, kids);
      for (auto it = kids.rbegin(); it != kids.rend(); ++it)
        if (!seen.count(*it)) stack.push_back({*it, false});
    }
  }

  int node_of(const expr* e) const {
    auto it = index_.find(through_on_device(e));
    return it == index_.end() ? -1 : it->second;
  }
  /// TVM's Update(e, consumer, pattern): an edge into `consumer`.
  void link(const expr* e, int consumer, op_pattern p) {
    if (int i = node_of(e); i >= 0) nodes_[static_cast<std::size_t>(i)].outputs.push_back({consumer, p});
  }
  /// TVM's Update(e, nullptr, ...): fusion stops at e (it is a root, never fused forward).
  void mark_extern(const expr* e) {
    if (int i = node_of(e); i >= 0) nodes_[static_cast<std::size_t>(i)].extern_ref = true;
  }

  const type& typed(const expr* e) const {
    if (!e->checked.known())
      throw m_.error_at(e->at, "the TVM planner needs a type-checked module (shapes decide how edges fuse)");
    return e->checked;
  }

  void build(tvm_plan& plan, std::vector<std::string>& globals) {
    for (const expr* f : functions_) {
      if (is_opaque_function(*f)) {
        plan.primitives.push_back(f);
        continue;
      }
      for (const expr* p : f->args) mark_extern(p);
      if (f->body) mark_extern(f->body);
    }
    globals.insert(globals.end(), globals_.begin(), globals_.end());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      gnode& n = nodes_[i];
      const expr* e = n.ref;
      const int self = static_cast<int>(i);
      switch (e->kind) {
        case expr_kind::constant: {
          // A 0-d constant of a dtype the code generator inlines is elemwise (2.3.1); any other
          // constant is opaque (it becomes a parameter).
          const type& t = typed(e);
          const dtype d = t.dt;
          const bool simple = d == dtype::int32() || d == dtype::int64() || d == dtype::float32() ||
                              d == dtype{dtype::float_code, 64, 1} || d.is_bool();
          n.pattern = t.is_tensor() && t.shape.empty() && simple ? op_pattern::elemwise : op_pattern::opaque;
          break;
        }
        case expr_kind::call: {
          if (!e->callee || e->callee->kind != expr_kind::op) {  // a closure or global call: opaque
            if (e->callee) {
              link(e->callee, self, op_pattern::opaque);
              mark_extern(e->callee);
            }
            for (const expr* a : e->args) link(a, self, op_pattern::opaque);
            break;
          }
          const std::string& name = e->callee->name;
          const op_def* def = find_op(name);
          if (!def) throw m_.error_at(e->at, "the TVM planner does not know the op " + name);
          if (def->pattern == op_pattern::none || name.starts_with("qnn.")) {
            // TVM's build lowers these before FuseOps; fpattern[op] would fail on them there.
            throw m_.error_at(
                e->at, "the TVM planner needs " + name + " lowered first (" +
                           (name.starts_with("qnn.") ? "TVM legalizes it" : "TVM's SimplifyInference decomposes it") +
                           " before FuseOps)");
          }
          n.pattern = def->pattern;
          const type& result = typed(e);
          for (const expr* a : e->args) {
            op_pattern p = n.pattern;
            // broadcast -> elemwise when this argument already has the result's shape (2.3.1).
            const type& at = typed(a);
            if (p == op_pattern::broadcast && at.is_tensor() && result.is_tensor() && at.shape == result.shape)
              p = op_pattern::elemwise;
            link(a, self, p);
          }
          break;
        }
        case expr_kind::tuple:
          n.pattern = op_pattern::tuple;
          for (const expr* f : e->args) {
            if (typed(f).is_tensor()) link(f, self, op_pattern::injective);
            else mark_extern(f);  // a nested tuple or a closure in a tuple is not fused
          }
          break;
        case expr_kind::tuple_get: {
          const type& t = typed(e->args[0]);
          if (t.k != type::kind::tuple)
            throw m_.error_at(e->at, "the TVM planner needs the projected value to have a tuple type, not " + t.str());
          const bool all_tensors =
              std::all_of(t.fields.begin(), t.fields.end(), [](const type& f) { return f.is_tensor(); });
          if (all_tensors) {
            n.pattern = op_pattern::injective;
            link(e->args[0], self, op_pattern::injective);
          } else {
            mark_extern(e->args[0]);  // the projection stays opaque
          }
          break;
        }
        case expr_kind::let:
        case expr_kind::if_else:  // do not fuse through let or if
          for (const expr* a : e->args) mark_extern(a);
          break;
        default: break;  // vars: opaque
      }
    }
  }

  // ---- 2. the post-dominator tree (2.3.2) --------------------------------------------------------

  /// The LCA of tree nodes a and b (-1: none), folding the patterns met while climbing into `p`.
  int lca(int a, int b, op_pattern& p) const {
    while (a != b) {
      if (a < 0 || b < 0) return -1;
      const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
      if (depth_[ua] < depth_[ub]) {
        p = max_pattern(p, dom_pattern_[ub]);
        b = dom_parent_[ub];
      } else if (depth_[ub] < depth_[ua]) {
        p = max_pattern(p, dom_pattern_[ua]);
        a = dom_parent_[ua];
      } else {
        p = max_pattern(p, max_pattern(dom_pattern_[ua], dom_pattern_[ub]));
        a = dom_parent_[ua];
        b = dom_parent_[ub];
      }
    }
    return a;
  }

  void post_dominators() {
    const std::size_t n = nodes_.size();
    dom_parent_.assign(n, -1);
    depth_.assign(n, 1);
    dom_pattern_.assign(n, op_pattern::opaque);
    for (std::size_t i = n; i-- > 0;) {
      const gnode& g = nodes_[i];
      if (g.extern_ref) continue;  // parent none, depth 1, pattern opaque
      op_pattern p = op_pattern::elemwise;
      int parent = -1;
      for (std::size_t k = 0; k < g.outputs.size(); ++k) {
        parent = k == 0 ? g.outputs[0].node : lca(parent, g.outputs[k].node, p);
        p = max_pattern(p, g.outputs[k].pattern);
      }
      dom_parent_[i] = parent;
      depth_[i] = parent >= 0 ? depth_[static_cast<std::size_t>(parent)] + 1 : 1;
      dom_pattern_[i] = p;
    }
  }

  // ---- 3. groups (2.3.3) ---------------------------------------------------------------------

  struct group {
    int parent;          // union-find; itself at a root
    op_pattern pattern;  // the node's, until an anchor joins this group as root
    bool anchor;         // holds a kOutEWiseFusable node
    std::size_t num_nodes = 1;
  };

  void groups_init() {
    groups_.clear();
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      groups_.push_back({static_cast<int>(i), nodes_[i].pattern, nodes_[i].pattern == op_pattern::out_ewise_fusable});
  }

  int root(int g) {
    int r = g;
    while (groups_[static_cast<std::size_t>(r)].parent != r) r = groups_[static_cast<std::size_t>(r)].parent;
    while (groups_[static_cast<std::size_t>(g)].parent != r) {
      const int next = groups_[static_cast<std::size_t>(g)].parent;
      groups_[static_cast<std::size_t>(g)].parent = r;
      g = next;
    }
    return r;
  }

  /// Child's group into parent's: sizes add up, an anchor carries its pattern along.
  void merge(int child, int parent) {
    child = root(child);
    parent = root(parent);
    if (child == parent) return;
    group& c = groups_[static_cast<std::size_t>(child)];
    group& p = groups_[static_cast<std::size_t>(parent)];
    p.num_nodes += c.num_nodes;
    c.parent = parent;
    if (c.anchor) {
      // TVM aborts ("Cannot merge two complex group together"); the rules never get here.
      if (p.anchor)
        throw m_.error_at(nodes_[static_cast<std::size_t>(parent)].ref->at,
                          "the TVM planner would put two anchors in one group");
      p.anchor = true;
      p.pattern = max_pattern(c.pattern, p.pattern);
    }
  }

  // ---- 4. RunFuse (2.3.4) ----------------------------------------------------------------------

  /// Starts a walk: the visited marks of the previous one are dropped in O(1).
  void new_walk() {
    if (mark_.size() != nodes_.size()) mark_.assign(nodes_.size(), 0);
    ++stamp_;
  }
  bool visit(int v) {
    std::uint32_t& m = mark_[static_cast<std::size_t>(v)];
    if (m == stamp_) return false;
    m = stamp_;
    return true;
  }

  /// Every node on every path src -> sink (src excluded, sink included) satisfies `ok(pattern of
  /// its root group, is_sink)`.
  template <class F>
  bool check_path(int src, int sink, F ok) {
    new_walk();
    stack_.clear();
    for (const edge& o : nodes_[static_cast<std::size_t>(src)].outputs) stack_.push_back(o.node);
    while (!stack_.empty()) {
      const int v = stack_.back();
      stack_.pop_back();
      if (!visit(v)) continue;
      if (!ok(groups_[static_cast<std::size_t>(root(v))].pattern, v == sink)) return false;
      if (v == sink) continue;
      for (const edge& o : nodes_[static_cast<std::size_t>(v)].outputs) stack_.push_back(o.node);
    }
    return true;
  }

  /// Merges every node on every path src -> sink into sink's group.
  void commit(int src, int sink) {
    new_walk();
    stack_.assign(1, src);
    while (!stack_.empty()) {
      const int v = stack_.back();
      stack_.pop_back();
      if (v == sink || !visit(v)) continue;
      merge(v, sink);
      for (const edge& o : nodes_[static_cast<std::size_t>(v)].outputs) stack_.push_back(o.node);
    }
  }

  /// The size the group would reach: the sink's root group, plus, for each node on the paths
  /// from child (included) to the sink (excluded), the size recorded in that node's *own* group
  /// record (not its root's: a node merged earlier keeps the size it had then). This is how
  /// TVM counts since #6327; it is what makes a 300-op chain split at 256.
  std::size_t fused_size(int child, int sink) {
    std::size_t sum = groups_[static_cast<std::size_t>(root(sink))].num_nodes;
    new_walk();
    stack_.assign(1, child);
    while (!stack_.empty()) {
      const int v = stack_.back();
      stack_.pop_back();
      if (v == sink || !visit(v)) continue;
      sum += groups_[static_cast<std::size_t>(v)].num_nodes;
      for (const edge& o : nodes_[static_cast<std::size_t>(v)].outputs) stack_.push_back(o.node);
    }
    return sum;
  }

  void fuse(int phase) {
    using P = op_pattern;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const int n = static_cast<int>(i);
      // n's own group record, not its root (as TVM reads groups_[nid]).
      const P gp = groups_[i].pattern;
      const int d = dom_parent_[i];
      if (gp == P::opaque || d < 0) continue;
      const auto ud = static_cast<std::size_t>(d);
      // TVM refuses a fusion whose group would pass max_fuse_depth before anything else; the
      // count walks the paths to d, so it is taken here only where a fusion would follow (the
      // same decisions: it changes nothing, and unrolled models stay near-linear).
      const auto small_enough = [&] { return fused_size(n, d) <= static_cast<std::size_t>(std::max(max_depth_, 0)); };

      if (phase == 2) {
        // Injective ops into an intermediate tuple that was itself fused into an injective
        // consumer (concatenate); nothing else happens in phase 2.
        if (!le(gp, P::injective)) continue;
        const P root_pattern = groups_[static_cast<std::size_t>(root(d))].pattern;
        if (groups_[ud].pattern == P::tuple && le(root_pattern, P::injective) && small_enough() &&
            check_path(n, d, [](P k, bool) { return le(k, P::injective); }))
          commit(n, d);
        continue;
      }
      if (root(n) == root(d)) continue;
      if (groups_[ud].pattern == P::tuple) continue;  // phases 0 and 1 never fuse into a tuple
      const P dp = dom_pattern_[i];
      if (gp == P::out_ewise_fusable) {
        // An anchor takes element-wise/broadcast epilogues only, in phase 0.
        if (phase == 0 && dp == P::elemwise && small_enough() &&
            check_path(n, d, [](P k, bool) { return le(k, P::broadcast); }))
          commit(n, d);
      } else if (le(gp, P::broadcast)) {
        // Into an injective, reduction or anchor sink through injective-or-less groups.
        if ((le(dp, P::injective) || dp == P::comm_reduce) && small_enough() && check_path(n, d, [](P k, bool sink) {
              return sink ? (le(k, P::injective) || k == P::comm_reduce || k == P::out_ewise_fusable)
                          : le(k, P::injective);
            }))
          commit(n, d);
      } else if (gp == P::injective || gp == P::tuple) {
        // Deferred to phase 1 so that anchors finish first; injective all the way, so an
        // injective producer never joins a reduction or an anchor.
        if (phase == 1 && small_enough() && check_path(n, d, [](P k, bool) { return le(k, P::injective); }))
          commit(n, d);
      }
      // comm_reduce: a reduction never absorbs its consumers.
    }
  }

  // ---- 5. the primitive functions (2.3.5) ----------------------------------------------------

  void collect(tvm_plan& plan) {
    std::unordered_map<int, std::size_t> slot;  // root -> index in `found`
    std::vector<std::pair<int, tvm_group>> found;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const expr* e = nodes_[i].ref;
      const bool op_call = e->kind == expr_kind::call && e->callee && e->callee->kind == expr_kind::op;
      if (!op_call && e->kind != expr_kind::tuple && e->kind != expr_kind::tuple_get) continue;
      const int r = root(static_cast<int>(i));
      auto [it, fresh] = slot.emplace(r, found.size());
      if (fresh) found.push_back({r, {}});
      found[it->second].second.nodes.push_back(e);
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [r, g] : found) {
      const auto ur = static_cast<std::size_t>(r);
      const expr* e = nodes_[ur].ref;
      bool kernel = false;
      if (e->kind == expr_kind::call)
        kernel = e->callee && e->callee->kind == expr_kind::op && !is_op_call(e, "annotation.stop_fusion");
      else if (e->kind == expr_kind::tuple_get) kernel = node_of(e->args[0]) >= 0 && root(node_of(e->args[0])) == r;
      if (!kernel) continue;
      g.root = e;
      g.pattern = groups_[ur].pattern;
      plan.groups.push_back(std::move(g));
    }
  }

  const module& m_;
  const expr* fn_;
  int max_depth_;
  std::vector<gnode> nodes_;
  std::unordered_map<const expr*, int> index_;
  std::vector<const expr*> functions_;
  std::vector<std::string> globals_;
  std::vector<int> dom_parent_;
  std::vector<int> depth_;
  std::vector<op_pattern> dom_pattern_;
  std::vector<group> groups_;
  std::vector<std::uint32_t> mark_;
  std::uint32_t stamp_ = 0;
  std::vector<int> stack_;
};

}  // namespace
}  // namespace detail::tvm

tvm_plan tvm_fuse_ops(const module& m, const std::string& def, int max_depth) {
  const definition* d = m.find(def);
  if (!d || !d->fn) throw relay::error("the TVM planner: no definition @" + def);
  tvm_plan plan;
  std::vector<std::string> pending{def};
  std::unordered_set<std::string> done;
  while (!pending.empty()) {
    const std::string name = pending.back();
    pending.pop_back();
    if (!done.insert(name).second) continue;
    const definition* g = m.find(name);
    if (!g || !g->fn) continue;
    if (detail::tvm::is_opaque_function(*g->fn)) {
      plan.primitives.push_back(g->fn);
      continue;
    }
    std::vector<std::string> called;
    detail::tvm::partitioner(m, g->fn, max_depth).run(plan, called);
    for (auto it = called.rbegin(); it != called.rend(); ++it) pending.push_back(*it);
  }
  return plan;
}

plan_options tvm_planner_options(const module& m, const std::string& def) {
  plan_options o;
  o.merge_siblings = false;
  for (const tvm_group& g : tvm_fuse_ops(m, def).groups)
    if (g.root) o.store.insert(g.root);
  return o;
}

}  // namespace fuse::relay
