// fuse-relay for CUDA (--target cuda): the planner's CUDA rules (a row node along the last axis
// fused into the tree that reads it, any other one the root of its own kernel, contractions an
// error), the .cuh's shape, and `check --target cuda` end to end: nvcc compiles the header, the
// driver runs it on the GPU when the machine has one, else on the host emulator, and the
// results are compared with the interpreter.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fuse/core/half.hpp>
#include <fuse/relay/emit.hpp>
#include <fuse/relay/metadata.hpp>
#include <fuse/relay/ops.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/plan.hpp>
#include <fuse/relay/typecheck.hpp>

#include "relay/emit_programs.hpp"
#include "relay/programs.hpp"
#include "relay/seed_programs.hpp"
#include "relay/tool.hpp"

using namespace fuse::relay;

namespace {

plan plan_for(module& m, plan_target target) {
  typecheck(m);
  plan_options o;
  o.target = target;
  return make_plan(m, "main", o);
}

/// Kernels of text's plan for CUDA and for the CPU.
struct counts {
  std::size_t cuda, cpu;
};
counts kernels_of(const std::string& text) {
  module a = parse("cuda.relay", text), b = parse("cpu.relay", text);
  return {plan_for(a, plan_target::cuda).kernels.size(), plan_for(b, plan_target::cpu).kernels.size()};
}

// A residual add, TVM's decomposed layer norm (SimplifyInference: mean, variance, add, sqrt,
// subtract, divide, multiply, add) and a requantized softmax of the result along axis 0.
const char* decomposed_norm = R"(
def @main(%x: Tensor[(4, 37), float32], %r: Tensor[(4, 37), float32], %g: Tensor[(37), float32], %b: Tensor[(37), float32]) {
  %0 = add(%x, %r);
  %1 = mean(%0, axis=[-1], keepdims=True);
  %2 = variance(%0, %1, axis=[-1], keepdims=True);
  %3 = add(%2, 1e-05f);
  %4 = sqrt(%3);
  %5 = subtract(%0, %1);
  %6 = divide(%5, %4);
  %7 = multiply(%6, %g);
  %8 = add(%7, %b);
  %9 = nn.softmax(%8, axis=0);
  %10 = multiply(%9, 127f);
  %11 = round(%10);
  %12 = clip(%11, a_min=-128f, a_max=127f);
  %13 = cast(%12, dtype="int8");
  (%8, %13)
})";

// Attention's scores: scaled, masked (broadcast over heads), softmax, requantized to int8.
const char* masked_softmax = R"(
def @main(%s: Tensor[(2, 3, 7, 37), float32], %mask: Tensor[(2, 1, 1, 37), float32]) {
  %0 = multiply(%s, 0.125f);
  %1 = add(%0, %mask);
  %2 = nn.softmax(%1, axis=-1);
  %3 = multiply(%2, 127f);
  %4 = round(%3);
  %5 = clip(%4, a_min=-128f, a_max=127f);
  cast(%5, dtype="int8")
})";

// Row nodes CUDA runs only at a kernel's root: along another axis, over several axes, read
// through a reshape or a transpose, read by two kernels; with the views around them.
const char* rooted = R"(
def @main(%x: Tensor[(5, 6, 7), float32], %i: Tensor[(4), int32]) {
  %0 = nn.log_softmax(%x, axis=1);
  %1 = exp(%0);
  %2 = mean(%x, axis=[0], keepdims=True);
  %3 = subtract(%x, %2);
  %4 = max(%x, axis=[-1]);
  %5 = reshape(%4, newshape=[30]);
  %6 = nn.softmax(%x, axis=-1);
  %7 = transpose(%6, axes=[0, 2, 1]);
  %8 = sum(%6, axis=[0, 2]);
  %9 = variance(%x, %2, axis=[0], keepdims=True, unbiased=True);
  %10 = take(%5, %i, axis=0, mode="wrap");
  %11 = (%1, %3);
  %12 = concatenate(%11, axis=2);
  %13 = prod(%x);
  (%12, %5, %7, %8, %9, %10, %13)
})";

