// A Relay dataflow graph built op by op, and the text TVM v0.19 prints for it.
//
// The model generators (bert.hpp) build what a TVM frontend builds: a DAG of calls over
// variables and constants. print_main() then writes it as TVM v0.19's RelayTextPrinter does
// (src/relay/printer/relay_text_printer.cc), because the numbering and the order of the
// bindings in real dumps follow from that printer's walk, not from the order the frontend
// created the nodes in:
//   * The nodes are visited in post-order (ExpandDataflow: a call's arguments pushed in reverse,
//     so the first argument's subtree finishes first).
//   * A call, tuple or projection gets its `%N = ...;` line when the FIRST of its users is
//     visited and prints its arguments (VisitExpr_(CallNode) -> Print(arg) -> PrintExpr), not
//     when it is itself visited. So in `f(g(..), h(..))` the lines of h's subtree come before
//     g's own line: seed 002 shows it (`%40 = cast(%31)` after `%39`).
//   * Variables, scalar constants and `meta[relay.Constant][i]` are always printed inline;
//     every reference to a constant repeats its `/* ty=... */` (the comment is memoised with
//     the text). Meta indices are given in the order the constants are visited.
//   * The function's body is printed inline as the last line (PrintScope with try_inline, a
//     node with no users).
//   * `/* ty=T span=NAME:0:0 */` follows every call, tuple, projection, constant and parameter
//     (PrintOptionalInfo); the span part only where the node has one.
//   * Attributes are printed by the caller in TVM's form (`axis=1`, `epsilon=1e-12f`,
//     `transpose_b=True`, `dtype="int32"`), only where they differ from the C++ default
//     (VisitNonDefaultAttrs); a field without a default is always printed (`axes=None`).
//   * Floats keep 6 significant digits (`std::ostream <<`): scalars `0.707107f`, attributes
//     `1e-12f`. The text is lossy; as_printed() is the value a reader gets back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "fuse/relay/ir.hpp"

