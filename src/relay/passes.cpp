// Relay graph passes (fuse/relay/passes.hpp).
#include "fuse/relay/passes.hpp"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fuse/expr/ops.hpp"
#include "fuse/relay/interpreter.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/ops.hpp"
#include "fuse/relay/printer.hpp"
#include "fuse/relay/typecheck.hpp"

namespace fuse::relay {

namespace pass_detail {

namespace {

expr* make_op(module& m, const std::string& name, location at) {
  expr* op = m.make(expr_kind::op, at);
  op->name = name;
  return op;
}

/// A 0-d constant of dtype dt (MakeConstantScalar), rounded as the dtype holds it.
expr* make_scalar(module& m, dtype dt, double v, location at) {
  constant_data c;
  c.dt = dt;
  c.bytes.resize(dt.bytes());
  if (dt.is_float()) c.set_real(0, v);
  else c.set_integer(0, static_cast<std::int64_t>(v));
  return make_constant(m, std::move(c), at);
}

/// Which globals each definition calls, and which definitions reach themselves through those
/// calls (never inlined: the inlining would not end).
struct call_graph {
  std::unordered_map<std::string, std::unordered_set<std::string>> callees;

  explicit call_graph(module& m) {
    for (definition& d : m.defs) callees[d.name] = globals_used(d.fn);
  }
  bool recursive(const std::string& f) const {
    std::unordered_set<std::string> seen;
    std::vector<std::string> work;
    if (auto it = callees.find(f); it != callees.end()) work.assign(it->second.begin(), it->second.end());
    while (!work.empty()) {
      const std::string g = work.back();
      work.pop_back();
      if (g == f) return true;
      if (!seen.insert(g).second) continue;
      if (auto it = callees.find(g); it != callees.end()) work.insert(work.end(), it->second.begin(), it->second.end());
    }
    return false;
  }
};

/// Bounds what inlining builds. A call graph whose functions call the one below twice (f1 calls
/// f0 twice, f2 calls f1 twice, ...) inlines to a program exponentially larger than its text:
/// inlining stops with an error at the call once the arena would pass 16 times its size before
/// inlining plus 2^18 nodes, so memory stays proportional to the input.
struct inline_budget {
  std::size_t limit;
  explicit inline_budget(const module& m) : limit(16 * m.nodes.size() + (std::size_t{1} << 18)) {}
  /// Throws when inlining `body` at `call` would pass the limit.
  void charge(const module& m, const expr* call, expr* body) const {
    const std::size_t adding = post_order({body}).size();
    if (m.nodes.size() + adding > limit)
      throw m.error_at(
          call->at, "inlining this call would grow the program past " + std::to_string(limit) +
                        " nodes: its functions call each other so many times that the inlined program is exponentially "
                        "larger than the text (keep such functions as calls, or inline fewer levels)");
  }
};

/// A copy of the nodes under `root`, with the variables of `subst` replaced by their values.
/// Variables bound under root (let, parameters of nested functions) get fresh copies, so the
/// same body can be inlined twice; free variables, ops and globals are shared.
expr* copy_with(module& m, expr* root, const std::unordered_map<expr*, expr*>& subst) {
  const std::vector<expr*> order = post_order({root});
  std::unordered_set<expr*> bound;
  for (expr* e : order) {
    if (e->kind == expr_kind::let) bound.insert(e->args[0]);
    if (e->kind == expr_kind::function)
      for (expr* p : e->args) bound.insert(p);
  }
  std::unordered_map<expr*, expr*> copy;
  for (expr* e : order) {
    if (auto s = subst.find(e); s != subst.end()) {
      copy[e] = s->second;
      continue;
    }
    if ((e->kind == expr_kind::var && !bound.count(e)) || e->kind == expr_kind::op || e->kind == expr_kind::global) {
      copy[e] = e;
      continue;
    }
    m.nodes.push_back(*e);
    expr* c = &m.nodes.back();
    for_each_child(c, [&](expr*& k) {
      auto it = copy.find(k);
      if (it != copy.end()) k = it->second;
    });
    copy[e] = c;
  }
  return copy.at(root);
}

bool was_typechecked(const module& m) {
  for (const definition& d : m.defs)
    if (!d.fn->checked.known()) return false;
  return !m.defs.empty();
}

/// A canonical text of an attribute value (numbers by value), for hashing.
std::string attr_key(const attr_value& v) {
  switch (v.k) {
    case attr_value::kind::none: return "N";
    case attr_value::kind::integer:
    case attr_value::kind::real:
    case attr_value::kind::boolean: return "#" + printer_detail::shortest(v.number());
    case attr_value::kind::string: return "s" + std::to_string(v.s.size()) + ":" + v.s;
    case attr_value::kind::array: {
      std::string s = "[";
      for (const attr_value& x : v.items) s += attr_key(x) + ",";
      return s + "]";
    }
    case attr_value::kind::meta: return "m" + v.meta.key + ":" + std::to_string(v.meta.index);
    case attr_value::kind::expr: return "e" + std::to_string(reinterpret_cast<std::uintptr_t>(v.e));
  }
  return "?";
}

/// The attributes of an op call with the op's defaults filled in, sorted by name.
std::string call_attrs_key(const expr* call) {
  std::map<std::string, std::string> all;
  for (const auto& [n, v] : call->attributes.items) all[n] = attr_key(v);
  if (const op_def* d = find_op(call->callee->name))
    for (const auto& [n, v] : d->defaults) all.emplace(std::string(n), attr_key(v));
  std::string s;
  for (const auto& [n, v] : all) s += n + "=" + v + ";";
  return s;
}

}  // namespace

void substitute(module& m, const std::unordered_map<expr*, expr*>& map) {
  if (map.empty()) return;
  auto resolve = [&](expr* e) {
    for (std::size_t guard = 0; guard <= map.size(); ++guard) {
      auto it = map.find(e);
      if (it == map.end() || it->second == e) return e;
      e = it->second;
    }
    return e;
  };
  for (definition& d : m.defs) d.fn = resolve(d.fn);
  // Each slot is redirected as the walk comes to it, and the walk goes on into its new target.
  walk_post_order(
      def_roots(m), enter_all{},
      [&](expr*, expr*& c) {
        c = resolve(c);
        return true;
      },
      [](expr*) {});
}

expr* make_call(module& m, const std::string& op, std::vector<expr*> args, location at, relay::attrs a) {
  expr* c = m.make(expr_kind::call, at);
  c->callee = make_op(m, op, at);
  c->args = std::move(args);
  c->attributes = std::move(a);
  return c;
}

expr* make_constant(module& m, std::shared_ptr<const constant_data> d, location at) {
  expr* c = m.make(expr_kind::constant, at);
  c->annotated = type::tensor(d->shape, d->dt);
  c->data = std::move(d);
  return c;
}

expr* make_constant(module& m, constant_data d, location at) {
  return make_constant(m, std::make_shared<const constant_data>(std::move(d)), at);
}

attr_value int_array(std::vector<std::int64_t> v) {
  attr_value a;
  a.k = attr_value::kind::array;
  for (std::int64_t x : v) a.items.push_back(attr::integer(x));
  return a;
}

expr* expand_to_axis(module& m, expr* bias, std::int64_t ndim, std::int64_t axis, location at) {
  const std::int64_t pad = ndim - axis - 1;
  if (pad <= 0) return bias;
  relay::attrs a;
  a.items.emplace_back("axis", attr::integer(1));
  a.items.emplace_back("num_newaxis", attr::integer(pad));
  return make_call(m, "expand_dims", {bias}, at, std::move(a));
}

std::unordered_set<std::string> globals_used(expr* root) {
  std::unordered_set<std::string> out;
  for (expr* e : post_order({root})) {
    if (e->kind == expr_kind::global) out.insert(e->name);
    if (e->kind == expr_kind::call && e->callee && e->callee->kind == expr_kind::global) out.insert(e->callee->name);
  }
  return out;
}

std::shared_ptr<const constant_data> constant_value(expr* root) {
  module scratch;
  expr* fn = scratch.make(expr_kind::function, root->at);
  fn->body = root;
  scratch.defs.push_back({"main", fn, root->at});
  try {
    typecheck(scratch);
    const value v = interpreter(scratch).run("main", {});
    if (v.is_tuple) return nullptr;
    return std::make_shared<const constant_data>(interpreter::to_constant(v));
  } catch (const relay::error&) {
    return nullptr;
  }
}

}  // namespace pass_detail

// ---- RemoveUnusedFunctions ---------------------------------------------------------------------

void remove_unused_functions(module& m, const std::string& entry) {
  if (!m.find(entry)) return;
  std::unordered_set<std::string> reached{entry};
  std::vector<std::string> work{entry};
  while (!work.empty()) {
    const std::string name = work.back();
    work.pop_back();
    const definition* d = m.find(name);
    if (!d) continue;
    for (const std::string& g : pass_detail::globals_used(d->fn))
      if (reached.insert(g).second) work.push_back(g);
  }
  std::erase_if(m.defs, [&](const definition& d) { return !reached.count(d.name); });
}

// ---- Inline ------------------------------------------------------------------------------------

void inline_functions(module& m) {
  using namespace pass_detail;
  const bool typed = was_typechecked(m);
  const call_graph calls(m);
  const inline_budget budget(m);
  const auto& callees = calls.callees;
  std::unordered_set<std::string> inlinable;
  for (definition& d : m.defs)
    if (has_flag(*d.fn, "Inline") && d.fn->body && !calls.recursive(d.name)) inlinable.insert(d.name);
  // Only functions whose callees are all inlinable (to a fixed point).
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = inlinable.begin(); it != inlinable.end();) {
      bool ok = true;
      for (const std::string& callee : callees.at(*it)) ok = ok && inlinable.count(callee);
      if (!ok) {
        it = inlinable.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
  }
  if (inlinable.empty()) return;
  // Round by round: an inlined body may call further inlinable functions (no recursion, so
  // the rounds end).
  for (;;) {
    std::unordered_map<expr*, expr*> map;
    for (expr* e : post_order(def_roots(m))) {
      if (e->kind != expr_kind::call || !e->callee || e->callee->kind != expr_kind::global ||
          !inlinable.count(e->callee->name))
        continue;
      const definition* d = m.find(e->callee->name);
      if (d->fn->args.size() != e->args.size()) continue;
      budget.charge(m, e, d->fn->body);
      std::unordered_map<expr*, expr*> subst;
      for (std::size_t i = 0; i < e->args.size(); ++i) subst[d->fn->args[i]] = e->args[i];
      map[e] = copy_with(m, d->fn->body, subst);
    }
    if (map.empty()) break;
    substitute(m, map);
  }
  std::unordered_set<std::string> still_used;
  for (definition& d : m.defs)
    for (const std::string& used : globals_used(d.fn))
      if (used != d.name) still_used.insert(used);
  std::erase_if(m.defs, [&](const definition& d) {
    return d.name != "main" && inlinable.count(d.name) && !still_used.count(d.name);
  });
  if (typed) typecheck(m);
}

void inline_calls(module& m) {
  using namespace pass_detail;
  const bool typed = was_typechecked(m);
  const call_graph calls(m);
  const inline_budget budget(m);
  bool changed = false;
  for (int round = 0; round < 64; ++round) {
    std::unordered_map<expr*, expr*> map;
    for (expr* e : post_order(def_roots(m))) {
      if (e->kind != expr_kind::call || !e->callee) continue;
      const expr* fn = nullptr;
      if (e->callee->kind == expr_kind::function) fn = e->callee;
      else if (e->callee->kind == expr_kind::global)
        if (const definition* d = m.find(e->callee->name); d && !calls.recursive(d->name)) fn = d->fn;
      if (!fn || !fn->body || fn->args.size() != e->args.size()) continue;
      budget.charge(m, e, fn->body);
      std::unordered_map<expr*, expr*> subst;
      for (std::size_t i = 0; i < e->args.size(); ++i) subst[fn->args[i]] = e->args[i];
      map[e] = copy_with(m, fn->body, subst);
    }
    if (map.empty()) break;
    substitute(m, map);
    changed = true;
  }
  if (typed && changed) typecheck(m);
}

// ---- SimplifyInference -------------------------------------------------------------------------

void simplify_inference(module& m) {
  using namespace pass_detail;
  if (!was_typechecked(m)) typecheck(m);
  std::unordered_map<expr*, expr*> map;
  std::unordered_map<expr*, expr*> unpacked;  // batch_norm call -> its inference form
  for (expr* e : post_order(def_roots(m))) {
    if (e->kind == expr_kind::tuple_get && e->index == 0) {
      expr* call = e->args[0];
      if (is_op_call(call, "nn.dropout")) {
        map[e] = call->args[0];
        continue;
      }
      if (!is_op_call(call, "nn.batch_norm")) continue;
      const type& t = call->args[0]->checked;
      if (!t.is_tensor()) continue;
      if (auto u = unpacked.find(call); u != unpacked.end()) {
        map[e] = u->second;
        continue;
      }
      const location at = call->at;
      expr *data = call->args[0], *gamma = call->args[1], *beta = call->args[2], *mean = call->args[3],
           *var = call->args[4];
      const std::int64_t ndim = static_cast<std::int64_t>(t.shape.size());
      std::int64_t axis = static_cast<std::int64_t>(attr_or_default(*call, "axis")->number());
      if (axis < 0) axis += ndim;
      // TVM makes epsilon a scalar of the data's dtype from the float attribute.
      const double eps = static_cast<float>(attr_or_default(*call, "epsilon")->number());
      expr* scale = make_call(
          m, ops::divide::name,
          {make_scalar(m, t.dt, 1.0, at),
           make_call(m, ops::sqrt::name, {make_call(m, ops::add::name, {var, make_scalar(m, t.dt, eps, at)}, at)}, at)},
          at);
      if (attr_or_default(*call, "scale")->number() != 0) scale = make_call(m, ops::multiply::name, {scale, gamma}, at);
      expr* shift = make_call(m, ops::multiply::name, {make_call(m, ops::negative::name, {mean}, at), scale}, at);
      if (attr_or_default(*call, "center")->number() != 0) shift = make_call(m, ops::add::name, {shift, beta}, at);
      scale = expand_to_axis(m, scale, ndim, axis, at);
      shift = expand_to_axis(m, shift, ndim, axis, at);
      expr* out = make_call(m, ops::add::name, {make_call(m, ops::multiply::name, {data, scale}, at), shift}, at);
      unpacked[call] = out;
      map[e] = out;
      continue;
    }
    if (is_op_call(e, "nn.layer_norm")) {
      const type& t = e->args[0]->checked;
      if (!t.is_tensor()) continue;
      const location at = e->at;
      expr *data = e->args[0], *gamma = e->args[1], *beta = e->args[2];
      const std::int64_t ndim = static_cast<std::int64_t>(t.shape.size());
      const std::int64_t written_axis = static_cast<std::int64_t>(attr_or_default(*e, "axis")->number());
      const std::int64_t axis = written_axis < 0 ? written_axis + ndim : written_axis;
      const double eps = static_cast<float>(attr_or_default(*e, "epsilon")->number());
      auto reduce_attrs = [&] {
        relay::attrs a;
        a.items.emplace_back("axis", int_array({written_axis}));
        a.items.emplace_back("keepdims", attr::boolean(true));
        return a;
      };
      expr* mu = make_call(m, "mean", {data}, at, reduce_attrs());
      expr* diff = make_call(m, ops::subtract::name, {data, mu}, at);
      expr* variance = make_call(m, "variance", {data, mu}, at, reduce_attrs());
      expr* denom = make_call(m, ops::sqrt::name,
                              {make_call(m, ops::add::name, {variance, make_scalar(m, t.dt, eps, at)}, at)}, at);
      expr* out = make_call(m, ops::divide::name, {diff, denom}, at);
      if (attr_or_default(*e, "scale")->number() != 0)
        out = make_call(m, ops::multiply::name, {out, expand_to_axis(m, gamma, ndim, axis, at)}, at);
      if (attr_or_default(*e, "center")->number() != 0)
        out = make_call(m, ops::add::name, {out, expand_to_axis(m, beta, ndim, axis, at)}, at);
      map[e] = out;
    }
  }
  if (map.empty()) return;  // nothing to simplify: the module and its types stand
  substitute(m, map);
  typecheck(m);
}

// ---- FoldConstant ------------------------------------------------------------------------------

void fold_constant(module& m) {
  using namespace pass_detail;
  typecheck(m);
  static const std::unordered_set<std::string> kept = {"nn.dropout", "on_device", "device_copy",
                                                       "annotation.stop_fusion"};
  // The walk does not enter Primitive functions: their bodies are kernels as written.
  std::vector<expr*> order =
      post_order(def_roots(m), [](expr* e) { return !(e->kind == expr_kind::function && has_flag(*e, "Primitive")); });
  // A folded value never holds more elements than the largest constant it is computed from
  // (or than small_fold): an expanding op (broadcast_to, full, one_hot of a constant) is a view
  // or a loop in the fused code, while folding it would write the expanded tensor into the
  // program (and `full(0f, shape=[1000000, 1000])` would take gigabytes to fold).
  constexpr std::int64_t small_fold = 4096;
  const auto elements = [](const type& t) {
    std::int64_t n = 1;
    for (std::int64_t d : t.shape) n = d < 0 ? std::numeric_limits<std::int64_t>::max() : n * d;
    return t.is_tensor() ? n : 0;
  };
  std::unordered_map<expr*, std::int64_t> source;  // foldable node -> elements of its largest constant
  for (expr* e : order) {
    bool ok = false;
    std::int64_t largest = small_fold;
    switch (e->kind) {
      case expr_kind::constant:
        ok = e->data != nullptr, largest = std::max(largest, e->data ? e->data->elements() : 0);
        break;
      case expr_kind::tuple:
        ok = true;
        for (expr* a : e->args) ok = ok && source.count(a);
        break;
      case expr_kind::tuple_get: ok = source.count(e->args[0]) > 0; break;
      case expr_kind::call:
        ok = e->callee->kind == expr_kind::op && !kept.count(e->callee->name) && find_op(e->callee->name);
        for (expr* a : e->args) ok = ok && source.count(a);
        break;
      default: break;
    }
    if (!ok) continue;
    for (expr* a : e->args) largest = std::max(largest, source[a]);
    if (e->kind == expr_kind::call && elements(e->checked) > largest) continue;
    source[e] = largest;
  }
  const auto foldable = [&](expr* e) { return source.count(e) > 0; };
  // Replaced: foldable tensors that are not constants already. Roots: those with a user that
  // is not replaced itself (the rest only feed roots and die with them).
  auto replaced = [&](expr* e) { return foldable(e) && e->kind != expr_kind::constant && e->checked.is_tensor(); };
  std::vector<expr*> roots;
  std::unordered_set<expr*> is_root;
  for (expr* p : order) {
    if (p->kind == expr_kind::function && has_flag(*p, "Primitive")) continue;
    const bool p_replaced = replaced(p);
    for_each_child(p, [&](expr*& c) {
      if (!p_replaced && replaced(c) && is_root.insert(c).second) roots.push_back(c);
    });
  }
  std::unordered_map<expr*, expr*> map;
  for (expr* r : roots)
    if (auto v = constant_value(r))
      map[r] = make_constant(m, std::move(v), r->at);  // else not foldable after all: left as it is
  substitute(m, map);
  typecheck(m);
}

// ---- DeadCodeElimination -----------------------------------------------------------------------

void eliminate_dead_code(module& m) {
  using namespace pass_detail;
  // A liveness worklist, not the shared walk: a let's value is reached only once its variable is
  // found live, which may come after the let.
  std::unordered_set<expr*> live, live_vars;
  std::unordered_map<expr*, expr*> let_of;  // let variable -> its let
  std::vector<expr*> lets;
  std::vector<expr*> work;
  auto mark = [&](expr* e) {
    if (e && live.insert(e).second) work.push_back(e);
  };
  for (definition& d : m.defs) mark(d.fn);
  while (!work.empty()) {
    expr* e = work.back();
    work.pop_back();
    if (e->kind == expr_kind::let) {
      lets.push_back(e);
      let_of[e->args[0]] = e;
      mark(e->args[2]);
      if (live_vars.count(e->args[0])) mark(e->args[1]);
      continue;
    }
    if (e->kind == expr_kind::var) {
      live_vars.insert(e);
      if (auto it = let_of.find(e); it != let_of.end()) mark(it->second->args[1]);
      continue;
    }
    for_each_child(e, [&](expr*& c) { mark(c); });
  }
  std::unordered_map<expr*, expr*> map;
  for (expr* l : lets)
    if (!live_vars.count(l->args[0])) map[l] = l->args[2];
  substitute(m, map);
}

// ---- graph form for the planner ----------------------------------------------------------------

void inline_lets(module& m) {
  using namespace pass_detail;
  std::unordered_map<expr*, expr*> map;
  for (expr* e : post_order(def_roots(m)))
    if (e->kind == expr_kind::let) map[e->args[0]] = e->args[1], map[e] = e->args[2];
  if (map.empty()) return;
  const bool typed = was_typechecked(m);
  substitute(m, map);
  if (typed) typecheck(m);
}

void if_to_where(module& m) {
  using namespace pass_detail;
  if (!was_typechecked(m)) typecheck(m);
  std::unordered_map<expr*, expr*> map;
  for (expr* e : post_order(def_roots(m))) {
    if (e->kind != expr_kind::if_else) continue;
    const type& c = e->args[0]->checked;
    const type& a = e->args[1]->checked;
    if (!c.is_tensor() || !c.shape.empty() || !c.dt.is_bool() || !a.is_tensor() || !(a == e->args[2]->checked))
      continue;
    map[e] = make_call(m, ops::where::name, {e->args[0], e->args[1], e->args[2]}, e->at);
  }
  if (map.empty()) return;
  substitute(m, map);
  typecheck(m);
}

void flatten_results(module& m, const std::string& fn) {
  using namespace pass_detail;
  definition* d = m.find(fn);
  if (!d || !d->fn->body) return;
  if (!was_typechecked(m)) typecheck(m);
  expr* body = d->fn->body;
  if (body->checked.k != type::kind::tuple) return;
  bool flat = body->kind == expr_kind::tuple;
  for (const expr* f : body->args) flat = flat && f->checked.is_tensor();
  if (flat) return;
  std::vector<expr*> leaves;
  const auto open = [&](const auto& self, expr* e) -> void {
    if (e->checked.k != type::kind::tuple) {
      leaves.push_back(e);
      return;
    }
    if (e->kind == expr_kind::tuple) {
      for (expr* f : e->args) self(self, f);
      return;
    }
    for (std::size_t i = 0; i < e->checked.fields.size(); ++i) {
      expr* g = m.make(expr_kind::tuple_get, e->at);
      g->args = {e};
      g->index = static_cast<std::int64_t>(i);
      g->checked = e->checked.fields[i];
      self(self, g);
    }
  };
  open(open, body);
  expr* t = m.make(expr_kind::tuple, body->at);
  t->args = std::move(leaves);
  d->fn->body = t;
  d->fn->ret = type{};  // the declared result type was the nested one
  typecheck(m);
}

void expand_one_hot(module& m) {
  using namespace pass_detail;
  if (!was_typechecked(m)) typecheck(m);
  std::unordered_map<expr*, expr*> map;
  for (expr* e : post_order(def_roots(m))) {
    if (!is_op_call(e, "one_hot") || !e->checked.is_tensor()) continue;
    const type& t = e->checked;
    const dtype idx = e->args[0]->checked.dt;
    const std::int64_t rank = static_cast<std::int64_t>(t.shape.size());
    auto axis = static_cast<std::int64_t>(attr_or_default(*e, "axis")->number());
    if (axis < 0) axis += rank;
    const std::int64_t depth = t.shape[static_cast<std::size_t>(axis)];
    constant_data positions;
    positions.dt = idx;
    positions.shape.assign(static_cast<std::size_t>(rank - axis), 1);
    positions.shape[0] = depth;
    positions.bytes.resize(static_cast<std::size_t>(depth) * idx.bytes());
    for (std::int64_t k = 0; k < depth; ++k) positions.set_integer(static_cast<std::size_t>(k), k);
    relay::attrs at;
    at.items.emplace_back("axis", attr::integer(axis));
    expr* hit = make_call(m, ops::equal::name,
                          {make_call(m, "expand_dims", {e->args[0]}, e->at, std::move(at)),
                           make_constant(m, std::move(positions), e->at)},
                          e->at);
    auto as_t = [&](expr* v) {
      if (v->checked.dt == t.dt) return v;
      relay::attrs c;
      c.items.emplace_back("dtype", attr::string(t.dt.name()));
      return make_call(m, "cast", {v}, e->at, std::move(c));
    };
    map[e] = make_call(m, ops::where::name, {hit, as_t(e->args[1]), as_t(e->args[2])}, e->at);
  }
  if (map.empty()) return;
  substitute(m, map);
  typecheck(m);
}

// ---- EliminateCommonSubexpr --------------------------------------------------------------------

void eliminate_common_subexpr(module& m) {
  using namespace pass_detail;
  std::unordered_map<expr*, expr*> rep;
  std::unordered_map<std::string, expr*> seen;
  // An argument's identity; scalar constants with data count as equal when their dtype and
  // value are (TVM's IsEqualScalar: two `16f` literals are one argument), so that the quantize
  // of one value by one scale, written once per reader, is one call.
  auto ptr = [](const expr* e) {
    if (e->kind == expr_kind::constant && e->data && e->data->shape.empty())
      return "s" + e->data->dt.name() + ":" + std::to_string(e->data->raw(0));
    return std::to_string(reinterpret_cast<std::uintptr_t>(e));
  };
  for (expr* e : post_order(def_roots(m))) {
    // Children come first, so theirs are final: point at them.
    for_each_child(e, [&](expr*& c) {
      if (auto it = rep.find(c); it != rep.end()) c = it->second;
    });
    std::string key;
    if (e->kind == expr_kind::call && e->callee->kind == expr_kind::op && e->callee->name != "nn.dropout") {
      key = "c" + e->callee->name + "(";
      for (expr* a : e->args) key += ptr(a) + ",";
      key += ")" + call_attrs_key(e);
    } else if (e->kind == expr_kind::tuple) {
      key = "t(";
      for (expr* a : e->args) key += ptr(a) + ",";
      key += ")";
    } else if (e->kind == expr_kind::tuple_get) {
      key = "g" + ptr(e->args[0]) + "." + std::to_string(e->index);
    } else {
      continue;
    }
    auto [it, fresh] = seen.emplace(std::move(key), e);
    if (!fresh) rep[e] = it->second;
  }
  substitute(m, rep);
}

// ---- FoldScaleAxis and CombineParallelDense: shared helpers ------------------------------------

namespace pass_detail {

namespace {

/// Each node's consumers among the nodes reachable from the definitions (a function counts as
/// the consumer of its body, so a result always has one). A node read twice by one call (add(d,
/// d)) has that call twice.
std::unordered_map<const expr*, std::vector<expr*>> consumers_of(module& m) {
  std::unordered_map<const expr*, std::vector<expr*>> out;
  for (expr* e : post_order(def_roots(m))) for_each_child(e, [&](expr*& c) { out[c].push_back(e); });
  return out;
}

bool has_only_consumer(const std::unordered_map<const expr*, std::vector<expr*>>& consumers, const expr* e) {
  const auto it = consumers.find(e);
  return it != consumers.end() && it->second.size() == 1;
}

/// The value of a subgraph of constants that a pass has just built (a weight times a scale, the
/// weights of several branches concatenated), as one constant: evaluated by the interpreter,
/// as fold_constant evaluates, but without touching the rest of the module.
expr* evaluate_constant(module& m, expr* e) {
  auto v = constant_value(e);
  if (!v) throw m.error_at(e->at, "internal: a constant subgraph a pass built could not be evaluated");
  return make_constant(m, std::move(v), e->at);
}

/// Whether a factor of type t varies at most along the last axis of a tensor of type `of`: a
/// rank no higher, every extent 1 but the last, which is 1 or of's (static) last extent, and
/// the same dtype. Multiplying by it (or adding it) scales (or shifts) whole columns and never
/// changes the result's shape.
bool along_last_axis(const type& t, const type& of) {
  if (!t.is_tensor() || !of.is_tensor() || !(t.dt == of.dt) || of.shape.empty() || of.shape.back() < 0 ||
      t.shape.size() > of.shape.size())
    return false;
  for (std::size_t d = 0; d + 1 < t.shape.size(); ++d)
    if (t.shape[d] != 1) return false;
  return t.shape.empty() || t.shape.back() == 1 || t.shape.back() == of.shape.back();
}

/// reshape(e, newshape=[-1]): a per-channel factor as a vector (1 or N elements).
expr* as_vector(module& m, expr* e, location at) {
  relay::attrs a;
  a.items.emplace_back("newshape", int_array({-1}));
  return make_call(m, "reshape", {e}, at, std::move(a));
}

/// expand_dims(v, axis=1): a vector as a column, to scale the rows of a matrix.
expr* as_column(module& m, expr* v, location at) {
  relay::attrs a;
  a.items.emplace_back("axis", attr::integer(1));
  return make_call(m, "expand_dims", {v}, at, std::move(a));
}

/// Whether the output channels of contraction c are the rows of its weight: a dense's [N, K],
/// a matmul's with transpose_b; else (a matmul's [K, N]) its columns.
bool output_channels_are_rows(const expr* c) {
  return is_op_call(c, "nn.dense") || attr_or_default(*c, "transpose_b")->number() != 0;
}

/// A float nn.dense or nn.matmul whose weight is a constant with data, all of one dtype: its
/// weight times a scale folds into one constant, so a scale moved into it costs nothing.
bool scalable_contraction(const expr* c) {
  if (!is_op_call(c, "nn.dense") && !is_op_call(c, "nn.matmul")) return false;
  const expr* w = c->args[1];
  return c->checked.is_tensor() && c->checked.dt.is_float() && has_data(w) && w->checked.is_tensor() &&
         w->checked.dt == c->checked.dt && c->args[0]->checked.is_tensor() && c->args[0]->checked.dt == c->checked.dt;
}

/// Contraction c again (same op and attributes), reading x by weight w.
expr* with_operands(module& m, const expr* c, expr* x, expr* w) {
  return make_call(m, c->callee->name, {x, w}, c->at, c->attributes);
}

/// One round of the backward fold: each multiply(y, s) (or (s, y)) where s is a constant that
/// varies only along the last axis and y is a scalable contraction c read only here, or a
/// bias on c (nn.bias_add on the last axis, or add of a constant that varies only along it)
/// with c read only by the bias and the bias only by the multiply, becomes c with its weight's
/// output channels scaled (and the bias scaled): (x W^T + b) s = x (s W)^T + b s.
bool fold_scale_backward(module& m) {
  const auto consumers = consumers_of(m);
  std::unordered_map<expr*, expr*> map;
  for (expr* e : post_order(def_roots(m))) {
    if (!is_op_call(e, ops::multiply::name) || !e->checked.is_tensor()) continue;
    for (std::size_t side = 0; side < 2; ++side) {
      expr* y = e->args[side];
      expr* s = e->args[1 - side];
      if (!has_data(s) || !(y->checked == e->checked) || !along_last_axis(s->checked, e->checked) ||
          !has_only_consumer(consumers, y))
        continue;
      expr* c = y;
      expr* bias = nullptr;       // the bias call between c and the multiply, if any
      std::size_t bias_side = 0;  // where c is among the bias call's arguments
      if (is_op_call(y, "nn.bias_add")) {
        const auto rank = static_cast<std::int64_t>(y->checked.shape.size());
        std::int64_t axis = static_cast<std::int64_t>(attr_or_default(*y, "axis")->number());
        if (axis < 0) axis += rank;
        if (axis != rank - 1 || !has_data(y->args[1])) continue;
        bias = y, c = y->args[0];
      } else if (is_op_call(y, ops::add::name)) {
        for (std::size_t k = 0; k < 2 && !bias; ++k)
          if (scalable_contraction(y->args[k]) && y->args[k]->checked == y->checked && has_data(y->args[1 - k]) &&
              along_last_axis(y->args[1 - k]->checked, y->checked))
            bias = y, c = y->args[k], bias_side = k;
        if (!bias) continue;
      }
      if (!scalable_contraction(c) || (bias && !has_only_consumer(consumers, c))) continue;
      const location at = e->at;
      expr* v = as_vector(m, s, at);
      expr* w = evaluate_constant(
          m,
          make_call(m, ops::multiply::name, {c->args[1], output_channels_are_rows(c) ? as_column(m, v, at) : v}, at));
      expr* out = with_operands(m, c, c->args[0], w);
      if (bias && is_op_call(bias, "nn.bias_add")) {
        out = make_call(m, "nn.bias_add",
                        {out, evaluate_constant(m, make_call(m, ops::multiply::name, {bias->args[1], v}, at))},
                        bias->at, bias->attributes);
      } else if (bias) {
        expr* b = evaluate_constant(m, make_call(m, ops::multiply::name, {bias->args[1 - bias_side], s}, at));
        out = make_call(m, ops::add::name, bias_side == 0 ? std::vector<expr*>{out, b} : std::vector<expr*>{b, out},
                        bias->at, bias->attributes);
      }
      map[e] = out;
      break;
    }
  }
  substitute(m, map);
  return !map.empty();
}

/// One round of the forward fold: each scalable contraction c (not a matmul with transpose_a)
/// whose data is multiply(x, s) (or (s, x)), read only by c, with s a constant that varies only
/// along the last (input-channel) axis, reads x instead, its weight's input channels scaled:
/// (x s) W^T = x (W s)^T.
bool fold_scale_forward(module& m) {
  const auto consumers = consumers_of(m);
  std::unordered_map<expr*, expr*> map;
  for (expr* c : post_order(def_roots(m))) {
    if (!scalable_contraction(c) || (is_op_call(c, "nn.matmul") && attr_or_default(*c, "transpose_a")->number() != 0))
      continue;
    expr* xs = c->args[0];
    if (!is_op_call(xs, ops::multiply::name) || !has_only_consumer(consumers, xs)) continue;
    for (std::size_t side = 0; side < 2; ++side) {
      expr* x = xs->args[side];
      expr* s = xs->args[1 - side];
      if (!has_data(s) || !(x->checked == xs->checked) || !along_last_axis(s->checked, xs->checked)) continue;
      const location at = xs->at;
      expr* v = as_vector(m, s, at);
      // The input channels are the columns of a dense's [N, K] and the rows of a matmul's [K, N].
      expr* w = evaluate_constant(
          m,
          make_call(m, ops::multiply::name, {c->args[1], output_channels_are_rows(c) ? v : as_column(m, v, at)}, at));
      map[c] = with_operands(m, c, x, w);
      break;
    }
  }
  substitute(m, map);
  return !map.empty();
}

/// concatenate((parts...), axis=0), evaluated to one constant when every part is a constant
/// with data.
expr* concatenate_rows(module& m, const std::vector<expr*>& parts, location at) {
  expr* t = m.make(expr_kind::tuple, at);
  t->args = parts;
  relay::attrs a;
  a.items.emplace_back("axis", attr::integer(0));
  expr* c = make_call(m, "concatenate", {t}, at, std::move(a));
  return std::all_of(parts.begin(), parts.end(), has_data) ? evaluate_constant(m, c) : c;
}

}  // namespace

}  // namespace pass_detail

// ---- FoldScaleAxis -----------------------------------------------------------------------------

void fold_scale_axis(module& m) {
  using namespace pass_detail;
  if (!was_typechecked(m)) typecheck(m);
  for (bool changed = true; changed;) {
    changed = false;
    if (fold_scale_backward(m)) typecheck(m), changed = true;
    if (fold_scale_forward(m)) typecheck(m), changed = true;
  }
}

// ---- CombineParallelDense ----------------------------------------------------------------------

void combine_parallel_dense(module& m, int min_num_branches) {
  using namespace pass_detail;
  if (!was_typechecked(m)) typecheck(m);
  const auto consumers = consumers_of(m);
  const std::size_t min_size = static_cast<std::size_t>(std::max(2, min_num_branches));
  std::unordered_map<expr*, expr*> map;
  for (definition& d : m.defs) {
    const std::vector<expr*> order =
        post_order({d.fn}, [&](expr* e) { return e == d.fn || e->kind != expr_kind::function; });
    const std::unordered_set<const expr*> params(d.fn->args.begin(), d.fn->args.end());
    std::unordered_set<const expr*> anywhere;  // operands readable from anywhere in the definition
    for (expr* e : order) {
      bool ok = e->kind == expr_kind::constant || (e->kind == expr_kind::var && params.count(e));
      if ((e->kind == expr_kind::call && e->callee->kind == expr_kind::op && !is_op_call(e, "nn.dense")) ||
          e->kind == expr_kind::tuple || e->kind == expr_kind::tuple_get)
        ok = std::all_of(e->args.begin(), e->args.end(), [&](const expr* a) { return anywhere.count(a) > 0; });
      if (ok) anywhere.insert(e);
    }
    // Groups of denses by data node, weight dtype, result dtype and whether the weight is a
    // constant with data (those concatenate into one constant; the others into a concatenate
    // the emitter reads through views). A constant without data (print(mod) dropped it) is
    // never a field of a concatenate: the emitter names constants only as op arguments.
    std::vector<std::vector<expr*>> groups;
    std::map<std::tuple<const expr*, std::string, std::string, bool>, std::size_t> group_of;
    for (expr* e : order) {
      if (!is_op_call(e, "nn.dense") || !e->checked.is_tensor() || e->checked.shape.empty()) continue;
      const expr* weight = e->args[1];
      const type& w = weight->checked;
      if (!w.is_tensor() || w.shape.size() != 2 || w.shape[0] < 0 || !anywhere.count(weight)) continue;
      if (weight->kind == expr_kind::constant && !weight->data) continue;
      const auto key =
          std::make_tuple(static_cast<const expr*>(e->args[0]), w.dt.name(), e->checked.dt.name(), has_data(weight));
      const auto [it, fresh] = group_of.emplace(key, groups.size());
      if (fresh) groups.emplace_back();
      groups[it->second].push_back(e);
    }
    for (const std::vector<expr*>& g : groups) {
      if (g.size() < min_size) continue;
      const location at = g[0]->at;
      const auto rank = static_cast<std::int64_t>(g[0]->checked.shape.size());
      // The biases join when every branch's only consumer is a bias_add on its last axis.
      std::vector<expr*> bias_adds;
      for (expr* e : g) {
        if (!has_only_consumer(consumers, e)) break;
        expr* b = consumers.at(e)[0];
        if (!is_op_call(b, "nn.bias_add") || b->args[0] != e || !anywhere.count(b->args[1]) ||
            !b->args[1]->checked.is_tensor())
          break;
        std::int64_t axis = static_cast<std::int64_t>(attr_or_default(*b, "axis")->number());
        if (axis < 0) axis += rank;
        if (axis != rank - 1 || (!bias_adds.empty() && !(b->args[1]->checked.dt == bias_adds[0]->args[1]->checked.dt)))
          break;
        // All constants with data (one constant bias), or no constant at all among them.
        const bool constant = b->args[1]->kind == expr_kind::constant;
        if (constant != has_data(b->args[1]) ||
            (!bias_adds.empty() && has_data(b->args[1]) != has_data(bias_adds[0]->args[1])))
          break;
        bias_adds.push_back(b);
      }
      const bool with_bias = bias_adds.size() == g.size();
      std::vector<expr*> weights, biases;
      std::vector<std::int64_t> cuts;
      std::int64_t total = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        weights.push_back(g[i]->args[1]);
        if (with_bias) biases.push_back(bias_adds[i]->args[1]);
        if (i) cuts.push_back(total);
        total += g[i]->args[1]->checked.shape[0];
      }
      relay::attrs dense_attrs = g[0]->attributes;
      for (auto& [name, value] : dense_attrs.items)
        if (name == "units" && value.k != attr_value::kind::none) value = attr::integer(total);
      expr* out =
          make_call(m, "nn.dense", {g[0]->args[0], concatenate_rows(m, weights, at)}, at, std::move(dense_attrs));
      if (with_bias)
        out = make_call(m, "nn.bias_add", {out, concatenate_rows(m, biases, at)}, bias_adds[0]->at,
                        bias_adds[0]->attributes);
      relay::attrs split_attrs;
      split_attrs.items.emplace_back("indices_or_sections", int_array(cuts));
      split_attrs.items.emplace_back("axis", attr::integer(rank - 1));
      expr* split = make_call(m, "split", {out}, at, std::move(split_attrs));
      for (std::size_t i = 0; i < g.size(); ++i) {
        expr* part = m.make(expr_kind::tuple_get, g[i]->at);
        part->args = {split};
        part->index = static_cast<std::int64_t>(i);
        map[with_bias ? bias_adds[i] : g[i]] = part;
      }
    }
  }
  if (map.empty()) return;  // nothing combined: the module and its types stand
  substitute(m, map);
  typecheck(m);
}

