// Relay graph passes over a module, in place: each is usable on its own, adds the nodes it
// needs to the module's arena and re-runs type inference where the types it leaves matter.
//
//   remove_unused_functions(m)   defs not reachable from @main dropped (TVM RemoveUnusedFunctions)
//   inline_functions(m)          calls of global functions marked Inline=1 inlined (TVM Inline)
//   simplify_inference(m)        batch_norm, dropout, layer_norm rewritten for inference
//   fold_constant(m)             subgraphs of constants evaluated by the interpreter
//   eliminate_dead_code(m)       let bindings whose variable is not used removed
//   inline_lets(m)               let-bound variables read as their values (graph form)
//   if_to_where(m)               if of a 0-d bool over tensor branches as where(c, a, b)
//   flatten_results(m)           @main's nested tuple result as one flat tuple of tensors
//   expand_one_hot(m)            one_hot as where(equal(expand_dims(i), positions), on, off)
//   eliminate_common_subexpr(m)  identical op calls, tuples and projections merged
//   fold_scale_axis(m)           per-channel scales around a dense/matmul moved into its constant weight
//   combine_parallel_dense(m)    denses of one input merged into one dense, its result split
//   batch_matmul_to_dense(m)     a batch_matmul of a weight broadcast over the batch as one dense
//   fold_layer_norm(m)           simplify_inference's unpacked layer norm folded back into nn.layer_norm
//
// A rewrite never edits a node that other nodes point at into something else: it builds the
// replacement and then redirects every pointer to the old node (`substitute`), so a shared
// variable or argument keeps its identity. Every walk is iterative: printed programs are chains
// of 100k bindings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fuse/relay/ir.hpp"

