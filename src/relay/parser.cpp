// The Relay text parser (fuse/relay/parser.hpp).
#include "fuse/relay/parser.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fuse/expr/ops.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/lexer.hpp"
#include "fuse/relay/metadata.hpp"
#include "fuse/relay/source.hpp"

namespace fuse::relay {

namespace parser_detail {
namespace {

std::string literal_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// The bytes of a scalar literal of dtype `dt` (little-endian, as constant_data holds them).
/// `is_real` says which of `i` and `f` holds the value. Empty when the value does not fit.
std::vector<unsigned char> scalar_bytes(relay::dtype dt, bool is_real, std::int64_t i, double f, std::string& why) {
  if (dt.lanes != 1) {
    why = "a literal cannot have the vector dtype " + dt.name();
    return {};
  }
  constant_data c;
  c.dt = dt;
  c.bytes.resize(dt.bytes());
  if (dt.is_bool()) {
    c.set_integer(0, is_real ? f != 0 : i != 0);
  } else if (dt.is_float()) {
    if (!(dt.bits == 16 || dt.bits == 32 || dt.bits == 64) || (dt.code == relay::dtype::bfloat_code && dt.bits != 16)) {
      why = "no literals of dtype " + dt.name();
      return {};
    }
    const double v = is_real ? f : static_cast<double>(i);
    // A finite value beyond the dtype's largest (3.40283e+38f32, 65505f16) is an error, as in
    // TVM, not an infinity or a rounded value: only inf literals are infinite.
    const double largest = dt.code == relay::dtype::bfloat_code ? 0x1.FEp127
                           : dt.bits == 16                      ? 65504.0
                           : dt.bits == 32                      ? static_cast<double>(std::numeric_limits<float>::max())
                                                                : std::numeric_limits<double>::max();
    c.set_real(0, v);
    if (std::isfinite(v) && std::fabs(v) > largest) {
      why = literal_text(v) + " is out of range for " + dt.name();
      return {};
    }
  } else {
    if (is_real) {
      why = "an " + dt.name() + " literal needs an integer value";
      return {};
    }
    const unsigned bits = dt.bits;
    const bool fits =
        dt.is_int() ? (bits >= 64 || (i >= -(std::int64_t(1) << (bits - 1)) && i < (std::int64_t(1) << (bits - 1))))
                    : (i >= 0 && (bits >= 64 || i < (std::int64_t(1) << bits)));
    if (!fits) {
      why = std::to_string(i) + " does not fit " + dt.name();
      return {};
    }
    c.set_integer(0, i);
  }
  return c.bytes;
}

class parser {
 public:
  explicit parser(module& m) : m_(m), main_lexer_(m.src), lx_(&main_lexer_) {}

  void parse_module() {
    bool bare = false;
    for (;;) {
      const token& t = lx_->peek();
      if (t.kind == token_kind::end) break;
      if (t.kind == token_kind::metadata) {
        read_metadata_section(lx_->next());
        expect_end();
        break;
      }
      if (t.kind == token_kind::version) {
        if (!m_.version.empty() || !m_.defs.empty()) throw error(t, "a version header must come first, and only once");
        m_.version = lx_->next().text;
        continue;
      }
      if (t.is_ident("def")) parse_def();
      else if (t.is_ident("type")) skip_type_definition();
      else if (t.is_ident("extern") && lx_->peek(1).is_ident("type")) skip_type_definition();
      else if (!bare && m_.defs.empty()) parse_bare_expression(), bare = true;
      else throw error(t, "expected 'def', 'type' or the end of the module, found " + describe(t));
    }
    resolve_meta_constants();
    legacy_batch_matmul();
  }

 private:
  // ---- errors and tokens ------------------------------------------------------------------------

  relay::error error(const token& t, const std::string& message) const { return lx_->error_at(t.begin, message); }
  relay::error error(location at, const std::string& message) const { return relay::error(m_.src, at, message); }
  location where(const token& t) const { return m_.src.locate(t.begin); }

  std::string describe(const token& t) const {
    switch (t.kind) {
      case token_kind::end: return "the end of the input";
      case token_kind::metadata: return "the metadata section";
      case token_kind::string: {
        std::string s = t.text.size() > 30 ? t.text.substr(0, 30) + "..." : t.text;
        return "the string \"" + s + "\"";
      }
      default: {
        std::string s = m_.src.text().substr(t.begin, t.end - t.begin);
        if (s.size() > 40) s = s.substr(0, 40) + "...";
        return "'" + s + "'";
      }
    }
  }

  bool accept(std::string_view punct) {
    if (!lx_->peek().is(punct)) return false;
    lx_->next();
    return true;
  }
  token expect(std::string_view punct, const std::string& what) {
    const token& t = lx_->peek();
    if (!t.is(punct)) throw error(t, "expected '" + std::string(punct) + "' " + what + ", found " + describe(t));
    return lx_->next();
  }
  void expect_end() {
    const token& t = lx_->peek();
    if (t.kind != token_kind::end)
      throw error(t, "expected the end of the input after the metadata section, found " + describe(t));
  }
  // An identifier followed by `=` (not `==`): a keyword attribute.
  bool at_attribute() { return lx_->peek().kind == token_kind::ident && lx_->peek(1).is("="); }

