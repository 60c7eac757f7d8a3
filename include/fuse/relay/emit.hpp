// The emitter: one self-contained header per model, made of fuse's templates.
//
//   namespace NS {
//   struct model {
//     model();                                     // constants filled (and weights packed) once;
//                                                  // model(weights_path) when some are in a file
//     void operator()(inputs..., outputs...);      // one fuse::eval per kernel of the plan
//   };
//   }
//
// Inputs are `fuse::tensor_view<const T, R>` in parameter order (then the constants whose
// bytes the text did not carry: `print(mod)` drops the metadata section), outputs are
// `fuse::tensor_view<T, R>`, one per result tensor. Each kernel is one `fuse::eval` with a
// comment listing the Relay ops it covers. Constants up to emit_options::inline_limit bytes
// are literals; larger ones go to the weights file (emitted::weights, fuse/core/weights_file.hpp)
// that the constructor reads. The stored intermediates are views into one arena, values whose
// lifetimes do not overlap sharing bytes. The header includes only fuse's headers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "fuse/core/weights_file.hpp"
#include "fuse/expr/ops.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/ops.hpp"
#include "fuse/relay/plan.hpp"

namespace fuse::relay {

/// How the emitter writes constants.
struct emit_options {
  /// Constants of more bytes than this go to the weights file (`emitted::weights`), read when
  /// the model is constructed; smaller ones are literals in the header.
  std::size_t inline_limit = 4096;
  /// The weights file's path the generated constructor defaults to (the caller writes the file
  /// there); the constructor also takes another.
  std::string weights_path = "model.weights";
};

/// What the emitter produced besides the text: the model's interface, for tools that drive it.
struct emitted {
  std::string header;
  /// The large constants, to be written (weights.write(stream)) where emit_options::weights_path
  /// says; empty when every constant is inline. It points into the module's constants: write it
  /// while the module lives.
  fuse::weights_file_writer weights;
  struct port {
    std::string name;  ///< the C++ parameter name
    std::string relay;  ///< the Relay name (%x) or the constant (meta[relay.Constant][i])
    type t;
  };
  std::vector<port> inputs, outputs;
  std::size_t kernels = 0;
  /// Bytes of the arena the intermediates share (values whose lifetimes do not overlap share
  /// memory), and what they would take each in its own tensor.
  std::size_t arena_bytes = 0, intermediate_bytes = 0;
};

namespace emit_detail {

inline std::string cxx_type(const module& m, const expr& at, dtype d) {
  if (d.lanes == 1) {
    if (d.is_bool()) return "bool";
    if (d.code == dtype::float_code && d.bits == 32) return "float";
    if (d.code == dtype::float_code && d.bits == 64) return "double";
    if (d.code == dtype::float_code && d.bits == 16) return "fuse::half";
    if (d.code == dtype::bfloat_code && d.bits == 16) return "fuse::bfloat16";
    if (d.code == dtype::int_code && d.bits == 8) return "std::int8_t";
    if (d.code == dtype::uint_code && d.bits == 8) return "std::uint8_t";
    if (d.code == dtype::int_code && d.bits == 32) return "std::int32_t";
    if (d.code == dtype::int_code && d.bits == 64) return "std::int64_t";
  }
  throw m.error_at(at.at, "dtype " + d.name() + " is not one fuse computes in (float32/64, float16, bfloat16, int8, uint8, int32, int64, bool)");
}

inline std::string identifier(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "v" + out;
  return out;
}

inline bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

inline std::string int_list(const std::vector<std::int64_t>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

/// An exact C++ literal of a value of dtype d.
inline std::string literal(double v, std::int64_t i, dtype d) {
  if (d.is_float()) {
    const bool f32 = !(d.code == dtype::float_code && d.bits == 64);
    const std::string t = f32 ? "float" : "double";
    if (std::isnan(v)) return "std::numeric_limits<" + t + ">::quiet_NaN()";
    if (std::isinf(v)) return std::string(v < 0 ? "-" : "") + "std::numeric_limits<" + t + ">::infinity()";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", v);
    return std::string(buf) + (f32 ? "f" : "");
  }
  if (d.is_bool()) return i ? "true" : "false";
  if (d.is_int() && d.bits == 64 && i == INT64_MIN) return "std::numeric_limits<std::int64_t>::min()";
  return "static_cast<" + std::string(d.is_int() ? (d.bits == 8 ? "std::int8_t" : d.bits == 32 ? "std::int32_t" : "std::int64_t")
                                                  : "std::uint8_t") + ">(" + std::to_string(i) + (d.bits == 64 ? "LL" : "") + ")";
}

class emitter {
 public:
  emitter(const module& m, const plan& p, std::string ns, std::string source_name, emit_options options)
      : m_(m), p_(p), ns_(std::move(ns)), source_(std::move(source_name)), options_(std::move(options)) {}

  emitted run() {
    emitted out;
    name_ports(out);
    std::ostringstream body;
    for (std::size_t k = 0; k < p_.kernels.size(); ++k) emit_kernel(k, body);
    // Results that no kernel writes (an input or a constant returned as it is, or a node
    // returned twice, which its kernel writes into its first output): copied.
    for (std::size_t r = 0; r < p_.results.size(); ++r)
      if (const std::string from = ref(p_.results[r], {}); from != out.outputs[r].name)
        body << "  fuse::eval(" << out.outputs[r].name << ", " << from << ");  // result " << r << "\n";
    out.kernels = p_.kernels.size();

    const bool file = out.weights.size() > 0;
    const std::string ctor_params = file ? "const std::string& weights = " + string_literal(options_.weights_path) : "";
    std::ostringstream h;
    h << "// Generated by fuse-relay from " << source_ << ": " << p_.kernels.size() << " kernel"
      << (p_.kernels.size() == 1 ? "" : "s") << ". Do not edit.\n"
      << "#pragma once\n\n#include <fuse/fuse.hpp>\n" << (file ? "#include <fuse/core/weights_file.hpp>\n" : "")
      << "\n#include <algorithm>\n#include <cstdint>\n#include <limits>\n" << (file ? "#include <string>\n" : "") << "\n"
      << "namespace " << ns_ << " {\n\n"
      << "struct model {\n";
    if (file)
      h << "  /// Constants filled and weights packed once; the " << out.weights.size() << " large ones read from the weights file\n"
        << "  /// written with this header (" << options_.weights_path << " unless another path is given).\n"
        << "  explicit model(" << ctor_params << ");\n  /// Inputs:";
    else
      h << "  /// Constants filled and weights packed once.\n  model();\n  /// Inputs:";
    for (const auto& i : out.inputs) h << "\n  ///   " << i.name << ": " << i.relay << ", " << i.t.str();
    h << "\n  /// Outputs:";
    for (const auto& o : out.outputs) h << "\n  ///   " << o.name << ": " << o.t.str();
    // The call operator's parameters: input views (const), then output views.
    std::string params;
    for (const auto& i : out.inputs)
      params += (params.empty() ? "" : ", ") + std::string("fuse::tensor_view<const ") + cxx_type(m_, *p_.fn, i.t.dt) + ", " +
                std::to_string(i.t.shape.size()) + "> " + i.name;
    for (const auto& o : out.outputs)
      params += (params.empty() ? "" : ", ") + std::string("fuse::tensor_view<") + cxx_type(m_, *p_.fn, o.t.dt) + ", " +
                std::to_string(o.t.shape.size()) + "> " + o.name;
    h << "\n  void operator()(" << params << ");\n\n private:\n" << members_.str() << "};\n\n";
    h << "inline model::model(" << (file ? "const std::string& weights" : "") << ")" << (inits_.str().empty() ? "" : " :\n" + inits_.str())
      << " {\n";
    if (file)
      h << "  fuse::weights_file file(weights, " << out.weights.id() << "ull, " << out.weights.size() << ", \"" << ns_ << "::model\");\n";
    h << ctor_.str() << "}\n\n";
    h << "inline void model::operator()(" << params << ") {\n" << check_.str() << body.str() << "}\n\n}  // namespace " << ns_ << "\n";
    out.header = h.str();
    return out;
  }

 private:
  std::string tensor_type(const type& t) const { return "fuse::tensor<" + cxx_type(m_, *p_.fn, t.dt) + ", " + std::to_string(t.shape.size()) + ">"; }

  void name_ports(emitted& out) {
    std::map<std::string, int> used;
    auto unique = [&](std::string s) {
      const int n = used[s]++;
      return n ? s + "_" + std::to_string(n) : s;
    };
    for (const expr* v : p_.fn->args) {
      const type& t = v->checked.known() ? v->checked : v->annotated;
      if (!t.is_tensor()) throw m_.error_at(v->at, "input %" + v->name + " must be a tensor, not " + t.str());
      for (std::int64_t d : t.shape)
        if (d < 0) throw m_.error_at(v->at, "input %" + v->name + " has a dynamic extent (" + t.str() + "): give static shapes");
      const std::string n = unique(identifier(v->name));
      names_[v] = n;
      out.inputs.push_back({n, "%" + v->name, t});
    }
    // Constants: with data, members filled once; without (print(mod) drops them), inputs.
    std::size_t c = 0;
    std::vector<const expr*> order;
    {
      std::unordered_map<const expr*, bool> seen;
      const auto take = [&](const auto& self, const expr* a) -> void {
        if (a->kind == expr_kind::tuple)  // fields of a tuple an op reads (concatenate's)
          for (const expr* f : a->args) self(self, f);
        if (a->kind == expr_kind::constant && !seen[a] && !(a->checked.is_tensor() && a->checked.shape.empty() && a->data)) {
          seen[a] = true;
          order.push_back(a);
        }
      };
      for (const kernel& k : p_.kernels)
        for (const expr* op : k.ops)
          for (const expr* a : op->args) take(take, a);
      for (const expr* r : p_.results) take(take, r);  // a constant returned as it is (a folded result)
    }
    for (const expr* a : order) {
      const type& t = a->checked;
      const std::string relay = a->meta ? "meta[" + a->meta->key + "][" + std::to_string(a->meta->index) + "]" : "constant";
      if (!a->data) {
        // One input per meta constant, however many times the text names it.
        bool same = false;
        for (const auto& i : out.inputs)
          if (i.relay == relay && relay != "constant") names_[a] = i.name, same = true;
        if (same) continue;
        const std::string n = unique("const" + std::to_string(c++));
        names_[a] = n;
        out.inputs.push_back({n, relay, t});
        continue;
      }
      const std::string n = unique("c" + std::to_string(c++));
      names_[a] = n;
      const std::string ct = cxx_type(m_, *a, t.dt);
      const bool packed = used_as_weight(a) && t.shape.size() == 2 &&
                          (ct == "float" || ct == "double" || ct == "std::int8_t" || ct == "std::uint8_t" || ct == "fuse::half" || ct == "fuse::bfloat16");
      const std::string label = a->span.empty() ? relay : a->span;
      if (a->data->bytes.size() > options_.inline_limit) {
        // From the weights file; a dense weight read only through its packed form is packed
        // from a tensor local to the constructor (not kept twice).
        const std::size_t index = out.weights.add(label, a->data->dt.code, a->data->dt.bits, a->data->shape, a->data->bytes.data(),
                                                  a->data->bytes.size());
        const bool local = packed && only_as_weight(a);
        if (local) ctor_ << "  {\n    " << tensor_type(t) << " " << n << "(" << int_list(t.shape) << ");\n  ";
        else {
          members_ << "  " << tensor_type(t) << " " << n << ";  // " << label << ", " << t.str() << " (weights file entry " << index << ")\n";
          inits_ << (inits_.str().empty() ? "      " : ",\n      ") << n << "(" << (t.shape.empty() ? "" : int_list(t.shape)) << ")";
        }
        ctor_ << "  file.read(" << index << ", " << n << ");  // " << label << "\n";
        if (packed) {
          members_ << "  decltype(fuse::pack(std::declval<" << tensor_type(t) << "&>())) " << n << "_packed;  // " << label << "\n";
          ctor_ << (local ? "  " : "") << "  " << n << "_packed = fuse::pack(" << n << ");\n";
          packed_[a] = n + "_packed";
        }
        if (local) ctor_ << "  }\n";
        continue;
      }
      members_ << "  " << tensor_type(t) << " " << n << ";  // " << label << ", " << t.str() << "\n";
      inits_ << (inits_.str().empty() ? "      " : ",\n      ") << n << "(" << (t.shape.empty() ? "" : int_list(t.shape)) << ")";
      ctor_ << "  {\n    static const " << (t.dt.is_bool() ? "unsigned char" : ct == "fuse::half" || ct == "fuse::bfloat16" ? "std::uint16_t" : ct) << " data[] = {";
      const auto count = static_cast<std::size_t>(a->data->elements());
      for (std::size_t e = 0; e < count; ++e) {
        // 16-bit floats as their bits (from_bits below), everything else as an exact literal.
        const std::int64_t i = t.dt.is_float() ? 0 : a->data->integer(e);
        const std::string lit = t.dt.is_float() && t.dt.bits == 16 ? std::to_string(a->data->raw(e))
                                : t.dt.is_float()                  ? literal(a->data->real(e), 0, t.dt)
                                : i == INT64_MIN                   ? "(-9223372036854775807LL - 1)"
                                                                   : std::to_string(i) + (t.dt.bits == 64 ? "LL" : "");
        ctor_ << (e ? ", " : "") << lit;
      }
      if (!count) ctor_ << "0";
      ctor_ << "};\n";
      if (ct == "fuse::half" || ct == "fuse::bfloat16" || ct == "bool")
        ctor_ << "    for (std::size_t i = 0; i < " << count << "; ++i) " << n << ".data()[i] = "
              << (ct == "bool" ? "data[i] != 0" : ct + "::from_bits(data[i])") << ";\n";
      else
        ctor_ << "    std::copy(data, data + " << count << ", " << n << ".data());\n";
      ctor_ << "  }\n";
      // Weights of a dense are packed once, here.
      if (packed) {
        members_ << "  decltype(fuse::pack(std::declval<" << tensor_type(t) << "&>())) " << n << "_packed;\n";
        ctor_ << "  " << n << "_packed = fuse::pack(" << n << ");\n";
        packed_[a] = n + "_packed";
      }
    }
    // Outputs.
    for (std::size_t r = 0; r < p_.results.size(); ++r) {
      const type& t = p_.results[r]->checked;
      for (std::int64_t d : t.shape)
        if (d < 0) throw m_.error_at(p_.results[r]->at, "result " + std::to_string(r) + " has a dynamic extent: " + t.str());
      out.outputs.push_back({"out" + std::to_string(r), "result " + std::to_string(r), t});
    }
    // Intermediates: views into one arena allocated when the model is constructed; values
    // whose lifetimes (from the kernel that writes one to the last kernel that reads it) do not
    // overlap share bytes. BERT-base's 180 stored values took 3 GB as separate tensors.
    place_intermediates(out);
    // Shapes of the inputs are checked at every call: a wrong view is a shape_error, not a
    // silent misread.
    for (const auto& i : out.inputs)
      check_ << "  if (" << i.name << ".shape().array() != fuse::index_array<" << i.t.shape.size() << ">" << int_list(i.t.shape)
             << ") fuse::throw_shape_error(\"" << ns_ << "::model: input " << i.name << " must have shape " << int_list(i.t.shape)
             << ", not \", " << i.name << ".shape().array());\n";
    for (const auto& o : out.outputs)
      check_ << "  if (" << o.name << ".shape().array() != fuse::index_array<" << o.t.shape.size() << ">" << int_list(o.t.shape)
             << ") fuse::throw_shape_error(\"" << ns_ << "::model: output " << o.name << " must have shape " << int_list(o.t.shape)
             << ", not \", " << o.name << ".shape().array());\n";
  }

  /// Names and places every stored value that is not a result (see name_ports): a first-fit
  /// of 64-byte-aligned offsets over the values live at once, in the order kernels write them.
  void place_intermediates(emitted& out) {
    struct value_slot {
      const expr* node;
      std::size_t first, last, bytes, offset = 0;
    };
    std::vector<value_slot> slots;
    std::unordered_map<const expr*, std::size_t> slot_of;
    for (std::size_t k = 0; k < p_.kernels.size(); ++k)
      for (const expr* o : p_.kernels[k].outputs) {
        if (const std::size_t r = result_index(o); r != npos) {
          names_[o] = "out" + std::to_string(r);
          continue;
        }
        std::size_t n = 1;
        for (std::int64_t d : o->checked.shape) n *= static_cast<std::size_t>(d);
        slot_of[o] = slots.size();
        slots.push_back({o, k, k, std::max<std::size_t>(n * o->checked.dt.bytes(), 1)});
      }
    // Last reads: the arguments of each kernel's ops, through the tuples they read.
    for (std::size_t k = 0; k < p_.kernels.size(); ++k) {
      const auto read = [&](const auto& self, const expr* a) -> void {
        if (auto it = slot_of.find(a); it != slot_of.end()) slots[it->second].last = std::max(slots[it->second].last, k);
        else if (a->kind == expr_kind::tuple || a->kind == expr_kind::tuple_get)
          for (const expr* f : a->args) self(self, f);
      };
      for (const expr* op : p_.kernels[k].ops)
        for (const expr* a : op->args) read(read, a);
    }
    std::size_t arena = 0;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      std::vector<std::pair<std::size_t, std::size_t>> busy;  // [offset, end) of values live with slot i
      for (std::size_t j = 0; j < i; ++j)
        if (slots[j].last >= slots[i].first) busy.emplace_back(slots[j].offset, slots[j].offset + slots[j].bytes);
      std::sort(busy.begin(), busy.end());
      std::size_t at = 0;
      for (const auto& [b, e] : busy) {
        if (b >= at + slots[i].bytes) break;
        at = std::max(at, (e + 63) / 64 * 64);
      }
      slots[i].offset = at;
      arena = std::max(arena, at + slots[i].bytes);
      out.intermediate_bytes += slots[i].bytes;
    }
    out.arena_bytes = arena;
    if (slots.empty()) return;
    members_ << "  fuse::tensor<std::uint8_t, 1> arena_;  // " << arena << " bytes: the intermediates below\n";
    inits_ << (inits_.str().empty() ? "      " : ",\n      ") << "arena_({" << arena << "})";
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const type& t = slots[i].node->checked;
      const std::string n = "t" + std::to_string(i), ct = cxx_type(m_, *slots[i].node, t.dt), r = std::to_string(t.shape.size());
      names_[slots[i].node] = n;
      members_ << "  fuse::tensor_view<" << ct << ", " << r << "> " << n << ";  // intermediate " << t.str() << ", arena bytes "
               << slots[i].offset << "-" << slots[i].offset + slots[i].bytes << ", kernels " << slots[i].first << "-" << slots[i].last << "\n";
      ctor_ << "  " << n << " = fuse::tensor_view<" << ct << ", " << r << ">(reinterpret_cast<" << ct << "*>(arena_.data() + "
            << slots[i].offset << "), fuse::dynamic_shape<" << r << ">(fuse::index_array<" << r << ">" << int_list(t.shape) << "));\n";
    }
  }

  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t result_index(const expr* e) const {
    for (std::size_t r = 0; r < p_.results.size(); ++r)
      if (p_.results[r] == e) return r;
    return npos;
  }