// Group norm as TVM's SimplifyInference writes it: NCHW reshaped to [N, G, C/G, H, W],
// normalised over the last three axes, reshaped back, scaled and shifted per channel. Its rows are
// inside the reshape; the CUDA kernel iterates there (one kernel; the CPU stores the statistics).
const char* group_norm = R"(
def @main(%x: Tensor[(2, 6, 7, 5), float32], %gamma: Tensor[(6, 1, 1), float32], %beta: Tensor[(6, 1, 1), float32]) {
  %0 = reshape(%x, newshape=[2, 3, 2, 7, 5]);
  %1 = mean(%0, axis=[2, 3, 4], keepdims=True);
  %2 = variance(%0, %1, axis=[2, 3, 4], keepdims=True);
  %3 = subtract(%0, %1);
  %4 = add(%2, 1e-05f);
  %5 = sqrt(%4);
  %6 = divide(%3, %5);
  %7 = reshape(%6, newshape=[2, 6, 7, 5]);
  %8 = multiply(%7, %gamma);
  add(%8, %beta)
})";
/// group_norm's body up to the normalised [2, 6, 7, 5] tensor %7 (for variants that read it).
std::string group_norm_then(const std::string& rest) {
  const std::string g = group_norm;
  return g.substr(0, g.find("  %8 =")) + rest + "\n}";
}

// Row nodes along other axes than the last inside trees: column statistics; a softmax along axis
// 0 over 1100 columns (a thread a column); rows along both axes of one output (the one along
// the first is stored), beside a result of the same shape (not one pass with it: no axis would
// be left to walk last).
const char* column_rows = R"(
def @main(%x: Tensor[(300, 6), float32], %y: Tensor[(30, 1100), float32]) {
  %0 = mean(%x, axis=[0], keepdims=True);
  %1 = subtract(%x, %0);
  %2 = max(%x, axis=[0]);
  %3 = divide(%1, %2);
  %4 = nn.softmax(%y, axis=0);
  %5 = multiply(%4, 2f);
  %6 = mean(%y, axis=[1], keepdims=True);
  %7 = sum(%y, axis=[0], keepdims=True);
  %8 = multiply(%6, %7);
  %9 = add(%8, %y);
  (%3, %5, %9)
})";

// Instance norm as TVM's SimplifyInference writes it (mean and variance over H and W, kept; the
// scale and shift expanded to [C, 1, 1]), beside a variance over two axes that reads a mean over
// one of them (whose rows move along the other: stored first), and a block sum without
// keepdims read by a tree (a kernel's root).
const char* instance_norm = R"(
def @main(%x: Tensor[(2, 3, 7, 9), float32], %gamma: Tensor[(3), float32], %beta: Tensor[(3), float32]) {
  %0 = mean(%x, axis=[2, 3], keepdims=True);
  %1 = variance(%x, %0, axis=[2, 3], keepdims=True);
  %2 = add(%1, 1e-05f);
  %3 = sqrt(%2);
  %4 = subtract(%x, %0);
  %5 = divide(%4, %3);
  %6 = expand_dims(%gamma, axis=1, num_newaxis=2);
  %7 = multiply(%5, %6);
  %8 = expand_dims(%beta, axis=1, num_newaxis=2);
  %9 = add(%7, %8);
  %10 = mean(%x, axis=[3], keepdims=True);
  %11 = variance(%x, %10, axis=[2, 3], keepdims=True, unbiased=True);
  %12 = add(%x, %11);
  %13 = sum(%x, axis=[0, 2, 3]);
  %14 = expand_dims(%13, axis=1, num_newaxis=2);
  %15 = multiply(%x, %14);
  (%9, %12, %15)
})";

