// The frontend's pipeline, one place for every command (fuse-relay compile, check, run), the
// tests and the fuzz target:
//
//   load_model(path, options)    parse, bind the weights (--params), type-check, legalize qnn
//   relay_build_prefix(m)        the passes TVM's relay.build runs before FuseOps (TVM's count after it)
//   prepare_for_planning(m)      what the planner needs: the prefix, inlining, graph form, CombineParallelDense
//   tvm_kernel_count(m)          TVM v0.19 FuseOps' count
//
// Weights: TVM frontends leave a model's weights as @main's parameters and give a dict that
// users save with save_param_dict or as .npz (fuse/relay/params.hpp). `bind_params` turns the
// named parameters into constants (folded and packed at compile time, gone from the generated
// function's signature) and gives data to `meta[relay.Constant][i]` constants that `print(mod)`
// printed without their metadata section (entries named `meta[relay.Constant][i]` or
// `meta_relay_Constant_i`, the form a file name can carry).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/params.hpp"
#include "fuse/relay/parser.hpp"
#include "fuse/relay/passes.hpp"
#include "fuse/relay/qnn.hpp"
#include "fuse/relay/tvm_fuse.hpp"
#include "fuse/relay/typecheck.hpp"

namespace fuse::relay {

/// The index i of a weights-file name that stands for `meta[relay.Constant][i]` (also spelled
/// `meta_relay_Constant_i`), or -1.
inline std::int64_t meta_constant_index(std::string_view name) {
  std::string_view digits;
  for (std::string_view prefix : {"meta[relay.Constant][", "meta_relay_Constant_"})
    if (name.starts_with(prefix)) digits = name.substr(prefix.size());
  if (name.starts_with("meta[") && digits.ends_with("]")) digits.remove_suffix(1);
  if (digits.empty() || digits.size() > 9) return -1;
  std::int64_t i = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    i = i * 10 + (c - '0');
  }
  return i;
}

/// What bind_params did: the names it bound, and the entries no parameter or constant took
/// (TVM ignores those too; a tool should say so).
struct binding_report {
  std::vector<std::string> bound, unused;
};

/// Binds weights to @fn's parameters of the same name and to `meta[relay.Constant][i]`
/// constants that have no data (see the file comment). A weight must have its parameter's or
/// constant's dtype and shape when those are written; errors name `source` and the entry. Call it
/// before type inference (an unannotated constant takes its type from the data).
inline binding_report bind_params(module& m, const std::vector<params::entry>& weights, const std::string& source,
                                  const std::string& fn = "main") {
  binding_report rep;
  definition* d = m.find(fn);
  if (!d) throw error(source + ": the model has no @" + fn + " to bind weights to");
  std::unordered_map<std::string, expr*> params;
  for (expr* p : d->fn->args) params[p->name] = p;
  std::unordered_map<std::int64_t, std::vector<expr*>> constants;  // meta index -> its nodes without data
  for (expr& e : m.nodes)
    if (e.kind == expr_kind::constant && !e.data && e.meta && e.meta->key == "relay.Constant") constants[e.meta->index].push_back(&e);

  const auto matches = [&](const type& want, const constant_data& c, const std::string& what, const params::entry& w) {
    if (!want.is_tensor()) return;
    bool same = want.dt == c.dt && want.shape.size() == c.shape.size();
    for (std::size_t k = 0; same && k < c.shape.size(); ++k) same = want.shape[k] < 0 || want.shape[k] == c.shape[k];
    if (!same)
      throw error(source + ": weight \"" + w.name + "\" is " + type::tensor(c.shape, c.dt).str() + ", but " + what + " is " + want.str());
  };
  std::unordered_map<expr*, expr*> replace;
  std::vector<expr*> removed;
  for (const params::entry& w : weights) {
    auto data = std::make_shared<const constant_data>(w.data);
    if (auto it = params.find(w.name); it != params.end()) {
      expr* p = it->second;
      matches(p->annotated, *data, "parameter %" + p->name, w);
      expr* c = pass_detail::make_constant(m, data, p->at);
      c->span = p->name;  // the weight's name stays visible in the generated header
      replace[p] = c;
      removed.push_back(p);
      rep.bound.push_back(w.name);
      continue;
    }
    const std::int64_t i = meta_constant_index(w.name);
    if (auto it = constants.find(i); i >= 0 && it != constants.end()) {
      for (expr* c : it->second) {
        matches(c->annotated, *data, "meta[relay.Constant][" + std::to_string(i) + "]", w);
        c->data = data;
        if (!c->annotated.known()) c->annotated = type::tensor(data->shape, data->dt);
      }
      rep.bound.push_back(w.name);
      continue;
    }
    rep.unused.push_back(w.name);
  }
  if (removed.empty()) return rep;
  std::vector<expr*> kept;
  for (expr* p : d->fn->args)
    if (std::find(removed.begin(), removed.end(), p) == removed.end()) kept.push_back(p);
  d->fn->args = std::move(kept);
  d->fn->annotated = type{};  // the function's type loses the bound parameters
  pass_detail::substitute(m, replace);
  return rep;
}

struct load_options {
  qnn_options qnn;
  std::vector<params::entry> weights;  ///< --params: bound before type inference
  std::string weights_source;          ///< the file they came from, for messages
};

/// A model as every command runs it: parsed, its weights bound, type-checked and its qnn ops
/// legalized (TVM legalizes them before any other pass, FuseOps included).
inline module load_model(const std::string& path, const load_options& options = {}, binding_report* bound = nullptr) {
  module m = parse_file(path);
  if (!options.weights.empty()) {
    const binding_report r = bind_params(m, options.weights, options.weights_source.empty() ? path : options.weights_source);
    if (bound) *bound = r;
  }
  typecheck(m);
  legalize_qnn(m, options.qnn);
  return m;
}

/// What TVM's relay.build runs before FuseOps (opt_level 3, src/relay/backend/utils.cc
/// GetPassPrefix) that changes the graph FuseOps sees and that fuse has: RemoveUnusedFunctions,
/// SimplifyInference (batch_norm, dropout and layer_norm unpacked), EliminateCommonSubexpr,
/// FoldConstant, FoldScaleAxis. (qnn legalization runs in load_model; CombineParallel* and
/// FastMath need opt_level 4.) TVM's count is taken after it.
inline void relay_build_prefix(module& m) {
  remove_unused_functions(m);
  simplify_inference(m);
  eliminate_common_subexpr(m);
  fold_constant(m);
  fold_scale_axis(m);
}

/// What the planner needs, after relay_build_prefix: one function of op calls (closures, global
/// calls and lets inlined, an `if` over tensors as a where, the result a flat tuple of tensors,
/// one_hot in fused form), the prefix again over what inlining exposed, then sibling denses of
/// one input combined (CombineParallelDense, fuse's split form; not with `combine = false`, as
/// `--planner tvm` plans TVM's opt_level 3 graph) and dead code removed.
inline void prepare_for_planning(module& m, bool combine = true) {
  relay_build_prefix(m);
  inline_calls(m);
  inline_lets(m);
  if_to_where(m);
  flatten_results(m);
  expand_one_hot(m);
  relay_build_prefix(m);
  if (combine) combine_parallel_dense(m);
  eliminate_dead_code(m);
}

/// TVM v0.19 FuseOps' kernel count on m, or "n/a: why". Run relay_build_prefix first to count
/// the program as relay.build gives it to FuseOps.
inline std::string tvm_kernel_count(const module& m) {
  try {
    return std::to_string(tvm_fuse_ops(m).kernels());
  } catch (const error& e) {
    return "n/a: " + e.message();
  }
}

}  // namespace fuse::relay
