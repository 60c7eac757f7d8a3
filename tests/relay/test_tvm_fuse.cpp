// The TVM planner (`--planner tvm`): TVM v0.19 FuseOps' grouping, rule by rule
// (../shared/reference/relay-text-and-fuseops.md section 2), on programs written here after the
// cases of TVM's tests/python/relay/test_pass_fuse_ops.py, on the seed cell, on the corpus and on
// a long chain on a small stack. Each expected grouping is derived by hand from the rules in a comment.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fuse/relay/ops.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/tvm_fuse.hpp>
#include <fuse/relay/typecheck.hpp>

#include "relay/seed_programs.hpp"
#include "support/small_stack.hpp"

using namespace fuse::relay;

namespace {

struct planned {
  module m;  // the plan points into it
  tvm_plan plan;
};

planned plan_of(const std::string& text, int max_depth = 256) {
  planned p{parse("test.relay", text), {}};
  typecheck(p.m);
  p.plan = tvm_fuse_ops(p.m, "main", max_depth);
  return p;
}

/// "nn.dense | split,.0,sigmoid,..." : each group's nodes by op name (tuples: "tuple",
/// projections: ".i"), groups in order.
std::string describe(const tvm_plan& plan) {
  std::string s;
  for (const tvm_group& g : plan.groups) {
    if (!s.empty()) s += " | ";
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const expr* e = g.nodes[i];
      if (i) s += ",";
      if (e->kind == expr_kind::call) s += e->callee->name;
      else if (e->kind == expr_kind::tuple) s += "tuple";
      else s += "." + std::to_string(e->index);
    }
  }
  return s;
}

/// The first `fn (%X` program at or after `from` in the seed issue: up to its closing brace at
/// the start of a line.
std::string seed_function(const std::string& text, std::size_t& from) {
  const std::size_t start = text.find("fn (%X", from);
  if (start == std::string::npos) return "";
  const std::size_t end = text.find("\n}", start);
  if (end == std::string::npos) return "";
  from = end + 2;
  return text.substr(start, end + 2 - start) + "\n";
}

}  // namespace

TEST_CASE("tvm planner: the seed cell dense -> split -> sigmoid/tanh/exp -> multiply/add gives 2 groups") {
  // Section 2.4: ipdom(dense) = split with dom pattern injective, so the anchor stays alone in
  // phase 0; split reaches add through injective-or-less groups and joins it in phase 1.
  const planned p = plan_of(fuse::test::seed_cell_relay());
  CHECK(describe(p.plan) == "nn.dense | split,.0,sigmoid,.1,tanh,.2,exp,multiply,add");
  CHECK(p.plan.kernels() == 2);
  REQUIRE(p.plan.groups.size() == 2);
  CHECK(p.plan.groups[0].pattern == op_pattern::out_ewise_fusable);
  CHECK(p.plan.groups[1].root->callee->name == "add");
  CHECK(p.plan.groups[1].pattern == op_pattern::broadcast);
}

TEST_CASE("tvm planner: the seed issue's programs") {
  const std::filesystem::path file = std::filesystem::path(FUSE_SEEDS_DIR) / "000_112a239187d26fef.txt";
  if (!std::filesystem::exists(file)) {
    MESSAGE("skipped: no seed at " << file.string());
    return;
  }
  const std::string text = fuse::test::read_file(file);
  std::size_t from = 0;
  const std::string expected = seed_function(text, from), fused = seed_function(text, from);
  REQUIRE(!expected.empty());
  REQUIRE(!fused.empty());
  // The function the issue's author wanted fused into one: v0.19 makes 2.
  const planned a = plan_of(expected);
  CHECK(describe(a.plan) == "nn.dense | split,.0,sigmoid,.1,tanh,.2,exp,multiply,add");
  // What 2019's FuseOps printed: three closures (printed without Primitive=1, so they are
  // closures here, each body a boundary): {dense}, {split} and the elementwise tail. The
  // projections of the split closure's result feed an opaque closure call and lie in another
  // group than their tuple: no function of their own. 3 kernels, the issue's count. (Groups
  // come in post-DFS order of their roots, and a call's callee is visited before its
  // arguments: the last closure's body comes first.)
  const planned b = plan_of(fused);
  CHECK(describe(b.plan) == "sigmoid,tanh,exp,multiply,add | split | nn.dense");
  CHECK(b.plan.kernels() == 3);
}

