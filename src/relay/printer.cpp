// Relay text out of a module, as TVM v0.19 prints it (fuse/relay/printer.hpp).
//
// Every walk is iterative (graph normal form chains are thousands deep); only the nesting of
// scopes (closures, if branches, let blocks) recurses, and the parser bounds that at 500.
#include "fuse/relay/printer.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/metadata.hpp"

namespace fuse::relay {

namespace printer_detail {

std::string shortest(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
std::string shortest(float v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

namespace {

/// The child edges of a node as the printer sees them: the shared children (fuse/relay/ir.hpp)
/// less a function's parameters, which its header prints by name.
bool printed_edge(const expr* parent, expr* const& slot) {
  return parent->kind != expr_kind::function || &slot == &parent->body;
}
void children(const expr* e, std::vector<const expr*>& out) {
  out.clear();
  for_each_child(e, [&](expr* const& c) {
    if (printed_edge(e, c)) out.push_back(c);
  });
}

/// A float literal of dtype dt: `1f`, `1e-05f`, `0.5f64`, `2f16`; non-finite values as `inff`,
/// `-inff`, `nanf` (float32) or `float16(inff)` (other widths: the lexer has no suffixed form).
std::string float_literal(double v, dtype dt) {
  const bool f32 = dt.code == dtype::float_code && dt.bits == 32;
  if (!std::isfinite(v)) {
    const std::string s = std::isnan(v) ? "nanf" : v < 0 ? "-inff" : "inff";
    return f32 ? s : dt.name() + "(" + s + ")";
  }
  if (f32) return shortest(static_cast<float>(v)) + "f";
  if (dt.code == dtype::float_code && dt.bits == 64) return shortest(v) + "f64";
  if (dt.code == dtype::float_code && dt.bits == 16) return shortest(static_cast<float>(v)) + "f16";
  std::string s = shortest(static_cast<float>(v));
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // a real token, not an integer
  return dt.name() + "(" + s + ")";
}

/// An integer literal of dtype dt: `3`, `3i64`, `3i8`, `uint8(3)`, `int4(3)` (the lexer's
/// suffixes are i8, i16, i32 and i64 only: other widths take the typed-scalar form).
std::string int_literal(std::int64_t v, dtype dt) {
  const bool suffixed = dt.bits == 0 || dt.bits == 8 || dt.bits == 16 || dt.bits == 32 || dt.bits == 64;
  if (dt.is_uint() || !suffixed) return dt.name() + "(" + std::to_string(v) + ")";
  if (dt.bits == 32 || dt.bits == 0) return std::to_string(v);
  return std::to_string(v) + "i" + std::to_string(dt.bits);
}

/// A 0-d constant as a literal, or "" when it has no literal form (then it goes to the metadata).
std::string scalar_literal(const constant_data& c) {
  if (!c.shape.empty() || c.dt.lanes != 1 || c.bytes.size() != c.dt.bytes()) return "";
  const dtype dt = c.dt;
  if (dt.is_bool()) return c.integer(0) ? "True" : "False";
  if (dt.is_float() && (dt.bits == 16 || dt.bits == 32 || dt.bits == 64)) {
    const double x = c.real(0);
    // A NaN has one literal (nanf, the quiet NaN of float32): any other NaN keeps its payload
    // in the metadata.
    if (std::isnan(x) && !(dt.code == dtype::float_code && dt.bits == 32 && c.raw(0) == 0x7fc00000u)) return "";
    return float_literal(x, dt);
  }
  if (dt.is_int() && (dt.bits == 8 || dt.bits == 16 || dt.bits == 32 || dt.bits == 64))
    return int_literal(c.integer(0), dt);
  if (dt.is_uint() && (dt.bits == 8 || dt.bits == 16 || dt.bits == 32)) return int_literal(c.integer(0), dt);
  return "";
}

/// A type as Relay text (type::str() without the loss of a named type's arguments).
std::string type_text(const type& t) {
  switch (t.k) {
    case type::kind::tuple: {
      std::string s = "(";
      for (std::size_t i = 0; i < t.fields.size(); ++i) s += (i ? ", " : "") + type_text(t.fields[i]);
      return s + (t.fields.size() == 1 ? ",)" : ")");
    }
    case type::kind::func: {
      std::string s = "fn (";
      for (std::size_t i = 0; i < t.fields.size(); ++i) s += (i ? ", " : "") + type_text(t.fields[i]);
      return s + ") -> " + (t.ret.empty() ? std::string("_") : type_text(t.ret[0]));
    }
    case type::kind::named: {
      std::string s = t.name;
      if (!t.fields.empty()) {
        s += "[";
        for (std::size_t i = 0; i < t.fields.size(); ++i) s += (i ? ", " : "") + type_text(t.fields[i]);
        s += "]";
      }
      return s;
    }
    default: return t.str();
  }
}

std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c == '\r') o += "\\r";
    else o += c;
  }
  return o + "\"";
}

/// Whether `%name` lexes back as exactly `name` and as a variable (not a graph binding `%7`).
bool plain_name(const std::string& n) {
  auto name_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  auto name_start = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; };
  if (n.empty()) return false;
  bool digits = true;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const char next = i + 1 < n.size() ? n[i + 1] : '\0';
    digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (name_char(c)) continue;
    if (i > 0 && c == '.' && name_start(next)) continue;
    if (i > 0 && c == '/' && name_char(next)) continue;
    if (i > 0 && c == ':' && next == ':' && i + 2 < n.size() && name_char(n[i + 2])) {
      ++i;
      continue;
    }
    return false;
  }
  return !digits;
}