  /// Counts one level of nesting for the lifetime of a parse function.
  struct depth_guard {
    parser& p;
    depth_guard(parser& p_, const token& t) : p(p_) {
      if (++p.depth_ > max_depth) throw p.error(t, "nesting deeper than " + std::to_string(max_depth) + " levels");
    }
    ~depth_guard() { --p.depth_; }
    depth_guard(const depth_guard&) = delete;
    depth_guard& operator=(const depth_guard&) = delete;
  };

  // ---- scopes -----------------------------------------------------------------------------------

  void push_scope() { scopes_.emplace_back(); }
  void pop_scope() { scopes_.pop_back(); }
  struct scope_guard {
    parser& p;
    explicit scope_guard(parser& p_) : p(p_) { p.push_scope(); }
    ~scope_guard() { p.pop_scope(); }
    scope_guard(const scope_guard&) = delete;
    scope_guard& operator=(const scope_guard&) = delete;
  };
  void bind(const std::string& name, expr* e) { scopes_.back()[name] = e; }
  expr* lookup(const std::string& name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      auto it = s->find(name);
      if (it != s->end()) return it->second;
    }
    return nullptr;
  }

  // ---- comments after a node ----------------------------------------------------------------------

  // The comments written before the next token belong to the node just parsed: `/* ty=T */`
  // (or the v0.5 `# ty=T`) gives its type, `span=NAME` or a lone name comment its span. Only
  // what is not known yet is filled in (a variable's `: T` wins over a comment on a reference).
  void annotate(expr* e) {
    const token& t = lx_->peek();
    if (t.comments.empty() || t.begin == annotated_before_) return;
    annotated_before_ = t.begin;
    const std::string& text = m_.src.text();
    for (const comment& c : t.comments) {
      if (c.kind == comment::style::line) continue;
      std::size_t b = c.begin, e_ = c.end;
      while (b < e_ && (text[b] == ' ' || text[b] == '\t')) ++b;
      while (e_ > b && (text[e_ - 1] == ' ' || text[e_ - 1] == '\t' || text[e_ - 1] == '\r')) --e_;
      const std::string_view body = std::string_view(text).substr(b, e_ - b);
      if (body.starts_with("ty=")) {
        const std::size_t span_at = body.find(" span=");
        const std::size_t type_end = span_at == std::string_view::npos ? e_ : b + span_at;
        if (!e->annotated.known()) {
          if (auto ty = comment_type(b + 3, type_end)) e->annotated = std::move(*ty);
        }
        if (span_at != std::string_view::npos && e->span.empty()) e->span = std::string(body.substr(span_at + 6));
      } else if (c.kind == comment::style::block && !body.empty() &&
                 body.find_first_of(" \t\n") == std::string_view::npos) {
        if (e->span.empty()) e->span = std::string(body);
      }
    }
  }

  // A type written in a comment; nullopt when it does not parse (such comments are ignored).
  std::optional<type> comment_type(std::size_t begin, std::size_t end) {
    lexer sub(m_.src, begin, end);
    lexer* saved = lx_;
    const std::size_t saved_annotated = annotated_before_;
    lx_ = &sub;
    std::optional<type> out;
    try {
      type ty = parse_type();
      if (lx_->peek().kind == token_kind::end) out = std::move(ty);
    } catch (const relay::error&) {}
    lx_ = saved;
    annotated_before_ = saved_annotated;
    return out;
  }

  // ---- module level -------------------------------------------------------------------------------

  void parse_def() {
    const token def = lx_->next();
    const token& name = lx_->peek();
    if (name.kind != token_kind::global)
      throw error(name, "expected a global name such as @main after 'def', found " + describe(name));
    const token g = lx_->next();
    if (m_.find(g.text)) throw error(g, "@" + g.text + " is defined twice");
    expr* fn = parse_function(where(g), "@" + g.text);
    m_.defs.push_back({g.text, fn, where(def)});
  }