TEST_CASE("tvm planner: an anchor takes element-wise epilogues (dense + bias_add + relu)") {
  // TVM's conv2d + bias + relu case with nn.dense: the dense -> bias_add edge is broadcast
  // demoted to elemwise (the dense result has the bias_add result's shape), so dom(dense) is
  // elemwise and the path (bias_add, broadcast) is <= broadcast: phase 0 fuses; then relu.
  const planned p = plan_of(R"(
def @main(%x: Tensor[(1, 16), float32], %w: Tensor[(8, 16), float32], %b: Tensor[(8), float32]) {
  %0 = nn.dense(%x, %w, units=8);
  %1 = nn.bias_add(%0, %b, axis=1);
  nn.relu(%1)
}
)");
  CHECK(describe(p.plan) == "nn.dense,nn.bias_add,nn.relu");
  REQUIRE(p.plan.groups.size() == 1);
  CHECK(p.plan.groups[0].pattern == op_pattern::out_ewise_fusable);

  // A broadcast that really broadcasts the anchor's result keeps its kBroadcast edge: the dom
  // pattern is not elemwise and the dense stays alone.
  const planned q = plan_of(R"(
def @main(%x: Tensor[(1, 16), float32], %w: Tensor[(8, 16), float32], %b: Tensor[(4, 1, 8), float32]) {
  %0 = nn.dense(%x, %w, units=8);
  add(%0, %b)
}
)");
  CHECK(describe(q.plan) == "nn.dense | add");
}

TEST_CASE("tvm planner: an element-wise chain is one group; injective ops join it") {
  const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = sigmoid(%0);
  %2 = add(%1, 1f);
  %3 = reshape(%2, newshape=[8, 4]);
  %4 = tanh(%3);
  nn.relu(%4)
}
)");
  // The scalar 1f is an elemwise node and joins add's group, but is not listed.
  CHECK(describe(p.plan) == "exp,sigmoid,add,reshape,tanh,nn.relu");
  CHECK(p.plan.kernels() == 1);
}

TEST_CASE("tvm planner: a reduction takes its element-wise producers but never its consumers") {
  // exp -> mean: dom pattern comm_reduce, sink a reduction: fused (phase 0). mean is
  // kCommReduce: nothing. subtract -> sigmoid fuse. So {exp, mean}, {subtract, sigmoid}.
  const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = mean(%0, axis=[1], keepdims=True);
  %2 = subtract(%x, %1);
  sigmoid(%2)
}
)");
  CHECK(describe(p.plan) == "exp,mean | subtract,sigmoid");

  // Softmax-like diamond: exp feeds both sum and subtract. ipdom(exp) = subtract, reached
  // through the sum, whose group (kCommReduce) is not <= injective on the path: exp stays
  // alone. 3 groups.
  const planned q = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = sum(%0, axis=[1], keepdims=True);
  subtract(%0, %1)
}
)");
  CHECK(describe(q.plan) == "exp | sum | subtract");
}

TEST_CASE("tvm planner: an injective producer does not fuse into a reduction") {
  // transpose (kInjective) fuses only in phase 1 and only along injective-or-less paths; the
  // sink sum is kCommReduce.
  const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = transpose(%x, axes=[1, 0]);
  sum(%0, axis=[1])
}
)");
  CHECK(describe(p.plan) == "transpose | sum");
}

TEST_CASE("tvm planner: a tuple root is not fused") {
  // add's two consumers meet at the returned tuple: ipdom(add) is the tuple, and phases 0/1
  // never fuse into a tuple; exp and sigmoid have the tuple as ipdom too. The tuple itself is
  // never wrapped: 3 kernels.
  const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = add(%x, 1f);
  %1 = exp(%0);
  %2 = sigmoid(%0);
  (%1, %2)
}
)");
  CHECK(describe(p.plan) == "add | exp | sigmoid");
  CHECK(p.plan.kernels() == 3);
}

