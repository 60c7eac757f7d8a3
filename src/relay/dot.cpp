// The plan drawn for Graphviz (fuse/relay/dot.hpp).

#include "fuse/relay/dot.hpp"

#include <algorithm>
#include <cstddef>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fuse/relay/ir.hpp"

namespace fuse::relay {

std::string plan_dot(const plan& p, const std::string& title) {
  std::ostringstream d;
  std::unordered_map<const expr*, std::string> id;
  auto node_id = [&](const expr* e) {
    auto it = id.find(e);
    if (it != id.end()) return it->second;
    const std::string n = "n" + std::to_string(id.size());
    id[e] = n;
    return n;
  };
  auto label = [](const expr* e) -> std::string {
    switch (e->kind) {
      case expr_kind::var: return "%" + e->name;
      case expr_kind::constant:
        return e->meta ? "meta[" + e->meta->key + "][" + std::to_string(e->meta->index) + "]" : "constant";
      case expr_kind::call: return e->callee->name;
      case expr_kind::tuple: return "tuple";
      case expr_kind::tuple_get: return "." + std::to_string(e->index);
      default: return "?";
    }
  };
  auto escape = [](std::string s) {
    std::string o;
    for (char c : s) o += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return o;
  };
  d << "digraph plan {\n  label=\"" << escape(title) << ": " << p.kernels.size() << " kernel"
    << (p.kernels.size() == 1 ? "" : "s")
    << "\";\n  labelloc=t;\n  rankdir=TB;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n";
  std::unordered_map<const expr*, bool> in_kernel;
  for (std::size_t k = 0; k < p.kernels.size(); ++k) {
    const kernel& kn = p.kernels[k];
    d << "  subgraph cluster_" << k << " {\n    label=\"kernel " << k
      << "\";\n    style=filled;\n    color=\"#dde8f6\";\n";
    // The kernel's nodes: its ops, and the tuples and projections among them.
    std::vector<const expr*> nodes(kn.ops.begin(), kn.ops.end());
    for (std::size_t i = 0; i < nodes.size(); ++i)
      for (const expr* a : nodes[i]->args)
        if ((a->kind == expr_kind::tuple || a->kind == expr_kind::tuple_get) && !in_kernel[a] &&
            std::find(nodes.begin(), nodes.end(), a) == nodes.end())
          nodes.push_back(a);
    for (const expr* e : nodes) {
      in_kernel[e] = true;
      d << "    " << node_id(e) << " [label=\"" << escape(label(e)) << "\""
        << (p.materialized.count(e) ? ", peripheries=2" : "") << "];\n";
    }
    d << "  }\n";
  }
  // Everything else that feeds a kernel, then the edges.
  std::vector<std::pair<std::string, std::string>> edges;
  std::unordered_map<const expr*, bool> drawn;
  for (const kernel& kn : p.kernels)
    for (const expr* op : kn.ops) {
      std::vector<const expr*> todo{op};
      while (!todo.empty()) {
        const expr* e = todo.back();
        todo.pop_back();
        if (drawn[e]) continue;
        drawn[e] = true;
        for (const expr* a : e->args) {
          if (!in_kernel[a] && a->kind != expr_kind::call && !drawn[a]) {
            d << "  " << node_id(a) << " [label=\"" << escape(label(a)) << "\", shape=ellipse, style=\"\"];\n";
            if (a->kind == expr_kind::tuple || a->kind == expr_kind::tuple_get) todo.push_back(a);
            else drawn[a] = true;
          } else if (a->kind == expr_kind::tuple || a->kind == expr_kind::tuple_get) {
            todo.push_back(a);
          }
          edges.push_back({node_id(a), node_id(e)});
        }
      }
    }
  for (const auto& [a, b] : edges) d << "  " << a << " -> " << b << ";\n";
  d << "}\n";
  return d.str();
}

}  // namespace fuse::relay