  // `type NAME[A, ...] { Ctor(T, ...), ... }` and `extern type NAME[...]`: read and dropped
  // (fuse compiles tensor programs; an ADT name in a type is kept as a `named` type).
  void skip_type_definition() {
    const bool is_extern = lx_->peek().is_ident("extern");
    if (is_extern) lx_->next();
    lx_->next();
    const token& name = lx_->peek();
    if (name.kind != token_kind::ident) throw error(name, "expected a type name after 'type', found " + describe(name));
    lx_->next();
    if (accept("[")) {
      for (;;) {
        const token& p = lx_->peek();
        if (p.kind != token_kind::ident) throw error(p, "expected a type parameter, found " + describe(p));
        lx_->next();
        if (accept(",")) continue;
        expect("]", "to close the type parameters");
        break;
      }
    }
    if (is_extern || !accept("{")) return;
    while (!accept("}")) {
      const token& ctor = lx_->peek();
      if (ctor.kind != token_kind::ident)
        throw error(ctor, "expected a constructor or '}' in the type definition, found " + describe(ctor));
      lx_->next();
      if (accept("(")) {
        for (;;) {
          parse_type();
          if (accept(",")) continue;
          expect(")", "to close the constructor's fields");
          break;
        }
      }
      if (!accept(",") && !lx_->peek().is("}"))
        throw error(lx_->peek(), "expected ',' or '}' in the type definition, found " + describe(lx_->peek()));
    }
  }

  // The text is one expression, not a module (what printing an expression gives): it becomes
  // "main". A function is main itself; anything else is wrapped in a function whose
  // parameters are the `free_var`s.
  void parse_bare_expression() {
    const token& first = lx_->peek();
    const location at = where(first);
    scope_guard scope(*this);
    expr* body = parse_expr();
    expr* fn = body;
    if (body->kind != expr_kind::function) {
      fn = m_.make(expr_kind::function, at);
      fn->args = free_vars_;
      fn->body = body;
    }
    m_.defs.push_back({"main", fn, at});
    const token& t = lx_->peek();
    if (t.kind != token_kind::end && t.kind != token_kind::metadata)
      throw error(t, "expected the end of the expression, found " + describe(t));
  }

  void read_metadata_section(const token& t) {
    const std::size_t json = static_cast<std::size_t>(t.i);
    m_.has_metadata = true;
    if (t.json_end < m_.src.text().size()) {
      // r"""...""": the reader reads to the end of its source, so it gets the text up to the
      // closing quotes (same name and offsets, so its errors point at the same places).
      const source cut(m_.src.name(), m_.src.text().substr(0, t.json_end));
      metadata md = read_metadata(cut, json);
      m_.constants = std::move(md.constants);
      m_.tvm_version = std::move(md.tvm_version);
    } else {
      metadata md = read_metadata(m_.src, json);
      m_.constants = std::move(md.constants);
      m_.tvm_version = std::move(md.tvm_version);
    }
  }

  /// Whether the text comes from a TVM before 0.8: a v0.0.3/v0.0.4 header, or a metadata
  /// section naming such a version.
  bool printed_before_0_8() const {
    if (m_.version == "0.0.3" || m_.version == "0.0.4") return true;
    const std::string& v = m_.tvm_version;
    if (!v.starts_with("0.")) return false;
    std::size_t i = 2;
    int minor = 0;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9' && minor < 1000) minor = minor * 10 + (v[i++] - '0');
    return i > 2 && minor < 8;
  }

  /// nn.batch_matmul had no transpose attributes before TVM 0.8 and meant a x b^T; since then
  /// an absent transpose_b means false. Calls in older text get transpose_b=True written in.
  void legacy_batch_matmul() {
    if (!printed_before_0_8()) return;
    for (expr& e : m_.nodes)
      if (is_op_call(&e, "nn.batch_matmul") && !e.attributes.find("transpose_a") && !e.attributes.find("transpose_b")) {
        attr_value b;
        b.k = attr_value::kind::boolean;
        b.b = true;
        b.at = e.at;
        e.attributes.items.emplace_back("transpose_b", std::move(b));
      }
  }

  void resolve_meta_constants() {
    if (!m_.has_metadata) return;
    for (expr* e : meta_constants_) {
      const auto i = static_cast<std::size_t>(e->meta->index);
      if (i >= m_.constants.size() || !m_.constants[i])
        throw error(e->at, "meta[relay.Constant][" + std::to_string(e->meta->index) +
                               "] is out of range: the metadata section has " + std::to_string(m_.constants.size()) +
                               " constants");
      e->data = m_.constants[i];
      if (!e->annotated.known()) e->annotated = type::tensor(e->data->shape, e->data->dt);
    }
  }

  // ---- functions ----------------------------------------------------------------------------------