TEST_CASE("tvm planner: concatenate of element-wise results (the phase-2 tuple rule)") {
  // Phase 1: the tuple (kTuple) joins concatenate, concatenate joins add (edge demoted to
  // elemwise). Phase 2: exp and sigmoid have the tuple as ipdom, the tuple's root group (add,
  // kBroadcast) is <= injective: they join it. One group.
  const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32], %y: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = sigmoid(%y);
  %2 = (%0, %1);
  %3 = concatenate(%2, axis=1);
  add(%3, 1f)
}
)");
  CHECK(describe(p.plan) == "exp,sigmoid,tuple,concatenate,add");
  // Without phase 2 they would be left out: the same program with the tuple returned as well
  // keeps the tuple extern, so the fields stay alone.
  const planned q = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32], %y: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = sigmoid(%y);
  %2 = (%0, %1);
  %3 = concatenate(%2, axis=1);
  (%3, %2)
}
)");
  CHECK(describe(q.plan) == "exp | sigmoid | concatenate");
}

TEST_CASE("tvm planner: annotation.stop_fusion is a boundary and no kernel") {
  const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = annotation.stop_fusion(%0);
  sigmoid(%1)
}
)");
  CHECK(describe(p.plan) == "exp | sigmoid");
  CHECK(p.plan.kernels() == 2);
}

TEST_CASE("tvm planner: an element-wise diamond is one group") {
  // ipdom(exp) = add (the LCA of sigmoid and tanh); every edge is elemwise: phase 0 fuses the
  // whole diamond.
  const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = sigmoid(%0);
  %2 = tanh(%0);
  add(%1, %2)
}
)");
  CHECK(describe(p.plan) == "exp,sigmoid,tanh,add");
}

TEST_CASE("tvm planner: max_depth") {
  // How TVM counts (CountFusedNodesWithNewChild, #6327): the sink's root group size plus, for
  // each node on the paths from the child, the size of that node's own group record. Along a
  // chain e1 -> e2 -> ..., fusing e_k into e_{k+1} gives a group of k + 1, allowed while
  // k + 1 <= max_depth. So the first group holds exactly max_depth ops and the rest start over.
  auto chain = [](int n) {
    std::string s = "def @main(%x: Tensor[(4, 8), float32]) {\n  %0 = exp(%x);\n";
    for (int i = 1; i < n; ++i)
      s += "  %" + std::to_string(i) + " = " + (i % 2 ? "sigmoid" : "exp") + "(%" + std::to_string(i - 1) + ");\n";
    return s + "  %" + std::to_string(n - 1) + "\n}\n";
  };
  const planned p = plan_of(chain(300));
  REQUIRE(p.plan.groups.size() == 2);
  CHECK(p.plan.groups[0].nodes.size() == 256);
  CHECK(p.plan.groups[1].nodes.size() == 44);
  const planned q = plan_of(chain(10), 4);
  REQUIRE(q.plan.groups.size() == 3);
  CHECK(q.plan.groups[0].nodes.size() == 4);
  CHECK(q.plan.groups[1].nodes.size() == 4);
  CHECK(q.plan.groups[2].nodes.size() == 2);
  CHECK(plan_of(chain(256)).plan.kernels() == 1);
  CHECK(plan_of(chain(257)).plan.kernels() == 2);

  // The count reads each path node's own group record, so nodes already merged into the
  // sink's group are counted again. Seed cell, phase 0: sigmoid joins add (add: 2), tanh and
  // exp join multiply (multiply: 3), multiply joins add (add: 5). Phase 1, split -> add:
  // add's 5 + split 1 + three projections 1 each + sigmoid, tanh, exp 1 each + multiply's own
  // record 3 = 15, although the group would hold 9 ops. With max_depth 14 the split stays alone
  // (the projections then join add one by one: 6, 7, 8).
  const std::string cell = R"(
def @main(%x: Tensor[(1, 10), float32], %w: Tensor[(30, 10), float32]) {
  %0 = nn.dense(%x, %w, units=None);
  %1 = split(%0, indices_or_sections=3, axis=1);
  %2 = multiply(tanh(%1.1), exp(%1.2));
  add(sigmoid(%1.0), %2)
}
)";
  CHECK(describe(plan_of(cell, 15).plan) == "nn.dense | split,.0,sigmoid,.1,tanh,.2,exp,multiply,add");
  CHECK(describe(plan_of(cell, 14).plan) == "nn.dense | split | .0,sigmoid,.1,tanh,.2,exp,multiply,add");
}