class printer {
 public:
  explicit printer(const module& m) : m_(m) {}

  std::string run() {
    std::string out = "#[version = \"0.0.5\"]\n";
    for (const definition& d : m_.defs) {
      reset_def();
      analyse(d.fn);
      out += "def @" + d.name + function_text(d.fn, 0) + "\n";
    }
    if (!blobs_.empty()) {
      // More data-carrying constants than a section without data can hold: a module whose
      // constants have no data cannot also get new ones with data (their indices would clash).
      if (dataless_) throw relay::error("print: the module mixes meta constants without data and constants with data");
      out += "#[metadata]\n" + metadata_json();
    }
    return out;
  }

 private:
  // ---- scopes and ownership -------------------------------------------------------------------
  //
  // A scope is a block of bindings the parser scopes: a function body, an if branch, or a let
  // that is not the tail of a block (printed `{ let ...; ... }`). Every node is bound in the
  // innermost scope that holds all its uses, so a closure or branch sees the bindings it uses
  // from outside, and nothing is bound where a use could not see it.

  struct scope {
    int parent = -1;
    int depth = 0;
  };

  void reset_def() {
    scopes_.clear();
    owner_.clear();
    uses_.clear();
    scope_of_.clear();
    tail_let_.clear();
    names_.clear();
    var_names_.clear();
    taken_.clear();
    next_binding_ = 0;
  }

  int new_scope(int parent) {
    scopes_.push_back({parent, parent < 0 ? 0 : scopes_[static_cast<std::size_t>(parent)].depth + 1});
    return static_cast<int>(scopes_.size()) - 1;
  }
  int lca(int a, int b) const {
    if (a < 0) return b;
    if (b < 0) return a;
    while (scopes_[static_cast<std::size_t>(a)].depth > scopes_[static_cast<std::size_t>(b)].depth)
      a = scopes_[static_cast<std::size_t>(a)].parent;
    while (scopes_[static_cast<std::size_t>(b)].depth > scopes_[static_cast<std::size_t>(a)].depth)
      b = scopes_[static_cast<std::size_t>(b)].parent;
    while (a != b) a = scopes_[static_cast<std::size_t>(a)].parent, b = scopes_[static_cast<std::size_t>(b)].parent;
    return a;
  }

  // Use counts, a topological order (parents first), tail lets, and each node's scope.
  void analyse(const expr* fn) {
    std::vector<const expr*> post;
    std::unordered_map<const expr*, std::vector<const expr*>> kids;
    walk_post_order(
        std::vector<const expr*>{fn}, enter_all{},
        [&](const expr* parent, expr* const& c) {
          if (!printed_edge(parent, c)) return false;
          ++uses_[c];
          return true;
        },
        [&](const expr* e) {
          post.push_back(e);
          children(e, kids[e]);
        });
    owner_[fn] = -1;
    for (auto p = post.rbegin(); p != post.rend(); ++p) {
      const expr* e = *p;
      const int own = owner_.at(e);
      const std::vector<const expr*>& ks = kids.at(e);
      for (std::size_t k = 0; k < ks.size(); ++k) {
        const expr* c = ks[k];
        int s = own;
        if (e->kind == expr_kind::function) {
          s = open(e, 0, own, c);
        } else if (e->kind == expr_kind::if_else && k > 0) {
          s = open(e, static_cast<int>(k), own, c);
        } else if (e->kind == expr_kind::let) {
          if (k == 0) {  // the variable: printed by name; it may have no other use (`e1; e2`)
            owner_.try_emplace(c, own);
            continue;
          }
          s = tail_let_.count(e) ? own : open(e, 0, own, nullptr);
          // The body of a let, when a let used only there, continues the chain.
          if (k == 2 && c->kind == expr_kind::let && uses_.at(c) == 1) tail_let_.insert(c);
        }
        auto o = owner_.find(c);
        if (o == owner_.end()) owner_[c] = s;
        else o->second = lca(o->second, s);
      }
    }
  }

