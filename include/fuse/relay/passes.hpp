// Relay graph passes over a module, in place: each is usable on its own, adds the nodes it
// needs to the module's arena and re-runs type inference where the types it leaves matter.
//
//   remove_unused_functions(m)   defs not reachable from @main dropped (TVM RemoveUnusedFunctions)
//   inline_functions(m)          calls of global functions marked Inline=1 inlined (TVM Inline)
//   simplify_inference(m)        batch_norm, dropout, layer_norm rewritten for inference
//   fold_constant(m)             subgraphs of constants evaluated by the interpreter
//   eliminate_dead_code(m)       let bindings whose variable is not used removed
//   eliminate_common_subexpr(m)  identical op calls, tuples and projections merged
//
// A rewrite never edits a node that other nodes point at into something else: it builds the
// replacement and then redirects every pointer to the old node (`substitute`), so a shared
// variable or argument keeps its identity. Every walk is iterative: printed programs are chains
// of 100k bindings.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fuse/relay/interpreter.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/ops.hpp"
#include "fuse/relay/printer.hpp"
#include "fuse/relay/typecheck.hpp"

namespace fuse::relay {

namespace pass_detail {

/// Child slots of a node (callee when it is not an op/global name, args, body).
template <class F>
void for_each_slot(expr* e, F&& f) {
  if (e->kind == expr_kind::call && e->callee && e->callee->kind != expr_kind::op && e->callee->kind != expr_kind::global) f(e->callee);
  for (expr*& a : e->args)
    if (a) f(a);
  if (e->body) f(e->body);
}

/// Every node reachable from `roots`, children before parents; `enter(e)` false keeps the walk
/// out of e's children.
template <class Enter>
std::vector<expr*> post_order(const std::vector<expr*>& roots, Enter&& enter) {
  struct frame {
    expr* e;
    std::vector<expr*> kids;
    std::size_t i = 0;
  };
  std::vector<expr*> out;
  std::unordered_set<expr*> seen;
  std::vector<frame> stack;
  auto push = [&](expr* e) {
    frame f{e, {}, 0};
    if (enter(e)) for_each_slot(e, [&](expr*& c) { f.kids.push_back(c); });
    stack.push_back(std::move(f));
  };
  for (expr* r : roots) {
    if (!r || !seen.insert(r).second) continue;
    push(r);
    while (!stack.empty()) {
      frame& f = stack.back();
      if (f.i < f.kids.size()) {
        expr* c = f.kids[f.i++];
        if (seen.insert(c).second) push(c);
        continue;
      }
      out.push_back(f.e);
      stack.pop_back();
    }
  }
  return out;
}
inline std::vector<expr*> post_order(const std::vector<expr*>& roots) {
  return post_order(roots, [](expr*) { return true; });
}

inline std::vector<expr*> def_roots(module& m) {
  std::vector<expr*> r;
  for (definition& d : m.defs) r.push_back(d.fn);
  return r;
}

/// Redirects every pointer to a key of `map` to its value (chains followed) in the nodes
/// reachable from the definitions.
inline void substitute(module& m, const std::unordered_map<expr*, expr*>& map) {
  if (map.empty()) return;
  auto resolve = [&](expr* e) {
    for (std::size_t guard = 0; guard <= map.size(); ++guard) {
      auto it = map.find(e);
      if (it == map.end() || it->second == e) return e;
      e = it->second;
    }
    return e;
  };
  std::unordered_set<expr*> seen;
  std::vector<expr*> stack;
  for (definition& d : m.defs) {
    d.fn = resolve(d.fn);
    if (seen.insert(d.fn).second) stack.push_back(d.fn);
  }
  while (!stack.empty()) {
    expr* e = stack.back();
    stack.pop_back();
    for_each_slot(e, [&](expr*& c) {
      c = resolve(c);
      if (seen.insert(c).second) stack.push_back(c);
    });
  }
}

inline expr* make_op(module& m, const std::string& name, location at) {
  expr* op = m.make(expr_kind::op, at);
  op->name = name;
  return op;
}

inline expr* make_call(module& m, const std::string& op, std::vector<expr*> args, location at, relay::attrs a = {}) {
  expr* c = m.make(expr_kind::call, at);
  c->callee = make_op(m, op, at);
  c->args = std::move(args);
  c->attributes = std::move(a);
  return c;
}

inline expr* make_constant(module& m, constant_data d, location at) {
  expr* c = m.make(expr_kind::constant, at);
  c->annotated = type::tensor(d.shape, d.dt);
  c->data = std::make_shared<const constant_data>(std::move(d));
  return c;
}

/// A 0-d constant of dtype dt (MakeConstantScalar), rounded as the dtype holds it.
inline expr* make_scalar(module& m, dtype dt, double v, location at) {
  constant_data c;
  c.dt = dt;
  c.bytes.resize(dt.bytes());
  if (dt.is_float()) c.set_real(0, v);
  else c.set_integer(0, static_cast<std::int64_t>(v));
  return make_constant(m, std::move(c), at);
}

inline attr_value int_array(std::vector<std::int64_t> v) {
  attr_value a;
  a.k = attr_value::kind::array;
  for (std::int64_t x : v) a.items.push_back(attr::integer(x));
  return a;
}

/// TVM's ExpandBiasToMatchAxis for one axis: a 1-d bias along `axis` of a rank-`ndim` tensor
/// gets trailing unit axes so that it broadcasts.
inline expr* expand_to_axis(module& m, expr* bias, std::int64_t ndim, std::int64_t axis, location at) {
  const std::int64_t pad = ndim - axis - 1;
  if (pad <= 0) return bias;
  relay::attrs a;
  a.items.emplace_back("axis", attr::integer(1));
  a.items.emplace_back("num_newaxis", attr::integer(pad));
  return make_call(m, "expand_dims", {bias}, at, std::move(a));
}


/// Global names that the nodes reachable from `root` refer to.
inline std::unordered_set<std::string> globals_used(expr* root) {
  std::unordered_set<std::string> out;
  for (expr* e : post_order({root})) {
    if (e->kind == expr_kind::global) out.insert(e->name);
    if (e->kind == expr_kind::call && e->callee && e->callee->kind == expr_kind::global) out.insert(e->callee->name);
  }
  return out;
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

/// A copy of the nodes under `root`, with the variables of `subst` replaced by their values.
/// Variables bound under root (let, parameters of nested functions) get fresh copies, so the
/// same body can be inlined twice; free variables, ops and globals are shared.
inline expr* copy_with(module& m, expr* root, const std::unordered_map<expr*, expr*>& subst) {
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
    for_each_slot(c, [&](expr*& k) {
      auto it = copy.find(k);
      if (it != copy.end()) k = it->second;
    });
    copy[e] = c;
  }
  return copy.at(root);
}

inline bool was_typechecked(const module& m) {
  for (const definition& d : m.defs)
    if (!d.fn->checked.known()) return false;
  return !m.defs.empty();
}

/// A canonical text of an attribute value (numbers by value), for hashing.
inline std::string attr_key(const attr_value& v) {
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
inline std::string call_attrs_key(const expr* call) {
  std::map<std::string, std::string> all;
  for (const auto& [n, v] : call->attributes.items) all[n] = attr_key(v);
  if (const op_def* d = find_op(call->callee->name))
    for (const auto& [n, v] : d->defaults) all.emplace(std::string(n), attr_key(v));
  std::string s;
  for (const auto& [n, v] : all) s += n + "=" + v + ";";
  return s;
}

}  // namespace pass_detail

// ---- RemoveUnusedFunctions ---------------------------------------------------------------------

/// Drops the definitions that `entry` does not reach through global references. A module
/// without `entry` is left as it is.
inline void remove_unused_functions(module& m, const std::string& entry = "main") {
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

/// Inlines every call of a global function that TVM's Inline would: marked Inline=1, not
/// recursive (directly or through others), and calling only functions that are themselves
/// inlinable. Inlined definitions that nothing refers to any more are removed (never @main).
/// Closures are not inlined (TVM's Inline does not either).
inline void inline_functions(module& m) {
  using namespace pass_detail;
  const bool typed = was_typechecked(m);
  const call_graph calls(m);
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
      if (e->kind != expr_kind::call || !e->callee || e->callee->kind != expr_kind::global || !inlinable.count(e->callee->name)) continue;
      const definition* d = m.find(e->callee->name);
      if (d->fn->args.size() != e->args.size()) continue;
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
  std::erase_if(m.defs, [&](const definition& d) { return d.name != "main" && inlinable.count(d.name) && !still_used.count(d.name); });
  if (typed) typecheck(m);
}

/// Inlines every call of a function into the definitions that make them: closures called where
/// they are written (FuseOps output binds `%0 = fn (..., Primitive=1) {...}` and calls
/// `%0(...)`) and non-recursive globals, whatever their attributes. The fusion planner then sees
/// one function of op calls, and regroups what FuseOps had grouped. Type-checks again when the
/// module was typed.
inline void inline_calls(module& m) {
  using namespace pass_detail;
  const bool typed = was_typechecked(m);
  const call_graph calls(m);
  for (int round = 0; round < 64; ++round) {
    std::unordered_map<expr*, expr*> map;
    for (expr* e : post_order(def_roots(m))) {
      if (e->kind != expr_kind::call || !e->callee) continue;
      const expr* fn = nullptr;
      if (e->callee->kind == expr_kind::function) fn = e->callee;
      else if (e->callee->kind == expr_kind::global)
        if (const definition* d = m.find(e->callee->name); d && !calls.recursive(d->name)) fn = d->fn;
      if (!fn || !fn->body || fn->args.size() != e->args.size()) continue;
      std::unordered_map<expr*, expr*> subst;
      for (std::size_t i = 0; i < e->args.size(); ++i) subst[fn->args[i]] = e->args[i];
      map[e] = copy_with(m, fn->body, subst);
    }
    if (map.empty()) break;
    substitute(m, map);
  }
  if (typed) typecheck(m);
}

// ---- SimplifyInference -------------------------------------------------------------------------

/// TVM's SimplifyInference: `nn.batch_norm(x, gamma, beta, mean, var).0` becomes
/// `x * scale + shift` with scale = 1 / sqrt(var + eps) * gamma and shift = -mean * scale + beta
/// (both expanded along the channel axis), `nn.dropout(x).0` becomes x, and `nn.layer_norm`
/// becomes (x - mean) / sqrt(variance + eps) * gamma + beta, the variance as the mean of the
/// squared difference (docs/ops.md). Other projections of a batch_norm keep the call.
/// Type-checks first (the rewrite needs the data's rank and dtype) and after.
inline void simplify_inference(module& m) {
  using namespace pass_detail;
  typecheck(m);
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
      expr *data = call->args[0], *gamma = call->args[1], *beta = call->args[2], *mean = call->args[3], *var = call->args[4];
      const std::int64_t ndim = static_cast<std::int64_t>(t.shape.size());
      std::int64_t axis = static_cast<std::int64_t>(attr_or_default(*call, "axis")->number());
      if (axis < 0) axis += ndim;
      // TVM makes epsilon a scalar of the data's dtype from the float attribute.
      const double eps = static_cast<float>(attr_or_default(*call, "epsilon")->number());
      expr* scale = make_call(m, "divide", {make_scalar(m, t.dt, 1.0, at), make_call(m, "sqrt", {make_call(m, "add", {var, make_scalar(m, t.dt, eps, at)}, at)}, at)}, at);
      if (attr_or_default(*call, "scale")->number() != 0) scale = make_call(m, "multiply", {scale, gamma}, at);
      expr* shift = make_call(m, "multiply", {make_call(m, "negative", {mean}, at), scale}, at);
      if (attr_or_default(*call, "center")->number() != 0) shift = make_call(m, "add", {shift, beta}, at);
      scale = expand_to_axis(m, scale, ndim, axis, at);
      shift = expand_to_axis(m, shift, ndim, axis, at);
      expr* out = make_call(m, "add", {make_call(m, "multiply", {data, scale}, at), shift}, at);
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
      expr* diff = make_call(m, "subtract", {data, mu}, at);
      expr* variance = make_call(m, "mean", {make_call(m, "multiply", {diff, diff}, at)}, at, reduce_attrs());
      expr* denom = make_call(m, "sqrt", {make_call(m, "add", {variance, make_scalar(m, t.dt, eps, at)}, at)}, at);
      expr* out = make_call(m, "divide", {diff, denom}, at);
      if (attr_or_default(*e, "scale")->number() != 0) out = make_call(m, "multiply", {out, expand_to_axis(m, gamma, ndim, axis, at)}, at);
      if (attr_or_default(*e, "center")->number() != 0) out = make_call(m, "add", {out, expand_to_axis(m, beta, ndim, axis, at)}, at);
      map[e] = out;
    }
  }
  substitute(m, map);
  typecheck(m);
}

// ---- FoldConstant ------------------------------------------------------------------------------

/// Evaluates, with the reference interpreter, every maximal subgraph of op calls, tuples and
/// projections whose leaves are all constants with data, and replaces its tensor-valued
/// outputs by constants. Left alone: calls of globals and closures, the bodies of Primitive
/// functions, nn.dropout (random in training), device annotations and copies, and whatever the
/// interpreter cannot run (its error keeps the subgraph as it is). Type-checks first and after.
inline void fold_constant(module& m) {
  using namespace pass_detail;
  typecheck(m);
  static const std::unordered_set<std::string> kept = {"nn.dropout", "on_device", "device_copy", "annotation.stop_fusion"};
  // The walk does not enter Primitive functions: their bodies are kernels as written.
  std::vector<expr*> order = post_order(def_roots(m), [](expr* e) { return !(e->kind == expr_kind::function && has_flag(*e, "Primitive")); });
  std::unordered_set<expr*> foldable;
  for (expr* e : order) {
    bool ok = false;
    switch (e->kind) {
      case expr_kind::constant: ok = e->data != nullptr; break;
      case expr_kind::tuple:
        ok = true;
        for (expr* a : e->args) ok = ok && foldable.count(a);
        break;
      case expr_kind::tuple_get: ok = foldable.count(e->args[0]) > 0; break;
      case expr_kind::call:
        ok = e->callee->kind == expr_kind::op && !kept.count(e->callee->name) && find_op(e->callee->name);
        for (expr* a : e->args) ok = ok && foldable.count(a);
        break;
      default: break;
    }
    if (ok) foldable.insert(e);
  }
  // Replaced: foldable tensors that are not constants already. Roots: those with a user that
  // is not replaced itself (the rest only feed roots and die with them).
  auto replaced = [&](expr* e) { return foldable.count(e) && e->kind != expr_kind::constant && e->checked.is_tensor(); };
  std::vector<expr*> roots;
  std::unordered_set<expr*> is_root;
  for (expr* p : order) {
    if (p->kind == expr_kind::function && has_flag(*p, "Primitive")) continue;
    const bool p_replaced = replaced(p);
    for_each_slot(p, [&](expr*& c) {
      if (!p_replaced && replaced(c) && is_root.insert(c).second) roots.push_back(c);
    });
  }
  std::unordered_map<expr*, expr*> map;
  for (expr* r : roots) {
    module scratch;  // runs the subgraph as the body of a function of no parameters
    expr* fn = scratch.make(expr_kind::function, r->at);
    fn->body = r;
    scratch.defs.push_back({"main", fn, r->at});
    try {
      const value v = interpreter(scratch).run("main", {});
      if (v.is_tuple) continue;
      map[r] = make_constant(m, interpreter::to_constant(v), r->at);
    } catch (const relay::error&) {
      // Not foldable after all (an op the interpreter does not run): left as it is.
    }
  }
  substitute(m, map);
  typecheck(m);
}

// ---- DeadCodeElimination -----------------------------------------------------------------------

/// Removes `let %x = v; body` where %x is not used (by the live code: a let that only feeds
/// dead lets is dead too). Graph bindings leave no trace, so they are never dead.
inline void eliminate_dead_code(module& m) {
  using namespace pass_detail;
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
    for_each_slot(e, [&](expr*& c) { mark(c); });
  }
  std::unordered_map<expr*, expr*> map;
  for (expr* l : lets)
    if (!live_vars.count(l->args[0])) map[l] = l->args[2];
  substitute(m, map);
}

// ---- EliminateCommonSubexpr --------------------------------------------------------------------

/// Merges op calls with the same op, the same arguments (by node) and equal attributes (the
/// op's defaults filled in), and likewise tuples and projections. nn.dropout is never merged
/// (each call draws its own mask in training).
inline void eliminate_common_subexpr(module& m) {
  using namespace pass_detail;
  std::unordered_map<expr*, expr*> rep;
  std::unordered_map<std::string, expr*> seen;
  auto ptr = [](const expr* e) { return std::to_string(reinterpret_cast<std::uintptr_t>(e)); };
  for (expr* e : post_order(def_roots(m))) {
    // Children come first, so theirs are final: point at them.
    for_each_slot(e, [&](expr*& c) {
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

}  // namespace fuse::relay