  bool used_as_weight(const expr* c) const {
    for (const kernel& k : p_.kernels)
      for (const expr* op : k.ops)
        if (plan_detail::is_call_of(op, {"nn.dense"}) && op->args[1] == c) return true;
    return false;
  }
  /// Whether every read of constant c is as a dense's weight (then only its packed form is kept).
  bool only_as_weight(const expr* c) const {
    for (const kernel& k : p_.kernels)
      for (const expr* op : k.ops)
        for (std::size_t i = 0; i < op->args.size(); ++i)
          if (op->args[i] == c && !(i == 1 && plan_detail::is_call_of(op, {"nn.dense"}))) return false;
    for (const expr* r : p_.results)
      if (r == c) return false;
    return true;
  }

  static std::string string_literal(const std::string& v) {
    std::string s = "\"";
    for (char ch : v) {
      if (ch == '"' || ch == '\\') s += '\\';
      s += ch;
    }
    return s + "\"";
  }

  /// The C++ expression that reads a node from outside the current kernel's tree.
  std::string storage(const expr* e) const {
    auto it = names_.find(e);
    if (it != names_.end()) return it->second;
    throw m_.error_at(e->at, "internal: no storage for this node");
  }

  /// How node e is read inside the kernel being written.
  std::string ref(const expr* e, const std::unordered_map<const expr*, std::string>& local) const {
    if (auto it = local.find(e); it != local.end()) return it->second;
    if (e->kind == expr_kind::constant && e->data && e->checked.is_tensor() && e->checked.shape.empty()) {
      // A scalar constant is a node of its own dtype (fuse::scalar_expr), so that an op whose
      // operands are all scalars is still an expression (add(1, 1) inside a tree).
      const dtype d = e->checked.dt;
      const std::string ct = cxx_type(m_, *e, d);
      const std::string v = d.is_float() && d.bits == 16 ? ct + "::from_bits(" + std::to_string(e->data->raw(0)) + ")"
                            : d.is_float()               ? literal(e->data->real(0), 0, d)
                                                         : literal(0, e->data->integer(0), d);
      return "fuse::scalar_expr<" + ct + ">{" + v + "}";
    }
    return storage(e);
  }

