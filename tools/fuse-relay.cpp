// fuse-relay: the command-line frontend, a thin layer of argument parsing around fuse/relay.
//
//   fuse-relay run MODEL.relay --inputs DIR --outputs DIR [--function NAME] [--params FILE] [QNN]
//       runs the model's @main (or NAME) in the reference interpreter on DIR/<input>.npy and
//       writes out0.npy, out1.npy, ... (a tuple result flattened in order); constants printed
//       without data may be given as DIR/meta_relay_Constant_<i>.npy
//   fuse-relay types MODEL.relay
//       parses and type-checks the model; prints each definition's signature
//   fuse-relay compile MODEL.relay -o OUT.hpp [--namespace NS] [--report] [--dot PLAN.dot] [--planner fuse|tvm|op-by-op] [--target cpu|cuda] [--params FILE] [QNN]
//       writes the header of fused kernels; --report lists each kernel with its ops and, where
//       the program repeats (a model's layers), the repeating block of kernels; --dot
//       draws the plan (kernels as clusters) for Graphviz; --planner tvm plans TVM v0.19
//       FuseOps' groups instead of fuse's (the header then runs TVM's grouping); --target cuda
//       writes a .cuh of fuse::cuda::eval kernels instead (emit.hpp; contractions: not yet)
//   fuse-relay check MODEL.relay [MODEL.relay...] [--seed S] [--planner fuse|tvm|op-by-op] [--target cpu|cuda] [--params FILE] [QNN]
//       generates the header, compiles it with the project's compiler and flags (nvcc for
//       --target cuda: run on the GPU when there is one, else on the host emulator), runs it on
//       random inputs and compares with the interpreter; exit 0 only within tolerance. Several
//       models share one driver (one compile) and each gets a line "MODEL: passed|failed|
//       refused|internal-error ..."; the exit status is the worst of theirs; --params then
//       comes once per model, in their order, or not at all
//   --params FILE: the model's weights (TVM's save_param_dict format or .npz): entries named as
//       @main's parameters become constants, folded and packed at compile time; entries named
//       meta[relay.Constant][i] (or meta_relay_Constant_i) give data to constants printed without it
//   QNN: [--qnn-rounding UPWARD|TONEAREST] [--qnn-compute-dtype int64|float32|float64]
//       what qnn.requantize's rounding="None" and compute_dtype="None" mean when qnn ops are
//       legalized (TVM's RequantizeConfig; defaults UPWARD and int64)
//
// Exit status: 0 success, 1 bad input (FILE:LINE:COL: error: ... on stderr), 2 bad usage or an
// internal error (a generated header that does not compile).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <fuse/relay/check.hpp>
#include <fuse/relay/dot.hpp>
#include <fuse/relay/emit.hpp>
#include <fuse/relay/interpreter.hpp>
#include <fuse/relay/npy.hpp>
#include <fuse/relay/params.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/pipeline.hpp>
#include <fuse/relay/plan.hpp>
#include <fuse/relay/report.hpp>
#include <fuse/relay/typecheck.hpp>

#include "shell_command.hpp"

namespace {

using namespace fuse::relay;

constexpr const char* usage_text =
    "usage:\n"
    "  fuse-relay run MODEL.relay --inputs DIR --outputs DIR [--function NAME] [--params FILE] [QNN]\n"
    "  fuse-relay types MODEL.relay\n"
    "  fuse-relay compile MODEL.relay -o OUT.hpp [--namespace NS] [--report] [--dot PLAN.dot] [--planner "
    "fuse|tvm|op-by-op] "
    "[--target cpu|cuda] [--params FILE] [QNN]\n"
    "  fuse-relay check MODEL.relay [MODEL.relay...] [--seed S] [--planner fuse|tvm|op-by-op] [--target cpu|cuda] "
    "[--params "
    "FILE] [QNN]\n"
    "--params FILE: weights (TVM save_param_dict or .npz) bound to @main's parameters of those names\n"
    "QNN: [--qnn-rounding UPWARD|TONEAREST] [--qnn-compute-dtype int64|float32|float64]\n"
    "  (qnn.requantize's \"None\": TVM's RequantizeConfig, default UPWARD and int64)\n";

struct usage_error {
  std::string message;
};

/// Arguments after the command: one positional MODEL (several where `several_models`) and --key
/// value options.
struct arguments {
  std::string model;
  std::vector<std::string> more_models;  ///< the models after the first
  std::vector<std::pair<std::string, std::string>> options;

