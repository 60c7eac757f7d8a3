// The Relay program as the frontend holds it: dtypes, types, attribute values, expression nodes
// and the module that owns them. The parser builds it (fuse/relay/parser.hpp), type inference
// fills in `checked`, passes rewrite it, the planner partitions it, the emitter and the
// interpreter read it.
//
// One node struct for every expression kind (a tagged record, not a class hierarchy): passes
// and the planner switch over `kind`, and a node's fields are plain data. Nodes live in the
// module's arena and point at each other; they are never freed before the module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fuse/relay/source.hpp"

namespace fuse::relay {

// ---- dtypes -----------------------------------------------------------------------------------

/// A dtype as DLPack and TVM describe it: type code, bits, lanes.
struct dtype {
  enum code_t : std::uint8_t { int_code = 0, uint_code = 1, float_code = 2, bfloat_code = 4, bool_code = 6 };
  std::uint8_t code = float_code;
  std::uint8_t bits = 32;
  std::uint16_t lanes = 1;

  static constexpr dtype float32() { return {float_code, 32, 1}; }
  static constexpr dtype int32() { return {int_code, 32, 1}; }
  static constexpr dtype int64() { return {int_code, 64, 1}; }
  static constexpr dtype boolean() { return {uint_code, 1, 1}; }  // TVM's bool is uint1

  bool is_bool() const { return (code == uint_code && bits == 1) || code == bool_code; }
  bool is_float() const { return code == float_code || code == bfloat_code; }
  bool is_int() const { return code == int_code; }
  bool is_uint() const { return code == uint_code && !is_bool(); }
  /// The smallest and largest value of an integer or bool dtype, as the interpreter holds them
  /// (int64; a uint64 maximum is the all-ones pattern, -1, as it is stored). Computed in
  /// unsigned arithmetic: `(1 << 63) - 1` in int64 overflows.
  std::int64_t lowest() const {
    if (is_bool() || is_uint()) return 0;
    return static_cast<std::int64_t>(~std::uint64_t{0} << (bits - 1));
  }
  std::int64_t highest() const {
    if (is_bool()) return 1;
    const unsigned value_bits = is_uint() ? bits : bits - 1u;
    return static_cast<std::int64_t>(value_bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << value_bits) - 1);
  }
  /// Bytes per element in a tensor's data (bool: one byte).
  std::size_t bytes() const { return (static_cast<std::size_t>(bits) * lanes + 7) / 8; }

  /// TVM's spelling: float32, int8, uint8, bool, bfloat16, float32x4.
  // Inline: npy.hpp (and so the driver `fuse-relay check` compiles without this library) names dtypes.
  std::string name() const {
    std::string s;
    if (is_bool()) s = "bool";
    else {
      s = code == int_code      ? "int"
          : code == uint_code   ? "uint"
          : code == float_code  ? "float"
          : code == bfloat_code ? "bfloat"
                                : "custom";
      s += std::to_string(bits);
    }
    if (lanes != 1) s += "x" + std::to_string(lanes);
    return s;
  }
  /// Parses TVM's spelling (int8, float32x4; `int`, `uint` and `float` are 32 bits, `bfloat`
  /// 16, as TVM reads them); nullopt when it is not a dtype name.
  static std::optional<dtype> parse(std::string_view s);
  friend bool operator==(const dtype&, const dtype&) = default;
};

// ---- types ------------------------------------------------------------------------------------

/// A Relay type. Tensor shapes use -1 for a dynamic extent (printed `?`).
struct type {
  enum class kind : std::uint8_t {
    incomplete,  ///< not known (yet): `_`, or no annotation
    tensor,      ///< Tensor[(d0, d1, ...), dtype]; a bare dtype is the 0-d tensor
    tuple,       ///< (T0, T1, ...)
    func,        ///< fn (T0, ...) -> R: `fields` are the parameters, `ret` holds R
    named,       ///< an ADT or type variable, kept by name (List[A])
  };
  kind k = kind::incomplete;
  std::vector<std::int64_t> shape;
  relay::dtype dt{};
  std::vector<type> fields;
  std::vector<type> ret;  // 0 or 1 element (a vector: type is incomplete inside its own definition)
  std::string name;

  static type tensor(std::vector<std::int64_t> shape, relay::dtype dt);
  static type tuple(std::vector<type> fields);
  bool is_tensor() const { return k == kind::tensor; }
  bool known() const { return k != kind::incomplete; }

  /// As TVM prints it: Tensor[(2, 3), float32], float32 (0-d), (Tensor[...], ...), fn (...) -> R.
  std::string str() const;
  friend bool operator==(const type& a, const type& b) {
    return a.k == b.k && a.shape == b.shape && (a.k != kind::tensor || a.dt == b.dt) && a.fields == b.fields &&
           a.ret == b.ret && a.name == b.name;
  }
};

// ---- constants --------------------------------------------------------------------------------

/// A constant tensor's contents: row-major, little-endian, `dt.bytes()` per element.
/// The element codec (raw/real/integer and their setters) is the one place that turns those
/// bytes into values and back: the parser, interpreter, printer and emitter all go through it.
struct constant_data {
  relay::dtype dt{};
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> bytes;

