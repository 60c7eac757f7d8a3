// Type inference and checking of a module (fuse/relay/typecheck.hpp).
//
// The walk is iterative: printed programs are chains of bindings thousands deep, and a
// recursive walk would overflow the stack on them.
#include "fuse/relay/typecheck.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fuse/relay/attributes.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/ops.hpp"

namespace fuse::relay {

namespace {

/// A type with incomplete parts accepts anything there; dynamic extents match any extent.
bool compatible(const type& annotated, const type& inferred) {
  if (!annotated.known() || !inferred.known()) return true;
  if (annotated.k != inferred.k) return false;
  switch (annotated.k) {
    case type::kind::tensor:
      if (!(annotated.dt == inferred.dt) || annotated.shape.size() != inferred.shape.size()) return false;
      for (std::size_t i = 0; i < annotated.shape.size(); ++i)
        if (annotated.shape[i] >= 0 && inferred.shape[i] >= 0 && annotated.shape[i] != inferred.shape[i]) return false;
      return true;
    case type::kind::tuple:
    case type::kind::func:
      if (annotated.fields.size() != inferred.fields.size()) return false;
      for (std::size_t i = 0; i < annotated.fields.size(); ++i)
        if (!compatible(annotated.fields[i], inferred.fields[i])) return false;
      if (annotated.k == type::kind::func && !annotated.ret.empty() && !inferred.ret.empty())
        return compatible(annotated.ret[0], inferred.ret[0]);
      return true;
    default: return true;
  }
}

type constant_type(const constant_data& d) { return type::tensor(d.shape, d.dt); }

class type_checker {
 public:
  explicit type_checker(module& m) : m_(m) {}

  void run() {
    refuse_unsupported_ops();
    for (definition& d : m_.defs) check(d.fn);
  }

  /// The first call of an op the frontend does not support, in source order, is the error: it
  /// says more than an unknown type somewhere after it (a constant next to a convolution).
  void refuse_unsupported_ops() {
    const expr* first = nullptr;
    std::vector<std::string> names;  // every unsupported op, once
    for (const expr* e : post_order(def_roots(std::as_const(m_)))) {
      if (e->kind == expr_kind::call && e->callee && e->callee->kind == expr_kind::op && !find_op(e->callee->name)) {
        if (std::find(names.begin(), names.end(), e->callee->name) == names.end()) names.push_back(e->callee->name);
        if (!first ||
            std::pair(e->callee->at.line, e->callee->at.col) < std::pair(first->callee->at.line, first->callee->at.col))
          first = e;
      }
    }
    if (!first) return;
    std::string others;
    std::sort(names.begin(), names.end());
    for (const std::string& n : names)
      if (n != first->callee->name) others += (others.empty() ? "" : ", ") + n;
    throw m_.error_at(first->callee->at,
                      "unsupported op " + first->callee->name +
                          (others.empty() ? "" : " (the program also uses " + others + ", unsupported too)") +
                          "; supported ops: " + supported_ops());
  }

