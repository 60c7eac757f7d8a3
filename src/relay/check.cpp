// `fuse-relay check` (see check.hpp): the generated model against the reference interpreter.
#include "fuse/relay/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fuse/expr/ops.hpp"
#include "fuse/relay/emit.hpp"
#include "fuse/relay/npy.hpp"
#include "fuse/relay/ops.hpp"

namespace fuse::relay {

namespace check_detail {

namespace {

/// The share of elements that are neither zero nor saturated (nor inf/NaN), over all outputs.
double live_share(const std::vector<value>& outs) {
  std::size_t total = 0, live = 0;
  for (const value& w : outs)
    for (std::size_t k = 0; k < static_cast<std::size_t>(w.count()); ++k) {
      ++total;
      if (w.floating()) {
        live += w.f[k] != 0 && std::isfinite(w.f[k]);
      } else {
        const std::int64_t lo = w.dt.lowest(), hi = w.dt.highest();
        live += w.i[k] != 0 && (w.dt.is_bool() || (w.i[k] != lo && w.i[k] != hi));
      }
    }
  return total ? static_cast<double>(live) / static_cast<double>(total) : 0.0;
}

/// Whether a call rounds a float to a discrete value: a cast to an integer or bool, round, floor,
/// ceil, trunc, or a comparison of floats. Its result flips where a reordered float sum moves an
/// operand across a boundary (a tie, a threshold).
bool rounds_a_float(const expr* e) {
  if (e->kind != expr_kind::call || e->args.empty() || !e->args[0]->checked.is_tensor() ||
      !e->args[0]->checked.dt.is_float())
    return false;
  if (is_op_call(e, "cast")) return !e->checked.dt.is_float();
  bool discrete = false;
  if (e->callee && e->callee->kind == expr_kind::op)
    with_elementwise_op(e->callee->name,
                        [&]<class Op>(std::type_identity<Op>) { discrete = ops::discrete_result<Op>; });
  return discrete;
}

/// The C++ element type of a port.
std::string ctype_of(const type& t) {
  const dtype x = t.dt;
  if (x.is_bool()) return "bool";
  if (x.code == dtype::float_code) return x.bits == 32 ? "float" : x.bits == 64 ? "double" : "fuse::half";
  if (x.code == dtype::bfloat_code) return "fuse::bfloat16";
  return std::string(x.is_int() ? "std::int" : "std::uint") + std::to_string(x.bits) + "_t";
}

/// What both drivers define: load and store of host tensors as .npy files.
const std::string driver_common =
    "template <class T, int R>\nfuse::tensor<T, R> load(const std::string& path) {\n"
    "  const fuse::relay::constant_data c = fuse::relay::npy::read_file(path);\n"
    "  fuse::index_array<R> s{};\n  for (int k = 0; k < R; ++k) s[k] = c.shape[k];\n"
    "  fuse::tensor<T, R> t{fuse::dynamic_shape<R>(s)};\n"
    "  if (c.bytes.size() != sizeof(T) * static_cast<std::size_t>(t.size())) throw fuse::relay::error(path + \": "
    "size\");\n"
    "  if (!c.bytes.empty()) std::memcpy(static_cast<void*>(t.data()), c.bytes.data(), c.bytes.size());\n  return "
    "t;\n}\n\n"
    "template <class T, int R>\nvoid store(const std::string& path, const fuse::tensor<T, R>& t, fuse::relay::dtype "
    "dt) {\n"
    "  fuse::relay::constant_data c;\n  c.dt = dt;\n  for (int k = 0; k < R; ++k) c.shape.push_back(t.shape()[k]);\n"
    "  c.bytes.resize(sizeof(T) * static_cast<std::size_t>(t.size()));\n"
    "  if (!c.bytes.empty()) std::memcpy(c.bytes.data(), static_cast<const void*>(t.data()), c.bytes.size());\n"
    "  fuse::relay::npy::write_file(path, c);\n}\n\n";

/// The driver's host tensors: in<i> loaded from DIR/in<i>.npy, out<o> of the outputs' shapes.
void driver_ports(std::ostringstream& d, const emitted& em) {
  for (std::size_t i = 0; i < em.inputs.size(); ++i)
    d << "    auto in" << i << " = load<" << ctype_of(em.inputs[i].t) << ", " << em.inputs[i].t.shape.size()
      << ">(dir + \"/in" << i << ".npy\");\n";
  for (std::size_t o = 0; o < em.outputs.size(); ++o) {
    d << "    fuse::tensor<" << ctype_of(em.outputs[o].t) << ", " << em.outputs[o].t.shape.size() << "> out" << o;
    if (!em.outputs[o].t.shape.empty()) d << "(" << emit_detail::int_list(em.outputs[o].t.shape) << ")";
    d << ";\n";
  }
}
/// The driver's end: out<o> stored to DIR/out<o>.npy.
void driver_end(std::ostringstream& d, const emitted& em) {
  for (std::size_t o = 0; o < em.outputs.size(); ++o) {
    const dtype x = em.outputs[o].t.dt;
    d << "  store(dir + \"/out" << o << ".npy\", out" << o << ", fuse::relay::dtype{" << int(x.code) << ", "
      << int(x.bits) << ", " << int(x.lanes) << "});\n";
  }
}

/// `int check_K(const std::string& dir)`: the model of namespace ns on the inputs in DIR, its
/// outputs written there.
void driver_function(std::ostringstream& d, const emitted& em, const std::string& ns, std::size_t k) {
  d << "int check_" << k << "(const std::string& dir) {\n  static " << ns << "::model m;\n";
  driver_ports(d, em);
  d << "  m(";
  for (std::size_t i = 0; i < em.inputs.size(); ++i) d << (i ? ", " : "") << "std::as_const(in" << i << ").view()";
  for (std::size_t o = 0; o < em.outputs.size(); ++o)
    d << (o || !em.inputs.empty() ? ", " : "") << "out" << o << ".view()";
  d << ");\n";
  driver_end(d, em);
  d << "  return 0;\n}\n\n";
}

/// The same for a CUDA header: on the GPU when the machine has one (inputs uploaded, outputs
/// copied back), else on the host emulator; writes where it ran to DIR/ran_on.txt.
void cuda_driver_function(std::ostringstream& d, const emitted& em, const std::string& ns, std::size_t k) {
  d << "int check_" << k << "(const std::string& dir) {\n";
  driver_ports(d, em);
  d << "  std::string ran_on = \"emulator\";\n  int devices = 0;\n"
    << "  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {\n"
    << "    cudaDeviceProp prop{};\n    FUSE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));\n"
    << "    ran_on = std::string(\"gpu \") + prop.name;\n    cudaStream_t s = nullptr;\n"
    << "    FUSE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));\n    {\n"
    << "      " << ns << "::model m(s);\n";
  for (std::size_t i = 0; i < em.inputs.size(); ++i)
    d << "      auto d_in" << i << " = fuse::cuda::to_device(in" << i << ", s);\n";
  for (std::size_t o = 0; o < em.outputs.size(); ++o)
    d << "      fuse::cuda::tensor<" << ctype_of(em.outputs[o].t) << ", " << em.outputs[o].t.shape.size() << "> d_out"
      << o << "(out" << o << ".shape(), s);\n";
  d << "      m.run(";
  for (std::size_t i = 0; i < em.inputs.size(); ++i) d << "std::as_const(d_in" << i << ").view(), ";
  for (std::size_t o = 0; o < em.outputs.size(); ++o) d << "d_out" << o << ".view(), ";
  d << "s);\n";
  for (std::size_t o = 0; o < em.outputs.size(); ++o)
    d << "      fuse::cuda::copy(out" << o << ", d_out" << o << ", fuse::cuda::on(s));\n";
  d << "      FUSE_CUDA_CHECK(cudaStreamSynchronize(s));\n    }\n"
    << "    FUSE_CUDA_CHECK(cudaStreamSynchronize(s));\n    FUSE_CUDA_CHECK(cudaStreamDestroy(s));\n"
    << "  } else {\n    " << ns << "::emulated_model m(nullptr);\n    m.run(";
  for (std::size_t i = 0; i < em.inputs.size(); ++i) d << "std::as_const(in" << i << ").view(), ";
  for (std::size_t o = 0; o < em.outputs.size(); ++o) d << "out" << o << ".view(), ";
  d << "nullptr);\n  }\n";
  driver_end(d, em);
  d << "  std::ofstream(dir + \"/ran_on.txt\") << ran_on;\n  return 0;\n}\n\n";
}

/// A model of a check in the driver: its header at DIR/m<K>/model.hpp (.cuh), namespace
/// fuse_check_model_<K>, its function check_<K>.
struct driver_model {
  std::size_t k;
  const emitted* em;
};

/// One driver for several models (one compile): `driver K DIR` runs model K on the inputs in DIR.
std::string driver_source(const std::vector<driver_model>& models, bool cuda) {
  std::ostringstream d;
  for (const driver_model& m : models) d << "#include \"m" << m.k << (cuda ? "/model.cuh\"\n" : "/model.hpp\"\n");
  d << "#include <fuse/relay/npy.hpp>\n#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n"
    << "#include <fstream>\n#include <string>\n#include <utility>\n\n"
    << driver_common;
  for (const driver_model& m : models)
    (cuda ? cuda_driver_function : driver_function)(d, *m.em, "fuse_check_model_" + std::to_string(m.k), m.k);
  d << "int main(int argc, char** argv) {\n  if (argc != 3) return 2;\n  const std::string dir = argv[2];\n"
    << "  try {\n    switch (std::atoi(argv[1])) {\n";
  for (const driver_model& m : models) d << "      case " << m.k << ": return check_" << m.k << "(dir);\n";
  d << "    }\n  } catch (const std::exception& e) {\n    std::fprintf(stderr, \"%s\\n\", e.what());\n    return 1;\n"
    << "  }\n  return 2;\n}\n";
  return d.str();
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

value random_input(const type& t, std::uint64_t seed, std::size_t position, double scale) {
  std::mt19937_64 gen(seed * 0x9E3779B97F4A7C15ull + position + 1);
  value v = value::tensor(t.dt, t.shape);
  std::uniform_real_distribution<double> ud(-scale, scale);
  // Drawn as the dtype holds them (float16 and bfloat16 rounded too): the reference reads the
  // values the generated code reads from the .npy file.
  for (double& x : v.f) x = interp::hold(ud(gen), t.dt, true);
  const double top = t.dt.bits >= 32 ? 1e9 : std::ldexp(1.0, t.dt.bits - (t.dt.is_int() ? 1 : 0)) - 1;
  const auto hi = static_cast<std::int64_t>(std::max(1.0, std::min(top, std::round(100 * scale))));
  const std::int64_t lo = t.dt.is_bool() || t.dt.is_uint() ? 0 : -hi;
  std::uniform_int_distribution<std::int64_t> id(lo, t.dt.is_bool() ? 1 : hi);
  for (std::int64_t& x : v.i) x = id(gen);
  return v;
}

std::string scales_text(const std::vector<double>& s) {
  std::string out;
  bool same = true;
  for (double x : s) same = same && x == s.front();
  for (std::size_t i = 0; i < (same ? std::min<std::size_t>(s.size(), 1) : s.size()); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", s[i]);
    out += (i ? "," : "") + std::string(buf);
  }
  return out.empty() ? "1" : out;
}

std::vector<bool> results_after_rounding(const plan& p) {
  // A node depends when it rounds or any argument depends (a planned graph's children are its
  // args: fuse/relay/ir.hpp), children first.
  std::unordered_map<const expr*, bool> memo;
  for (const expr* e : post_order(std::vector<const expr*>(p.results.begin(), p.results.end()))) {
    bool d = rounds_a_float(e);
    for (const expr* a : e->args) d = d || memo.at(a);
    memo[e] = d;
  }
  std::vector<bool> out;
  for (const expr* r : p.results) out.push_back(memo.at(r));
  return out;
}

}  // namespace check_detail

namespace {

/// A model of a check between its build and its run: its plan, header and work directory.
struct prepared_model {
  module* m;
  plan p;
  emitted em;
  std::filesystem::path dir;
};

/// The nvcc flags of a check's driver. On a machine with no NVIDIA device node the driver runs
/// the host emulator and its device code is compiled to prove that it compiles, never run: it is
/// compiled unoptimized (-G), which takes cicc and ptxas less than half as long (test_relay_e2e's
/// batch of eleven models: 88 -> 34 s and 41 -> 15 s; nvcc as a whole 194 -> 117 s) and still
/// assembles every kernel; and the host half, which holds the emulated kernels, unoptimized too
/// (a later -O wins in nvcc): the models are small, so the emulator's runs barely notice (the
/// batch's first five: 0.48 -> 0.67 s) while the host compiler's part of the batch's compile
/// drops from 70 to 49 s. With a GPU the flags are used as given.
std::string driver_nvcc_flags(const check_options& opt) {
  std::error_code ec;
  const bool gpu = std::filesystem::exists("/dev/nvidiactl", ec) || std::filesystem::exists("/dev/nvidia0", ec);
  return gpu ? opt.nvcc_flags : opt.nvcc_flags + " -G -O0";
}

/// Compiles the driver of `models` (indices into `all`) into DIR/NAME; the compiler's log in
/// DIR/NAME.log. Returns whether it compiled.
bool build_driver(const std::vector<prepared_model>& all, const std::vector<std::size_t>& models,
                  const std::filesystem::path& dir, const std::string& name, const check_options& opt) {
  const bool cuda = opt.target == plan_target::cuda;
  std::vector<check_detail::driver_model> dm;
  for (std::size_t k : models) dm.push_back({k, &all[k].em});
  const std::filesystem::path driver = dir / (name + (cuda ? ".cu" : ".cpp"));
  std::ofstream(driver) << check_detail::driver_source(dm, cuda);
  return opt.run((cuda ? opt.nvcc + " " + driver_nvcc_flags(opt) : opt.cxx + " " + opt.flags) + " -o " +
                     (dir / name).string() + " " + driver.string(),
                 (dir / (name + ".log")).string()) == 0;
}

/// Runs model k of the driver `exe` on random inputs and compares its outputs with the reference.
check_report run_and_compare(prepared_model& pm, std::size_t k, const std::string& exe, const check_options& opt) {
  using namespace check_detail;
  check_report rep;
  rep.kernels = pm.em.kernels;
  module& m = *pm.m;
  const plan& p = pm.p;
  const emitted& em = pm.em;
  const std::filesystem::path& dir = pm.dir;
  const bool cuda = opt.target == plan_target::cuda;
  std::unordered_set<const expr*> constants_from_inputs;
  // Inputs: the parameters, then the constants the text did not carry (attached to the
  // module's constant nodes, so the interpreter reads the values the generated code gets).
  // Magnitudes: inputs whose outputs are all zero or saturated prove nothing, so the scale of
  // each random input is chosen on the interpreter first (choose_scales).
  const std::size_t nparams = p.fn->args.size();
  auto draw = [&](const std::vector<double>& scales) {
    std::vector<value> in;
    for (std::size_t i = 0; i < em.inputs.size(); ++i)
      in.push_back(random_input(em.inputs[i].t, opt.seed, i, scales[i]));
    for (expr& e : m.nodes)
      if (e.kind == expr_kind::constant && e.meta && constants_from_inputs.count(&e))
        for (std::size_t i = nparams; i < em.inputs.size(); ++i)
          if (em.inputs[i].relay == "meta[" + e.meta->key + "][" + std::to_string(e.meta->index) + "]")
            e.data = std::make_shared<const constant_data>(interpreter::to_constant(in[i]));
    return in;
  };
  for (expr& e : m.nodes)
    if (e.kind == expr_kind::constant && !e.data && e.meta) constants_from_inputs.insert(&e);
  interpreter ip(m);
  const auto reference = [&](const std::vector<value>& in) {
    return interpreter::flatten(
        ip.run("main", std::vector<value>(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(nparams))));
  };
  rep.input_scales =
      choose_scales(em.inputs.size(), [&](const std::vector<double>& s) { return live_share(reference(draw(s))); });
  const std::vector<value> inputs = draw(rep.input_scales);  // the constants of the chosen inputs attached
  const std::vector<value> want = reference(inputs);
  for (std::size_t i = 0; i < inputs.size(); ++i)
    npy::write_file((dir / ("in" + std::to_string(i) + ".npy")).string(), interpreter::to_constant(inputs[i]));
  if (opt.run(exe + " " + std::to_string(k) + " " + dir.string(), (dir / "run.log").string()) != 0) {
    rep.detail = "the generated model failed:\n" + read_text((dir / "run.log").string());
    return rep;
  }
  rep.ran_on = cuda ? read_text((dir / "ran_on.txt").string()) : "cpu";
  const std::vector<value> params(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(nparams));
  // Outputs that depend on a rounding of a float intermediate (requantized integers, and the
  // floats dequantized from them) are compared with the reference that rounds float32 ops as
  // the fused code does (see interpreter::run): a reordered float sum can still flip a tie, so
  // up to 0.1% of their elements may differ. Every other output is compared with the double
  // reference: integers exactly, floats within the tolerance of it or of the float32-rounded
  // reference (the op-by-op float32 program: float32 itself can be far from the exact value, as
  // in BERT's additive mask (1 - m) * -10000 of a random integer m, whose 7e5 has a 0.06 ulp).
  const std::vector<bool> after_rounding = results_after_rounding(p);
  rep.tie_allowance = std::find(after_rounding.begin(), after_rounding.end(), true) != after_rounding.end();
  // The float32-rounded run, computed when an output needs it (rounded outputs, or a float
  // output beyond the tolerance of the double reference): one more interpreter run.
  std::vector<value> want_rounded;
  const auto rounded_reference = [&]() -> const std::vector<value>& {
    if (want_rounded.empty()) want_rounded = interpreter::flatten(ip.run("main", params, true));
    return want_rounded;
  };
  if (rep.tie_allowance) rounded_reference();
  std::size_t total = 0, live = 0, int_total = 0, int_diff = 0, tie_total = 0, tie_diff = 0;
  bool floats_ok = true;
  for (std::size_t o = 0; o < want.size(); ++o) {
    const value got = interpreter::from_constant(npy::read_file((dir / ("out" + std::to_string(o) + ".npy")).string()));
    const bool rounded = after_rounding[o];
    const value& w = rounded ? rounded_reference()[o] : want[o];
    // A float16/bfloat16 result is rounded at every op in the reference and once per fused tree
    // in the generated code (float32 accumulation): they agree to a few ulps of the dtype.
    const double ulp = w.dt.code == dtype::bfloat_code ? 0x1p-7 : w.dt.is_float() && w.dt.bits == 16 ? 0x1p-10 : 0.0;
    const double tolerance = std::max(opt.float_tolerance, 4 * ulp);
    for (std::size_t k = 0; k < static_cast<std::size_t>(w.count()); ++k) {
      ++total;
      tie_total += rounded;
      if (w.floating()) {
        const double g = got.f[k], r = w.f[k];
        const auto error_to = [&](double ref) {
          const double err =
              (std::isnan(g) && std::isnan(ref)) || g == ref ? 0.0 : std::fabs(g - ref) / std::max(1.0, std::fabs(ref));
          return std::isnan(err) ? INFINITY : err;
        };
        double e = error_to(r);
        if (!rounded && e > tolerance) e = std::min(e, error_to(rounded_reference()[o].f[k]));
        if (rounded && e > tolerance) ++tie_diff;
        else rep.max_rel_err = std::max(rep.max_rel_err, e), floats_ok = floats_ok && e <= tolerance;
        live += r != 0 && std::isfinite(r);
      } else {
        const bool differs = got.i[k] != w.i[k];
        if (rounded) tie_diff += differs;
        else ++int_total, int_diff += differs;
        const std::int64_t lo = w.dt.lowest(), hi = w.dt.highest();
        live += w.i[k] != 0 && (w.dt.is_bool() || (w.i[k] != lo && w.i[k] != hi));
      }
    }
  }
  rep.differing = tie_total ? static_cast<double>(tie_diff) / static_cast<double>(tie_total) : 0.0;
  rep.live = total ? static_cast<double>(live) / static_cast<double>(total) : 0.0;

  const bool ints_ok = int_diff == 0;
  const bool ties_ok = rep.differing <= 0.001;
  rep.ok = floats_ok && ints_ok && ties_ok;
  if (!floats_ok)
    rep.detail += "float outputs differ from the reference by up to " + std::to_string(rep.max_rel_err) + "\n";
  if (!ints_ok)
    rep.detail += std::to_string(int_diff) + " of " + std::to_string(int_total) + " integer output elements differ\n";
  if (!ties_ok)
    rep.detail += std::to_string(tie_diff) + " of " + std::to_string(tie_total) +
                  " output elements after a float rounding differ from the float32-rounded reference (allowed: 0.1%)\n";
  return rep;
}

}  // namespace

std::vector<check_report> check_models(const std::vector<check_subject>& subjects, const check_options& opt) {
  using check_detail::read_text;
  // The library spawns no process itself: the caller says how commands run (a tool through the
  // shell, a sandbox otherwise).
  if (!opt.run)
    throw error("check_model needs a command runner (check_options::run) to compile and run the generated driver");
  const bool cuda = opt.target == plan_target::cuda;
  if (cuda && opt.nvcc.empty())
    throw error("check --target cuda needs nvcc (check_options::nvcc): this build of fuse was configured without it");
  const std::filesystem::path dir = std::filesystem::absolute(opt.workdir);
  std::vector<check_report> reports(subjects.size());
  std::vector<prepared_model> models;
  std::vector<std::size_t> report_of, built;  // per prepared model: its subject; the ones that compiled
  for (std::size_t s = 0; s < subjects.size(); ++s) {
    try {
      plan_options planning = subjects[s].planning ? *subjects[s].planning : opt.planning;
      planning.target = opt.target;
      plan p = make_plan(*subjects[s].m, "main", planning);
      const std::size_t k = models.size();
      const std::filesystem::path mdir = dir / ("m" + std::to_string(k));
      std::filesystem::create_directories(mdir);
      emit_options eo;
      eo.weights_path = (mdir / "model.weights").string();
      eo.target = opt.target;
      emitted em = emit_header(*subjects[s].m, p, "fuse_check_model_" + std::to_string(k), subjects[s].source_name, eo);
      std::ofstream(mdir / (cuda ? "model.cuh" : "model.hpp")) << em.header;
      if (em.weights.size() > 0) {
        std::ofstream w(eo.weights_path, std::ios::binary);
        if (!em.weights.write(w)) throw error("cannot write " + eo.weights_path);
      }
      models.push_back({subjects[s].m, std::move(p), std::move(em), mdir});
      report_of.push_back(s);
    } catch (const error& e) {
      if (subjects.size() == 1) throw;  // one model: its error is the check's
      reports[s].refused = true;
      reports[s].detail = e.what();
    }
  }
  // One driver for all (one compile: nvcc takes ~20 s a driver); when it does not compile, each
  // model alone, so that the failure names its model.
  std::vector<std::size_t> all(models.size());
  for (std::size_t k = 0; k < all.size(); ++k) all[k] = k;
  std::vector<std::string> exe(models.size());
  const auto did_not_compile = [&](std::size_t k, const std::string& name) {
    check_report& r = reports[report_of[k]];
    r.kernels = models[k].em.kernels;
    r.internal = true;  // a program that type-checks must give a header that compiles
    r.detail = "the generated header did not compile:\n" + read_text((dir / (name + ".log")).string());
  };
  if (models.empty()) {
  } else if (build_driver(models, all, dir, "driver", opt)) {
    std::fill(exe.begin(), exe.end(), (dir / "driver").string());
  } else if (models.size() == 1) {
    did_not_compile(0, "driver");
  } else {
    for (std::size_t k = 0; k < models.size(); ++k) {
      const std::string name = "driver" + std::to_string(k);
      if (build_driver(models, {k}, dir, name, opt)) exe[k] = (dir / name).string();
      else did_not_compile(k, name);
    }
  }
  for (std::size_t k = 0; k < models.size(); ++k)
    if (!exe[k].empty()) reports[report_of[k]] = run_and_compare(models[k], k, exe[k], opt);
  return reports;
}

check_report check_model(module& m, const std::string& source_name, const check_options& opt) {
  return check_models({{&m, source_name}}, opt).front();
}

}  // namespace fuse::relay