// Five softmaxes into one sum: 10 row values, more than one row kernel holds (8).
const char* many_rows = R"(
def @main(%x: Tensor[(3, 50), float32]) {
  %0 = nn.softmax(%x);
  %1 = add(%x, 1f);
  %2 = nn.softmax(%1);
  %3 = add(%x, 2f);
  %4 = nn.softmax(%3);
  %5 = nn.softmax(%0);
  %6 = multiply(%0, 2f);
  %7 = nn.softmax(%6);
  %8 = add(%2, %4);
  %9 = add(%8, %5);
  %10 = add(%9, %7);
  add(%10, %0)
})";

}  // namespace

TEST_CASE("cuda planner: a row node along the last axis runs inside the tree that reads it") {
  // x - mean(x): one kernel (the CPU stores the mean first).
  const counts centred = kernels_of(R"(
def @main(%x: Tensor[(6, 300), float32]) {
  %0 = mean(%x, axis=[-1], keepdims=True);
  subtract(%x, %0)
})");
  CHECK(centred.cuda == 1);
  CHECK(centred.cpu == 2);
  // The decomposed layer norm is one kernel; the softmax along axis 0 with its requantize another
  // (the row kernel then walks the output's first axis last).
  const counts norm = kernels_of(decomposed_norm);
  CHECK(norm.cuda == 2);
  CHECK(norm.cpu == 5);
  // Column statistics inside a tree: one kernel.
  const counts columns = kernels_of(R"(
def @main(%x: Tensor[(300, 6), float32]) {
  %0 = mean(%x, axis=[0], keepdims=True);
  %1 = subtract(%x, %0);
  %2 = max(%x, axis=[0]);
  divide(%1, %2)
})");
  CHECK(columns.cuda == 1);
  CHECK(columns.cpu == 3);
  // Row nodes along both axes of one output: no axis is left to walk last, so the one along the
  // first axis is stored.
  const counts both = kernels_of(R"(
def @main(%x: Tensor[(30, 6), float32]) {
  %0 = mean(%x, axis=[0], keepdims=True);
  %1 = mean(%x, axis=[1], keepdims=True);
  %2 = multiply(%0, %1);
  multiply(%2, %x)
})");
  CHECK(both.cuda == 2);
  // A row node along another axis is never nested in another's input (nor holds one).
  const counts nested = kernels_of(R"(
def @main(%x: Tensor[(30, 6), float32]) {
  %0 = mean(%x, axis=[0], keepdims=True);
  %1 = subtract(%x, %0);
  nn.softmax(%1)
})");
  CHECK(nested.cuda == 2);
  CHECK(kernels_of(column_rows).cuda == 4);
  // A reduction without keepdims read at its own shape: the output's lines would cross the
  // sum's rows, so the sum is stored (seed 001's tenth program; TVM: 2 too).
  CHECK(kernels_of(R"(
def @main(%x: Tensor[(20, 20), float32]) {
  %0 = sum(%x, axis=[-1]);
  add(%0, %0)
})")
            .cuda == 2);
  // Instance norm: one kernel (the CPU stores the mean and the variance first). Beside it, the
  // mean that a variance's block crosses and the sum without keepdims are stored; the three
  // results, of one shape, are one pass.
  module inorm = parse("inorm.relay", instance_norm);
  const plan ip = plan_for(inorm, plan_target::cuda);
  REQUIRE(ip.kernels.size() == 3);
  CHECK(ip.kernels[0].outputs[0]->callee->name == "sum");
  CHECK(ip.kernels[1].outputs[0]->callee->name == "mean");
  CHECK(ip.kernels[2].outputs.size() == 3);
  CHECK(kernels_of(R"(
def @main(%x: Tensor[(2, 3, 7, 9), float32]) {
  %0 = mean(%x, axis=[2, 3], keepdims=True);
  %1 = variance(%x, %0, axis=[2, 3], keepdims=True);
  %2 = add(%1, 1e-05f);
  %3 = sqrt(%2);
  %4 = subtract(%x, %0);
  divide(%4, %3)
})")
            .cuda == 1);
  // Scale, mask, softmax and requantize: one kernel.
  const counts attention = kernels_of(masked_softmax);
  CHECK(attention.cuda == 1);
  CHECK(attention.cpu == 2);
}

