// The frontend's pipeline (see pipeline.hpp): loading a model, binding its weights, and the passes
// every command runs before the planner, listed once in compile_pipeline.
#include "fuse/relay/pipeline.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fuse/relay/parser.hpp"
#include "fuse/relay/passes.hpp"
#include "fuse/relay/tvm_fuse.hpp"
#include "fuse/relay/typecheck.hpp"

namespace fuse::relay {

std::int64_t meta_constant_index(std::string_view name) {
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

binding_report bind_params(module& m, const std::vector<params::entry>& weights, const std::string& source,
                           const std::string& fn) {
  binding_report rep;
  definition* d = m.find(fn);
  if (!d) throw error(source + ": the model has no @" + fn + " to bind weights to");
  std::unordered_map<std::string, expr*> params;
  for (expr* p : d->fn->args) params[p->name] = p;
  std::unordered_map<std::int64_t, std::vector<expr*>> constants;  // meta index -> its nodes without data
  for (expr& e : m.nodes)
    if (e.kind == expr_kind::constant && !e.data && e.meta && e.meta->key == "relay.Constant")
      constants[e.meta->index].push_back(&e);

  const auto matches = [&](const type& want, const constant_data& c, const std::string& what, const params::entry& w) {
    if (!want.is_tensor()) return;
    bool same = want.dt == c.dt && want.shape.size() == c.shape.size();
    for (std::size_t k = 0; same && k < c.shape.size(); ++k) same = want.shape[k] < 0 || want.shape[k] == c.shape[k];
    if (!same)
      throw error(source + ": weight \"" + w.name + "\" is " + type::tensor(c.shape, c.dt).str() + ", but " + what +
                  " is " + want.str());
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

module load_model(const std::string& path, const load_options& options, binding_report* bound) {
  module m = parse_file(path);
  if (!options.weights.empty()) {
    const binding_report r =
        bind_params(m, options.weights, options.weights_source.empty() ? path : options.weights_source);
    if (bound) *bound = r;
  }
  typecheck(m);
  legalize_qnn(m, options.qnn);
  return m;
}

void relay_build_prefix(module& m) {
  remove_unused_functions(m);
  simplify_inference(m);
  eliminate_common_subexpr(m);
  fold_constant(m);
  fold_scale_axis(m);
}

void prepare_for_planning(module& m, bool combine) {
  relay_build_prefix(m);
  inline_calls(m);
  inline_lets(m);
  if_to_where(m);
  flatten_results(m);
  expand_one_hot(m);
  relay_build_prefix(m);
  if (combine) {  // fuse's planner (not TVM's graph): see pipeline.hpp
    batch_matmul_to_dense(m);
    combine_parallel_dense(m);
    fold_layer_norm(m);
  }
  eliminate_dead_code(m);
}

std::string tvm_kernel_count(const module& m) {
  try {
    return std::to_string(tvm_fuse_ops(m).kernels());
  } catch (const error& e) {
    return "n/a: " + e.message();
  }
}

pipeline_result compile_pipeline(module& m, const pipeline_options& options) {
  pipeline_result r;
  relay_build_prefix(m);  // TVM counts what relay.build gives FuseOps
  r.tvm_kernels = tvm_kernel_count(m);
  prepare_for_planning(m, options.planner == planner_kind::fuse);
  if (options.planner == planner_kind::tvm) r.planning = tvm_planner_options(m);
  if (options.planner == planner_kind::op_by_op) r.planning = op_by_op_options(m);
  return r;
}

}  // namespace fuse::relay