  /// Types `root` and everything under it. Not the shared post_order (ir.hpp): a let's body
  /// waits for its variable's type, and `visiting_` spans walks to detect recursive globals.
  void check(expr* root) {
    std::vector<std::pair<expr*, bool>> stack{{root, false}};
    while (!stack.empty()) {
      auto [e, expanded] = stack.back();
      stack.pop_back();
      if (done_.count(e)) continue;
      if (!expanded) {
        // A node met again while its own children are being typed is a cycle (a recursive
        // global): it is left untyped here, and its caller reports the unknown type.
        if (!visiting_.insert(e).second) continue;
        stack.push_back({e, true});
        if (e->kind == expr_kind::let) {  // the value first: the variable takes its type
          if (!done_.count(e->args[1])) stack.push_back({e->args[1], false});
          continue;
        }
        // A closure called where it is written: its arguments are typed before it, so that
        // parameters without annotations take their argument's type (FuseOps and pattern
        // partitioning write `%10 = fn (%FunctionVar_0_0, ...) {...}; %10(%4, ...)`).
        if (e->kind == expr_kind::call && e->callee && e->callee->kind == expr_kind::function)
          call_site_.emplace(e->callee, e);
        if (e->kind == expr_kind::function) take_parameter_types(*e);
        for (expr* c : children(e))
          if (c && !done_.count(c) && !visiting_.count(c)) stack.push_back({c, false});
        continue;
      }
      if (e->kind == expr_kind::let) {
        expr* var = e->args[0];
        const expr* val = e->args[1];
        if (!done_.count(var)) {
          if (!compatible(var->annotated, val->checked))
            throw m_.error_at(e->at, "let binds a value of type " + val->checked.str() + " to %" + var->name +
                                         ", annotated " + var->annotated.str());
          var->checked = var->annotated.known() ? var->annotated : val->checked;
          done_.insert(var);
        }
        if (!done_.count(e->args[2])) {
          stack.push_back({e, true});
          stack.push_back({e->args[2], false});
          continue;
        }
        e->checked = e->args[2]->checked;
        done_.insert(e);
        continue;
      }
      type t = infer(*e);
      if (!compatible(e->annotated, t))
        throw m_.error_at(
            e->at,
            "the annotated type " + e->annotated.str() + " differs from the inferred type " + t.str() +
                (e->kind == expr_kind::call && e->callee && e->callee->kind == expr_kind::op ? " of " + e->callee->name
                                                                                             : std::string()));
      // Keep the annotation's extra facts (a dynamic extent the relation could not fix).
      e->checked = t.known() ? t : e->annotated;
      done_.insert(e);
    }
  }

 private:
  /// Unannotated parameters of fn take the types of the arguments at its call site, once those
  /// are typed (a parameter typed neither way stays an error at the function).
  void take_parameter_types(expr& fn) {
    const auto site = call_site_.find(&fn);
    if (site == call_site_.end() || site->second->args.size() != fn.args.size()) return;
    for (std::size_t i = 0; i < fn.args.size(); ++i) {
      expr* p = fn.args[i];
      const expr* a = site->second->args[i];
      if (!p->annotated.known() && done_.count(a) && a->checked.known()) p->annotated = a->checked;
    }
  }

  /// The nodes e's type depends on, the last typed first (the stack pops them in reverse): a
  /// call's arguments before a callee that is not an op.
  std::vector<expr*> children(expr* e) {
    std::vector<expr*> c;
    if (e->kind == expr_kind::call && e->callee && e->callee->kind != expr_kind::op) c.push_back(e->callee);
    c.insert(c.end(), e->args.begin(), e->args.end());
    if (e->body) c.push_back(e->body);
    if (e->kind == expr_kind::call && e->callee && e->callee->kind == expr_kind::global) {
      if (definition* d = m_.find(e->callee->name)) c.push_back(d->fn);
    }
    return c;
  }