TEST_CASE("cuda planner: row nodes read through a reshape run inside it where the kernel allows") {
  const counts gn = kernels_of(group_norm);
  CHECK(gn.cuda == 1);
  CHECK(gn.cpu == 3);
  // What the executor does not rewrite: its row nodes are stored, as before. A transpose between
  // the reshape and the root; a softmax beside it; two reshapes of different shapes; a reshape
  // broadcast to the output.
  CHECK(kernels_of(group_norm_then("  transpose(%7, axes=[0, 1, 3, 2])")).cuda == 3);
  CHECK(kernels_of(group_norm_then("  %8 = nn.softmax(%x);\n  add(%7, %8)")).cuda == 3);
  CHECK(kernels_of(group_norm_then("  %8 = reshape(%x, newshape=[2, 2, 3, 7, 5]);\n"
                                   "  %9 = nn.softmax(%8, axis=2);\n"
                                   "  %10 = reshape(%9, newshape=[2, 6, 7, 5]);\n"
                                   "  add(%7, %10)"))
            .cuda == 4);
  CHECK(kernels_of(R"(
def @main(%x: Tensor[(2, 6, 7, 5), float32]) {
  %0 = reshape(%x, newshape=[2, 6, 35]);
  %1 = mean(%0, axis=[-1], keepdims=True);
  %2 = reshape(%1, newshape=[2, 6, 1, 1]);
  subtract(%x, %2)
})")
            .cuda == 2);
  // A result of the same shape beside it is not one pass with it (one output per such kernel).
  module two = parse("two.relay", group_norm_then("  %8 = exp(%x);\n  (%7, %8)"));
  const plan tp = plan_for(two, plan_target::cuda);
  CHECK(tp.kernels.size() == 2);
  for (const kernel& k : tp.kernels) CHECK(k.outputs.size() == 1);
}

TEST_CASE("cuda planner: other row nodes are kernel roots; a row kernel holds at most 8 row values") {
  module m = parse("rooted.relay", rooted);
  const plan p = plan_for(m, plan_target::cuda);
  // Every row node over several axes, or whose rows a transpose or concatenation moves, or that
  // two kernels read, or that lies along another axis than its last under another row node, is
  // stored (the root of its kernel). The max read through a reshape runs inside the reshape's
  // kernel, which iterates in the max's shape (fuse/cuda/row_reshape.hpp).
  std::size_t rooted_rows = 0;
  for (const kernel& k : p.kernels)
    for (const expr* o : k.outputs)
      if (kernel_of(o) == op_kernel::row_kernel) ++rooted_rows;
  CHECK(rooted_rows == 6);  // log_softmax, mean, softmax, sum, variance, prod
  std::size_t through_reshape = 0;
  for (const kernel& k : p.kernels)
    for (const expr* op : k.ops)
      if (kernel_of(op) == op_kernel::row_kernel &&
          std::find(k.outputs.begin(), k.outputs.end(), op) == k.outputs.end()) {
        CHECK_MESSAGE(op->callee->name == "max", op->callee->name << " is inside a tree");
        CHECK(k.outputs.size() == 1);
        CHECK(k.outputs[0]->callee->name == "reshape");
        ++through_reshape;
      }
  CHECK(through_reshape == 1);
  module many = parse("many.relay", many_rows);
  const plan q = plan_for(many, plan_target::cuda);
  // 12 values in one tree: the sum of the first four softmaxes (8) is stored; the first softmax,
  // then read by two kernels, is stored too; the last kernel holds 2 + 2 (softmax of twice the
  // stored first).
  CHECK(q.kernels.size() == 3);
}