  // After `fn` or `def @name`: [type params] (params, attrs) [-> R] { body }.
  expr* parse_function(location at, const std::string& what) {
    depth_guard depth(*this, lx_->peek());
    expr* fn = m_.make(expr_kind::function, at);
    scope_guard scope(*this);
    if (accept("[")) {
      for (;;) {
        const token& p = lx_->peek();
        if (p.kind != token_kind::ident)
          throw error(p, "expected a type parameter of " + what + ", found " + describe(p));
        lx_->next();
        if (accept(",")) continue;
        expect("]", "to close the type parameters of " + what);
        break;
      }
    }
    expect("(", "to open the parameters of " + what);
    bool attrs_seen = false;
    while (!lx_->peek().is(")")) {
      const token& t = lx_->peek();
      if ((t.kind == token_kind::local || t.kind == token_kind::graph) && !attrs_seen) {
        const token p = lx_->next();
        for (const expr* q : fn->args)
          if (q->name == p.text) throw error(p, "parameter %" + p.text + " of " + what + " is declared twice");
        expr* v = m_.make(expr_kind::var, where(p));
        v->name = p.text;
        if (accept("{")) {
          // `{virtual_device=...}` after a parameter (device planning output).
          while (!accept("}")) {
            parse_attribute(v->attributes, "the parameter %" + p.text);
            if (!accept(",") && !lx_->peek().is("}"))
              throw error(lx_->peek(), "expected ',' or '}' after the attributes of %" + p.text + ", found " +
                                           describe(lx_->peek()));
          }
        }
        if (accept(":")) v->annotated = parse_type();
        annotate(v);
        bind(p.text, v);
        fn->args.push_back(v);
      } else if (at_attribute()) {
        attrs_seen = true;
        parse_attribute(fn->attributes, what);
      } else {
        throw error(
            t, std::string(attrs_seen ? "expected an attribute or ')'" : "expected a parameter, an attribute or ')'") +
                   " in the parameters of " + what + ", found " + describe(t));
      }
      if (!accept(",") && !lx_->peek().is(")"))
        throw error(lx_->peek(),
                    "expected ',' or ')' in the parameters of " + what + ", found " + describe(lx_->peek()));
    }
    lx_->next();
    if (accept("->")) fn->ret = parse_type();
    expect("{", "to open the body of " + what);
    fn->body = parse_expr();
    expect("}", "to close the body of " + what);
    return fn;
  }

  // ---- expressions --------------------------------------------------------------------------------

  // A sequence: graph bindings, `let`s and `free_var`s (in a loop), then one expression.
  expr* parse_expr() {
    std::vector<expr*> lets;  // let nodes still waiting for their body, outermost first
    expr* result = nullptr;
    for (;;) {
      const token& t = lx_->peek();
      if ((t.kind == token_kind::graph || t.kind == token_kind::local) && lx_->peek(1).is("=")) {
        const token name = lx_->next();
        lx_->next();
        expr* value = parse_binop();
        bind(name.text, value);
        end_of_binding("%" + name.text);
        continue;
      }
      if (t.is_ident("let")) {
        const token kw = lx_->next();
        const token& v = lx_->peek();
        if (v.kind != token_kind::local && v.kind != token_kind::graph)
          throw error(v, "expected a variable such as %x after 'let', found " + describe(v));
        expr* var = make_var(lx_->next());
        expect("=", "after the variable of 'let %" + var->name + "'");
        bind(var->name, var);  // visible in its own value: recursive closures
        expr* let = m_.make(expr_kind::let, where(kw));
        let->args = {var, parse_binop()};
        lets.push_back(let);
        const token& s = lx_->peek();
        if (!accept(";") && !s.newline_before)
          throw error(s, "expected ';' after the value of 'let %" + var->name + "', found " + describe(s));
        continue;
      }
      if (t.is_ident("free_var")) {
        lx_->next();
        const token& v = lx_->peek();
        if (v.kind != token_kind::local)
          throw error(v, "expected a variable such as %x after 'free_var', found " + describe(v));
        expr* var = make_var(lx_->next());
        bind(var->name, var);
        free_vars_.push_back(var);
        accept(";");
        continue;
      }
      expr* e = parse_binop();
      // `a; b`: evaluate a, then b (TVM: let _ = a; b).
      if (lx_->peek().is(";") && !is_closer(lx_->peek(1))) {
        const token semi = lx_->next();
        expr* let = m_.make(expr_kind::let, where(semi));
        expr* var = m_.make(expr_kind::var, where(semi));
        var->name = "_";
        let->args = {var, e};
        lets.push_back(let);
        continue;
      }
      accept(";");  // tolerated before the closing brace
      result = e;
      break;
    }
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
      (*it)->args.push_back(result);
      result = *it;
    }
    return result;
  }
  static bool is_closer(const token& t) { return t.kind == token_kind::end || t.is("}") || t.is(")"); }

  // After a binding's value: `;`, or (v0.5 printer) a line break before the next statement.
  void end_of_binding(const std::string& name) {
    const token& t = lx_->peek();
    if (accept(";")) {
      if (is_closer(lx_->peek()))
        throw error(lx_->peek(),
                    "expected an expression after the binding of " + name + ", found " + describe(lx_->peek()));
      return;
    }
    if (is_closer(t))
      throw error(t, "expected ';' and an expression after the binding of " + name + ", found " + describe(t));
    if (!t.newline_before) throw error(t, "expected ';' after the binding of " + name + ", found " + describe(t));
  }

  // `%x` or `%x: T` in a let or free_var.
  expr* make_var(const token& name) {
    expr* v = m_.make(expr_kind::var, where(name));
    v->name = name.text;
    if (accept(":")) v->annotated = parse_type();
    annotate(v);
    return v;
  }