  type infer(expr& e) {
    switch (e.kind) {
      case expr_kind::var: return e.annotated;
      case expr_kind::constant:
        if (e.data) return constant_type(*e.data);
        if (!e.annotated.known())
          throw m_.error_at(e.at, "the constant " +
                                      (e.meta ? "meta[" + e.meta->key + "][" + std::to_string(e.meta->index) + "]"
                                              : std::string("")) +
                                      " has no data and no ty= annotation: its shape and dtype are unknown");
        return e.annotated;
      case expr_kind::op:
        // Only reached for an operator that is not a call's callee: an annotation must not give
        // it a tensor type (`%0 = foo /* ty=Tensor[...] */` would then "type-check").
        throw m_.error_at(e.at, "operator " + e.name +
                                    " used as a value: fuse runs operators only where they are called, " + e.name +
                                    "(...)");
      case expr_kind::global: {
        const definition* d = m_.find(e.name);
        if (!d) throw m_.error_at(e.at, "@" + e.name + " is not defined in this module");
        return d->fn->checked;
      }
      case expr_kind::tuple: {
        std::vector<type> f;
        for (expr* a : e.args) f.push_back(a->checked);
        return type::tuple(f);
      }
      case expr_kind::tuple_get: {
        const type& t = e.args[0]->checked;
        if (t.k != type::kind::tuple)
          throw m_.error_at(e.at, "projection ." + std::to_string(e.index) + " of a non-tuple of type " + t.str());
        if (e.index < 0 || e.index >= static_cast<std::int64_t>(t.fields.size()))
          throw m_.error_at(e.at, "projection ." + std::to_string(e.index) + " of a tuple of " +
                                      std::to_string(t.fields.size()) + " fields");
        return t.fields[static_cast<std::size_t>(e.index)];
      }
      case expr_kind::let:  // typed in check(): the variable between its value and the body
        return e.args[2]->checked;
      case expr_kind::function: {
        type f;
        f.k = type::kind::func;
        for (expr* p : e.args) {
          if (!p->annotated.known()) throw m_.error_at(p->at, "parameter %" + p->name + " has no type annotation");
          f.fields.push_back(p->annotated);
        }
        const type& body = e.body ? e.body->checked : type{};
        if (e.ret.known() && !compatible(e.ret, body))
          throw m_.error_at(e.at, "the function returns " + body.str() + " but declares " + e.ret.str());
        f.ret.push_back(body.known() ? body : e.ret);
        return f;
      }
      case expr_kind::if_else: return e.args[1]->checked;
      case expr_kind::call: return infer_call(e);
    }
    return type{};
  }

  type infer_call(expr& e) {
    const expr* callee = e.callee;
    if (callee->kind == expr_kind::op) {
      const op_def* d = find_op(callee->name);
      if (!d) throw m_.error_at(callee->at, "unsupported op " + callee->name + "; supported ops: " + supported_ops());
      const int n = static_cast<int>(e.args.size());
      if (n < d->min_args || n > d->max_args)
        throw m_.error_at(e.at, callee->name + " takes " + std::to_string(d->min_args) +
                                    (d->max_args != d->min_args ? "-" + std::to_string(d->max_args) : std::string()) +
                                    " arguments, not " + std::to_string(n));
      std::vector<type> args;
      for (const expr* a : e.args) {
        if (!a->checked.known())
          throw m_.error_at(a->at, "the type of this argument of " + callee->name + " is unknown");
        args.push_back(a->checked);
      }
      return d->infer(op_call(m_, e, *d, std::move(args)));
    }
    const definition* def = callee->kind == expr_kind::global ? m_.find(callee->name) : nullptr;
    if (callee->kind == expr_kind::global && !def)
      throw m_.error_at(callee->at, "@" + callee->name + " is not defined in this module");
    const type& f = def ? def->fn->checked : callee->checked;
    if (f.k != type::kind::func) throw m_.error_at(e.at, "calling a value of non-function type " + f.str());
    if (f.fields.size() != e.args.size())
      throw m_.error_at(e.at, "the function takes " + std::to_string(f.fields.size()) + " arguments, not " +
                                  std::to_string(e.args.size()));
    for (std::size_t i = 0; i < e.args.size(); ++i)
      if (!compatible(f.fields[i], e.args[i]->checked))
        throw m_.error_at(e.args[i]->at, "argument " + std::to_string(i + 1) + " has type " + e.args[i]->checked.str() +
                                             ", the parameter " + f.fields[i].str());
    return f.ret.empty() ? type{} : f.ret[0];
  }

  module& m_;
  std::unordered_map<const expr*, expr*> call_site_;  // closure -> the first call of it met
  std::unordered_set<const expr*> done_;
  std::unordered_set<const expr*> visiting_;
};

}  // namespace

void typecheck(module& m) { type_checker(m).run(); }

}  // namespace fuse::relay