TEST_CASE("cuda planner and emitter: contractions are an error that names the op") {
  module m = parse("dense.relay", R"(
def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(3, 8), float32]) {
  %0 = nn.dense(%x, %w, units=3);
  nn.softmax(%0)
})");
  typecheck(m);
  plan_options o;
  o.target = plan_target::cuda;
  CHECK_THROWS_WITH_AS(make_plan(m, "main", o), doctest::Contains("nn.dense: contractions on CUDA: not yet"), error);
}

TEST_CASE("cuda emitter: basic_model over a target, constants uploaded once, one fuse::cuda::eval a kernel") {
  module m = parse("norm.relay", decomposed_norm);
  const plan p = plan_for(m, plan_target::cuda);
  emit_options eo;
  eo.target = plan_target::cuda;
  const emitted e = emit_header(m, p, "norm", "norm.relay", eo);
  CHECK(e.kernels == 2);
  for (const char* part :
       {"#include <fuse/cuda.hpp>", "template <class Target>\nstruct basic_model {",
        "explicit basic_model(fuse::cuda::stream_t stream)", "fuse::cuda::stream_t stream) {",
        "using emulated_model = basic_model<fuse::cuda::emulator>;", "using model = basic_model<fuse::cuda::gpu>;",
        "fuse::cuda::eval(out0, e8, Target::option(stream));", "Target::finish(stream);"})
    CHECK_MESSAGE(e.header.find(part) != std::string::npos, part << "\n" << e.header);
  CHECK(e.header.find("fuse::eval(") == std::string::npos);
  CHECK(e.header.find("#include <fuse/fuse.hpp>") == std::string::npos);
}

#ifdef FUSE_RELAY_TOOL
// A contraction, which the CUDA target refuses at the nn.dense (line 3, column 3).
const char* const dense_program = R"(
def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(3, 8), float32]) {
  nn.dense(%x, %w, units=3)
})";

TEST_CASE("fuse-relay --target cuda: usage and errors") {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fuse_relay_cuda_" + std::to_string(fuse::test::base_seed()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "dense.relay") << dense_program;
  const std::string model = (dir / "dense.relay").string(), out = (dir / "dense.cuh").string();
  const fuse::test::tool_run bad = fuse::test::run_tool("compile " + model + " -o " + out + " --target gpu");
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--target gpu: cpu or cuda") != std::string::npos);
  const fuse::test::tool_run dense = fuse::test::run_tool("compile " + model + " -o " + out + " --target cuda");
  CHECK(dense.status == 1);
  CHECK(dense.err.find("dense.relay:3:3: error: nn.dense: contractions on CUDA: not yet") != std::string::npos);
  INFO(dense.err);
  const fuse::test::tool_run cpu = fuse::test::run_tool("compile " + model + " -o " + (dir / "dense.hpp").string());
  CHECK(cpu.status == 0);
  std::filesystem::remove_all(dir);
}