namespace fuse::relay::models {

/// A number as TVM's printers write it: std::ostream's default, 6 significant digits.
inline std::string six_digits(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// The float32 value a reader gets back from a float32 scalar TVM printed (`0.707107f`).
inline double as_printed(double v) {
  return static_cast<double>(static_cast<float>(std::stod(six_digits(static_cast<float>(v)))));
}

// ---- attribute values in TVM's printed form --------------------------------------------------

namespace attr_text {
inline std::string ints(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
/// A double attribute (`AttrPrinter::Visit(double)`: the stream's 6 digits, then `f`).
inline std::string real(double v) { return six_digits(v) + "f"; }
inline std::string boolean(bool v) { return v ? "True" : "False"; }
inline std::string str(const std::string& v) { return "\"" + v + "\""; }
}  // namespace attr_text

/// One node of the graph.
struct node {
  enum class kind : std::uint8_t { var, scalar, constant, call, tuple, get };
  kind k = kind::call;
  std::string name;  ///< var: its name; scalar: its literal (`0.5f`); call: the op
  std::vector<int> args;
  std::string attrs;  ///< call: `key=value, ...` as printed (empty: none)
  relay::type ty;
  std::string span;  ///< the source name TVM's frontends attach ("" none)
  int index = 0;     ///< get: the field; constant: the weight entry holding its data
};

/// The graph under construction. `span` is given to the nodes made while it is set, as the
/// frontends' set_span() gives each converted op's name to everything its converter made.
class graph {
 public:
  std::string span;

  int var(const std::string& name, relay::type t, const std::string& var_span = "") {
    node n;
    n.k = node::kind::var;
    n.name = name;
    n.ty = std::move(t);
    n.span = var_span;
    return add(std::move(n));
  }
  /// A float32 scalar constant, printed as TVM prints one (`NDArrayScalarToString`).
  int scalar(double v) {
    node n;
    n.k = node::kind::scalar;
    n.name = six_digits(static_cast<float>(v)) + "f";
    n.ty = relay::type::tensor({}, relay::dtype::float32());
    n.span = span;
    return add(std::move(n));
  }
  /// An int32 scalar constant (`0`).
  int scalar_int32(std::int64_t v) {
    node n;
    n.k = node::kind::scalar;
    n.name = std::to_string(v);
    n.ty = relay::type::tensor({}, relay::dtype::int32());
    n.span = span;
    return add(std::move(n));
  }
  /// A tensor constant printed as `meta[relay.Constant][i]`; weight entry `entry` holds it.
  int constant(relay::type t, int entry) {
    node n;
    n.k = node::kind::constant;
    n.ty = std::move(t);
    n.index = entry;
    return add(std::move(n));
  }
  int call(const std::string& op, std::vector<int> args, std::string attrs, relay::type t) {
    node n;
    n.k = node::kind::call;
    n.name = op;
    n.args = std::move(args);
    n.attrs = std::move(attrs);
    n.ty = std::move(t);
    n.span = span;
    return add(std::move(n));
  }
  int tuple(std::vector<int> fields) {
    node n;
    n.k = node::kind::tuple;
    std::vector<relay::type> types;
    for (int f : fields) types.push_back(nodes_[static_cast<std::size_t>(f)].ty);
    n.args = std::move(fields);
    n.ty = relay::type::tuple(std::move(types));
    n.span = span;
    return add(std::move(n));
  }
  int get(int t, int i) {
    node n;
    n.k = node::kind::get;
    n.args = {t};
    n.index = i;
    n.ty = nodes_[static_cast<std::size_t>(t)].ty.fields.at(static_cast<std::size_t>(i));
    n.span = span;
    return add(std::move(n));
  }

  const node& at(int i) const { return nodes_[static_cast<std::size_t>(i)]; }
  const relay::type& type_of(int i) const { return at(i).ty; }
  const std::vector<std::int64_t>& shape_of(int i) const { return at(i).ty.shape; }
  std::size_t size() const { return nodes_.size(); }

 private:
  int add(node n) {
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
  }
  std::vector<node> nodes_;
};

namespace printer_detail {

/// Post-order visit from `root` as ExpandDataflow does it (arguments pushed in reverse, so the
/// first argument's subtree is finished first); `visit(n)` is called once per node.
template <typename Visit>
void post_order(const graph& g, int root, std::vector<char>& visited, Visit visit) {
  std::vector<std::pair<int, bool>> stack{{root, false}};
  while (!stack.empty()) {
    auto& [n, expanded] = stack.back();
    if (visited[static_cast<std::size_t>(n)]) {
      stack.pop_back();
    } else if (expanded) {
      const int done = n;
      stack.pop_back();
      visited[static_cast<std::size_t>(done)] = 1;
      visit(done);
    } else {
      expanded = true;
      const std::vector<int> args = g.at(n).args;  // copy: push_back may move the stack
      for (std::size_t i = args.size(); i-- > 0;)
        if (!visited[static_cast<std::size_t>(args[i])]) stack.push_back({args[i], false});
    }
  }
}

inline std::string info(const node& n) {
  std::string s = " /* ty=" + n.ty.str();
  if (!n.span.empty()) s += " span=" + n.span + ":0:0";
  return s + " */";
}

}  // namespace printer_detail

/// The variables reachable from `root` in the order relay.analysis.free_vars lists them (the
/// first occurrence in the same post-order walk): the order from_tensorflow gives @main's
/// parameters, and from_pytorch its weights.
inline std::vector<int> free_vars(const graph& g, int root) {
  std::vector<char> visited(g.size(), 0);
  std::vector<int> out;
  printer_detail::post_order(g, root, visited, [&](int n) {
    if (g.at(n).k == node::kind::var) out.push_back(n);
  });
  return out;
}

/// What print_main wrote besides the text.
struct printed {
  std::string text;
  std::vector<int> meta_entries;  ///< meta[relay.Constant][i] holds weight entry meta_entries[i]
};

/// `def @main(PARAMS) -> RET { ... }` as TVM v0.19 prints the module holding only @main:
/// with `header`, mod.astext()'s `#[version = "0.0.5"]` line first (print(mod) has none).
inline printed print_main(const graph& g, const std::vector<int>& params, int body, bool header) {
  using printer_detail::info;
  printed out;
  std::string text = header ? "#[version = \"0.0.5\"]\n" : "";
  text += "def @main(";
  for (std::size_t i = 0; i < params.size(); ++i) {
    const node& p = g.at(params[i]);
    text += (i ? ", %" : "%") + p.name + ": " + p.ty.str() + info(p);
  }
  text += ") -> " + g.type_of(body).str() + " {\n";

  std::vector<char> visited(g.size(), 0);
  for (int p : params) visited[static_cast<std::size_t>(p)] = 1;  // memoised by the signature
  std::vector<std::string> doc(g.size());                         // a node's text once visited
  std::vector<int> temp(g.size(), -1);                            // its %N once bound
  int counter = 0;
  std::string lines;

  // How an argument is printed where it is used: inline, or the %N it is bound to (bound now
  // if this is its first user).
  const auto ref = [&](int a) -> std::string {
    const node& n = g.at(a);
    switch (n.k) {
      case node::kind::var: return "%" + n.name;
      case node::kind::scalar:
      case node::kind::constant: return doc[static_cast<std::size_t>(a)] + info(n);
      default: break;
    }
    int& t = temp[static_cast<std::size_t>(a)];
    if (t < 0) {
      t = counter++;
      lines += "  %" + std::to_string(t) + " = " + doc[static_cast<std::size_t>(a)] + info(n) + ";\n";
    }
    return "%" + std::to_string(t);
  };

  printer_detail::post_order(g, body, visited, [&](int i) {
    const node& n = g.at(i);
    std::string& d = doc[static_cast<std::size_t>(i)];
    switch (n.k) {
      case node::kind::var: d = "%" + n.name; break;  // a free variable (none in @main)
      case node::kind::scalar: d = n.name; break;
      case node::kind::constant:
        d = "meta[relay.Constant][" + std::to_string(out.meta_entries.size()) + "]";
        out.meta_entries.push_back(n.index);
        break;
      case node::kind::call: {
        d = n.name + "(";
        for (std::size_t k = 0; k < n.args.size(); ++k) d += (k ? ", " : "") + ref(n.args[k]);
        if (!n.attrs.empty()) d += (n.args.empty() ? "" : ", ") + n.attrs;
        d += ")";
        break;
      }
      case node::kind::tuple: {
        d = "(";
        for (std::size_t k = 0; k < n.args.size(); ++k) d += (k ? ", " : "") + ref(n.args[k]);
        d += n.args.size() == 1 ? ",)" : ")";
        break;
      }
      case node::kind::get: d = ref(n.args[0]) + "." + std::to_string(n.index); break;
    }
  });
  text += lines;
  text += "  " + doc[static_cast<std::size_t>(body)] + info(g.at(body)) + "\n}\n";
  out.text = std::move(text);
  return out;
}

}  // namespace fuse::relay::models
