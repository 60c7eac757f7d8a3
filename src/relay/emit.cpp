// The emitter (fuse/relay/emit.hpp): one self-contained header per model, made of fuse's templates.

#include "fuse/relay/emit.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fuse/core/weights_file.hpp"
#include "fuse/expr/ops.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/ops.hpp"
#include "fuse/relay/plan.hpp"

namespace fuse::relay {

namespace emit_detail {

std::string int_list(const std::vector<std::int64_t>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

namespace {

std::string cxx_type(const module& m, const expr& at, dtype d) {
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
  throw m.error_at(at.at,
                   "dtype " + d.name() +
                       " is not one fuse computes in (float32/64, float16, bfloat16, int8, uint8, int32, int64, bool)");
}

std::string identifier(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "v" + out;
  return out;
}

/// Whether the generated code uses identifier s itself (a keyword, its own locals and members,
/// the CUDA model's stream and aliases): an input of that name is renamed.
bool reserved(const std::string& s) {
  static const char* const words[] = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
      "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit",
      "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
      "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
      "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
      "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "return", "short",
      "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
      "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual",
      "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
      // the generated code's own names
      "fuse", "std", "model", "basic_model", "emulated_model", "Target", "view", "storage", "stream", "arena_", "file",
      "weights", "data", "h"};
  for (const char* w : words)
    if (s == w) return true;
  // c0, e3, t12 (constants, a kernel's locals, intermediates), e3_1 (a tuple's fields), out2
  std::size_t i = s.rfind("out", 0) == 0 ? 3 : (s[0] == 'c' || s[0] == 'e' || s[0] == 't') ? 1 : 0;
  if (i == 0 || i >= s.size()) return false;
  bool digits = false;
  for (; i < s.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) digits = true;
    else if (!(s[i] == '_' && digits)) return false;
  }
  return digits;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

/// An exact C++ literal of a value of dtype d.
std::string literal(double v, std::int64_t i, dtype d) {
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
  return "static_cast<" +
         std::string(d.is_int() ? (d.bits == 8    ? "std::int8_t"
                                   : d.bits == 32 ? "std::int32_t"
                                                  : "std::int64_t")
                                : "std::uint8_t") +
         ">(" + std::to_string(i) + (d.bits == 64 ? "LL" : "") + ")";
}

class emitter {
 public:
  emitter(const module& m, const plan& p, std::string ns, std::string source_name, emit_options options)
      : m_(m),
        p_(p),
        ns_(std::move(ns)),
        source_(std::move(source_name)),
        options_(std::move(options)),
        cuda_(options_.target == plan_target::cuda) {}

  emitted run() {
    emitted out;
    name_ports(out);
    std::ostringstream body;
    for (std::size_t k = 0; k < p_.kernels.size(); ++k) emit_kernel(k, body);
    // Results that no kernel writes (an input or a constant returned as it is, or a node
    // returned twice, which its kernel writes into its first output): copied.
    for (std::size_t r = 0; r < p_.results.size(); ++r)
      if (const std::string from = ref(p_.results[r], {}); from != out.outputs[r].name)
        body << "  " << eval_call(out.outputs[r].name + ", " + from) << ";  // result " << r << "\n";
    out.kernels = p_.kernels.size();
    if (cuda_) {
      out.header = cuda_header(out, body.str());
      return out;
    }

    const bool file = out.weights.size() > 0;
    const std::string ctor_params = file ? "const std::string& weights = " + string_literal(options_.weights_path) : "";
    std::ostringstream h;
    h << "// Generated by fuse-relay from " << source_ << ": " << p_.kernels.size() << " kernel"
      << (p_.kernels.size() == 1 ? "" : "s") << ". Do not edit.\n"
      << "#pragma once\n\n#include <fuse/fuse.hpp>\n"
      << (file ? "#include <fuse/core/weights_file.hpp>\n" : "")
      << "\n#include <algorithm>\n#include <cstdint>\n#include <limits>\n"
      << (file ? "#include <string>\n" : "") << "\n"
      << "namespace " << ns_ << " {\n\n"
      << "struct model {\n";
    if (file)
      h << "  /// Constants filled and weights packed once; the " << out.weights.size()
        << " large ones read from the weights file\n"
        << "  /// written with this header (" << options_.weights_path << " unless another path is given).\n"
        << "  explicit model(" << ctor_params << ");\n  /// Inputs:";
    else h << "  /// Constants filled and weights packed once.\n  model();\n  /// Inputs:";
    for (const auto& i : out.inputs) h << "\n  ///   " << i.name << ": " << i.relay << ", " << i.t.str();
    h << "\n  /// Outputs:";
    for (const auto& o : out.outputs) h << "\n  ///   " << o.name << ": " << o.t.str();
    // The call operator's parameters: input views (const), then output views.
    std::string params;
    for (const auto& i : out.inputs)
      params += (params.empty() ? "" : ", ") + std::string("fuse::tensor_view<const ") + cxx_type(m_, *p_.fn, i.t.dt) +
                ", " + std::to_string(i.t.shape.size()) + "> " + i.name;
    for (const auto& o : out.outputs)
      params += (params.empty() ? "" : ", ") + std::string("fuse::tensor_view<") + cxx_type(m_, *p_.fn, o.t.dt) + ", " +
                std::to_string(o.t.shape.size()) + "> " + o.name;
    h << "\n  void operator()(" << params << ");\n\n private:\n" << members_.str() << "};\n\n";
    h << "inline model::model(" << (file ? "const std::string& weights" : "") << ")"
      << (inits_.str().empty() ? "" : " :\n" + inits_.str()) << " {\n";
    if (file)
      h << "  fuse::weights_file file(weights, " << out.weights.id() << "ull, " << out.weights.size() << ", \"" << ns_
        << "::model\");\n";
    h << ctor_.str() << "}\n\n";
    h << "inline void model::operator()(" << params << ") {\n"
      << check_.str() << body.str() << "}\n\n}  // namespace " << ns_ << "\n";
    out.header = h.str();
    return out;
  }

 private:
  std::string tensor_type(const type& t) const {
    return "fuse::tensor<" + cxx_type(m_, *p_.fn, t.dt) + ", " + std::to_string(t.shape.size()) + ">";
  }
  /// The type of a view of element type ct and rank r in the model's memory.
  std::string view_type(const std::string& ct, std::size_t r) const {
    return (cuda_ ? "view<" : "fuse::tensor_view<") + ct + ", " + std::to_string(r) + ">";
  }
  /// One eval of the header's executor over `args` (outputs and expressions).
  std::string eval_call(const std::string& args) const {
    return cuda_ ? "fuse::cuda::eval(" + args + ", Target::option(stream))" : "fuse::eval(" + args + ")";
  }

  /// text with `by` before each of its lines.
  static std::string indented(const std::string& text, const std::string& by) {
    std::string r;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t end = std::min(text.find('\n', at), text.size());
      r += by + text.substr(at, end - at) + "\n";
      at = end + 1;
    }
    return r;
  }

  /// The CUDA header (emit.hpp): basic_model<Target>, its members defined in the class.
  std::string cuda_header(const emitted& out, const std::string& body) const {
    const bool file = out.weights.size() > 0;
    const std::size_t kernels = p_.kernels.size();
    std::ostringstream h;
    h << "// Generated by fuse-relay from " << source_ << " for CUDA: " << kernels << " kernel"
      << (kernels == 1 ? "" : "s") << ". Do not edit.\n"
      << "#pragma once\n\n#include <fuse/cuda.hpp>\n#include <fuse/cuda/target.hpp>\n"
      << (file ? "#include <fuse/core/weights_file.hpp>\n" : "")
      << "\n#include <algorithm>\n#include <cstdint>\n#include <limits>\n"
      << (file ? "#include <string>\n" : "") << "\n"
      << "namespace " << ns_ << " {\n\n"
      << "/// The model on Target: fuse::cuda::gpu (device views, kernels launched on a stream) or\n"
      << "/// fuse::cuda::emulator (host views, the same kernel bodies run on the host).\n"
      << "template <class Target>\n"
      << "struct basic_model {\n"
      << "  template <class T, int R>\n  using view = fuse::tensor_view<T, R, typename Target::memory>;\n"
      << "  template <class T, int R>\n  using storage = typename Target::template tensor<T, R>;\n\n";
    h << "  /// Constants uploaded once on `stream`";
    if (file)
      h << " (the " << out.weights.size() << " large ones read from the weights file written\n"
        << "  /// with this header: " << options_.weights_path << " unless another path is given)";
    h << "; returns when they are there.\n"
      << "  /// The stream must outlive the model: its memory is freed on it.\n"
      << "  explicit basic_model(fuse::cuda::stream_t stream"
      << (file ? ", const std::string& weights = " + string_literal(options_.weights_path) : "") << ")"
      << (inits_.str().empty() ? "" : "\n    : " + inits_.str().substr(6)) << " {\n";
    if (file)
      h << "  fuse::weights_file file(weights, " << out.weights.id() << "ull, " << out.weights.size() << ", \"" << ns_
        << "::model\");\n";
    h << indented(ctor_.str(), "  ") << "    Target::finish(stream);\n  }\n\n  /// Inputs:";
    for (const auto& i : out.inputs) h << "\n  ///   " << i.name << ": " << i.relay << ", " << i.t.str();
    h << "\n  /// Outputs:";
    for (const auto& o : out.outputs) h << "\n  ///   " << o.name << ": " << o.t.str();
    h << "\n  /// Launches the " << kernels << " kernel" << (kernels == 1 ? "" : "s")
      << " on `stream` and returns: no allocation, no synchronization (a CUDA graph\n"
      << "  /// may capture it).\n  void run(";
    for (const auto& i : out.inputs)
      h << view_type("const " + cxx_type(m_, *p_.fn, i.t.dt), i.t.shape.size()) << " " << i.name << ", ";
    for (const auto& o : out.outputs)
      h << view_type(cxx_type(m_, *p_.fn, o.t.dt), o.t.shape.size()) << " " << o.name << ", ";
    h << "fuse::cuda::stream_t stream) {\n"
      << indented(check_.str(), "  ") << indented(body, "  ") << "  }\n\n private:\n"
      << members_.str() << "};\n\n"
      << "/// The model on the host emulator: host views, any machine, no GPU.\n"
      << "using emulated_model = basic_model<fuse::cuda::emulator>;\n"
      << "#if defined(FUSE_CUDA_RUNTIME)\n/// The model on the GPU: device views.\n"
      << "using model = basic_model<fuse::cuda::gpu>;\n#endif\n\n}  // namespace " << ns_ << "\n";
    return h.str();
  }

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
        if (d < 0)
          throw m_.error_at(v->at, "input %" + v->name + " has a dynamic extent (" + t.str() + "): give static shapes");
      const std::string id = identifier(v->name);
      const std::string n = unique(reserved(id) ? id + "_in" : id);
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
        if (a->kind == expr_kind::constant && !seen[a] &&
            !(a->checked.is_tensor() && a->checked.shape.empty() && a->data)) {
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
      const std::string relay =
          a->meta ? "meta[" + a->meta->key + "][" + std::to_string(a->meta->index) + "]" : "constant";
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
      if (cuda_) {
        upload_constant(out, a, n, ct, relay);
        continue;
      }
      const bool packed = used_as_weight(a) && t.shape.size() == 2 &&
                          (ct == "float" || ct == "double" || ct == "std::int8_t" || ct == "std::uint8_t" ||
                           ct == "fuse::half" || ct == "fuse::bfloat16");
      const std::string label = a->span.empty() ? relay : a->span;
      if (a->data->bytes.size() > options_.inline_limit) {
        // From the weights file; a dense weight read only through its packed form is packed
        // from a tensor local to the constructor (not kept twice).
        const std::size_t index = out.weights.add(label, a->data->dt.code, a->data->dt.bits, a->data->shape,
                                                  a->data->bytes.data(), a->data->bytes.size());
        const bool local = packed && only_as_weight(a);
        if (local) ctor_ << "  {\n    " << tensor_type(t) << " " << n << "(" << int_list(t.shape) << ");\n  ";
        else {
          members_ << "  " << tensor_type(t) << " " << n << ";  // " << label << ", " << t.str()
                   << " (weights file entry " << index << ")\n";
          inits_ << (inits_.str().empty() ? "      " : ",\n      ") << n << "("
                 << (t.shape.empty() ? "" : int_list(t.shape)) << ")";
        }
        ctor_ << "  file.read(" << index << ", " << n << ");  // " << label << "\n";
        if (packed) {
          members_ << "  decltype(fuse::pack(std::declval<" << tensor_type(t) << "&>())) " << n << "_packed;  // "
                   << label << "\n";
          ctor_ << (local ? "  " : "") << "  " << n << "_packed = fuse::pack(" << n << ");\n";
          packed_[a] = n + "_packed";
        }
        if (local) ctor_ << "  }\n";
        continue;
      }
      members_ << "  " << tensor_type(t) << " " << n << ";  // " << label << ", " << t.str() << "\n";
      inits_ << (inits_.str().empty() ? "      " : ",\n      ") << n << "("
             << (t.shape.empty() ? "" : int_list(t.shape)) << ")";
      ctor_ << "  {\n    static const "
            << (t.dt.is_bool()                                 ? "unsigned char"
                : ct == "fuse::half" || ct == "fuse::bfloat16" ? "std::uint16_t"
                                                               : ct)
            << " data[] = {";
      const auto count = static_cast<std::size_t>(a->data->elements());
      ctor_ << data_literals(*a) << "};\n";
      if (ct == "fuse::half" || ct == "fuse::bfloat16" || ct == "bool")
        ctor_ << "    for (std::size_t i = 0; i < " << count << "; ++i) " << n
              << ".data()[i] = " << (ct == "bool" ? "data[i] != 0" : ct + "::from_bits(data[i])") << ";\n";
      else ctor_ << "    std::copy(data, data + " << count << ", " << n << ".data());\n";
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
        if (d < 0)
          throw m_.error_at(p_.results[r]->at, "result " + std::to_string(r) + " has a dynamic extent: " + t.str());
      out.outputs.push_back({"out" + std::to_string(r), "result " + std::to_string(r), t});
    }
    // Intermediates: views into one arena allocated when the model is constructed; values
    // whose lifetimes (from the kernel that writes one to the last kernel that reads it) do not
    // overlap share bytes. BERT-base's 180 stored values took 3 GB as separate tensors.
    place_intermediates(out);
    // Shapes of the inputs are checked at every call: a wrong view is a shape_error, not a
    // silent misread.
    for (const auto& i : out.inputs)
      check_ << "  if (" << i.name << ".shape().array() != fuse::index_array<" << i.t.shape.size() << ">"
             << int_list(i.t.shape) << ") fuse::throw_shape_error(\"" << ns_ << "::model: input " << i.name
             << " must have shape " << int_list(i.t.shape) << ", not \", " << i.name << ".shape().array());\n";
    for (const auto& o : out.outputs)
      check_ << "  if (" << o.name << ".shape().array() != fuse::index_array<" << o.t.shape.size() << ">"
             << int_list(o.t.shape) << ") fuse::throw_shape_error(\"" << ns_ << "::model: output " << o.name
             << " must have shape " << int_list(o.t.shape) << ", not \", " << o.name << ".shape().array());\n";
  }