#if defined(FUSE_RELAY_NVCC)
namespace {

/// The batch of the first check case: every row form the CUDA planner makes, and a contraction
/// (refused by name while the others are still checked).
std::vector<std::pair<std::string, std::string>> row_batch() {
  return {{"decomposed_norm", decomposed_norm},
          {"masked_softmax", masked_softmax},
          {"rooted", rooted},
          {"many_rows", many_rows},
          {"column_rows", column_rows},
          {"instance_norm", instance_norm},
          {"group_norm", group_norm},
          {"contraction", dense_program},
          {"returned_twice", fuse::test::returned_twice},
          {"shifts", fuse::test::shifts},
          {"clashing_names", fuse::test::clashing_names},
          {"every_op", fuse::test::every_op_program()}};
}

/// Seeds 000 and 001's programs, named SEED_K (none when the seeds are not beside the checkout).
std::vector<std::pair<std::string, std::string>> seed_batch() {
#if defined(FUSE_SEEDS_DIR)
  return fuse::test::seed_programs_000_001(FUSE_SEEDS_DIR);
#else
  return {};
#endif
}

/// A program whose constants come from its metadata: meta[relay.Constant][0], float32 [20, 60]
/// (4800 bytes: the weights file); [1], float16 [60] and [2], bool [60] (literals). Finite
/// values (a NaN would make whole rows of log_softmax NaN, proving nothing).
std::string constants_program() {
  std::mt19937_64 g(fuse::test::base_seed());
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<constant_data> cs(3);
  cs[0].dt = dtype::float32(), cs[0].shape = {20, 60}, cs[0].bytes.resize(4 * 1200);
  for (std::size_t i = 0; i < 1200; ++i) {
    const float v = u(g);
    std::memcpy(cs[0].bytes.data() + 4 * i, &v, 4);
  }
  cs[1].dt = dtype{dtype::float_code, 16, 1}, cs[1].shape = {60}, cs[1].bytes.resize(2 * 60);
  for (std::size_t i = 0; i < 60; ++i) {
    const std::uint16_t b = fuse::half(u(g)).bits();
    std::memcpy(cs[1].bytes.data() + 2 * i, &b, 2);
  }
  cs[2] = fuse::test::random_constant(dtype::boolean(), {60}, g);
  std::string nodes, arrays, refs;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    refs += (i ? ", " : "") + std::to_string(3 + i);
    nodes += R"(, {"type_key": "relay.Constant", "attrs": {"data": ")" + std::to_string(i) + R"(", "span": "0"}})";
    arrays += (i ? "\", \"" : "") + encode_ndarray_base64(cs[i]);
  }
  const std::string meta =
      R"({"root": 1, "nodes": [{"type_key": ""}, {"type_key": "Map", "keys": ["relay.Constant"], "data": [2]},
    {"type_key": "Array", "data": [)" +
      refs + "]}" + nodes + R"(], "b64ndarrays": [")" + arrays + R"("], "attrs": {"tvm_version": "0.19.0"}})";
  return R"(#[version = "0.0.5"]
def @main(%x: Tensor[(20, 60), float32]) {
  %0 = add(%x, meta[relay.Constant][0] /* ty=Tensor[(20, 60), float32] */);
  %1 = cast(meta[relay.Constant][1] /* ty=Tensor[(60), float16] */, dtype="float32");
  %2 = multiply(%0, %1);
  %3 = where(meta[relay.Constant][2] /* ty=Tensor[(60), bool] */, %2, %x);
  nn.log_softmax(%3, axis=-1)
}
#[metadata]
)" + meta;
}

/// The three check cases below read one `fuse-relay check --target cuda` of all their programs:
/// one driver and one nvcc compile (each compile has a fixed part of about 15 s on a 2-core
/// machine: the CUDA front end over fuse's headers and the host compiler's share), run once by
/// whichever case comes first.
const fuse::test::checked_batch& cuda_checks() {
  static const fuse::test::checked_batch b = [] {
    std::vector<std::pair<std::string, std::string>> all = row_batch();
    for (auto& p : seed_batch()) all.push_back(std::move(p));
    all.emplace_back("constants", constants_program());
    return fuse::test::check_programs("cuda_checks", all, "--target cuda");
  }();
  return b;
}

}  // namespace

TEST_CASE("fuse-relay check --target cuda: nvcc compiles the .cuh, the GPU or the emulator runs it, results match") {
  const fuse::test::checked_batch& b = cuda_checks();
  INFO(b.run.out << b.run.err);
  CHECK(b.run.status == 1);  // the contraction's refusal (and the seeds'); every other program passes
  for (const auto& [name, text] : row_batch()) {
    CAPTURE(name);
    const std::string line = b.line_of(name);
    if (name == "contraction") {
      CHECK(line.ends_with(": refused"));
      REQUIRE(b.err.count(name));
      CHECK(b.err.at(name).find(":3:3: error: nn.dense: contractions on CUDA: not yet") != std::string::npos);
      continue;
    }
    CHECK(b.passed(name));
    CHECK(line.find("live=0.0%") == std::string::npos);
    // The GPU where the machine has one, else the emulator: the report says which.
    const bool ran = line.find("ran_on=emulator") != std::string::npos || line.find("ran_on=gpu ") != std::string::npos;
    CHECK(ran);
    MESSAGE(line);
  }
}