// ---- BatchMatmulToDense ------------------------------------------------------------------------

namespace pass_detail {
namespace {

/// v through reshapes that keep its shape (`reshape(%b, newshape=[-1, 768, 3072])`).
expr* through_same_shape_reshapes(expr* v) {
  while (is_op_call(v, "reshape") && v->args[0]->checked == v->checked) v = v->args[0];
  return v;
}

/// Whether t, a transpose, swaps the two axes of a 2-d tensor (axes unset, [1, 0] or [-1, -2]):
/// not the identity [0, 1].
bool swaps_two_axes(const expr* t) {
  const type& in = t->args[0]->checked;
  if (!in.is_tensor() || in.shape.size() != 2) return false;
  const attr_value* axes = attr_or_default(*t, "axes");
  if (!axes || axes->k == attr_value::kind::none) return true;
  if (axes->k != attr_value::kind::array || axes->items.size() != 2) return false;
  const auto axis = [&](std::size_t i) {
    const auto a = static_cast<std::int64_t>(axes->items[i].number());
    return a < 0 ? a + 2 : a;
  };
  return axis(0) == 1 && axis(1) == 0;
}

/// A constant with data of rank 3 whose batches hold the same bytes (a 2-d weight broadcast
/// over the batch and folded by FoldConstant, as TVM exports int8 BERT: [8, 768, 768]): a new
/// constant of its first batch; else null (other constants, and anything else).
expr* first_of_equal_batches(module& m, const expr* y) {
  if (y->kind != expr_kind::constant || !y->data || y->data->shape.size() != 3) return nullptr;
  const constant_data& d = *y->data;
  const std::int64_t b = d.shape[0];
  if (b < 1) return nullptr;
  const std::size_t batch = d.bytes.size() / static_cast<std::size_t>(b);
  for (std::int64_t i = 1; i < b; ++i)
    if (std::memcmp(d.bytes.data(), d.bytes.data() + static_cast<std::size_t>(i) * batch, batch) != 0) return nullptr;
  constant_data first;
  first.dt = d.dt;
  first.shape = {d.shape[1], d.shape[2]};
  first.bytes.assign(d.bytes.begin(), d.bytes.begin() + static_cast<std::ptrdiff_t>(batch));
  expr* c = make_constant(m, std::move(first), y->at);
  c->checked = c->annotated;  // read before the module is type-checked again
  return c;
}

}  // namespace
}  // namespace pass_detail