  // The scope that `e`'s slot opens (created once). A function body or branch that is a let used
  // only there starts a chain of lets printed in that scope.
  int open(const expr* e, int slot, int own, const expr* child) {
    auto it = scope_of_.find({e, slot});
    if (it != scope_of_.end()) return it->second;
    const int s = new_scope(own);
    scope_of_[{e, slot}] = s;
    if (child && child->kind == expr_kind::let && uses_.at(child) == 1) tail_let_.insert(child);
    return s;
  }

  // ---- names ------------------------------------------------------------------------------------

  std::string var_name(const expr* v) {
    auto it = var_names_.find(v);
    if (it != var_names_.end()) return it->second;
    std::string base = plain_name(v->name) ? v->name : "v";
    if (!plain_name(v->name))
      for (char c : v->name) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    std::string n = base;
    for (int k = 1; taken_.count(n); ++k) n = base + std::to_string(k);
    taken_.insert(n);
    return var_names_[v] = n;
  }

  /// A reference to an atom or a bound node.
  std::string ref(const expr* e) {
    switch (e->kind) {
      case expr_kind::var: return "%" + var_name(e);
      case expr_kind::op: return e->name;
      case expr_kind::global: return "@" + e->name;
      case expr_kind::constant: return constant_text(e);
      default: {
        auto it = names_.find(e);
        if (it == names_.end()) throw relay::error("print: a node is used before it is bound (malformed scoping)");
        return it->second;
      }
    }
  }

  std::string constant_text(const expr* e) {
    if (e->data) {
      const std::string lit = scalar_literal(*e->data);
      if (!lit.empty()) return lit;
      auto it = blob_index_.find(e->data.get());
      std::size_t i;
      if (it != blob_index_.end()) i = it->second;
      else {
        i = blobs_.size();
        blobs_.push_back(e->data);
        blob_index_[e->data.get()] = i;
      }
      return "meta[relay.Constant][" + std::to_string(i) +
             "] /* ty=" + type_text(type::tensor(e->data->shape, e->data->dt)) + " */";
    }
    if (e->meta) {
      if (e->meta->key == "relay.Constant") dataless_ = true;
      std::string s = "meta[" + e->meta->key + "][" + std::to_string(e->meta->index) + "]";
      const type& t = e->checked.known() ? e->checked : e->annotated;
      if (t.known()) s += " /* ty=" + type_text(t) + " */";
      return s;
    }
    throw relay::error("print: a constant with neither data nor a meta reference");
  }

  // ---- attributes ------------------------------------------------------------------------------

  std::string attr_text(const attr_value& v) {
    switch (v.k) {
      case attr_value::kind::none: return "None";
      case attr_value::kind::integer:
        return int_literal(v.i, v.literal.is_int() || v.literal.is_uint() ? v.literal : dtype::int32());
      case attr_value::kind::real: return float_literal(v.f, v.literal.is_float() ? v.literal : dtype::float32());
      case attr_value::kind::boolean: return v.b ? "True" : "False";
      case attr_value::kind::string: return quoted(v.s);
      case attr_value::kind::array: {
        std::string s = "[";
        for (std::size_t i = 0; i < v.items.size(); ++i) s += (i ? ", " : "") + attr_text(v.items[i]);
        return s + "]";
      }
      case attr_value::kind::meta: return "meta[" + v.meta.key + "][" + std::to_string(v.meta.index) + "]";
      case attr_value::kind::expr: {
        if (v.e && atomic(v.e)) return ref(v.e);
        throw relay::error("print: an attribute holds an expression that is not an atom");
      }
    }
    return "None";
  }