TEST_CASE("fuse-relay check over the seeds' programs --target cuda: each passes or names what it does not run") {
  const std::vector<std::pair<std::string, std::string>> programs = seed_batch();
  if (programs.empty()) {
    MESSAGE("skipped: no seeds beside the checkout");
    return;
  }
  const fuse::test::checked_batch& b = cuda_checks();
  INFO(b.run.out << b.run.err);
  std::string table =
      "| program | kernels (cuda) | kernels (tvm rules) | max error | ran on |\n|---|---:|---:|---|---|\n";
  int passed = 0, refused = 0;
  using fuse::test::report_field;
  for (const auto& [name, program] : programs) {
    CAPTURE(name);
    const std::string line = b.line_of(name);
    if (b.passed(name)) {
      ++passed;
      table += "| " + name + " | " + report_field(line, "kernels") + " | " + report_field(line, "tvm_kernels") + " | " +
               report_field(line, "max_rel_err") + " | " + report_field(line, "ran_on") + " |\n";
      continue;
    }
    ++refused;
    CHECK(line.ends_with(": refused"));
    const std::string err = b.err.count(name) ? b.err.at(name) : "";
    const bool named = err.find("contractions on CUDA: not yet") != std::string::npos ||
                       err.find("unsupported op ") != std::string::npos;
    CHECK(named);
    const std::size_t e = err.find(": error: ");
    table += "| " + name + " | refused: " +
             (e == std::string::npos ? err : err.substr(e + 9, err.find_first_of(";(\n", e + 9) - e - 9)) +
             " | | | |\n";
  }
  MESSAGE("seeds on CUDA: " << passed << " pass check, " << refused << " refused\n" << table);
  CHECK(passed >= 11);  // seed 001's elementwise and row programs; contractions and convolutions are refused
}

TEST_CASE("check --target cuda: constants from the weights file, float16 and bool constants, uploaded once") {
  module m = parse("constants.relay", constants_program());
  typecheck(m);
  const plan p = plan_for(m, plan_target::cuda);
  emit_options eo;
  eo.target = plan_target::cuda;
  const emitted e = emit_header(m, p, "constants", "constants.relay", eo);
  CHECK(e.weights.size() == 1);
  CHECK(e.inputs.size() == 1);
  CHECK(e.header.find("file.read(0, h);") != std::string::npos);
  CHECK(e.header.find("fuse::half::from_bits(data[i])") != std::string::npos);
  CHECK(e.header.find("h.data()[i] = data[i] != 0;") != std::string::npos);
  // Its check, in the batch of this file's cases: the header runs on the GPU or the emulator
  // with the weights file beside it.
  const fuse::test::checked_batch& b = cuda_checks();
  const std::string line = b.line_of("constants");
  INFO(line << "\n" << (b.err.count("constants") ? b.err.at("constants") : ""));
  REQUIRE(b.passed("constants"));
  using fuse::test::report_field;
  CHECK(report_field(line, "kernels") == "1");
  const std::string ran_on = report_field(line, "ran_on");
  CHECK((ran_on == "emulator" || ran_on == "gpu"));
  const std::string live = report_field(line, "live");
  REQUIRE(!live.empty());
  CHECK(std::stod(live) > 50.0);  // "NN.N%"
  MESSAGE("constants: " << line);
}
#endif  // FUSE_RELAY_NVCC
#endif  // FUSE_RELAY_TOOL