  std::int64_t elements() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }

  /// The little-endian bits of element k.
  std::uint64_t raw(std::size_t k) const;
  void set_raw(std::size_t k, std::uint64_t bits);
  /// Element k of a floating dtype (float16, bfloat16, float32, float64), exactly, as a double.
  double real(std::size_t k) const;
  /// Element k of an integer dtype, sign- or zero-extended; of bool, 0 or 1.
  std::int64_t integer(std::size_t k) const;
  /// Stores v at element k of a floating dtype, rounded once to its width (nearest even).
  void set_real(std::size_t k, double v);
  /// Stores v, wrapped to the width (bool: v != 0), at element k of an integer or bool dtype.
  void set_integer(std::size_t k, std::int64_t v) {
    set_raw(k, dt.is_bool() ? (v != 0) : static_cast<std::uint64_t>(v));
  }
};

/// `meta[KEY][INDEX]`.
struct meta_ref {
  std::string key;  ///< relay.Constant, VirtualDevice, relay.attrs.Conv2DAttrs, ...
  std::int64_t index = 0;
  friend bool operator==(const meta_ref&, const meta_ref&) = default;
};

// ---- attributes -------------------------------------------------------------------------------

struct expr;

/// An attribute value as printed: 1, 3i64, 0.5f, True, "NCHW", None, [1, 1], meta[...][i].
struct attr_value {
  enum class kind : std::uint8_t { none, integer, real, boolean, string, array, meta, expr };
  kind k = kind::none;
  std::int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::vector<attr_value> items;
  meta_ref meta;
  relay::dtype literal{};          ///< the literal's dtype (3i64: int64; 0.5f: float32)
  const relay::expr* e = nullptr;  ///< an expression in attribute position (rare)
  location at;

  bool is_number() const { return k == kind::integer || k == kind::real || k == kind::boolean; }
  /// The value as a double (integer, real or boolean).
  double number() const { return k == kind::real ? f : k == kind::boolean ? (b ? 1.0 : 0.0) : static_cast<double>(i); }
};

/// Attributes in the order they were written.
struct attrs {
  std::vector<std::pair<std::string, attr_value>> items;

  /// The value of attribute `name`, or null when it is not written.
  const attr_value* find(std::string_view name) const;
  bool empty() const { return items.empty(); }
};

// ---- expressions ------------------------------------------------------------------------------

enum class expr_kind : std::uint8_t {
  var,        ///< %x (a parameter, a let-bound variable or a free variable)
  constant,   ///< a literal scalar or meta[relay.Constant][i]
  op,         ///< an operator name used as a callee: nn.dense
  global,     ///< @f
  call,       ///< callee(args..., attrs...)
  tuple,      ///< (a, b, ...)
  tuple_get,  ///< t.i
  let,        ///< let %x = value; body
  function,   ///< fn (%p: T, ..., Attr=v) -> R { body }
  if_else,    ///< if (c) { a } else { b }
};

/// One expression node. Which fields mean something depends on `kind`:
///   var:       name (without %), annotated (its `: T`)
///   constant:  data (null when its bytes are unknown: `meta[relay.Constant][i]` without a
///              metadata section; then `annotated` from the ty= comment gives shape and dtype),
///              meta (when written meta[...])
///   op:        name (nn.dense)          global: name (without @)
///   call:      callee, args, attributes
///   tuple:     args (the fields)        tuple_get: args[0] (the tuple), index
///   let:       args = {var, value, body}
///   function:  args = parameters (vars), body, attributes (Primitive=1, ...), ret (its -> R)
///   if_else:   args = {condition, then, else}
struct expr {
  expr_kind kind = expr_kind::var;
  location at;
  std::string name;
  std::vector<expr*> args;
  expr* callee = nullptr;
  expr* body = nullptr;
  relay::attrs attributes;
  std::int64_t index = 0;
  std::shared_ptr<const constant_data> data;
  std::optional<meta_ref> meta;
  type annotated;    ///< from `/* ty=... */` or a variable's `: T` (incomplete when absent)
  type ret;          ///< function: the declared `-> R`
  type checked;      ///< filled in by type inference
  std::string span;  ///< a span comment's source name (`/* bert/encoder/... */`), when printed
};

/// Whether e calls the operator named `op`.
inline bool is_op_call(const expr* e, std::string_view op) {
  return e->kind == expr_kind::call && e->callee && e->callee->kind == expr_kind::op && e->callee->name == op;
}

/// Whether a function's attribute `name` is a non-zero number (Primitive=1, Inline=1).
inline bool has_flag(const expr& fn, std::string_view name) {
  const attr_value* v = fn.attributes.find(name);
  return v && v->is_number() && v->number() != 0;
}

/// A `def @name(...) { ... }`.
struct definition {
  std::string name;
  expr* fn = nullptr;  ///< a function node
  location at;
};

/// A parsed program: its definitions, the metadata's constant table and the arena of nodes.
struct module {
  // Nodes point at each other inside `nodes`: a copy would point into the original. Moving
  // keeps them valid (a deque's elements stay where they are).
  module() = default;
  module(const module&) = delete;
  module& operator=(const module&) = delete;
  module(module&&) = default;
  module& operator=(module&&) = default;