  // Binary operators of hand-written text, as calls of the ops they stand for. Shunting-yard
  // with an explicit stack: a long `a + b + c ...` chain does not recurse.
  struct binop {
    const char* op;
    int prec;
  };
  static std::optional<binop> binary_operator(const token& t) {
    if (t.kind != token_kind::punct) return std::nullopt;
    static constexpr std::pair<std::string_view, binop> table[] = {
        {"*", {ops::multiply::name, 12}}, {"/", {ops::divide::name, 12}},        {"+", {ops::add::name, 10}},
        {"-", {ops::subtract::name, 10}}, {"<", {ops::less::name, 8}},           {"<=", {ops::less_equal::name, 8}},
        {">", {ops::greater::name, 8}},   {">=", {ops::greater_equal::name, 8}}, {"==", {ops::equal::name, 7}},
        {"!=", {ops::not_equal::name, 7}}};
    for (const auto& [s, b] : table)
      if (t.text == s) return b;
    return std::nullopt;
  }
  expr* parse_binop() {
    depth_guard depth(*this, lx_->peek());
    std::vector<expr*> operands{parse_postfix()};
    std::vector<std::pair<binop, location>> ops;
    auto reduce = [&] {
      expr* call = m_.make(expr_kind::call, ops.back().second);
      call->callee = m_.make(expr_kind::op, ops.back().second);
      call->callee->name = ops.back().first.op;
      expr* rhs = operands.back();
      operands.pop_back();
      call->args = {operands.back(), rhs};
      operands.back() = call;
      ops.pop_back();
    };
    while (auto b = binary_operator(lx_->peek())) {
      while (!ops.empty() && ops.back().first.prec >= b->prec) reduce();
      ops.emplace_back(*b, where(lx_->next()));
      operands.push_back(parse_postfix());
    }
    while (!ops.empty()) reduce();
    return operands.back();
  }

  // An atom followed by calls `(...)` and projections `.N`, then its comments.
  expr* parse_postfix() {
    bool fresh = true;
    expr* e = parse_atomic(fresh);
    for (;;) {
      const token& t = lx_->peek();
      // A call's `(` is on the callee's line; on a new line it starts the next statement (v0.5).
      if (t.is("(") && !t.newline_before) {
        e = parse_call(e);
      } else if (t.is(".") && lx_->peek(1).kind == token_kind::integer && lx_->peek(1).begin == t.end) {
        const token dot = lx_->next();
        const token index = lx_->next();
        if (index.i < 0) throw error(index, "a tuple index cannot be negative");
        expr* get = m_.make(expr_kind::tuple_get, where(dot));
        get->args = {e};
        get->index = index.i;
        e = get;
      } else {
        break;
      }
      fresh = true;
    }
    if (fresh) annotate(e);
    return e;
  }

  std::string callee_name(const expr* callee) const {
    switch (callee->kind) {
      case expr_kind::op: return callee->name;
      case expr_kind::global: return "@" + callee->name;
      case expr_kind::var: return "%" + callee->name;
      default: return "the function";
    }
  }

  expr* parse_call(expr* callee) {
    const token open = lx_->next();
    expr* call = m_.make(expr_kind::call, callee->kind == expr_kind::op ? callee->at : where(open));
    call->callee = callee;
    const std::string what = callee_name(callee);
    bool attrs_seen = false;
    while (!lx_->peek().is(")")) {
      const token& t = lx_->peek();
      if (at_attribute()) {
        attrs_seen = true;
        parse_attribute(call->attributes, "the call of " + what);
      } else if (t.kind == token_kind::meta && t.text.starts_with("relay.attrs.") &&
                 (lx_->peek(1).is(")") || lx_->peek(1).is(","))) {
        // `on_device(%1, meta[relay.attrs.OnDeviceAttrs][0])`: the call's attrs object.
        attr_value v;
        v.k = attr_value::kind::meta;
        v.meta = {t.text, t.i};
        v.at = where(t);
        call->attributes.items.emplace_back("attrs", std::move(v));
        lx_->next();
        attrs_seen = true;
      } else if (attrs_seen) {
        throw error(t, "expected a keyword attribute or ')' in the call of " + what +
                           " (arguments come before attributes), found " + describe(t));
      } else if (t.kind == token_kind::end) {
        throw error(t, "expected ')' to close the call of " + what + ", found " + describe(t));
      } else {
        call->args.push_back(parse_binop());
      }
      if (!accept(",") && !lx_->peek().is(")"))
        throw error(lx_->peek(), "expected ')' to close the call of " + what + ", found " + describe(lx_->peek()));
    }
    lx_->next();
    return call;
  }

  expr* literal(const token& t, relay::dtype dt, bool is_real, std::int64_t i, double f) {
    std::string why;
    std::vector<unsigned char> bytes = scalar_bytes(dt, is_real, i, f, why);
    if (!why.empty()) throw error(t, why);
    expr* c = m_.make(expr_kind::constant, where(t));
    auto data = std::make_shared<constant_data>();
    data->dt = dt;
    data->bytes = std::move(bytes);
    c->data = std::move(data);
    c->annotated = type::tensor({}, dt);
    return c;
  }

