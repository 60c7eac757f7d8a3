// The frontend's pipeline, one place for every command (fuse-relay compile, check, run), the
// tests and the fuzz target:
//
//   load_model(path, options)     parse, bind the weights (--params), type-check, legalize qnn
//   compile_pipeline(m, options)  what `fuse-relay compile` and `check` run between load_model and
//                                 make_plan/emit_header, listed there alone:
//     relay_build_prefix(m)         the passes TVM's relay.build runs before FuseOps (TVM's count after it)
//     tvm_kernel_count(m)           TVM v0.19 FuseOps' count
//     prepare_for_planning(m)       what the planner needs: the prefix, inlining, graph form, CombineParallelDense
//     tvm_planner_options(m)        for --planner tvm: the plan options of TVM's groups
//
// Weights: TVM frontends leave a model's weights as @main's parameters and give a dict that
// users save with save_param_dict or as .npz (fuse/relay/params.hpp). `bind_params` turns the
// named parameters into constants (folded and packed at compile time, gone from the generated
// function's signature) and gives data to `meta[relay.Constant][i]` constants that `print(mod)`
// printed without their metadata section (entries named `meta[relay.Constant][i]` or
// `meta_relay_Constant_i`, the form a file name can carry).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/params.hpp"
#include "fuse/relay/plan.hpp"
#include "fuse/relay/qnn.hpp"

namespace fuse::relay {

/// The index i of a weights-file name that stands for `meta[relay.Constant][i]` (also spelled
/// `meta_relay_Constant_i`), or -1.
std::int64_t meta_constant_index(std::string_view name);

/// What bind_params did: the names it bound, and the entries no parameter or constant took
/// (TVM ignores those too; a tool should say so).
struct binding_report {
  std::vector<std::string> bound, unused;
};

/// Binds weights to @fn's parameters of the same name and to `meta[relay.Constant][i]`
/// constants that have no data (see the file comment). A weight must have its parameter's or
/// constant's dtype and shape when those are written; errors name `source` and the entry. Call it
/// before type inference (an unannotated constant takes its type from the data).
binding_report bind_params(module& m, const std::vector<params::entry>& weights, const std::string& source,
                           const std::string& fn = "main");

struct load_options {
  qnn_options qnn;
  std::vector<params::entry> weights;  ///< --params: bound before type inference
  std::string weights_source;          ///< the file they came from, for messages
};

/// A model as every command runs it: parsed, its weights bound, type-checked and its qnn ops
/// legalized (TVM legalizes them before any other pass, FuseOps included).
module load_model(const std::string& path, const load_options& options = {}, binding_report* bound = nullptr);

/// What TVM's relay.build runs before FuseOps (opt_level 3, src/relay/backend/utils.cc
/// GetPassPrefix) that changes the graph FuseOps sees and that fuse has: RemoveUnusedFunctions,
/// SimplifyInference (batch_norm, dropout and layer_norm unpacked), EliminateCommonSubexpr,
/// FoldConstant, FoldScaleAxis. (qnn legalization runs in load_model; CombineParallel* and
/// FastMath need opt_level 4.) TVM's count is taken after it.
void relay_build_prefix(module& m);

/// What the planner needs, after relay_build_prefix: one function of op calls (closures, global
/// calls and lets inlined, an `if` over tensors as a where, the result a flat tuple of tensors,
/// one_hot in fused form), the prefix again over what inlining exposed, then sibling denses of
/// one input combined (CombineParallelDense, fuse's split form) and the layer norms that the
/// prefix unpacked folded back into nn.layer_norm (fold_layer_norm: one row node for fuse, where
/// FuseOps makes its mean and variance kernels of their own), neither with `combine = false`, as
/// `--planner tvm` plans TVM's opt_level 3 graph; then dead code removed.
void prepare_for_planning(module& m, bool combine = true);

/// TVM v0.19 FuseOps' kernel count on m, or "n/a: why". Run relay_build_prefix first to count
/// the program as relay.build gives it to FuseOps.
std::string tvm_kernel_count(const module& m);

/// The planners of `--planner`.
enum class planner_kind {
  fuse,      ///< fuse's planner (default plan_options)
  tvm,       ///< TVM v0.19 FuseOps' groups (tvm_planner_options) on TVM's opt_level 3 graph
  op_by_op,  ///< every op call its own kernel (op_by_op_options) on that same graph: the naive executor
};

/// How compile_pipeline prepares @main for the planner.
struct pipeline_options {
  /// The graph of `tvm` and `op_by_op` is TVM's opt_level 3 one: no denses combined.
  planner_kind planner = planner_kind::fuse;
};

/// What compile_pipeline gives its callers.
struct pipeline_result {
  std::string tvm_kernels;  ///< tvm_kernel_count after relay_build_prefix: TVM's count, or "n/a: why"
  plan_options planning;    ///< for make_plan(m, "main", planning) (check_options::planning)
};

/// The passes `fuse-relay compile` and `check` (and the fuzz target) run on a loaded model (see
/// load_model) before make_plan and emit_header, in this one place: relay_build_prefix, TVM's
/// count of what relay.build gives FuseOps, prepare_for_planning (CombineParallelDense only for
/// fuse's planner), then the planner's options for @main.
pipeline_result compile_pipeline(module& m, const pipeline_options& options = {});

}  // namespace fuse::relay