  arguments(int argc, char** argv, std::vector<std::string> known, bool several_models = false) {
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--report") {
        bool ok = false;
        for (const auto& k : known) ok = ok || k == a;
        if (!ok) throw usage_error{"unknown option " + a};
        options.emplace_back(a, "1");
      } else if (a.rfind("--", 0) == 0 || a == "-o") {
        bool ok = false;
        for (const auto& k : known) ok = ok || k == a;
        if (!ok) throw usage_error{"unknown option " + a};
        if (i + 1 >= argc) throw usage_error{"option " + a + " needs a value"};
        options.emplace_back(a, argv[++i]);
      } else if (model.empty()) {
        model = a;
      } else if (several_models) {
        more_models.push_back(a);
      } else {
        throw usage_error{"unexpected argument " + a};
      }
    }
    if (model.empty()) throw usage_error{"missing MODEL.relay"};
    // An option given twice would silently lose one value: an error, except --params with
    // several models (one each, in order).
    for (std::size_t i = 0; i < options.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (options[i].first == options[j].first && !(several_models && options[i].first == "--params"))
          throw usage_error{"option " + options[i].first + " given twice"};
  }
  /// Every value of `key`, in order.
  std::vector<std::string> all(const std::string& key) const {
    std::vector<std::string> v;
    for (const auto& [k, value] : options)
      if (k == key) v.push_back(value);
    return v;
  }
  std::string get(const std::string& key, const std::string& fallback = "") const {
    for (const auto& [k, v] : options)
      if (k == key) return v;
    return fallback;
  }
  std::string require(const std::string& key) const {
    const std::string v = get(key);
    if (v.empty()) throw usage_error{"missing " + key + " DIR"};
    return v;
  }
};

/// The qnn options of the command line (checked here: a bad value is bad usage).
qnn_options qnn_options_of(const arguments& args) {
  qnn_options o;
  o.rounding = args.get("--qnn-rounding", o.rounding);
  o.compute_dtype = args.get("--qnn-compute-dtype", o.compute_dtype);
  if (o.rounding != "UPWARD" && o.rounding != "TONEAREST")
    throw usage_error{"--qnn-rounding " + o.rounding + ": UPWARD or TONEAREST"};
  if (o.compute_dtype != "int64" && o.compute_dtype != "float32" && o.compute_dtype != "float64")
    throw usage_error{"--qnn-compute-dtype " + o.compute_dtype + ": int64, float32 or float64"};
  return o;
}
const std::vector<std::string> qnn_flags = {"--qnn-rounding", "--qnn-compute-dtype"};
std::vector<std::string> with_qnn_flags(std::vector<std::string> known) {
  known.insert(known.end(), qnn_flags.begin(), qnn_flags.end());
  return known;
}

/// The pipeline of --planner: fuse's own planner (the default), TVM's groups, or every op alone.
pipeline_options pipeline_options_of(const arguments& args) {
  const std::string planner = args.get("--planner", "fuse");
  pipeline_options o;
  if (planner == "tvm") o.planner = planner_kind::tvm;
  else if (planner == "op-by-op") o.planner = planner_kind::op_by_op;
  else if (planner != "fuse") throw usage_error{"--planner " + planner + ": fuse, tvm or op-by-op"};
  return o;
}

