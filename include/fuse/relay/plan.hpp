// The fusion planner: partitions a type-checked function into kernels, each one `fuse::eval` the
// library runs as one loop nest (fuse/cpu/eval.hpp, epilogue.hpp).
//
// A node is *materialized* (it becomes a kernel's output, a tensor in memory) only where the
// library needs it or where recomputing it would cost more than storing it:
//   - the function's results;
//   - a contraction (dense, matmul, batch_matmul) read by more than one consumer, so it is not
//     computed twice; one whose value reaches another contraction's operand (through views,
//     elementwise ops or a split's sections: the reader's kernel would evaluate it whole, once
//     per reading kernel, and BERT's FFN measured slower so); a batch_matmul whose value flows
//     into a row node (that kernel would evaluate it whole);
//   - a row reduction (sum, mean, max, min, prod, softmax, log_softmax, layer_norm): it is the
//     root of its own kernel, its input tree fused as its prologue;
//   - an elementwise or view node read by several consumers whose tree is big (cheaper to store
//     than to recompute), or whose tree grows too deep for one C++ expression.
// Everything else is inlined into its consumer's tree: elementwise ops and views (split,
// strided_slice, reshape, transpose, concatenate, take ...) fuse anywhere, and a dense/matmul
// read once becomes a leaf its consumer's kernel computes block by block (the epilogue).
// Results of one shape that share a contraction or an input, or of which one reads the other,
// are evaluated in the same pass (an LSTM cell's h' and c'; a quantized result and its
// dequantized value).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "fuse/relay/ir.hpp"

namespace fuse::relay {

struct kernel {
  std::vector<const expr*> outputs;  ///< the materialized nodes it writes (one shape)
  std::vector<const expr*> ops;      ///< the op calls it covers, in evaluation order
};

struct plan {
  const expr* fn = nullptr;
  std::vector<kernel> kernels;  ///< in dependency order
  std::unordered_set<const expr*> materialized;
  std::vector<const expr*> results;  ///< the function's result tensors, in output order
};

namespace plan_detail {

/// Whether e calls one of the operators `names`.
inline bool is_call_of(const expr* e, std::initializer_list<std::string_view> names) {
  for (auto n : names)
    if (is_op_call(e, n)) return true;
  return false;
}

}  // namespace plan_detail

/// The executor a plan is for: the CPU's (fuse::eval) or CUDA's (fuse::cuda::eval).
enum class plan_target { cpu, cuda };

/// How to plan. The defaults are fuse's planner; `--planner tvm` stores the roots of TVM's
/// groups and merges nothing, so the header runs TVM's grouping on fuse's loops.
///
/// For CUDA (`target = plan_target::cuda`) a row node (sum, mean, max, min, prod, variance over
/// one axis, or over several with keepdims; softmax, log_softmax, layer_norm along any) is not
/// stored but fused
/// into the tree that reads it (the row kernel computes it per line of the output: `x -
/// mean(x)`, TVM's decomposed layer norm, softmax and its requantize, `x - mean(x, axis=[0])` are
/// one kernel), as long as every op between it and its kernel's root aligns its axes with the
/// output's last ones (elementwise ops with their broadcasts, casts, bias_add, broadcast_to, and
/// other row nodes reading it along axes its rows do not move along; a reshape, where the kernel can
/// iterate inside it: fuse/cuda/row_reshape.hpp), one kernel reads it, the tree holds at most
/// 8 row values (a reduction counts 1, softmax and layer norm 2), and some axis of the output lies
/// outside every row node's other axes (the one the kernel walks last). Any other row node is the
/// root of its own kernel, as on the CPU. A contraction is an error: contractions do not run on
/// CUDA yet.
struct plan_options {
  /// Nodes stored whatever the rules say (each becomes a kernel's output).
  std::unordered_set<const expr*> store;
  /// Results of one shape that share a contraction or an input run as one pass.
  bool merge_siblings = true;
  plan_target target = plan_target::cpu;
};

/// The naive executor's plan options for @name: every op call (and field of a split) is stored,
/// each its own kernel, nothing merged; the yardstick `--planner op-by-op` measures fusion by.
plan_options op_by_op_options(const module& m, const std::string& name = "main");

/// Plans @name of a type-checked module. Throws relay::error for what the emitter cannot run
/// (calls of functions: inline them first).
plan make_plan(const module& m, const std::string& name = "main", const plan_options& options = {});

}  // namespace fuse::relay