void batch_matmul_to_dense(module& m) {
  using namespace pass_detail;
  if (!was_typechecked(m)) typecheck(m);
  std::unordered_map<expr*, expr*> map;
  for (expr* c : post_order(def_roots(m))) {
    if (!is_op_call(c, "nn.batch_matmul") || !c->checked.is_tensor()) continue;
    if (attr_or_default(*c, "transpose_a")->number() != 0) continue;
    const bool tb = attr_or_default(*c, "transpose_b")->number() != 0;
    expr* x = c->args[0];
    expr* y = through_same_shape_reshapes(c->args[1]);
    expr* w = nullptr;
    if (is_op_call(y, "broadcast_to")) w = y->args[0];
    else if (expr* first = first_of_equal_batches(m, y)) w = first;  // TVM folded the broadcast
    if (!w) continue;
    const type &tx = x->checked, &tw = w->checked, &tc = c->checked;
    if (!tx.is_tensor() || !tw.is_tensor() || tx.shape.size() != 3 || tw.shape.size() != 2 || tc.shape.size() != 3)
      continue;
    const std::int64_t b = tx.shape[0];
    if (b < 0 || tc.shape[0] != b) continue;
    // Broadcast over the batch only: the weight's own axes as they are (not a [1, N] row
    // broadcast over K).
    const type& ty = y->checked;
    if (!ty.is_tensor() || ty.shape.size() != 3 || ty.shape[1] != tw.shape[0] || ty.shape[2] != tw.shape[1]) continue;
    // The weight as a dense reads it, [N, K]: as written when the product reads it transposed,
    // else through its transpose (undone when the program wrote one: PyTorch's linear).
    expr* dense_weight;
    if (tb) {
      dense_weight = w;
    } else if (is_op_call(w, "transpose") && swaps_two_axes(w)) {
      dense_weight = w->args[0];  // the program's transpose, undone
    } else {
      relay::attrs a;
      a.items.emplace_back("axes", int_array({1, 0}));
      dense_weight = make_call(m, "transpose", {w}, w->at, std::move(a));
      if (has_data(w)) dense_weight = evaluate_constant(m, dense_weight);  // a constant weight stays one
    }
    // nn.dense takes the [B, M, K] data as it is (its leading axes are rows): no reshape, which
    // the blocked epilogue could not see through (a row block of a layer norm over a reshaped
    // product computed the whole product, 10x at BERT's sizes).
    relay::attrs a;
    if (const attr_value* out = attr_or_default(*c, "out_dtype")) a.items.emplace_back("out_dtype", *out);
    map[c] = make_call(m, "nn.dense", {x, dense_weight}, c->at, std::move(a));
  }
  if (map.empty()) return;
  substitute(m, map);
  typecheck(m);
}