TEST_CASE("tvm planner: decomposed layer norm") {
  // Post-DFS: mean0, subtract1, 2f, power2, mean3, eps, add4, sqrt5, divide6, multiply7, add8.
  // ipdoms: mean0 -> subtract1 (broadcast); subtract1 -> divide6, the LCA of power2 and
  // divide6, reached through mean3 (dom pattern comm_reduce); 2f -> power2; power2 -> mean3
  // (comm_reduce); mean3 -> add4 -> sqrt5 -> divide6 -> multiply7 -> add8.
  // Phase 0: mean0 is a reduction: nothing. subtract1: the path to divide6 crosses mean3, a
  //   kCommReduce group that is not the sink: refused (and again in phase 1). power2 (with 2f)
  //   joins mean3 (a reduction sink). mean3: nothing. add4, sqrt5, divide6, multiply7 fuse
  //   forward into add8.
  // So 4 kernels: {mean}, {subtract}, {power, mean}, {add, sqrt, divide, multiply, add}.
  const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32], %gamma: Tensor[(8), float32], %beta: Tensor[(8), float32]) {
  %0 = mean(%x, axis=[-1], keepdims=True);
  %1 = subtract(%x, %0);
  %2 = power(%1, 2f);
  %3 = mean(%2, axis=[-1], keepdims=True);
  %4 = add(%3, 1e-05f);
  %5 = sqrt(%4);
  %6 = divide(%1, %5);
  %7 = multiply(%6, %gamma);
  add(%7, %beta)
}
)");
  CHECK(describe(p.plan) == "mean | subtract | power,mean | add,sqrt,divide,multiply,add");
  CHECK(p.plan.kernels() == 4);
}

TEST_CASE("tvm planner: injective producers of batch_matmul stay separate") {
  // reshape -> transpose fuse (phase 1, injective path); transpose -> batch_matmul is refused
  // (the sink is an anchor); the scale after batch_matmul is its elemwise epilogue.
  const planned p = plan_of(R"(
def @main(%x: Tensor[(2, 4, 8), float32], %y: Tensor[(2, 6, 8), float32]) {
  %0 = reshape(%x, newshape=[2, 8, 4]);
  %1 = transpose(%0, axes=[0, 2, 1]);
  %2 = nn.batch_matmul(%1, %y, transpose_b=True);
  multiply(%2, 0.125f)
}
)");
  CHECK(describe(p.plan) == "reshape,transpose | nn.batch_matmul,multiply");
}

TEST_CASE("tvm planner: boundaries (let, closures, globals, Primitive functions, devices)") {
  SUBCASE("let") {
    const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  let %a = exp(%x);
  sigmoid(%a)
}
)");
    CHECK(describe(p.plan) == "exp | sigmoid");
  }
  SUBCASE("a global's body is planned on its own") {
    const planned p = plan_of(R"(
def @f(%y: Tensor[(4, 8), float32]) {
  %0 = sigmoid(%y);
  exp(%0)
}
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = @f(%0);
  tanh(%1)
}
)");
    CHECK(describe(p.plan) == "exp | tanh | sigmoid,exp");
  }
  SUBCASE("an existing Primitive function is one kernel, not looked into") {
    const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = fn (%p0: Tensor[(4, 8), float32], Primitive=1) {
    %1 = exp(%p0);
    sigmoid(%1)
  };
  %2 = %0(%x);
  tanh(%2)
}
)");
    CHECK(describe(p.plan) == "tanh");
    CHECK(p.plan.primitives.size() == 1);
    CHECK(p.plan.kernels() == 2);
  }
  SUBCASE("on_device is transparent, device_copy is an opaque kernel") {
    const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = on_device(%0);
  sigmoid(%1)
}
)");
    CHECK(describe(p.plan) == "exp,sigmoid");
    const planned q = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = exp(%x);
  %1 = device_copy(%0);
  sigmoid(%1)
}
)");
    CHECK(describe(q.plan) == "exp | device_copy | sigmoid");
  }
  SUBCASE("an opaque op's projection joins its consumer, the op is a kernel of its own") {
    const planned p = plan_of(R"(
def @main(%x: Tensor[(4, 8), float32]) {
  %0 = nn.dropout(%x, rate=0.5f);
  %1 = %0.0;
  sigmoid(%1)
}
)");
    CHECK(describe(p.plan) == "nn.dropout | .0,sigmoid");
  }
}