  std::string attrs_text(const attrs& a, bool positional_meta) {
    std::string s;
    for (const auto& [k, v] : a.items) {
      s += ", ";
      // `on_device(%1, meta[relay.attrs.OnDeviceAttrs][0])`: the attrs object, positional.
      if (positional_meta && k == "attrs" && v.k == attr_value::kind::meta && v.meta.key.starts_with("relay.attrs."))
        s += attr_text(v);
      else s += k + "=" + attr_text(v);
    }
    return s;
  }

  // ---- expressions -----------------------------------------------------------------------------

  std::string ty_comment(const expr* e) {
    const type& t = e->checked.known() ? e->checked : e->annotated;
    return t.known() ? " /* ty=" + type_text(t) + " */" : "";
  }

  /// The text of a non-atomic node whose children are all printed already.
  std::string node_text(const expr* e, int indent) {
    switch (e->kind) {
      case expr_kind::call: {
        std::string s = ref(e->callee) + "(";
        for (std::size_t i = 0; i < e->args.size(); ++i) s += (i ? ", " : "") + ref(e->args[i]);
        std::string a = attrs_text(e->attributes, true);
        if (e->args.empty() && !a.empty()) a = a.substr(2);
        return s + a + ")" + ty_comment(e);
      }
      case expr_kind::tuple: {
        std::string s = "(";
        for (std::size_t i = 0; i < e->args.size(); ++i) s += (i ? ", " : "") + ref(e->args[i]);
        return s + (e->args.size() == 1 ? ",)" : ")");
      }
      case expr_kind::tuple_get: return ref(e->args[0]) + "." + std::to_string(e->index) + ty_comment(e);
      case expr_kind::function: return "fn " + function_text(e, indent);
      case expr_kind::if_else: {
        const std::string pad(static_cast<std::size_t>(indent), ' ');
        return "if (" + ref(e->args[0]) + ") {\n" + block(e->args[1], scope_of_.at({e, 1}), indent + 2) + pad +
               "} else {\n" + block(e->args[2], scope_of_.at({e, 2}), indent + 2) + pad + "}";
      }
      case expr_kind::let: {
        const std::string pad(static_cast<std::size_t>(indent), ' ');
        return "{\n" + block(e, scope_of_.at({e, 0}), indent + 2) + pad + "}";
      }
      default: return ref(e);
    }
  }

  std::string param_text(const expr* v) {
    std::string s = "%" + var_name(v);
    if (!v->attributes.empty()) {
      std::string a = attrs_text(v->attributes, false);
      s += " {" + a.substr(2) + "}";
    }
    if (v->annotated.known()) s += ": " + type_text(v->annotated);
    return s;
  }

  /// `(params, attrs) -> R {\n body }` after `fn ` or `def @name`.
  std::string function_text(const expr* fn, int indent) {
    std::string s = "(";
    for (std::size_t i = 0; i < fn->args.size(); ++i) s += (i ? ", " : "") + param_text(fn->args[i]);
    std::string a = attrs_text(fn->attributes, false);
    if (fn->args.empty() && !a.empty()) a = a.substr(2);
    s += a + ")";
    type r = fn->ret;
    if (!r.known() && fn->checked.k == type::kind::func && !fn->checked.ret.empty()) r = fn->checked.ret[0];
    if (r.known()) s += " -> " + type_text(r);
    s += " {\n";
    const int sc = scope_of_.count({fn, 0}) ? scope_of_.at({fn, 0}) : 0;
    if (fn->body) s += block(fn->body, sc, indent + 2);
    return s + std::string(static_cast<std::size_t>(indent), ' ') + "}";
  }

  /// Whether `e` is the single-use root of `sc`'s block, printed inline as its result.
  bool inline_result(const expr* e) const {
    auto u = uses_.find(e);
    return u != uses_.end() && u->second == 1;
  }