namespace fuse::relay {

namespace pass_detail {

/// Redirects every pointer to a key of `map` to its value (chains followed) in the nodes
/// reachable from the definitions.
void substitute(module& m, const std::unordered_map<expr*, expr*>& map);

/// A call of the op named `op`, located at `at`.
expr* make_call(module& m, const std::string& op, std::vector<expr*> args, location at, relay::attrs a = {});

/// A constant whose bytes are known (not a `meta[...]` printed without its metadata section).
inline bool has_data(const expr* e) { return e->kind == expr_kind::constant && e->data != nullptr; }

/// A constant node holding d, annotated with d's tensor type.
expr* make_constant(module& m, std::shared_ptr<const constant_data> d, location at);
expr* make_constant(module& m, constant_data d, location at);

/// An array attribute of integers.
attr_value int_array(std::vector<std::int64_t> v);

/// TVM's ExpandBiasToMatchAxis for one axis: a 1-d bias along `axis` of a rank-`ndim` tensor
/// gets trailing unit axes so that it broadcasts.
expr* expand_to_axis(module& m, expr* bias, std::int64_t ndim, std::int64_t axis, location at);

/// Global names that the nodes reachable from `root` refer to.
std::unordered_set<std::string> globals_used(expr* root);

/// The value of a subgraph whose leaves are constants with data: the interpreter runs it as the
/// body of a function of no parameters in a scratch module (the rest of the module is not
/// touched). Null when it cannot be evaluated (an op the interpreter does not run, a type
/// error) or is a tuple. FoldConstant, FoldScaleAxis, CombineParallelDense and qnn
/// legalization evaluate through it.
std::shared_ptr<const constant_data> constant_value(expr* root);

}  // namespace pass_detail

// ---- RemoveUnusedFunctions ---------------------------------------------------------------------

/// Drops the definitions that `entry` does not reach through global references. A module
/// without `entry` is left as it is.
void remove_unused_functions(module& m, const std::string& entry = "main");

// ---- Inline ------------------------------------------------------------------------------------

/// Inlines every call of a global function that TVM's Inline would: marked Inline=1, not
/// recursive (directly or through others), and calling only functions that are themselves
/// inlinable. Inlined definitions that nothing refers to any more are removed (never @main).
/// Closures are not inlined (TVM's Inline does not either).
void inline_functions(module& m);

/// Inlines every call of a function into the definitions that make them: closures called where
/// they are written (FuseOps output binds `%0 = fn (..., Primitive=1) {...}` and calls
/// `%0(...)`) and non-recursive globals, whatever their attributes. The fusion planner then sees
/// one function of op calls, and regroups what FuseOps had grouped. Type-checks again when the
/// module was typed and a call was inlined.
void inline_calls(module& m);

// ---- SimplifyInference -------------------------------------------------------------------------

/// TVM's SimplifyInference: `nn.batch_norm(x, gamma, beta, mean, var).0` becomes
/// `x * scale + shift` with scale = 1 / sqrt(var + eps) * gamma and shift = -mean * scale + beta
/// (both expanded along the channel axis), `nn.dropout(x).0` becomes x, and `nn.layer_norm`
/// becomes (x - mean) / sqrt(variance(x, mean) + eps) * gamma + beta, as TVM's
/// LayerNormToInferUnpack writes it. Other projections of a batch_norm keep the call.
/// Type-checks first (the rewrite needs the data's rank and dtype) and after.
void simplify_inference(module& m);

// ---- FoldConstant ------------------------------------------------------------------------------

/// Evaluates, with the reference interpreter, every maximal subgraph of op calls, tuples and
/// projections whose leaves are all constants with data, and replaces its tensor-valued
/// outputs by constants. Left alone: calls of globals and closures, the bodies of Primitive
/// functions, nn.dropout (random in training), device annotations and copies, and whatever the
/// interpreter cannot run (its error keeps the subgraph as it is). Type-checks first and after.
void fold_constant(module& m);

// ---- DeadCodeElimination -----------------------------------------------------------------------

/// Removes `let %x = v; body` where %x is not used (by the live code: a let that only feeds
/// dead lets is dead too). Graph bindings leave no trace, so they are never dead.
void eliminate_dead_code(module& m);

// ---- graph form for the planner ----------------------------------------------------------------

/// Every `let %x = v; body` becomes `body` with %x read as v (TVM's ToGraphNormalForm: Relay's
/// tensor programs are pure, so a let only names a value). The planner then sees the dataflow.
void inline_lets(module& m);

/// `if (c) { a } else { b }` with a 0-d boolean condition and branches of one tensor type
/// becomes `where(c, a, b)`: both branches are computed (they are pure) and the condition picks.
/// An `if` of other types (tuples, functions) is left for the planner to refuse, located.
void if_to_where(module& m);

/// @fn's result as a flat tuple of tensors, depth first (what the interpreter's `flatten` and
/// the generated code's outputs list): nested tuples are opened, and a tuple-valued call (a
/// split returned as it is) is read field by field.
void flatten_results(module& m, const std::string& fn = "main");

/// one_hot(i, on, off, depth, axis, dtype) as the ops fuse fuses: where(equal(expand_dims(i,
/// axis), positions), cast(on), cast(off)), positions a constant 0..depth-1 laid along the new
/// axis. An index outside [0, depth) matches no position: a row of off, as TVM's one_hot.
void expand_one_hot(module& m);

// ---- EliminateCommonSubexpr --------------------------------------------------------------------

/// Merges op calls with the same op, the same arguments (by node, and scalar constants with
/// data by dtype and value, as TVM's IsEqualScalar: `multiply(%x, 16f)` written twice is one
/// call) and equal attributes (the op's defaults filled in), and likewise tuples and
/// projections. nn.dropout is never merged (each call draws its own mask in training).
void eliminate_common_subexpr(module& m);

// ---- FoldScaleAxis -----------------------------------------------------------------------------

/// TVM's FoldScaleAxis (BackwardFoldScaleAxis, ForwardFoldScaleAxis, FoldConstant) for the
/// contractions fuse runs, nn.dense and nn.matmul: a per-channel scale after a contraction
/// (through a bias between them), or before it on its data, is moved into the weight, which is
/// a constant, so the scaled weight folds into a new constant and the multiply disappears: one
/// elementwise op and one read of a scale less per element, and the bias scaled once, not per
/// row. The scale must be a constant with data varying only along the channel axis (the last
/// one: output channels after, input channels before), read only by this multiply, and the
/// contraction (and its bias) must be read only on this path; otherwise nothing changes.
///
/// Only what the pass builds is folded (the scaled weights and biases): the rest of the module
/// is left as it is (run fold_constant for the other constant subgraphs). Folds repeat to a fixed
/// point, so chains of scales all go. nn.conv2d, TVM's main case, is not supported by fuse yet:
/// type checking names it. Type-checks first (unless typed) and after each change.
void fold_scale_axis(module& m);

// ---- CombineParallelDense ----------------------------------------------------------------------

/// TVM's CombineParallelDense (horizontal fusion), fuse's way: nn.dense calls that read the same
/// data node (same weight dtype, same result dtype) become one nn.dense whose weight is their
/// weights concatenated along the output axis (a constant when they all are constants with
/// data; else a `concatenate`, which the planner fuses into the weight operand), followed by a
/// `split` of its last axis at the branch widths, each branch reading its section. Branches may
/// differ in units. TVM stacks equal-width weights into a batch_matmul and splits and squeezes
/// its result: those are copies, where in fuse a split of a contraction's result is a view the
/// consuming kernel reads block by block, computing only the sections it reads (branches whose
/// results run in one pass, as TVM's equal widths do, share one packing of the data's rows).
///
/// When every branch is read only by an nn.bias_add on its last axis whose biases are of one
/// dtype and readable from anywhere (all constants with data, or none a constant), the biases
/// are concatenated too and the split comes after one bias_add. Operands that may be combined:
/// constants with data, parameters of the definition, and op calls, tuples and projections of
/// those (no dense among them, so combining cannot make a cycle); constant weights and the
/// others form separate groups; denses inside nested functions are left alone. Groups smaller
/// than `min_num_branches` (and than 2) are left as they are. Type-checks first (unless typed) and after a change.
void combine_parallel_dense(module& m, int min_num_branches = 2);

/// A batch_matmul whose B is one 2-d weight broadcast over the batch (PyTorch's linear on 3-d
/// data, as TVM imports it: `batch_matmul(x, reshape(broadcast_to(transpose(W), [B, K, N])))`)
/// becomes `nn.dense(x, W)` (x's leading axes are the dense's rows): the same products, the
/// weight read as a dense weight (packed once by the generated model) instead of a broadcast
/// copy per batch, and the dense's blocked epilogues (a layer norm over it in one pass). B may
/// reach the broadcast through reshapes that keep its shape; with transpose_b the weight is
/// [N, K] as written, else it is read through its transpose (the program's own, undone, or a
/// new one). out_dtype is kept; batch_matmuls with transpose_a, of other ranks or whose B varies
/// over the batch are left as they are. Type-checks first (unless typed) and after a change.
void batch_matmul_to_dense(module& m);

/// The inverse of simplify_inference's layer_norm unpacking, for fuse's planner: TVM unpacks
/// nn.layer_norm because FuseOps has no kernel for it (its mean and variance become kernels of
/// their own); fuse runs a layer norm as one row node, over a contraction's blocks where it
/// reads one (dense + bias + residual + layer norm in one pass). Rewrites
/// `add(multiply(divide(subtract(x, mu), sqrt(add(variance(x, mu), eps))), gamma), beta)` with
/// mu = mean(x) and the variance over one axis with keepdims (biased), eps a scalar constant of
/// x's float dtype, gamma and beta 1-d along the axis (as written, or through the expand_dims that
/// unpacking adds before a non-last axis), every inner node read only there (mu by the subtract
/// and the variance), as `nn.layer_norm(x, gamma, beta, axis, epsilon=eps)`: the same formula,
/// computed in one place. Anything else is left as it is. Type-checks first (unless typed) and
/// after a change.
void fold_layer_norm(module& m);

}  // namespace fuse::relay