  // `int64(3)`, `float16(0.5)`: the v0.5 printer's typed scalars.
  bool at_dtype_literal() {
    // Looks no further than `(` unless the name is a dtype: a debug blob may not lex.
    const token& t = lx_->peek();
    if (t.kind != token_kind::ident || !dtype::parse(t.text) || !lx_->peek(1).is("(")) return false;
    const token& n = lx_->peek(2);
    return (n.kind == token_kind::integer || n.kind == token_kind::real) && lx_->peek(3).is(")");
  }

  expr* parse_atomic(bool& fresh) {
    const token& t = lx_->peek();
    switch (t.kind) {
      case token_kind::integer:
      case token_kind::real: {
        const token n = lx_->next();
        return literal(n, n.dt, n.kind == token_kind::real, n.i, n.f);
      }
      case token_kind::local:
      case token_kind::graph: {
        const token v = lx_->next();
        expr* e = lookup(v.text);
        if (!e) throw error(v, "%" + v.text + " is not defined");
        fresh = e->kind == expr_kind::var;  // a variable takes a comment's type if it has none
        return e;
      }
      case token_kind::global: {
        const token g = lx_->next();
        expr* e = m_.make(expr_kind::global, where(g));
        e->name = g.text;
        return e;
      }
      case token_kind::meta: {
        const token mt = lx_->next();
        expr* e = m_.make(expr_kind::constant, where(mt));
        e->meta = meta_ref{mt.text, mt.i};
        if (mt.text == "relay.Constant") meta_constants_.push_back(e);
        return e;
      }
      case token_kind::punct: {
        if (t.is("(")) return parse_parenthesized(fresh);
        if (t.is("{")) {
          const token open = lx_->next();
          scope_guard scope(*this);
          expr* e = parse_expr();
          expect("}", "to close the block opened at line " + std::to_string(where(open).line));
          fresh = false;
          return e;
        }
        if (t.is("-")) {
          const token minus = lx_->next();
          depth_guard depth(*this, minus);
          expr* call = m_.make(expr_kind::call, where(minus));
          call->callee = m_.make(expr_kind::op, where(minus));
          call->callee->name = ops::negative::name;
          call->args = {parse_postfix()};
          return call;
        }
        break;
      }
      case token_kind::ident: {
        if (t.text == "True" || t.text == "False") {
          const token b = lx_->next();
          return literal(b, dtype::boolean(), false, b.text == "True", 0);
        }
        if (t.text == "fn") {
          const token kw = lx_->next();
          return parse_function(where(kw), "the function at line " + std::to_string(where(kw).line));
        }
        if (t.text == "if") return parse_if();
        if (t.text == "match" || t.text == "match?")
          throw error(t, "match is not supported: fuse reads tensor programs, not ADT pattern matching");
        if (t.text == "let" || t.text == "free_var" || t.text == "def" || t.text == "type" || t.text == "else" ||
            t.text == "extern")
          break;
        if (at_dtype_literal()) {
          const token d = lx_->next();
          lx_->next();
          const token n = lx_->next();
          lx_->next();
          return literal(n, *dtype::parse(d.text), n.kind == token_kind::real, n.i, n.f);
        }
        const token name = lx_->next();
        expr* e = m_.make(expr_kind::op, where(name));
        e->name = name.text;
        return e;
      }
      default: break;
    }
    throw error(t, "expected an expression, found " + describe(t));
  }

  // `()`, `(e)`, `(e,)`, `(a, b, ...)`.
  expr* parse_parenthesized(bool& fresh) {
    const token open = lx_->next();
    expr* tuple = m_.make(expr_kind::tuple, where(open));
    if (accept(")")) return tuple;
    scope_guard scope(*this);
    expr* first = parse_expr();
    if (accept(")")) {
      fresh = false;
      return first;
    }
    tuple->args.push_back(first);
    for (;;) {
      const token& t = lx_->peek();
      if (!t.is(","))
        throw error(t, "expected ',' or ')' in the tuple opened at line " + std::to_string(where(open).line) +
                           ", found " + describe(t));
      lx_->next();
      if (accept(")")) return tuple;
      tuple->args.push_back(parse_binop());
      if (accept(")")) return tuple;
    }
  }

  expr* parse_if() {
    const token kw = lx_->next();
    expr* e = m_.make(expr_kind::if_else, where(kw));
    expect("(", "after 'if'");
    expr* cond;
    {
      scope_guard scope(*this);
      cond = parse_expr();
    }
    expect(")", "to close the condition of 'if'");
    auto branch = [&](const char* which) {
      expect("{", std::string("to open the ") + which + " branch of 'if'");
      scope_guard scope(*this);
      expr* b = parse_expr();
      expect("}", std::string("to close the ") + which + " branch of 'if'");
      return b;
    };
    expr* then = branch("then");
    const token& el = lx_->peek();
    if (!el.is_ident("else")) throw error(el, "expected 'else' after the then branch of 'if', found " + describe(el));
    lx_->next();
    expr* otherwise = branch("else");
    e->args = {cond, then, otherwise};
    return e;
  }

