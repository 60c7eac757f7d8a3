// `--planner tvm`: the grouping that Apache TVM v0.19's FuseOps would give a Relay program, so
// that a report can set fuse's kernel count beside TVM's ("kernels: N (tvm: M)").
//
// This reproduces the rules of ../shared/reference/relay-text-and-fuseops.md section 2 (the
// dataflow graph of fuse_ops.cc and the partitioner of graph_partitioner.cc); the code is written
// from those rules, not taken from TVM. In order:
//   1. the dataflow graph: nodes in post-DFS order (producers first), each with an op pattern,
//      each edge producer->consumer with the consumer's pattern, a broadcast edge demoted to
//      elemwise when the argument's shape equals the result's (2.3.1);
//   2. the post-dominator tree, built in reverse post-DFS order by a walking LCA (2.3.2);
//   3. one union-find group per node (2.3.3);
//   4. RunFuse phases 0, 1 and 2 (2.3.4), with the max-depth count;
//   5. which groups become primitive functions (2.3.5): the kernels.
//
// Kernel count (what `tvm_plan::kernels()` returns), precisely:
//   * one per group that TVM's FuseMutator wraps into a `Primitive=1` function: a group whose
//     root is an op call (any op, opaque ones such as device_copy and nn.dropout included), or
//     whose root is a tuple projection `t.i` with `t` in the same group;
//   * not: a group rooted at a tuple (a tuple root is never wrapped), a var, a constant, a let,
//     an if, a call of a closure or global (their bodies are counted where they are defined),
//     a projection whose tuple lies in another group, or `annotation.stop_fusion` (dropped by the
//     rewrite, but a boundary: it is an opaque node of the graph);
//   * plus one per existing function marked `Primitive=1` (or carrying `Compiler=...`, external
//     codegen): already fused, it is skipped and not looked into;
//   * `on_device` is transparent: PlanDevices removes it before FuseOps, so it is no node and its
//     input is connected straight to its consumers (its input takes its place when it is a body);
//   * counts are static: a function body is counted once however often it is called. The body
//     of @def, its nested closures, and every global definition called from them (each once; TVM
//     runs FuseOps as a function pass over every function of the module) are counted.
//
// Not modelled: targets with `max_function_args` (opencl, metal: none for the CPU), data-dependent
// dynamic shapes (no registered op is data-dependent), `opt_level == 0`.
//
// Everything is iterative: printed programs are chains of bindings 100k deep.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "fuse/expr/ops.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/plan.hpp"

namespace fuse::relay {

/// One group that TVM turns into a primitive function.
struct tvm_group {
  /// The op calls, tuples and tuple projections of the group, in post-DFS order (scalar constants
  /// fused into the group are left out: they are literals inside the function, not operations).
  std::vector<const expr*> nodes;
  /// The group's root: its post-dominator, the last node, whose value the function returns.
  const expr* root = nullptr;
  /// The root group's pattern: the root's own, or kOutEWiseFusable once an anchor joined.
  op_pattern pattern = op_pattern::opaque;
};

/// TVM's partition of a program.
struct tvm_plan {
  /// The groups that become primitive functions: by definition (@def first), then in the post-DFS
  /// order of their roots (producers first; a call's callee closure before its arguments).
  std::vector<tvm_group> groups;
  /// Functions already marked Primitive=1 (or Compiler=...): one kernel each, not looked into.
  std::vector<const expr*> primitives;
  /// Primitive functions TVM's build would hold: the groups plus the existing primitives.
  std::size_t kernels() const { return groups.size() + primitives.size(); }
};

/// TVM v0.19 FuseOps' partition of @def (a type-checked module), with its nested closures and
/// the globals it calls. `max_depth` is `relay.FuseOps.max_depth` (kMaxFusedOps = 256).
tvm_plan tvm_fuse_ops(const module& m, const std::string& def = "main", int max_depth = 256);

/// `--planner tvm`: fuse's planner told to store the root of every group TVM's FuseOps forms on
/// @def (the program as the planner sees it: calls inlined) and to merge no passes, so the
/// header runs TVM's grouping on fuse's loops; its kernel count is TVM's, give or take what
/// fuse stores on its own (a batch_matmul, a reduction TVM fuses into an elementwise group).
plan_options tvm_planner_options(const module& m, const std::string& def = "main");

}  // namespace fuse::relay