/// The executor of --target: the CPU's (the default) or CUDA's.
plan_target target_of(const arguments& args) {
  const std::string t = args.get("--target", "cpu");
  if (t != "cpu" && t != "cuda") throw usage_error{"--target " + t + ": cpu or cuda"};
  return t == "cuda" ? plan_target::cuda : plan_target::cpu;
}

/// A model as every command runs it (pipeline.hpp's load_model), with the weights of --params
/// bound; entries that nothing took are named on stderr (TVM ignores them too).
module load_legalized(const arguments& args, std::vector<params::entry> more = {}) {
  load_options o;
  o.qnn = qnn_options_of(args);
  if (const std::string file = args.get("--params"); !file.empty()) {
    o.weights = params::read_file(file);
    o.weights_source = file;
  }
  o.weights.insert(o.weights.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  binding_report bound;
  module m = load_model(args.model, o, &bound);
  if (!bound.unused.empty()) {
    std::string names;
    for (std::size_t i = 0; i < bound.unused.size() && i < 8; ++i) names += (i ? ", " : "") + bound.unused[i];
    if (bound.unused.size() > 8) names += ", ...";
    std::fprintf(stderr, "fuse-relay: note: %zu entr%s of %s named no parameter or constant of the model: %s\n",
                 bound.unused.size(), bound.unused.size() == 1 ? "y" : "ies", o.weights_source.c_str(), names.c_str());
  }
  return m;
}

int run(const arguments& args) {
  const std::filesystem::path in = args.require("--inputs"), out = args.require("--outputs");
  // Constants printed without their data (print(mod) drops the metadata section) may be given
  // as DIR/meta_relay_Constant_<i>.npy.
  std::vector<params::entry> constants;
  if (std::filesystem::is_directory(in))
    for (const auto& f : std::filesystem::directory_iterator(in))
      if (const std::string stem = f.path().stem().string();
          f.path().extension() == ".npy" && meta_constant_index(stem) >= 0)
        constants.push_back({stem, npy::read_file(f.path().string())});
  module m = load_legalized(args, std::move(constants));
  const std::string fn = args.get("--function", "main");
  const definition* d = m.find(fn);
  if (!d) throw error(args.model + ": the model has no @" + fn);
  std::vector<value> inputs;
  for (const expr* p : d->fn->args) {
    const std::filesystem::path file = in / (p->name + ".npy");
    const constant_data c = npy::read_file(file.string());
    const type& t = p->checked.known() ? p->checked : p->annotated;
    if (t.is_tensor() && (!(c.dt == t.dt) || c.shape.size() != t.shape.size()))
      throw error(file.string() + ": input %" + p->name + " must be " + t.str() + ", the file holds " +
                  type::tensor(c.shape, c.dt).str());
    for (std::size_t k = 0; t.is_tensor() && k < c.shape.size(); ++k)
      if (t.shape[k] >= 0 && t.shape[k] != c.shape[k])
        throw error(file.string() + ": input %" + p->name + " must be " + t.str() + ", the file holds " +
                    type::tensor(c.shape, c.dt).str());
    inputs.push_back(interpreter::from_constant(c));
  }
  interpreter ip(m);
  const std::vector<value> results = interpreter::flatten(ip.run(fn, inputs));
  std::filesystem::create_directories(out);
  for (std::size_t k = 0; k < results.size(); ++k) {
    const std::filesystem::path file = out / ("out" + std::to_string(k) + ".npy");
    npy::write_file(file.string(), interpreter::to_constant(results[k]));
  }
  std::printf("%zu output%s written to %s\n", results.size(), results.size() == 1 ? "" : "s", out.string().c_str());
  return 0;
}

int compile(const arguments& args) {
  module m = load_legalized(args);
  const pipeline_result prepared = compile_pipeline(m, pipeline_options_of(args));
  const std::string out = args.get("-o");
  if (out.empty()) throw usage_error{"missing -o OUT.hpp"};
  const std::string ns = args.get("--namespace", "model");
  for (char c : ns)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'))
      throw usage_error{"--namespace " + ns + " is not a C++ namespace name"};
  plan_options planning = prepared.planning;
  planning.target = target_of(args);
  const plan p = make_plan(m, "main", planning);
  // Large constants go to OUT.weights beside the header; the model reads them when constructed
  // (from this absolute path unless given another).
  emit_options eo;
  eo.target = planning.target;
  eo.weights_path = std::filesystem::absolute(std::filesystem::path(out).replace_extension(".weights")).string();
  emitted e = emit_header(m, p, ns, args.model, eo);
  std::ofstream f(out);
  if (!(f << e.header)) throw error("cannot write " + out);
  if (e.weights.size() > 0) {
    std::ofstream w(eo.weights_path, std::ios::binary);
    if (!e.weights.write(w)) throw error("cannot write " + eo.weights_path);
  }
  if (const std::string dot = args.get("--dot"); !dot.empty()) {
    std::ofstream g(dot);
    if (!(g << plan_dot(p, std::filesystem::path(args.model).filename().string()))) throw error("cannot write " + dot);
  }
  if (!args.get("--report").empty()) {
    std::fputs(plan_report(p).c_str(), stdout);
    std::printf("intermediates: %.1f MB in one arena (%.1f MB unshared); weights file: %zu entries\n",
                e.arena_bytes / 1e6, e.intermediate_bytes / 1e6, e.weights.size());
    std::printf("kernels: %zu (tvm: %s)\n", e.kernels, prepared.tvm_kernels.c_str());
  }
  return 0;
}

/// One line of check's report (prefixed with the model and its verdict when several are checked).
void print_check_report(const check_report& r, const std::string& tvm_kernels) {
  std::printf(
      "kernels=%zu tvm_kernels=%s max_rel_err=%.3g rounded_differing=%.4f%% live=%.1f%% input_scale=%s ran_on=%s\n",
      r.kernels, tvm_kernels.c_str(), r.max_rel_err, 100 * r.differing, 100 * r.live,
      check_detail::scales_text(r.input_scales).c_str(), r.ran_on.empty() ? "-" : r.ran_on.c_str());
}

int check(const arguments& args) {
  check_options opt;
  opt.cxx = FUSE_RELAY_CXX;
  opt.flags = FUSE_RELAY_CXX_FLAGS;
  opt.run = fuse::tools::run_shell_command;
  opt.target = target_of(args);
#if defined(FUSE_RELAY_NVCC) && defined(FUSE_RELAY_NVCC_FLAGS)
  opt.nvcc = FUSE_RELAY_NVCC;
  opt.nvcc_flags = FUSE_RELAY_NVCC_FLAGS;
#endif
  const std::string seed = args.get("--seed", "1");
  char* end = nullptr;
  opt.seed = std::strtoull(seed.c_str(), &end, 10);
  if (seed.empty() || *end) throw usage_error{"--seed " + seed + " is not a number"};
  opt.workdir = (std::filesystem::temp_directory_path() / ("fuse-relay-check-" + std::to_string(::getpid()))).string();
  const pipeline_options pipeline = pipeline_options_of(args);
  // --params: none, or one per model, in order.
  const std::vector<std::string> params = args.all("--params");
  if (params.size() > 1 && args.more_models.empty()) throw usage_error{"option --params given twice"};
  if (!params.empty() && params.size() != args.more_models.size() + 1)
    throw usage_error{"--params: one per model (" + std::to_string(args.more_models.size() + 1) + " models, " +
                      std::to_string(params.size()) + " --params)"};
  if (args.more_models.empty()) {
    module m = load_legalized(args);
    const pipeline_result prepared = compile_pipeline(m, pipeline);
    opt.planning = prepared.planning;
    const check_report r = check_model(m, args.model, opt);
    std::filesystem::remove_all(opt.workdir);
    print_check_report(r, prepared.tvm_kernels);
    if (r.internal) {
      std::fprintf(stderr, "%s: internal error (please report it): %s", args.model.c_str(), r.detail.c_str());
      return 2;
    }
    if (!r.ok) std::fprintf(stderr, "%s: check failed: %s", args.model.c_str(), r.detail.c_str());
    return r.ok ? 0 : 1;
  }
  // Several models: one driver, one compile (check_models). A model that does not load or that
  // fuse does not run is named with its error and the others are still checked.
  std::vector<std::string> names{args.model};
  names.insert(names.end(), args.more_models.begin(), args.more_models.end());
  std::vector<module> modules(names.size());
  std::vector<std::string> tvm_kernels(names.size()), load_errors(names.size());
  std::vector<plan_options> planning(names.size());
  std::vector<check_subject> subjects;
  std::vector<std::size_t> subject_of(names.size(), names.size());
  for (std::size_t k = 0; k < names.size(); ++k) {
    arguments one = args;
    one.model = names[k];
    std::erase_if(one.options, [](const auto& o) { return o.first == "--params"; });
    if (!params.empty()) one.options.emplace_back("--params", params[k]);
    try {
      modules[k] = load_legalized(one);
      const pipeline_result prepared = compile_pipeline(modules[k], pipeline);
      planning[k] = prepared.planning;
      tvm_kernels[k] = prepared.tvm_kernels;
      subject_of[k] = subjects.size();
      subjects.push_back({&modules[k], names[k], &planning[k]});
    } catch (const error& e) {
      load_errors[k] = e.what();
    }
  }
  const std::vector<check_report> reports = check_models(subjects, opt);
  std::filesystem::remove_all(opt.workdir);
  int status = 0;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const char* name = names[k].c_str();
    if (subject_of[k] == names.size() || reports[subject_of[k]].refused) {
      const std::string& why = subject_of[k] == names.size() ? load_errors[k] : reports[subject_of[k]].detail;
      std::printf("%s: refused\n", name);
      std::fprintf(stderr, "%s\n", why.c_str());
      status = std::max(status, 1);
      continue;
    }
    const check_report& r = reports[subject_of[k]];
    std::printf("%s: %s ", name, r.internal ? "internal-error" : r.ok ? "passed" : "failed");
    print_check_report(r, tvm_kernels[k]);
    if (r.internal) std::fprintf(stderr, "%s: internal error (please report it): %s", name, r.detail.c_str());
    else if (!r.ok) std::fprintf(stderr, "%s: check failed: %s", name, r.detail.c_str());
    status = std::max(status, r.internal ? 2 : r.ok ? 0 : 1);
  }
  return status;
}

int types(const arguments& args) {
  module m = parse_file(args.model);
  typecheck(m);
  for (const definition& d : m.defs) std::printf("@%s: %s\n", d.name.c_str(), d.fn->checked.str().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) throw usage_error{"missing command"};
    const std::string cmd = argv[1];
    if (cmd == "-h" || cmd == "--help") {
      std::fputs(usage_text, stdout);
      return 0;
    }
    if (cmd == "run")
      return run(arguments(argc, argv, with_qnn_flags({"--inputs", "--outputs", "--function", "--params"})));
    if (cmd == "types") return types(arguments(argc, argv, {}));
    if (cmd == "compile")
      return compile(arguments(
          argc, argv, with_qnn_flags({"-o", "--namespace", "--report", "--dot", "--planner", "--target", "--params"})));
    if (cmd == "check")
      return check(arguments(argc, argv, with_qnn_flags({"--seed", "--planner", "--target", "--params"}), true));
    throw usage_error{"unknown command " + cmd};
  } catch (const usage_error& e) {
    std::fprintf(stderr, "fuse-relay: %s\n%s", e.message.c_str(), usage_text);
    return 2;
  } catch (const error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