  relay::source src;
  std::string version;      ///< "0.0.5" (#[version]), "0.0.4" (bare v0.0.4 line), or "" (none)
  std::string tvm_version;  ///< the metadata's attrs.tvm_version ("0.19.0"), or "" (none)
  std::vector<definition> defs;
  bool has_metadata = false;
  /// meta[relay.Constant][i] -> its data (from the #[metadata] section; empty without one).
  std::vector<std::shared_ptr<const constant_data>> constants;
  std::deque<expr> nodes;

  /// A new node of kind `k` at `at`, in this module's arena.
  expr* make(expr_kind k, location at);
  /// The definition `@name`, or null.
  const definition* find(std::string_view name) const;
  definition* find(std::string_view name);
  /// An error at location `at` of this module's source.
  relay::error error_at(location at, const std::string& message) const { return relay::error(src, at, message); }
};

// ---- children and the post-order walk ------------------------------------------------------------

/// The children of a node, the one definition every walk of the frontend shares (passes, the
/// planner, the emitter, the interpreter, the printer). In order:
///   - a call's callee, unless it is an op or a global name (those are names, not subgraphs);
///   - every non-null entry of `args` (call arguments, tuple fields, a tuple_get's tuple, a
///     let's {var, value, body}, a function's parameters, an if's {condition, then, else});
///   - `body`, when set (a function's body).
/// `f` receives the slot itself (a reference to the field), so a caller can rewrite it or tell
/// which field it is (`&slot == &e->body`). A walk that needs fewer edges (the printer leaves
/// out a function's parameters) filters in its callback.
template <class E, class F>
  requires std::is_same_v<std::remove_const_t<E>, expr>
void for_each_child(E* e, F&& f) {
  if (e->kind == expr_kind::call && e->callee && e->callee->kind != expr_kind::op &&
      e->callee->kind != expr_kind::global)
    f(e->callee);  // expr*& for a node, expr* const& for a const one
  for (auto& a : e->args)
    if (a) f(a);
  if (e->body) f(e->body);
}

/// Default predicates of the walk: enter every node, follow every edge.
struct enter_all {
  bool operator()(const expr*) const { return true; }
};
struct follow_all {
  bool operator()(const expr*, const expr*) const { return true; }
};

/// The one post-order walk (iterative: printed programs are chains of 100k bindings). Visits
/// every node reachable from `roots` once, children before parents, depth first in child order
/// (as a recursive walk would), calling `visit(e)` as e is finished.
///   - `enter(e)`, asked when e is first reached: false keeps the walk out of e's children.
///   - `edge(parent, slot)`, asked for every child slot of an entered node as the walk comes to
///     it (also for a child already visited: it can count uses): false does not follow that edge
///     (the child is not marked visited through it).
/// E is `expr` or `const expr`. The walk keeps pointers to the slots of unfinished nodes: the
/// callbacks must not resize their `args`.
template <class E, class Enter, class Edge, class Visit>
void walk_post_order(const std::vector<E*>& roots, Enter&& enter, Edge&& edge, Visit&& visit) {
  using slot = std::conditional_t<std::is_const_v<E>, expr* const, expr*>;
  struct frame {
    E* e;
    std::vector<slot*> kids;
    std::size_t i = 0;
  };
  std::unordered_set<E*> seen;
  std::vector<frame> stack;
  auto push = [&](E* e) {
    frame f{e, {}, 0};
    if (enter(e)) for_each_child(e, [&](slot& c) { f.kids.push_back(&c); });
    stack.push_back(std::move(f));
  };
  for (E* r : roots) {
    if (!r || !seen.insert(r).second) continue;
    push(r);
    while (!stack.empty()) {
      frame& f = stack.back();
      if (f.i < f.kids.size()) {
        slot& c = *f.kids[f.i++];
        E* parent = f.e;
        if (edge(parent, c) && seen.insert(c).second) push(c);  // may reallocate `stack`
        continue;
      }
      E* e = f.e;
      stack.pop_back();
      visit(e);
    }
  }
}

/// Every node reachable from `roots`, children before parents (see walk_post_order); `enter(e)`
/// false keeps the walk out of e's children. `post_order({root})` walks `expr*`; a vector of
/// `const expr*` (or `post_order<const expr>({root})`) walks const nodes.
template <class E = expr, class Enter = enter_all>
std::vector<E*> post_order(const std::vector<E*>& roots, Enter&& enter = {}) {
  std::vector<E*> out;
  walk_post_order(roots, enter, follow_all{}, [&](E* e) { out.push_back(e); });
  return out;
}

/// The functions of the module's definitions: the roots of a walk over all of it.
inline std::vector<expr*> def_roots(module& m) {
  std::vector<expr*> r;
  for (definition& d : m.defs) r.push_back(d.fn);
  return r;
}
inline std::vector<const expr*> def_roots(const module& m) {
  std::vector<const expr*> r;
  for (const definition& d : m.defs) r.push_back(d.fn);
  return r;
}

}  // namespace fuse::relay
