// The Relay op registry's table and its look-ups (fuse/relay/ops.hpp).
#include "fuse/relay/ops.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fuse/expr/ops.hpp"
#include "fuse/relay/attributes.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/type_relations.hpp"

namespace fuse::relay {

const std::vector<op_def>& op_table() {
  using P = op_pattern;
  using K = op_kernel;
  using namespace attr;
  static const std::vector<op_def> table = [] {
    std::vector<op_def> t;
    // The elementwise ops of fuse's table (fuse/expr/ops.hpp), each from its descriptor.
    [&]<class... Op>(ops::op_list<Op...>) { (add_elementwise<Op>(t), ...); }(ops::relay_elementwise{});
    t.push_back({"copy", P::elemwise, 1, 1, {}, infer::same, K::pass_through});
    for (std::string_view n : {"zeros_like", "ones_like"}) t.push_back({n, P::elemwise, 1, 1, {}, infer::same});
    t.push_back({"cast", P::elemwise, 1, 1, {}, infer::cast});
    t.push_back({"fixed_point_multiply", P::elemwise, 1, 1, {}, infer::same});
    t.push_back({"nn.bias_add", P::broadcast, 2, 2, {{"axis", integer(1)}}, infer::bias_add});
    t.push_back({"expand_dims", P::broadcast, 1, 1, {{"num_newaxis", integer(1)}}, infer::expand_dims});
    t.push_back({"nn.dense",
                 P::out_ewise_fusable,
                 2,
                 2,
                 {{"units", none()}, {"out_dtype", string("")}},
                 infer::dense,
                 K::contraction});
    t.push_back({"nn.matmul",
                 P::out_ewise_fusable,
                 2,
                 2,
                 {{"units", none()},
                  {"out_dtype", string("")},
                  {"transpose_a", boolean(false)},
                  {"transpose_b", boolean(false)}},
                 infer::matmul,
                 K::contraction});
    // BatchMatmulAttrs' C++ defaults are false/false (the Python wrapper passes transpose_b=True,
    // so TVM's text writes it); text from printers before 0.8 meant a x b^T: the parser
    // writes transpose_b=True into such calls (parser.hpp, legacy_batch_matmul).
    t.push_back({"nn.batch_matmul",
                 P::out_ewise_fusable,
                 2,
                 2,
                 {{"out_dtype", string("")}, {"transpose_a", boolean(false)}, {"transpose_b", boolean(false)}},
                 infer::batch_matmul,
                 K::contraction});
    t.push_back({"reshape", P::injective, 1, 1, {{"allowzero", integer(0)}}, infer::reshape});
    t.push_back({"transpose", P::injective, 1, 1, {{"axes", none()}}, infer::transpose});
    t.push_back({"squeeze", P::injective, 1, 1, {{"axis", none()}}, infer::squeeze});
    t.push_back({"split", P::injective, 1, 1, {{"axis", integer(0)}}, infer::split});
    t.push_back({"concatenate", P::injective, 1, 1, {{"axis", integer(0)}}, infer::concatenate});
    t.push_back({"stack", P::injective, 1, 1, {{"axis", integer(0)}}, infer::stack});
    t.push_back({"strided_slice",
                 P::injective,
                 1,
                 1,
                 {{"strides", none()}, {"axes", none()}, {"slice_mode", string("end")}},
                 infer::strided_slice});
    t.push_back({"take",
                 P::injective,
                 2,
                 2,
                 {{"axis", none()}, {"batch_dims", integer(0)}, {"mode", string("clip")}},
                 infer::take});
    for (std::string_view n : {"sum", "mean", "max", "min", "prod"})
      t.push_back({n,
                   P::comm_reduce,
                   1,
                   1,
                   {{"axis", none()}, {"keepdims", boolean(false)}, {"exclude", boolean(false)}},
                   infer::reduce,
                   K::row_kernel});
    t.push_back(
        {"variance",
         P::comm_reduce,
         2,
         2,
         {{"axis", none()}, {"keepdims", boolean(false)}, {"exclude", boolean(false)}, {"unbiased", boolean(false)}},
         infer::variance,
         K::row_kernel});
    t.push_back({"collapse_sum_like", P::comm_reduce, 2, 2, {}, infer::collapse_sum_like, K::row_kernel});
    t.push_back({"broadcast_to", P::broadcast, 1, 1, {{"dtype", string("")}}, infer::broadcast_to});
    t.push_back({"full", P::elemwise, 1, 1, {{"dtype", string("")}}, infer::full});
    t.push_back({"one_hot",
                 P::out_ewise_fusable,
                 3,
                 3,
                 {{"depth", integer(1)}, {"axis", integer(-1)}, {"dtype", string("")}},
                 infer::one_hot});
    t.push_back({"broadcast_to_like", P::broadcast, 2, 2, {}, infer::broadcast_to_like});
    t.push_back({"nn.softmax", P::out_ewise_fusable, 1, 1, {{"axis", integer(-1)}}, infer::softmax, K::row_kernel});
    t.push_back({"nn.log_softmax", P::out_ewise_fusable, 1, 1, {{"axis", integer(-1)}}, infer::softmax, K::row_kernel});
    t.push_back({"nn.layer_norm",
                 P::none,
                 3,
                 3,
                 {{"axis", integer(-1)}, {"epsilon", real(1e-5)}, {"center", boolean(true)}, {"scale", boolean(true)}},
                 infer::layer_norm,
                 K::row_kernel});
    t.push_back({"nn.batch_norm",
                 P::out_ewise_fusable,
                 5,
                 5,
                 {{"axis", integer(1)}, {"epsilon", real(1e-5)}, {"center", boolean(true)}, {"scale", boolean(true)}},
                 infer::batch_norm});
    t.push_back({"nn.dropout", P::opaque, 1, 1, {{"rate", real(0.5)}}, infer::dropout});
    t.push_back({"annotation.stop_fusion", P::opaque, 1, 1, {}, infer::identity, K::pass_through});
    t.push_back({"on_device", P::opaque, 1, 1, {}, infer::identity, K::pass_through});
    t.push_back({"device_copy", P::opaque, 1, 1, {}, infer::identity, K::pass_through});
    t.push_back(
        {"qnn.quantize", P::none, 3, 3, {{"axis", integer(-1)}, {"out_dtype", string("int8")}}, infer::qnn_quantize});
    t.push_back({"qnn.dequantize",
                 P::none,
                 3,
                 3,
                 {{"axis", integer(-1)}, {"out_dtype", string("float32")}},
                 infer::qnn_dequantize});
    t.push_back({"qnn.requantize",
                 P::none,
                 5,
                 5,
                 {{"axis", integer(-1)},
                  {"rounding", string("None")},
                  {"compute_dtype", string("None")},
                  {"out_dtype", string("int8")}},
                 infer::qnn_requantize});
    t.push_back({"qnn.dense",
                 P::out_ewise_fusable,
                 6,
                 6,
                 {{"units", none()}, {"out_dtype", string("int32")}},
                 infer::qnn_dense});
    t.push_back({"qnn.batch_matmul",
                 P::none,
                 6,
                 6,
                 {{"out_dtype", string("int32")}, {"transpose_a", boolean(false)}, {"transpose_b", boolean(false)}},
                 infer::qnn_batch_matmul});
    t.push_back(
        {"qnn.add", P::broadcast, 8, 8, {{"lhs_axis", integer(-1)}, {"rhs_axis", integer(-1)}}, infer::qnn_binary});
    t.push_back(
        {"qnn.mul", P::broadcast, 8, 8, {{"lhs_axis", integer(-1)}, {"rhs_axis", integer(-1)}}, infer::qnn_binary});
    t.push_back({"qnn.concatenate", P::none, 5, 5, {{"axis", integer(0)}}, infer::qnn_concatenate});
    return t;
  }();
  return table;
}

const op_def* find_op(std::string_view name) {
  // An index by name: the planner asks for every node of programs of 10,000 ops.
  static const std::unordered_map<std::string_view, const op_def*> index = [] {
    std::unordered_map<std::string_view, const op_def*> m;
    for (const op_def& d : op_table()) m.emplace(d.name, &d);
    return m;
  }();
  const auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

op_kernel kernel_of(const expr* e) {
  if (e->kind != expr_kind::call || !e->callee || e->callee->kind != expr_kind::op) return op_kernel::loop;
  const op_def* d = find_op(e->callee->name);
  return d ? d->kernel : op_kernel::loop;
}

std::string supported_ops() {
  std::vector<std::string_view> names;
  for (const op_def& d : op_table()) names.push_back(d.name);
  std::sort(names.begin(), names.end());
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s;
}

}  // namespace fuse::relay