TEST_CASE("tvm planner: ops TVM lowers before FuseOps are refused at the call") {
  const std::string text = R"(
def @main(%x: Tensor[(4, 8), float32], %g: Tensor[(8), float32], %b: Tensor[(8), float32]) {
  %0 = exp(%x);
  nn.layer_norm(%0, %g, %b)
}
)";
  module m = parse("ln.relay", text);
  typecheck(m);
  try {
    (void)tvm_fuse_ops(m);
    FAIL("no error");
  } catch (const fuse::relay::error& e) {
    CHECK(std::string(e.message()).starts_with("the TVM planner needs nn.layer_norm lowered first"));
    CHECK(e.where().line == 4);
    CHECK(e.where().col == 3);
  }
  const std::string q = R"(
def @main(%x: Tensor[(2, 8), int8], %w: Tensor[(4, 8), int8]) {
  qnn.dense(%x, %w, 0, 0, 0.5f, 0.5f, units=4)
}
)";
  module mq = parse("q.relay", q);
  typecheck(mq);
  try {
    (void)tvm_fuse_ops(mq);
    FAIL("no error");
  } catch (const fuse::relay::error& e) {
    CHECK(std::string(e.message()) ==
          "the TVM planner needs qnn.dense lowered first (TVM legalizes it before FuseOps)");
  }
}

TEST_CASE("tvm planner: corpus programs that type-check") {
  const std::filesystem::path dir = FUSE_RELAY_CORPUS_DIR;
  if (!std::filesystem::is_directory(dir)) {
    MESSAGE("skipped: no corpus at " << dir.string());
    return;
  }
  // 09: dense -> add (the bias has another shape, but the edge from the dense is demoted: the
  // dense result has add's shape) fuse in phase 0; the cublas function is Primitive=1 with a
  // Compiler: one kernel. 14: the closure's dense -> relu -> add(1f) is one group.
  const std::vector<std::pair<std::string, std::size_t>> files = {{"09_printer_output_ty_span_nested_fns.relay", 2},
                                                                  {"14_closure_call_with_attrs_type_key.relay", 1}};
  for (const auto& entry : files) {
    const std::string& name = entry.first;  // not a structured binding: CAPTURE's lambda takes it
    const std::size_t expected = entry.second;
    CAPTURE(name);
    module m = parse_file((dir / name).string());
    typecheck(m);
    const tvm_plan plan = tvm_fuse_ops(m);
    MESSAGE(name << ": tvm kernels " << plan.kernels() << " (" << describe(plan) << ", " << plan.primitives.size()
                 << " existing primitive)");
    CHECK(plan.kernels() == expected);
  }
}

TEST_CASE("tvm planner: a long chain takes constant stack") {
  fuse::test::on_small_stack([&] {
    constexpr int n = fuse::test::small_stack_chain;
    std::string s = "def @main(%x: Tensor[(2, 2), float32]) {\n  %0 = exp(%x);\n";
    for (int i = 1; i < n; ++i)
      s += "  %" + std::to_string(i) + " = " + (i % 3 ? "sigmoid" : "negative") + "(%" + std::to_string(i - 1) + ");\n";
    s += "  %" + std::to_string(n - 1) + "\n}\n";
    const planned p = plan_of(s);
    // Groups of 256 from the start: 78 full ones and 32 left over.
    static_assert(n == 78 * 256 + 32);
    CHECK(p.plan.kernels() == 79);
    CHECK(p.plan.groups.back().nodes.size() == 32);
  });
}