  /// The bindings of scope `sc` that `root` needs, its lets, then the result.
  std::string block(const expr* root, int sc, int indent) {
    const std::string pad(static_cast<std::size_t>(indent), ' ');
    std::string out;
    const expr* e = root;
    // The let chain: value's bindings, `let %x = value;`, on to the body.
    while (e->kind == expr_kind::let &&
           (e == root ? (root->kind == expr_kind::let && (tail_let_.count(e) || owner_of(e) != sc))
                      : tail_let_.count(e) > 0)) {
      const expr* var = e->args[0];
      const expr* val = e->args[1];
      const bool inline_val = !atomic(val) && inline_result(val) && val->kind != expr_kind::let;
      emit(val, sc, indent, out, inline_val);
      std::string v = "%" + var_name(var);
      if (var->annotated.known()) v += ": " + type_text(var->annotated);
      out += pad + "let " + v + " = " + (inline_val ? node_text(val, indent) : ref(val)) + ";\n";
      e = e->args[2];
    }
    const bool inline_res = !atomic(e) && inline_result(e) && !(e->kind == expr_kind::let && e != root);
    emit(e, sc, indent, out, inline_res);
    out += pad + (inline_res ? node_text(e, indent) : ref(e)) + "\n";
    return out;
  }

  int owner_of(const expr* e) const {
    auto it = owner_.find(e);
    return it == owner_.end() ? -2 : it->second;
  }

  /// Binds, in post-order, every node under `from` that scope `sc` owns and that is not bound
  /// yet. With `skip_root`, `from` itself is left to be printed inline by the caller.
  void emit(const expr* from, int sc, int indent, std::string& out, bool skip_root) {
    const std::string pad(static_cast<std::size_t>(indent), ' ');
    if (atomic(from) || names_.count(from)) return;
    walk_post_order(
        std::vector<const expr*>{from}, enter_all{},
        [&](const expr* parent, expr* const& c) {
          // Only what this scope or a scope inside it owns is still to be bound.
          return printed_edge(parent, c) && !atomic(c) && !names_.count(c) && inside(owner_of(c), sc);
        },
        [&](const expr* e) {
          if (owner_of(e) != sc || names_.count(e) || tail_let_.count(e) || (skip_root && e == from)) return;
          const std::string name = "%" + std::to_string(next_binding_++);
          out += pad + name + " = " + node_text(e, indent) + ";\n";
          names_[e] = name;
        });
  }

  bool inside(int s, int sc) const {
    if (s < 0) return false;
    while (s >= 0 && scopes_[static_cast<std::size_t>(s)].depth > scopes_[static_cast<std::size_t>(sc)].depth)
      s = scopes_[static_cast<std::size_t>(s)].parent;
    return s == sc;
  }

  std::string metadata_json() const {
    std::string nodes =
        "[{\"type_key\": \"\"}, {\"type_key\": \"Map\", \"keys\": [\"relay.Constant\"], \"data\": [2]}, {\"type_key\": "
        "\"Array\", \"data\": [";
    for (std::size_t i = 0; i < blobs_.size(); ++i) nodes += (i ? ", " : "") + std::to_string(3 + i);
    nodes += "]}";
    for (std::size_t i = 0; i < blobs_.size(); ++i)
      nodes += ", {\"type_key\": \"relay.Constant\", \"attrs\": {\"_checked_type_\": \"0\", \"data\": \"" +
               std::to_string(i) + "\", \"span\": \"0\", \"virtual_device_\": \"0\"}}";
    nodes += "]";
    std::string b = "[";
    for (std::size_t i = 0; i < blobs_.size(); ++i) b += (i ? ", \"" : "\"") + encode_ndarray_base64(*blobs_[i]) + "\"";
    b += "]";
    return "{\n  \"root\": 1,\n  \"nodes\": " + nodes + ",\n  \"b64ndarrays\": " + b +
           ",\n  \"attrs\": {\"tvm_version\": \"0.19.0\"}\n}\n";
  }

  struct key_hash {
    std::size_t operator()(const std::pair<const expr*, int>& k) const {
      return std::hash<const void*>()(k.first) * 31 + static_cast<std::size_t>(k.second);
    }
  };

  const module& m_;
  std::vector<scope> scopes_;
  std::unordered_map<const expr*, int> owner_;
  std::unordered_map<const expr*, int> uses_;
  std::unordered_map<std::pair<const expr*, int>, int, key_hash> scope_of_;
  std::unordered_set<const expr*> tail_let_;
  std::unordered_map<const expr*, std::string> names_;
  std::unordered_map<const expr*, std::string> var_names_;
  std::unordered_set<std::string> taken_;
  int next_binding_ = 0;
  std::vector<std::shared_ptr<const constant_data>> blobs_;
  std::unordered_map<const constant_data*, std::size_t> blob_index_;
  bool dataless_ = false;
};

}  // namespace

}  // namespace printer_detail

std::string print(const module& m) { return printer_detail::printer(m).run(); }

}  // namespace fuse::relay