  /// The elements of constant a as the initializer of its `data[]` array: 16-bit floats as their
  /// bits (from_bits converts them), everything else as an exact literal ("0" when empty).
  static std::string data_literals(const expr& a) {
    const dtype d = a.checked.dt;
    const auto count = static_cast<std::size_t>(a.data->elements());
    std::string s;
    for (std::size_t e = 0; e < count; ++e) {
      const std::int64_t i = d.is_float() ? 0 : a.data->integer(e);
      s += (e ? ", " : "") + (d.is_float() && d.bits == 16 ? std::to_string(a.data->raw(e))
                              : d.is_float()               ? literal(a.data->real(e), 0, d)
                              : i == INT64_MIN             ? std::string("(-9223372036854775807LL - 1)")
                                                           : std::to_string(i) + (d.bits == 64 ? "LL" : ""));
    }
    return count ? s : "0";
  }

  /// For CUDA: constant a as the target's tensor `n`, filled on the host and uploaded once in
  /// the constructor (from a literal up to inline_limit bytes, else from the weights file).
  void upload_constant(emitted& out, const expr* a, const std::string& n, const std::string& ct,
                       const std::string& relay) {
    const type& t = a->checked;
    const std::string r = std::to_string(t.shape.size()), label = a->span.empty() ? relay : a->span;
    const std::string host = "fuse::tensor<" + ct + ", " + r + ">";
    members_ << "  storage<" << ct << ", " << r << "> " << n << ";  // " << label << ", " << t.str() << "\n";
    inits_ << (inits_.str().empty() ? "      " : ",\n      ") << n << "(Target::template make<" << ct << ", " << r
           << ">(fuse::index_array<" << r << ">" << int_list(t.shape) << ", stream))";
    ctor_ << "  {\n";
    if (a->data->bytes.size() > options_.inline_limit) {
      const std::size_t index = out.weights.add(label, a->data->dt.code, a->data->dt.bits, a->data->shape,
                                                a->data->bytes.data(), a->data->bytes.size());
      ctor_ << "    " << host << " h(" << int_list(t.shape) << ");\n    file.read(" << index << ", h);  // " << label
            << "\n    Target::upload(" << n << ", h.data(), stream);\n  }\n";
      return;
    }
    const auto count = static_cast<std::size_t>(a->data->elements());
    const bool bits = ct == "fuse::half" || ct == "fuse::bfloat16" || ct == "bool";
    ctor_ << "    static const " << (ct == "bool" ? "unsigned char" : bits ? "std::uint16_t" : ct) << " data[] = {";
    ctor_ << data_literals(*a) << "};\n";
    if (bits) {
      // 16-bit floats as their bits, bools as bytes: converted on the host first.
      ctor_ << "    " << host << " h(" << int_list(t.shape) << ");\n    for (std::size_t i = 0; i < " << count
            << "; ++i) h.data()[i] = " << (ct == "bool" ? "data[i] != 0" : ct + "::from_bits(data[i])")
            << ";\n    Target::upload(" << n << ", h.data(), stream);\n  }\n";
    } else {
      ctor_ << "    Target::upload(" << n << ", data, stream);\n  }\n";
    }
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
        if (auto it = slot_of.find(a); it != slot_of.end())
          slots[it->second].last = std::max(slots[it->second].last, k);
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
    members_ << "  " << (cuda_ ? "storage" : "fuse::tensor") << "<std::uint8_t, 1> arena_;  // " << arena
             << " bytes: the intermediates below\n";
    inits_ << (inits_.str().empty() ? "      " : ",\n      ")
           << (cuda_ ? "arena_(Target::template make<std::uint8_t, 1>(fuse::index_array<1>{" + std::to_string(arena) +
                           "}, stream))"
                     : "arena_({" + std::to_string(arena) + "})");
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const type& t = slots[i].node->checked;
      const std::string n = "t" + std::to_string(i), ct = cxx_type(m_, *slots[i].node, t.dt),
                        r = std::to_string(t.shape.size());
      names_[slots[i].node] = n;
      members_ << "  " << view_type(ct, t.shape.size()) << " " << n << ";  // intermediate " << t.str()
               << ", arena bytes " << slots[i].offset << "-" << slots[i].offset + slots[i].bytes << ", kernels "
               << slots[i].first << "-" << slots[i].last << "\n";
      ctor_ << "  " << n << " = " << view_type(ct, t.shape.size()) << "(reinterpret_cast<" << ct
            << "*>(arena_.data() + " << slots[i].offset << "), fuse::dynamic_shape<" << r << ">(fuse::index_array<" << r
            << ">" << int_list(t.shape) << "));\n";
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
      // The shared walk (ir.hpp; a tree's nodes are op calls, tuples and projections, whose
      // children are their args), not into leaves nor other kernels' outputs.
      walk_post_order(
          std::vector<const expr*>(k.outputs.begin(), k.outputs.end()), enter_all{},
          [&](const expr*, const expr* c) {
            if (c->kind == expr_kind::var || c->kind == expr_kind::constant) return false;
            return !p_.materialized.count(c) || std::find(k.outputs.begin(), k.outputs.end(), c) != k.outputs.end();
          },
          [&](const expr* e) { nodes.push_back(e); });
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
      out << "    " << eval_call(storage(k.outputs[0]) + ", " + local.at(k.outputs[0])) << ";\n";
    } else {
      std::string args = "fuse::outputs(";
      for (std::size_t i = 0; i < k.outputs.size(); ++i) args += (i ? ", " : "") + storage(k.outputs[i]);
      args += ")";
      for (const expr* o : k.outputs) args += ", " + local.at(o);
      out << "    " << eval_call(args) << ";\n";
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
        s += ", " + (a.integer ? std::to_string(c.integer(a.name))
                               : literal(c.real(a.name), 0, dtype{dtype::float_code, 64, 1}));
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
    if (std::string s; with_elementwise_op(op, [&]<class Op>(std::type_identity<Op>) { s = elementwise<Op>(c, arg); }))
      return s;
    if (op == "copy" || op == "annotation.stop_fusion" || op == "on_device" || op == "device_copy") return "";
    const type& t = e.checked;
    const std::string ct = cxx_type(m_, e, t.dt);
    if (op == "cast") return "fuse::cast<" + ct + ">(" + arg(0) + ")";
    if (op == "nn.bias_add")
      return "fuse::bias_add(" + arg(0) + ", " + arg(1) + ", " + std::to_string(c.integer("axis")) + ")";
    if (op == "nn.dense" || op == "nn.matmul" || op == "nn.batch_matmul") {
      const dtype in = e.args[0]->checked.dt;
      if (!(in == e.args[1]->checked.dt) && !(in.bits == 8 && e.args[1]->checked.dt.bits == 8))
        throw m_.error_at(e.at, op + " of " + in.name() + " by " + e.args[1]->checked.dt.name() +
                                    ": fuse's contractions take one dtype");
      const bool int8 = in.bits == 8 && !in.is_float();
      // float16/bfloat16 operands accumulate in float32 and give their own dtype or float32.
      const bool half = in.is_float() && in.bits == 16;
      const dtype expect = int8 ? dtype::int32() : in;
      if (!(t.dt == expect) && !(half && t.dt == dtype::float32()))
        throw m_.error_at(e.at, op + " with out_dtype " + t.dt.name() + " from " + in.name() +
                                    " operands: fuse computes " + expect.name() + (half ? " or float32" : ""));
      const std::string out = t.dt == expect ? "" : "<float>";
      if (op == "nn.dense") return "fuse::dense" + out + "(" + arg(0) + ", " + weight(1) + ")";
      const std::string ta = c.boolean("transpose_a") ? "true" : "false",
                        tb = c.boolean("transpose_b") ? "true" : "false";
      if (op == "nn.matmul") return "fuse::matmul" + out + "(" + arg(0) + ", " + arg(1) + ", " + ta + ", " + tb + ")";
      return "fuse::batch_matmul" + out + "(" + arg(0) + ", " + arg(1) + ", " + ta + ", " + tb + ")";
    }
    if (op == "reshape" || op == "squeeze" || op == "expand_dims") {
      if (t.shape.empty()) throw m_.error_at(e.at, op + " to a rank-0 tensor is not supported yet");
      return "fuse::reshape(" + arg(0) + ", " + int_list(t.shape) + ")";
    }
    const std::int64_t in_rank = e.args.empty() || !e.args[0]->checked.is_tensor()
                                     ? 0
                                     : static_cast<std::int64_t>(e.args[0]->checked.shape.size());
    if (op == "transpose") return "fuse::transpose(" + arg(0) + ", " + int_list(c.transpose_axes(in_rank)) + ")";
    if (op == "split") {
      const std::int64_t axis = c.axis(c.integer("axis"), in_rank);
      const attr_value* ios = c.find("indices_or_sections");
      if (ios->k == attr_value::kind::array)
        return "fuse::split(" + arg(0) + ", " + int_list(c.integers("indices_or_sections")) + ", " +
               std::to_string(axis) + ")";
      return "fuse::split<" + std::to_string(c.integer("indices_or_sections")) + ">(" + arg(0) + ", " +
             std::to_string(axis) + ")";
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
      return "fuse::strided_slice(" + arg(0) + ", " + int_list(b) + ", " + int_list(en) + ", " + int_list(s) + ", " +
             int_list(axes) + ", " + (c.string("slice_mode") == "size" ? "true" : "false") + ")";
    }
    if (op == "take") {
      const std::string mode = c.string("mode");
      const std::string m = "fuse::take_mode::" + std::string(mode == "wrap"   ? "wrap"
                                                              : mode == "fast" ? "fast"
                                                                               : "clip");
      if (c.is_none("axis")) return "fuse::take(" + arg(0) + ", " + arg(1) + ", " + m + ")";
      return "fuse::take(" + arg(0) + ", " + arg(1) + ", " + std::to_string(c.axis(c.integer("axis"), in_rank)) + ", " +
             m + ")";
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
    if (op == "sum" || op == "mean" || op == "max" || op == "min" || op == "prod")
      return reduction(op, arg(0), c.boolean("keepdims"));
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
      const std::string n1 =
          "fuse::scalar_expr<" + ct + ">{" + literal(static_cast<double>(count - 1), count - 1, t.dt) + "}";
      // On CUDA a reduction over other axes than the last runs only at a kernel's root: the
      // division goes inside.
      if (cuda_) return reduction("sum", "fuse::divide(" + sq + ", " + n1 + ")", c.boolean("keepdims"));
      return "fuse::divide(" + reduction("sum", sq, c.boolean("keepdims")) + ", " + n1 + ")";
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
      if (cuda_) {
        // On CUDA a reduction is not read through a reshape: the sum that gives the result's
        // shape itself (no leading axes: all kept; only leading ones: none kept).
        const std::string list = axes.size() == 1 ? std::to_string(axes[0]) : int_list(axes);
        if (lead == 0) return "fuse::sum(" + arg(0) + ", " + list + ", fuse::keepdims)";
        if (axes.size() == lead) return "fuse::sum(" + arg(0) + ", " + list + ")";
        throw m_.error_at(e.at,
                          "collapse_sum_like that drops leading axes and keeps others of extent 1 does not run on "
                          "CUDA yet");
      }
      return "fuse::reshape(fuse::sum(" + arg(0) + ", " +
             (axes.size() == 1 ? std::to_string(axes[0]) : int_list(axes)) + ", fuse::keepdims), " + int_list(t.shape) +
             ")";
    }
    if (op == "full") {
      const std::string v = "fuse::cast<" + ct + ">(" + arg(0) + ")";
      return t.shape.empty() ? v : "fuse::broadcast_to(" + v + ", " + int_list(t.shape) + ")";
    }
    if (op == "zeros_like" || op == "ones_like") {
      const std::string v = "fuse::scalar_expr<" + ct + ">{" +
                            (t.dt.is_bool() ? std::string(op == "ones_like" ? "true" : "false")
                                            : ct + "(" + (op == "ones_like" ? "1" : "0") + ")") +
                            "}";
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
      return "fuse::layer_norm(" + arg(0) + ", " + arg(1) + ", " + arg(2) + ", " +
             std::to_string(c.axis(c.integer("axis"), in_rank)) + ", " +
             literal(c.real("epsilon"), 0, dtype{dtype::float_code, 64, 1}) + ", " +
             (c.boolean("center") ? "true" : "false") + ", " + (c.boolean("scale") ? "true" : "false") + ")";
    throw m_.error_at(
        e.at,
        op + " has no fused form yet (nn.batch_norm and nn.dropout: run simplify_inference; qnn.*: legalize first)");
  }

  const module& m_;
  const plan& p_;
  std::string ns_, source_;
  emit_options options_;
  bool cuda_ = false;  ///< the header is for CUDA (emit.hpp)
  std::unordered_map<const expr*, std::string> names_, packed_;
  std::ostringstream members_, inits_, ctor_, check_;
};

}  // namespace
}  // namespace emit_detail

emitted emit_header(const module& m, const plan& p, const std::string& ns, const std::string& source_name,
                    const emit_options& options) {
  return emit_detail::emitter(m, p, ns, source_name, options).run();
}

}  // namespace fuse::relay