// ---- FoldLayerNorm -----------------------------------------------------------------------------

namespace pass_detail {
namespace {

/// The one axis a reduction of rank-`ndim` data reduces, non-negative, when it is written as one
/// axis (a number or a one-element array), keeps its dimensions and excludes nothing; else -1.
std::int64_t single_kept_axis(const expr* r, std::int64_t ndim) {
  const attr_value* axis = attr_or_default(*r, "axis");
  const attr_value* keep = attr_or_default(*r, "keepdims");
  const attr_value* exclude = attr_or_default(*r, "exclude");
  if (!axis || !keep || keep->number() == 0 || (exclude && exclude->number() != 0)) return -1;
  std::int64_t a;
  if (axis->is_number()) a = static_cast<std::int64_t>(axis->number());
  else if (axis->k == attr_value::kind::array && axis->items.size() == 1 && axis->items[0].is_number())
    a = static_cast<std::int64_t>(axis->items[0].number());
  else return -1;
  if (a < 0) a += ndim;
  return a >= 0 && a < ndim ? a : -1;
}

/// v itself, or v's operand when v is the expand_dims that expand_to_axis writes for `axis` of
/// a rank-`ndim` tensor (a 1-d parameter along a non-last axis).
expr* unexpanded(expr* v, std::int64_t ndim, std::int64_t axis) {
  const std::int64_t pad = ndim - axis - 1;
  if (pad <= 0) return v;
  if (!is_op_call(v, "expand_dims")) return nullptr;
  const attr_value* a = attr_or_default(*v, "axis");
  const attr_value* n = attr_or_default(*v, "num_newaxis");
  if (!a || !n || a->number() != 1 || n->number() != static_cast<double>(pad)) return nullptr;
  return v->args[0];
}

/// A float32 attribute of value v as the parser reads it back from its printed (shortest)
/// form, so that a folded program prints and re-parses to itself: 1e-12f is the double 1e-12,
/// not 1e-12f's exact value. Readers round it to float32 again (the same value).
double float_attribute(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

}  // namespace
}  // namespace pass_detail

void fold_layer_norm(module& m) {
  using namespace pass_detail;
  if (!was_typechecked(m)) typecheck(m);
  const auto consumers = consumers_of(m);
  const auto only = [&](const expr* e) { return has_only_consumer(consumers, e); };
  const auto uses = [&](const expr* e) {
    const auto it = consumers.find(e);
    return it == consumers.end() ? std::size_t{0} : it->second.size();
  };
  std::unordered_map<expr*, expr*> map;
  // The layer norm of x over `axis` (a kept axis of mu and of the variance's reduction), epsilon
  // eps, gamma and beta, replacing root, when the operands are as nn.layer_norm takes them.
  const auto fold = [&](expr* root, expr* x, const expr* mu, const expr* var, const expr* eps, expr* gamma_arg,
                        expr* beta_arg) {
    const type& t = x->checked;
    if (!t.is_tensor() || !t.dt.is_float() || !(root->checked == t)) return;
    const auto ndim = static_cast<std::int64_t>(t.shape.size());
    const std::int64_t axis = single_kept_axis(mu, ndim);
    if (axis < 0 || single_kept_axis(var, ndim) != axis || t.shape[static_cast<std::size_t>(axis)] < 0) return;
    // epsilon: a scalar constant of x's dtype (simplify_inference's float32-rounded attribute).
    if (eps->kind != expr_kind::constant || !eps->data || !eps->data->shape.empty() || !(eps->data->dt == t.dt)) return;
    // gamma and beta: 1-d along the axis, of x's dtype.
    expr* gamma = unexpanded(gamma_arg, ndim, axis);
    expr* beta = unexpanded(beta_arg, ndim, axis);
    const auto along_axis = [&](const expr* v) {
      return v && v->checked.is_tensor() && v->checked.dt == t.dt && v->checked.shape.size() == 1 &&
             v->checked.shape[0] == t.shape[static_cast<std::size_t>(axis)];
    };
    if (!along_axis(gamma) || !along_axis(beta)) return;
    relay::attrs a;
    a.items.emplace_back("axis", attr::integer(axis));
    a.items.emplace_back("epsilon", attr::real(float_attribute(eps->data->real(0))));
    a.items.emplace_back("center", attr::boolean(true));
    a.items.emplace_back("scale", attr::boolean(true));
    map[root] = make_call(m, "nn.layer_norm", {x, gamma, beta}, root->at, std::move(a));
  };
  for (expr* root : post_order(def_roots(m))) {
    // TensorFlow's form (tf.nn.batch_normalization over moments): add(multiply(x, g),
    // subtract(beta, multiply(mu, g))), g = multiply(rsqrt(add(mean(square(x - mu)), eps)), gamma).
    if (is_op_call(root, ops::add::name) && root->checked.is_tensor() &&
        is_op_call(root->args[0], ops::multiply::name) && is_op_call(root->args[1], ops::subtract::name)) {
      expr* xg = root->args[0];
      expr* shift = root->args[1];
      expr* x = xg->args[0];
      expr* g = xg->args[1];
      expr* mug = shift->args[1];
      if (only(xg) && only(shift) && is_op_call(mug, ops::multiply::name) && only(mug) && mug->args[1] == g &&
          uses(g) == 2 && is_op_call(g, ops::multiply::name)) {
        expr* mu = mug->args[0];
        expr* inv = g->args[0];
        expr* padded = is_op_call(inv, ops::rsqrt::name) && only(inv) ? inv->args[0] : nullptr;
        expr* var = padded && is_op_call(padded, ops::add::name) && only(padded) ? padded->args[0] : nullptr;
        expr* sq = var && is_op_call(var, "mean") && only(var) ? var->args[0] : nullptr;
        expr* d =
            sq && is_op_call(sq, ops::multiply::name) && only(sq) && sq->args[0] == sq->args[1] ? sq->args[0] : nullptr;
        if (d && is_op_call(d, ops::subtract::name) && uses(d) == 2 && d->args[0] == x && d->args[1] == mu &&
            is_op_call(mu, "mean") && mu->args[0] == x && uses(mu) == 2)
          fold(root, x, mu, var, padded->args[1], g->args[1], shift->args[0]);
      }
      continue;
    }
    // add(multiply(divide(subtract(x, mu), sqrt(add(variance(x, mu), eps))), gamma), beta)
    if (!is_op_call(root, ops::add::name) || !root->checked.is_tensor()) continue;
    expr* scaled = root->args[0];
    expr* beta_arg = root->args[1];
    if (!is_op_call(scaled, ops::multiply::name) || !only(scaled)) continue;
    expr* normalized = scaled->args[0];
    expr* gamma_arg = scaled->args[1];
    if (!is_op_call(normalized, ops::divide::name) || !only(normalized)) continue;
    expr* centered = normalized->args[0];
    expr* deviation = normalized->args[1];
    if (!is_op_call(centered, ops::subtract::name) || !only(centered)) continue;
    if (!is_op_call(deviation, ops::sqrt::name) || !only(deviation)) continue;
    expr* x = centered->args[0];
    expr* mu = centered->args[1];
    expr* padded = deviation->args[0];
    if (!is_op_call(padded, ops::add::name) || !only(padded)) continue;
    expr* var = padded->args[0];
    const expr* eps = padded->args[1];
    if (!is_op_call(mu, "mean") || mu->args[0] != x || uses(mu) != 2) continue;
    if (!is_op_call(var, "variance") || var->args[0] != x || var->args[1] != mu || !only(var)) continue;
    const attr_value* unbiased = attr_or_default(*var, "unbiased");
    if (unbiased && unbiased->number() != 0) continue;
    fold(root, x, mu, var, eps, gamma_arg, beta_arg);
  }
  if (map.empty()) return;
  substitute(m, map);
  typecheck(m);
}

}  // namespace fuse::relay
