// The type relations of the Relay ops: the shape and dtype of a call's result from its arguments'
// types and its attributes (read through op_call, attributes.hpp). Each is the `infer` of its op's
// registry entry (ops.hpp); a relation throws relay::error at the call, naming the op, when the
// arguments do not fit it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuse/expr/ops.hpp"
#include "fuse/relay/attributes.hpp"
#include "fuse/relay/ir.hpp"

namespace fuse::relay::infer {

// ---- helpers the relations share -------------------------------------------------------------

/// A shape as type::str() prints it, for messages: Tensor[(2, 3), float32].
std::string shape_str(const std::vector<std::int64_t>& s);

/// NumPy broadcasting of two shapes (-1, a dynamic extent, matches anything).
std::vector<std::int64_t> broadcast(const op_call& c, const std::vector<std::int64_t>& a,
                                    const std::vector<std::int64_t>& b);

/// Fails with `what` when two extents, both static, differ.
void same_extent(const op_call& c, std::int64_t a, std::int64_t b, const std::string& what);

/// The number of elements of a static shape.
std::int64_t product(const std::vector<std::int64_t>& s);

/// Fails unless argument i is a scalar or 1-d (qnn's scales and zero points).
void scalar_param(const op_call& c, std::size_t i, const char* what);

// ---- elementwise -------------------------------------------------------------------------------

type same(const op_call& c);
type float_unary(const op_call& c);
type cast(const op_call& c);

/// Binary broadcast ops; `result` overrides the dtype (bool for comparisons).
type binary(const op_call& c, std::optional<dtype> result);
type arith(const op_call& c);
type where(const op_call& c);

/// The type relation of an op of fuse's table (fuse/expr/ops.hpp), from its dtype rule: the
/// checks that fuse's builders make at compile time, made here, so that a program that type
/// checks never gives a header that does not compile.
template <class Op>
type elementwise(const op_call& c) {
  using K = ops::rule_kind;
  if constexpr (Op::kind == K::where) {
    return where(c);
  } else {
    const dtype d = c.tensor(0).dt;
    if constexpr (Op::kind == K::numeric)
      if (d.is_bool()) c.fail("needs numeric operands, not bool");
    if constexpr (Op::kind == K::floating)
      if (!d.is_float()) c.fail("needs a floating-point input, not " + d.name());
    if constexpr (Op::kind == K::integer)
      if (!(d.is_int() || d.is_uint())) c.fail("needs integer operands, not " + d.name());
    if constexpr (Op::kind == K::logical)
      if (!d.is_bool()) c.fail("needs bool operands, not " + d.name());
    if constexpr (ops::has_channel_operand<Op>) {
      // Operand 1: one value per channel of `axis` of operand 0 (nn.prelu's alpha).
      const type& x = c.tensor(0);
      const type& ch = c.tensor(Op::channel_operand);
      if (!(ch.dt == d)) c.fail("operands have different dtypes, " + d.name() + " and " + ch.dt.name());
      const std::int64_t ax = c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size()));
      if (ch.shape.size() != 1) c.fail("the channel operand must be 1-D, not " + ch.str());
      const std::int64_t n = x.shape[static_cast<std::size_t>(ax)];
      if (n >= 0 && ch.shape[0] >= 0 && n != ch.shape[0])
        c.fail("the channel operand " + ch.str() + " must have the extent of axis " + std::to_string(ax) + " of " +
               x.str());
      return x;
    }
    if constexpr (Op::kind == K::classify) {
      if (!d.is_float()) c.fail("needs a floating-point input, not " + d.name());
      return type::tensor(c.tensor(0).shape, dtype::boolean());
    }
    if constexpr (Op::arity == 1) return c.tensor(0);
    else return binary(c, Op::kind == K::compare ? std::optional<dtype>(dtype::boolean()) : std::nullopt);
  }
}

type bias_add(const op_call& c);

// ---- contractions ------------------------------------------------------------------------------

/// dense(x [.., K], w [N, K]) -> [.., N]; matmul with transpose flags.
type dense_like(const op_call& c, bool transpose_a, bool transpose_b);
type dense(const op_call& c);
type matmul(const op_call& c);
type batch_matmul(const op_call& c);

// ---- layout --------------------------------------------------------------------------------------

/// reshape with Relay's codes: 0 copy, -1 infer, -2 copy the rest, -3 merge two, -4 split one.
type reshape(const op_call& c);
type transpose(const op_call& c);
type squeeze(const op_call& c);
type expand_dims(const op_call& c);
type split(const op_call& c);
type concatenate(const op_call& c);

/// stack((t0, t1, ...), axis): fields of one shape and dtype, joined along a new axis inserted
/// at `axis` (in [-(rank + 1), rank + 1)), of extent the number of fields.
type stack(const op_call& c);

type strided_slice(const op_call& c);
type take(const op_call& c);

// ---- reductions and broadcasts -------------------------------------------------------------------

/// sum/mean/max/min/prod over `axis` (None: all), keepdims, exclude.
type reduce(const op_call& c);

/// variance(data, mean): the mean of (data - mean)^2 over the reduced axes (unbiased: the sum
/// over N - 1). TVM's VarianceRel checks only that mean has data's rank; here mean must also
/// broadcast against data, which it does in every program TVM writes (keepdims=True means).
type variance(const op_call& c);

/// collapse_sum_like(data, like): data summed down to like's type (leading extra axes and axes
/// where like has extent 1), as the gradient of a broadcast; like must broadcast to data.
type collapse_sum_like(const op_call& c);

/// broadcast_to(data, shape): data broadcast to exactly `shape`.
type broadcast_to(const op_call& c);
type broadcast_to_like(const op_call& c);

/// full(fill_value, shape, dtype): a tensor of `shape` filled with the 0-d fill_value, cast to
/// dtype (absent: the fill value's, as TVM's FullRel).
type full(const op_call& c);

/// one_hot(indices, on_value, off_value, depth, axis, dtype): on_value where the index equals
/// the position along the new axis of extent depth, off_value elsewhere (an index outside
/// [0, depth) gives a row of off_value).
type one_hot(const op_call& c);

// ---- normalizations and the rest -----------------------------------------------------------------

type softmax(const op_call& c);
type layer_norm(const op_call& c);
type batch_norm(const op_call& c);
type dropout(const op_call& c);
type identity(const op_call& c);

// ---- qnn -----------------------------------------------------------------------------------------

type qnn_quantize(const op_call& c);
type qnn_dequantize(const op_call& c);
type qnn_requantize(const op_call& c);
type qnn_dense(const op_call& c);
type qnn_batch_matmul(const op_call& c);
type qnn_binary(const op_call& c);
type qnn_concatenate(const op_call& c);

}  // namespace fuse::relay::infer