  // ---- attributes ---------------------------------------------------------------------------------

  void parse_attribute(relay::attrs& into, const std::string& what) {
    const token& k = lx_->peek();
    if (k.kind != token_kind::ident || !lx_->peek(1).is("="))
      throw error(k, "expected an attribute KEY=VALUE in " + what + ", found " + describe(k));
    if (into.find(k.text))
      throw error(k, "attribute " + k.text + " is given twice in " + what +
                         " (which value is meant is ambiguous; TVM silently takes the last)");
    std::string key = lx_->next().text;
    lx_->next();
    into.items.emplace_back(std::move(key), parse_attr_value());
  }

  attr_value parse_attr_value() {
    const token& t = lx_->peek();
    depth_guard depth(*this, t);
    attr_value v;
    v.at = where(t);
    switch (t.kind) {
      case token_kind::integer:
      case token_kind::real: {
        const token n = lx_->next();
        set_number(v, n.dt, n.kind == token_kind::real, n.i, n.f);
        return v;
      }
      case token_kind::string:
        v.k = attr_value::kind::string;
        v.s = lx_->next().text;
        return v;
      case token_kind::meta: {
        const token mt = lx_->next();
        v.k = attr_value::kind::meta;
        v.meta = {mt.text, mt.i};
        return v;
      }
      case token_kind::ident: {
        if (t.text == "True" || t.text == "False") {
          v.k = attr_value::kind::boolean;
          v.b = lx_->next().text == "True";
          v.literal = dtype::boolean();
          return v;
        }
        if (t.text == "None" || t.text == "nullptr") {
          v.k = attr_value::kind::none;
          v.s = lx_->next().text;
          return v;
        }
        if (at_dtype_literal()) {
          const token d = lx_->next();
          lx_->next();
          const token n = lx_->next();
          lx_->next();
          const relay::dtype dt = *dtype::parse(d.text);
          std::string why;
          scalar_bytes(dt, n.kind == token_kind::real, n.i, n.f, why);
          if (!why.empty()) throw error(n, why);
          set_number(v, dt, n.kind == token_kind::real, n.i, n.f);
          return v;
        }
        const token& after = lx_->peek(1);
        if ((after.is("(") || after.is("{")) && after.begin == t.end && t.text != "fn" && t.text != "if")
          return raw_blob(v);
        break;
      }
      case token_kind::punct: {
        if (t.is("{")) return raw_blob(v);
        if (t.is("[") || t.is("(")) {
          const bool bracket = t.is("[");
          const char* close = bracket ? "]" : ")";
          const token open = lx_->next();
          v.k = attr_value::kind::array;
          bool comma = false;
          while (!accept(close)) {
            v.items.push_back(parse_attr_value());
            if (accept(",")) comma = true;
            else if (!lx_->peek().is(close))
              throw error(lx_->peek(), std::string("expected ',' or '") + close +
                                           "' in the attribute value opened at line " +
                                           std::to_string(where(open).line) + ", found " + describe(lx_->peek()));
          }
          if (!bracket && v.items.size() == 1 && !comma) return std::move(v.items[0]);  // (value)
          return v;
        }
        break;
      }
      default: break;
    }
    // Anything else that reads as an expression (rare: a global, a variable, an operator name).
    if (t.kind == token_kind::end) throw error(t, "expected an attribute value, found " + describe(t));
    v.k = attr_value::kind::expr;
    v.e = parse_postfix();
    return v;
  }

  static void set_number(attr_value& v, relay::dtype dt, bool is_real, std::int64_t i, double f) {
    v.literal = dt;
    if (dt.is_bool()) {
      v.k = attr_value::kind::boolean;
      v.b = is_real ? f != 0 : i != 0;
    } else if (dt.is_float()) {
      v.k = attr_value::kind::real;
      v.f = is_real ? f : static_cast<double>(i);
    } else {
      v.k = attr_value::kind::integer;
      v.i = i;
    }
  }