  void emit_kernel(std::size_t index, std::ostringstream& out) {
    const kernel& k = p_.kernels[index];
    std::unordered_map<const expr*, std::string> local;
    std::size_t n = 0;
    // Nodes of the tree in evaluation order: the ops, plus tuples and projections among them.
    std::vector<const expr*> nodes;
    {
      std::unordered_map<const expr*, bool> seen;
      std::vector<std::pair<const expr*, bool>> stack;
      for (auto it = k.outputs.rbegin(); it != k.outputs.rend(); ++it) stack.push_back({*it, false});
      while (!stack.empty()) {
        auto [e, expanded] = stack.back();
        stack.pop_back();
        if (expanded) {
          nodes.push_back(e);
          continue;
        }
        if (seen[e]) continue;
        seen[e] = true;
        if (e->kind == expr_kind::var || e->kind == expr_kind::constant) continue;
        if (p_.materialized.count(e) && std::find(k.outputs.begin(), k.outputs.end(), e) == k.outputs.end()) continue;
        stack.push_back({e, true});
        for (auto it = e->args.rbegin(); it != e->args.rend(); ++it) stack.push_back({*it, false});
      }
    }
    out << "  // kernel " << index << ":";
    for (const expr* e : nodes)
      if (e->kind == expr_kind::call) out << " " << e->callee->name;
    out << "\n  {\n";
    for (const expr* e : nodes) {
      const std::string name = "e" + std::to_string(n++);
      if (e->kind == expr_kind::tuple) {
        // A tuple of references (a tuple of copies would copy stored tensors, which fuse's
        // concatenate refuses); a field that is not a named value is named first, so that no
        // reference outlives a temporary.
        std::string s = "std::forward_as_tuple(";
        for (std::size_t i = 0; i < e->args.size(); ++i) {
          std::string f = ref(e->args[i], local);
          if (!is_identifier(f)) {
            out << "    auto " << name << "_" << i << " = " << f << ";\n";
            f = name + "_" + std::to_string(i);
          }
          s += (i ? ", " : "") + f;
        }
        out << "    auto " << name << " = " << s << ");\n";
      } else if (e->kind == expr_kind::tuple_get) {
        const expr* t = e->args[0];
        if (t->kind == expr_kind::tuple) {
          local[e] = ref(t->args[static_cast<std::size_t>(e->index)], local);
          continue;
        }
        out << "    auto " << name << " = " << ref(t, local) << "[" << e->index << "];\n";
      } else {
        const std::string c = call(*e, local);
        if (c.empty()) {  // a pass-through op
          local[e] = ref(e->args[0], local);
          continue;
        }
        out << "    auto " << name << " = " << c << ";\n";
      }
      local[e] = name;
    }
    // One pass for all outputs.
    if (k.outputs.size() == 1) {
      out << "    fuse::eval(" << storage(k.outputs[0]) << ", " << local.at(k.outputs[0]) << ");\n";
    } else {
      out << "    fuse::eval(fuse::outputs(";
      for (std::size_t i = 0; i < k.outputs.size(); ++i) out << (i ? ", " : "") << storage(k.outputs[i]);
      out << ")";
      for (const expr* o : k.outputs) out << ", " << local.at(o);
      out << ");\n";
    }
    out << "  }\n";
  }

