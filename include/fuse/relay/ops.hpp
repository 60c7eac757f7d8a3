// The Relay op registry: every op the frontend knows, with its TVM fusion pattern (v0.19,
// for `--planner tvm`), its arity, the defaults of the attributes printers leave out (they print
// only non-default attributes), and its type relation (shape and dtype of the result from those
// of the arguments; type_relations.hpp).
//
// An op missing here is unsupported: the error names it and lists what is supported.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "fuse/expr/ops.hpp"
#include "fuse/relay/attributes.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/type_relations.hpp"

namespace fuse::relay {

/// TVM's OpPatternKind (fuse/expr/ops.hpp); `none` for ops TVM lowers before FuseOps (qnn.*,
/// nn.layer_norm), which the TVM planner mode sees only after legalization.
using fuse::op_pattern;

/// How fuse's executor runs an op: the planner's classes come from here, not from lists of its own.
enum class op_kernel {
  loop,          ///< fused into the loop of a pass (elementwise, broadcast, views, casts)
  contraction,   ///< dense, matmul, batch_matmul: a GEMM whose epilogue (and prologue) may fuse
  row_kernel,    ///< reductions, softmax, layer_norm: a kernel of their own over rows
  pass_through,  ///< annotations and copies: their input as it is, no loop of their own
};

/// One registered op.
struct op_def {
  std::string_view name;
  op_pattern pattern;
  int min_args, max_args;
  /// Attribute defaults, written as Relay attribute text would be ("axis=-1"); read through
  /// op_call's accessors.
  std::vector<std::pair<std::string_view, attr_value>> defaults;
  type (*infer)(const op_call&);
  op_kernel kernel = op_kernel::loop;
};

// ---- the table -------------------------------------------------------------------------------------

/// The registry's entry of an op of fuse's table: its Relay name, pattern and arity, the
/// defaults of its attributes, and the type relation of its dtype rule.
template <class Op>
void add_elementwise(std::vector<op_def>& table) {
  if constexpr (ops::in_relay<Op>) {
    std::vector<std::pair<std::string_view, attr_value>> defaults;
    if constexpr (ops::has_attributes<Op>) {
      Op op{};
      Op::attributes(op, [&](ops::attribute a, double& v) {
        if (a.has_default)
          defaults.emplace_back(a.name, a.integer ? attr::integer(static_cast<std::int64_t>(v)) : attr::real(v));
      });
    }
    table.push_back({Op::name, Op::pattern, Op::arity, Op::arity, std::move(defaults), infer::elementwise<Op>});
  }
}

namespace detail {
template <class Op, class F>
bool call_if_named(std::string_view name, F& f) {
  if constexpr (!ops::in_relay<Op>) {
    return false;
  } else {
    if (name != Op::name) return false;
    f(std::type_identity<Op>{});
    return true;
  }
}
}  // namespace detail

/// f(std::type_identity<Op>{}) for the op of fuse's table (fuse/expr/ops.hpp) that Relay calls
/// `name`; false, and no call, when there is none. The interpreter, the emitter and check find
/// an elementwise op's descriptor this way.
template <class F>
bool with_elementwise_op(std::string_view name, F&& f) {
  return [&]<class... Op>(ops::op_list<Op...>) {
    return (detail::call_if_named<Op>(name, f) || ...);
  }(ops::relay_elementwise{});
}

/// Every op the frontend supports, by Relay name.
const std::vector<op_def>& op_table();

/// The op named `name`, or null when it is not supported.
const op_def* find_op(std::string_view name);

/// How fuse runs the op that call expression e calls (loop for anything that is not an op call).
op_kernel kernel_of(const expr* e);

/// "add, cast, clip, ..." (sorted), for the unsupported-op error.
std::string supported_ops();

}  // namespace fuse::relay
