// Structural equality of Relay expressions and modules (fuse/relay/structural_equal.hpp).
//
// The walk is iterative (graph normal form chains are thousands deep).
#include "fuse/relay/structural_equal.hpp"

#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fuse/relay/attributes.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/printer.hpp"

namespace fuse::relay {

namespace {

using printer_detail::atomic;

bool attr_equal(const attr_value& a, const attr_value& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.number(), y = b.number();
    return x == y || (std::isnan(x) && std::isnan(y));
  }
  // A dtype attribute written "" and one left None mean "the input's".
  if (a.k != b.k) return false;
  switch (a.k) {
    case attr_value::kind::none: return true;
    case attr_value::kind::string: return a.s == b.s;
    case attr_value::kind::meta: return a.meta == b.meta;
    case attr_value::kind::array:
      if (a.items.size() != b.items.size()) return false;
      for (std::size_t i = 0; i < a.items.size(); ++i)
        if (!attr_equal(a.items[i], b.items[i])) return false;
      return true;
    case attr_value::kind::expr:
      return a.e && b.e && a.e->kind == b.e->kind && a.e->name == b.e->name && (atomic(a.e) || a.e == b.e);
    default: return false;
  }
}

/// Attribute lists equal by name, in any order; with `with_defaults`, a missing attribute
/// stands for the op's default.
bool attrs_equal(const expr* a, const expr* b, bool with_defaults) {
  std::vector<std::string> names;
  for (const auto& [n, v] : a->attributes.items) names.push_back(n);
  for (const auto& [n, v] : b->attributes.items) names.push_back(n);
  for (const std::string& n : names) {
    const attr_value* x = with_defaults ? relay::attr_or_default(*a, n) : a->attributes.find(n);
    const attr_value* y = with_defaults ? relay::attr_or_default(*b, n) : b->attributes.find(n);
    if (!x || !y) {
      if (x != y) return false;
      continue;
    }
    if (!attr_equal(*x, *y)) return false;
  }
  return true;
}

}  // namespace

bool structurally_equal(const expr* a, const expr* b) {
  std::unordered_map<const expr*, const expr*> ab, ba;
  std::vector<std::pair<const expr*, const expr*>> stack{{a, b}};
  auto pair_up = [&](const expr* x, const expr* y) {
    auto i = ab.find(x);
    auto j = ba.find(y);
    if (i != ab.end() || j != ba.end()) return i != ab.end() && j != ba.end() && i->second == y && j->second == x;
    ab[x] = y;
    ba[y] = x;
    return true;
  };
  auto var_equal = [&](const expr* x, const expr* y) {
    return x->kind == expr_kind::var && y->kind == expr_kind::var && x->annotated == y->annotated &&
           attrs_equal(x, y, false);
  };
  while (!stack.empty()) {
    auto [x, y] = stack.back();
    stack.pop_back();
    if (!x || !y) {
      if (x != y) return false;
      continue;
    }
    if (x->kind != y->kind) return false;
    if (x->kind == expr_kind::var) {
      // A variable not seen at a binding is free: it matches a free one of the same name.
      if (!ab.count(x) && !ba.count(y) && x->name != y->name) return false;
      if (!pair_up(x, y) || !var_equal(x, y)) return false;
      continue;
    }
    // Constants, ops and globals are values: text repeats them at each use, so a shared one
    // equals copies. Other nodes correspond one to one.
    if (!atomic(x)) {
      const bool seen = ab.count(x) || ba.count(y);
      if (!pair_up(x, y)) return false;
      if (seen) continue;
    }
    switch (x->kind) {
      case expr_kind::constant:
        if (x->data || y->data) {
          if (!x->data || !y->data) return false;
          if (!(x->data->dt == y->data->dt) || x->data->shape != y->data->shape || x->data->bytes != y->data->bytes)
            return false;
        } else if (x->meta != y->meta || !(x->annotated == y->annotated)) {
          return false;
        }
        continue;
      case expr_kind::op:
      case expr_kind::global:
        if (x->name != y->name) return false;
        continue;
      case expr_kind::call:
        if (x->args.size() != y->args.size() || !attrs_equal(x, y, true)) return false;
        if (x->callee->kind != y->callee->kind) return false;
        if (x->callee->kind == expr_kind::op || x->callee->kind == expr_kind::global) {
          if (x->callee->name != y->callee->name) return false;
        } else {
          stack.push_back({x->callee, y->callee});
        }
        break;
      case expr_kind::tuple:
        if (x->args.size() != y->args.size()) return false;
        break;
      case expr_kind::tuple_get:
        if (x->index != y->index) return false;
        break;
      case expr_kind::let:
        if (!var_equal(x->args[0], y->args[0]) || !pair_up(x->args[0], y->args[0])) return false;
        stack.push_back({x->args[1], y->args[1]});
        stack.push_back({x->args[2], y->args[2]});
        continue;
      case expr_kind::function:
        if (x->args.size() != y->args.size() || !attrs_equal(x, y, false)) return false;
        if (x->ret.known() && y->ret.known() && !(x->ret == y->ret)) return false;
        for (std::size_t i = 0; i < x->args.size(); ++i)
          if (!var_equal(x->args[i], y->args[i]) || !pair_up(x->args[i], y->args[i])) return false;
        stack.push_back({x->body, y->body});
        continue;
      default: break;
    }
    for (std::size_t i = x->args.size(); i-- > 0;) stack.push_back({x->args[i], y->args[i]});
  }
  return true;
}

bool structurally_equal(const module& a, const module& b) {
  if (a.defs.size() != b.defs.size()) return false;
  for (const definition& d : a.defs) {
    const definition* e = b.find(d.name);
    if (!e || !structurally_equal(d.fn, e->fn)) return false;
  }
  return true;
}

}  // namespace fuse::relay