  /// fuse::NAME(operands..., attributes...): the call of the elementwise op Op of fuse's table.
  template <class Op, class Arg>
  static std::string elementwise(const op_call& c, const Arg& arg) {
    std::string s = std::string("fuse::") + ops::builder_name<Op> + "(";
    for (int i = 0; i < Op::arity; ++i) s += (i ? ", " : "") + arg(static_cast<std::size_t>(i));
    if constexpr (ops::has_attributes<Op>) {
      Op op{};
      Op::attributes(op, [&](ops::attribute a, double&) {
        s += ", " + (a.integer ? std::to_string(c.integer(a.name)) : literal(c.real(a.name), 0, dtype{dtype::float_code, 64, 1}));
      });
    }
    return s + ")";
  }

  std::string call(const expr& e, const std::unordered_map<const expr*, std::string>& local) const {
    const std::string& op = e.callee->name;
    const op_def* d = find_op(op);
    if (!d) throw m_.error_at(e.callee->at, "unsupported op " + op + "; supported ops: " + supported_ops());
    std::vector<type> at;
    for (const expr* a : e.args) at.push_back(a->checked);
    const op_call c(m_, e, *d, at);
    auto arg = [&](std::size_t i) { return ref(e.args[i], local); };
    auto weight = [&](std::size_t i) {
      if (auto it = packed_.find(e.args[i]); it != packed_.end()) return it->second;
      return arg(i);
    };
    // The elementwise ops of fuse's table (fuse/expr/ops.hpp): fuse::NAME(operands...,
    // attributes...), the builder generated from the same table.
    if (std::string s; with_elementwise_op(op, [&]<class Op>(std::type_identity<Op>) { s = elementwise<Op>(c, arg); })) return s;
    if (op == "copy" || op == "annotation.stop_fusion" || op == "on_device" || op == "device_copy") return "";
    const type& t = e.checked;
    const std::string ct = cxx_type(m_, e, t.dt);
    if (op == "cast") return "fuse::cast<" + ct + ">(" + arg(0) + ")";
    if (op == "nn.bias_add") return "fuse::bias_add(" + arg(0) + ", " + arg(1) + ", " + std::to_string(c.integer("axis")) + ")";
    if (op == "nn.dense" || op == "nn.matmul" || op == "nn.batch_matmul") {
      const dtype in = e.args[0]->checked.dt;
      if (!(in == e.args[1]->checked.dt) && !(in.bits == 8 && e.args[1]->checked.dt.bits == 8))
        throw m_.error_at(e.at, op + " of " + in.name() + " by " + e.args[1]->checked.dt.name() + ": fuse's contractions take one dtype");
      const bool int8 = in.bits == 8 && !in.is_float();
      // float16/bfloat16 operands accumulate in float32 and give their own dtype or float32.
      const bool half = in.is_float() && in.bits == 16;
      const dtype expect = int8 ? dtype::int32() : in;
      if (!(t.dt == expect) && !(half && t.dt == dtype::float32()))
        throw m_.error_at(e.at, op + " with out_dtype " + t.dt.name() + " from " + in.name() + " operands: fuse computes " + expect.name() +
                                    (half ? " or float32" : ""));
      const std::string out = t.dt == expect ? "" : "<float>";
      if (op == "nn.dense") return "fuse::dense" + out + "(" + arg(0) + ", " + weight(1) + ")";
      const std::string ta = c.boolean("transpose_a") ? "true" : "false", tb = c.boolean("transpose_b") ? "true" : "false";
      if (op == "nn.matmul") return "fuse::matmul" + out + "(" + arg(0) + ", " + arg(1) + ", " + ta + ", " + tb + ")";
      return "fuse::batch_matmul" + out + "(" + arg(0) + ", " + arg(1) + ", " + ta + ", " + tb + ")";
    }
    if (op == "reshape" || op == "squeeze" || op == "expand_dims") {
      if (t.shape.empty()) throw m_.error_at(e.at, op + " to a rank-0 tensor is not supported yet");
      return "fuse::reshape(" + arg(0) + ", " + int_list(t.shape) + ")";
    }
    const std::int64_t in_rank = e.args.empty() || !e.args[0]->checked.is_tensor() ? 0 : static_cast<std::int64_t>(e.args[0]->checked.shape.size());
    if (op == "transpose") return "fuse::transpose(" + arg(0) + ", " + int_list(c.transpose_axes(in_rank)) + ")";
    if (op == "split") {
      const std::int64_t axis = c.axis(c.integer("axis"), in_rank);
      const attr_value* ios = c.find("indices_or_sections");
      if (ios->k == attr_value::kind::array) return "fuse::split(" + arg(0) + ", " + int_list(c.integers("indices_or_sections")) + ", " + std::to_string(axis) + ")";
      return "fuse::split<" + std::to_string(c.integer("indices_or_sections")) + ">(" + arg(0) + ", " + std::to_string(axis) + ")";
    }
    if (op == "concatenate") {
      const std::int64_t r = static_cast<std::int64_t>(t.shape.size());
      return "fuse::concatenate(" + arg(0) + ", " + std::to_string(c.axis(c.integer("axis"), r)) + ")";
    }
    if (op == "stack") {
      // stack((a, b, ...), axis) = concatenate((expand_dims(a, axis), expand_dims(b, axis), ...), axis):
      // each field read through a reshape view with the unit axis inserted, the views joined
      // inside the consumer's loop (no copy). Fields of a written tuple are read directly, not
      // through the std::tuple the tuple node becomes (which would copy a stored tensor).
      const std::int64_t axis = c.axis(c.integer("axis"), static_cast<std::int64_t>(t.shape.size()));
      std::vector<std::int64_t> unit = t.shape;
      unit[static_cast<std::size_t>(axis)] = 1;
      const expr* tup = e.args[0];
      std::string parts;
      for (std::int64_t i = 0; i < t.shape[static_cast<std::size_t>(axis)]; ++i) {
        const std::string field = tup->kind == expr_kind::tuple ? ref(tup->args[static_cast<std::size_t>(i)], local)
                                                                : "std::get<" + std::to_string(i) + ">(" + arg(0) + ")";
        parts += (i ? ", " : "") + std::string("fuse::reshape(") + field + ", " + int_list(unit) + ")";
      }
      return "fuse::concatenate(std::make_tuple(" + parts + "), " + std::to_string(axis) + ")";
    }
    if (op == "strided_slice") {
      const auto b = c.integers("begin"), en = c.integers("end");
      const std::vector<std::int64_t> s = c.is_none("strides") ? std::vector<std::int64_t>{} : c.integers("strides");
      const std::vector<std::int64_t> axes = c.is_none("axes") ? std::vector<std::int64_t>{} : c.integers("axes");
      return "fuse::strided_slice(" + arg(0) + ", " + int_list(b) + ", " + int_list(en) + ", " + int_list(s) + ", " + int_list(axes) +
             ", " + (c.string("slice_mode") == "size" ? "true" : "false") + ")";
    }
    if (op == "take") {
      const std::string mode = c.string("mode");
      const std::string m = "fuse::take_mode::" + std::string(mode == "wrap" ? "wrap" : mode == "fast" ? "fast" : "clip");
      if (c.is_none("axis")) return "fuse::take(" + arg(0) + ", " + arg(1) + ", " + m + ")";
      return "fuse::take(" + arg(0) + ", " + arg(1) + ", " + std::to_string(c.axis(c.integer("axis"), in_rank)) + ", " + m + ")";
    }
    // A reduction `f` of the expression x over the call's axes (the axes and keepdims as fuse's
    // reduction functions take them).
    const auto reduction = [&](const std::string& f, const std::string& x, bool keepdims) {
      const std::vector<bool> red = c.reduced_axes(in_rank);
      std::vector<std::int64_t> axes;
      for (std::int64_t i = 0; i < in_rank; ++i)
        if (red[static_cast<std::size_t>(i)]) axes.push_back(i);
      const std::string keep = keepdims ? ", fuse::keepdims" : "";
      if (axes.empty()) throw m_.error_at(e.at, op + " over no axes (exclude of every axis) is not supported yet");
      if (static_cast<std::int64_t>(axes.size()) == in_rank) return "fuse::" + f + "(" + x + keep + ")";
      // One axis as an integer: a one-element brace list would also match the integer overload.
      return "fuse::" + f + "(" + x + ", " + (axes.size() == 1 ? std::to_string(axes[0]) : int_list(axes)) + keep + ")";
    };
    if (op == "sum" || op == "mean" || op == "max" || op == "min" || op == "prod") return reduction(op, arg(0), c.boolean("keepdims"));
    if (op == "variance") {
      // The mean of (x - mean)^2 (TVM's VarianceCompute: the sum over the element count, less
      // one when unbiased).
      const std::string d = "fuse::subtract(" + arg(0) + ", " + arg(1) + ")";
      const std::string sq = "fuse::multiply(" + d + ", " + d + ")";
      if (!c.boolean("unbiased")) return reduction("mean", sq, c.boolean("keepdims"));
      std::int64_t count = 1;
      const std::vector<bool> red = c.reduced_axes(in_rank);
      for (std::size_t k = 0; k < red.size(); ++k)
        if (red[k]) count *= e.args[0]->checked.shape[k];
      return "fuse::divide(" + reduction("sum", sq, c.boolean("keepdims")) + ", fuse::scalar_expr<" + ct + ">{" +
             literal(static_cast<double>(count - 1), count - 1, t.dt) + "})";
    }
    if (op == "collapse_sum_like") {
      // The sum over data's leading extra axes and the axes where the result has extent 1, kept,
      // then reshaped to the result.
      const std::vector<std::int64_t>& xs = e.args[0]->checked.shape;
      const std::size_t lead = xs.size() - t.shape.size();
      std::vector<std::int64_t> axes;
      for (std::size_t d = 0; d < xs.size(); ++d)
        if (d < lead || (t.shape[d - lead] == 1 && xs[d] != 1)) axes.push_back(static_cast<std::int64_t>(d));
      if (axes.empty()) return "fuse::reshape(" + arg(0) + ", " + int_list(t.shape) + ")";
      if (t.shape.empty()) return "fuse::sum(" + arg(0) + ")";
      return "fuse::reshape(fuse::sum(" + arg(0) + ", " + (axes.size() == 1 ? std::to_string(axes[0]) : int_list(axes)) +
             ", fuse::keepdims), " + int_list(t.shape) + ")";
    }
    if (op == "full") {
      const std::string v = "fuse::cast<" + ct + ">(" + arg(0) + ")";
      return t.shape.empty() ? v : "fuse::broadcast_to(" + v + ", " + int_list(t.shape) + ")";
    }
    if (op == "zeros_like" || op == "ones_like") {
      const std::string v = "fuse::scalar_expr<" + ct + ">{" + (t.dt.is_bool() ? std::string(op == "ones_like" ? "true" : "false")
                                                                : ct + "(" + (op == "ones_like" ? "1" : "0") + ")") + "}";
      return t.shape.empty() ? v : "fuse::broadcast_to(" + v + ", " + int_list(t.shape) + ")";
    }
    if (op == "broadcast_to" || op == "broadcast_to_like") {
      if (t.shape.empty()) return "";  // a scalar broadcast to a scalar: itself
      return "fuse::broadcast_to(" + arg(0) + ", " + int_list(t.shape) + ")";
    }
    if (op == "nn.softmax" || op == "nn.log_softmax")
      return std::string("fuse::") + (op == "nn.softmax" ? "softmax" : "log_softmax") + "(" + arg(0) + ", " +
             std::to_string(c.axis(c.integer("axis"), in_rank)) + ")";
    if (op == "nn.layer_norm")
      return "fuse::layer_norm(" + arg(0) + ", " + arg(1) + ", " + arg(2) + ", " + std::to_string(c.axis(c.integer("axis"), in_rank)) + ", " +
             literal(c.real("epsilon"), 0, dtype{dtype::float_code, 64, 1}) + ", " + (c.boolean("center") ? "true" : "false") + ", " +
             (c.boolean("scale") ? "true" : "false") + ")";
    throw m_.error_at(e.at, op + " has no fused form yet (nn.batch_norm and nn.dropout: run simplify_inference; qnn.*: legalize first)");
  }

  const module& m_;
  const plan& p_;
  std::string ns_, source_;
  emit_options options_;
  std::unordered_map<const expr*, std::string> names_, packed_;
  std::ostringstream members_, inits_, ctor_, check_;
};

}  // namespace emit_detail

/// Writes the header of @main's plan p (see the file comment). Throws relay::error for what
/// fuse cannot run.
inline emitted emit_header(const module& m, const plan& p, const std::string& ns, const std::string& source_name,
                           const emit_options& options = {}) {
  return emit_detail::emitter(m, p, ns, source_name, options).run();
}

}  // namespace fuse::relay