  // A debug value that is not Relay text (`VirtualDevice(device_type=1, ..., keys={'cpu'})`,
  // `{k=v}` maps): skipped as raw text up to its balanced closing bracket, kept as a string.
  attr_value raw_blob(attr_value& v) {
    const token first = lx_->peek();
    const std::string& text = m_.src.text();
    std::size_t p = first.begin;
    std::string closers;
    while (p < text.size() && closers.empty() && text[p] != '(' && text[p] != '{' && text[p] != '[') ++p;
    for (; p < text.size(); ++p) {
      const char c = text[p];
      if (c == '(') closers.push_back(')');
      else if (c == '[') closers.push_back(']');
      else if (c == '{') closers.push_back('}');
      else if (c == ')' || c == ']' || c == '}') {
        if (closers.empty() || closers.back() != c)
          throw lx_->error_at(p, std::string("unbalanced '") + c + "' in the attribute value starting at line " +
                                     std::to_string(where(first).line));
        closers.pop_back();
        if (closers.empty()) break;
      } else if (c == '"' || c == '\'') {
        for (++p; p < text.size() && text[p] != c; ++p)
          if (text[p] == '\\') ++p;
        if (p >= text.size()) break;
      }
    }
    if (p >= text.size()) throw error(first, "unterminated attribute value: no closing bracket for " + describe(first));
    v.k = attr_value::kind::string;
    v.s = text.substr(first.begin, p + 1 - first.begin);
    lx_->reset(p + 1);
    return v;
  }

  // ---- types --------------------------------------------------------------------------------------

  type parse_type() {
    const token& t = lx_->peek();
    depth_guard depth(*this, t);
    if (t.is("(")) {
      lx_->next();
      std::vector<type> fields;
      while (!accept(")")) {
        fields.push_back(parse_type());
        if (!accept(",") && !lx_->peek().is(")"))
          throw error(lx_->peek(), "expected ',' or ')' in the tuple type, found " + describe(lx_->peek()));
      }
      return type::tuple(std::move(fields));
    }
    if (t.kind != token_kind::ident) throw error(t, "expected a type, found " + describe(t));
    const token name = lx_->next();
    if (name.text == "_") return type{};
    if (name.text == "fn") {
      type f;
      f.k = type::kind::func;
      expect("(", "after 'fn' in a function type");
      while (!accept(")")) {
        f.fields.push_back(parse_type());
        if (!accept(",") && !lx_->peek().is(")"))
          throw error(lx_->peek(), "expected ',' or ')' in the function type, found " + describe(lx_->peek()));
      }
      expect("->", "after the parameters of a function type");
      f.ret.push_back(parse_type());
      return f;
    }
    if (name.text == "Tensor" && lx_->peek().is("[")) return parse_tensor_type();
    if (auto dt = dtype::parse(name.text)) return type::tensor({}, *dt);
    type n;
    n.k = type::kind::named;
    n.name = name.text;
    const bool tuple = name.text == "Tuple";  // the v0.5 printer's Tuple[T, ...]
    const char* close = lx_->peek().is("[") ? "]" : lx_->peek().is("(") && name.text == "ref" ? ")" : nullptr;
    if (close) {
      lx_->next();
      while (!accept(close)) {
        n.fields.push_back(parse_type());
        if (!accept(",") && !lx_->peek().is(close))
          throw error(lx_->peek(), "expected ',' or '" + std::string(close) + "' in the type arguments of " +
                                       name.text + ", found " + describe(lx_->peek()));
      }
    }
    if (tuple && close) return type::tuple(std::move(n.fields));
    return n;
  }

  // Tensor[(d0, d1, ...), dtype]; a dim is an integer (any suffix), `?` (dynamic), or a symbol
  // (meta[tir.Var][0], n) which is dynamic here too.
  type parse_tensor_type() {
    expect("[", "after 'Tensor'");
    expect("(", "to open the shape of a Tensor type");
    std::vector<std::int64_t> shape;
    while (!accept(")")) {
      const token& d = lx_->peek();
      if (d.kind == token_kind::integer) {
        if (d.i < 0) throw error(d, "a tensor dimension cannot be negative");
        shape.push_back(d.i);
      } else if (d.is("?") || d.kind == token_kind::meta || d.kind == token_kind::ident) {
        shape.push_back(-1);
      } else {
        throw error(d, "expected a dimension (an integer or '?') in the Tensor shape, found " + describe(d));
      }
      lx_->next();
      if (!accept(",") && !lx_->peek().is(")"))
        throw error(lx_->peek(), "expected ',' or ')' in the Tensor shape, found " + describe(lx_->peek()));
    }
    expect(",", "after the shape of a Tensor type");
    const token& d = lx_->peek();
    if (d.kind != token_kind::ident) throw error(d, "expected a dtype in the Tensor type, found " + describe(d));
    const auto dt = dtype::parse(d.text);
    if (!dt) throw error(d, "unknown dtype '" + d.text + "'");
    lx_->next();
    expect("]", "to close the Tensor type");
    return type::tensor(std::move(shape), *dt);
  }

  module& m_;
  lexer main_lexer_;
  lexer* lx_;
  int depth_ = 0;
  std::vector<std::unordered_map<std::string, expr*>> scopes_;
  std::vector<expr*> free_vars_;
  std::vector<expr*> meta_constants_;
  std::size_t annotated_before_ = std::size_t(-1);  // the token whose comments were used already
};

}  // namespace
}  // namespace parser_detail

module parse(std::string name, std::string text) {
  module m;
  m.src = source(std::move(name), std::move(text));
  parser_detail::parser(m).parse_module();
  return m;
}

}  // namespace fuse::relay
