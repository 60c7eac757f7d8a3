// QNN legalization: `legalize_qnn(m)` rewrites every qnn op of the registry into primitive
// Relay ops that the interpreter, the planner and the emitter run. The rewrite is TVM v0.19's
// QNN canonicalization (src/relay/qnn/op/*.cc, utils.cc, and the TIR lowering of
// fixed_point_multiply in src/target/intrin_rule.cc), op for op where it matters to the
// result. A quantized value q with scale s and zero point z stands for the real s * (q - z).
//
// qnn.quantize(x, s, z, axis, out_dtype)
//     cast(clip(round(x / s) + float32(z), qmin, qmax), out_dtype)
//   in float32; `round` rounds halves away from zero (TVM's llvm.round). A 1-d s or z is laid
//   along `axis` (per channel). s and z may be any expressions.
// qnn.dequantize(q, s, z, axis, out_dtype)
//     float32(int32(q) - z) * s, then cast to out_dtype when it is float16
// qnn.requantize(q, s_in, z_in, s_out, z_out, axis, rounding, compute_dtype, out_dtype)
//     q' = z_out + round(m * (q - z_in)),  m = s_in / s_out (per channel when s_in is 1-d)
//   then clip to out_dtype (not for int32) and cast. s_in and s_out must be constants: m is
//   computed here, in double from the float32 scales, as TVM does. Two computations:
//   - compute_dtype "int64", fixed point: m = M * 2^(e - 31) with M = round(frexp(m).sig * 2^31)
//     (a sig that rounds up to 2^31 becomes 2^30 with e + 1). With x = int32(q) - z_in (int32
//     arithmetic), p = int64(x) * (M << max(e, 0)) and t = 31 + max(-e, 0):
//       UPWARD    y = floor((p + 2^(t-1)) / 2^t)                  halves towards +infinity
//       TONEAREST y = floor((p + 2^(t-1) - [p < 0]) / 2^t)        halves away from zero
//     then int32(y) + z_out in int32. The floor is TVM's arithmetic right_shift by t (a wrapped
//     product shifts as TVM's does). Per tensor with UPWARD and M = 2^30 (m a power of two) TVM's
//     fixed_point_multiply works in int32: x * 2^(e-1), or (x + 2^(-e)) >> (1 - e) in int32
//     arithmetic; so does this pass.
//   - compute_dtype "float32" / "float64": t = (float(q) - float(z_in)) * float(m)
//     + float(z_out), then UPWARD floor(t + 0.5) or TONEAREST round(t), cast to int32. This is
//     TVM's code for a target with SSE4.1; its other branch computes the same values but for
//     ties that float rounding creates above 2^23.
//   "None" takes the option given to the pass: TVM's RequantizeConfig defaults are rounding
//   UPWARD, and compute_dtype float32 for an llvm target whose -mcpu has SSE4.1, else int64 (a
//   bare "llvm" target is -mcpu=generic: int64). qnn_options defaults to UPWARD/int64.
// qnn.dense(x, w, z_x, z_w, s_x, s_w, units, out_dtype=int32)
//     sum_k (x - z_x)(w - z_w) = dense(x, w) - z_w * sum_k x - z_x * sum_k w + z_x z_w K
//   in int32 (wrapping), terms with a constant zero point of 0 left out; z_w may be per output
//   channel ([N]). x is [.., K] (TVM: 2-d).
// qnn.batch_matmul(x, y, z_x, z_y, s_x, s_y, transpose_a, transpose_b, out_dtype=int32)
//     the same four terms over each batch; scalar zero points (TVM: also only
//     transpose_a=false, transpose_b=true; the other layouts are the same formula here).
// qnn.add(a, b, s_a, z_a, s_b, z_b, s_c, z_c, lhs_axis, rhs_axis)
//     a' + b' - z_c, clipped and cast to the inputs' dtype, where a' = requantize(a -> s_c, z_c)
//     to int32 (or int32(a) when s_a, z_a equal s_c, z_c as constants).
// qnn.mul(a, b, ...)
//     requantize((int32(a) - z_a) * (int32(b) - z_b), scale float32(s_a * s_b), zero point 0
//     -> s_c, z_c, the inputs' dtype); per channel (1-d scales) along lhs_axis, which must equal
//     rhs_axis.
// qnn.concatenate((x_i...), (s_i...), (z_i...), s, z, axis)
//     concatenate(requantize(x_i -> s, z) or x_i when s_i, z_i equal s, z as constants).
// The requantizations inside add, mul and concatenate take the pass's rounding and
// compute_dtype (TVM: the RequantizeConfig), as TVM's do.
// fixed_point_multiply(x, multiplier=M, shift=s) (an op TVM's own canonicalization may leave)
//     the int64 computation above with that M and e = s, rounding UPWARD; x int32, or int64
//     (relay.quantize's realize casts to int64 first): the int32 result widened back to int64.
//
// Constants: a zero point or scale that is a constant expression (`divide(1f, 3f)`) counts as
// its value. A call whose operands are all constants with data is evaluated here by the
// interpreter (weight sums of a constant qnn.dense weight become constants). Where a value is
// needed and unknown (a variable, or a meta constant without a metadata section) the error is
// located at the call and says which argument. The result is type-checked.
#pragma once

#include <string>

#include "fuse/relay/ir.hpp"

namespace fuse::relay {

/// What qnn.requantize's "None" means (TVM's RequantizeConfig). TVM's defaults: rounding
/// "UPWARD"; compute_dtype "float32" on an llvm target with SSE4.1 in its -mcpu, else "int64".
struct qnn_options {
  std::string rounding = "UPWARD";      ///< "UPWARD" or "TONEAREST"
  std::string compute_dtype = "int64";  ///< "int64", "float32" or "float64"
};

/// Rewrites every qnn.* and fixed_point_multiply call of m into primitive ops (see the file
/// comment); type-checks before and after. Throws relay::error, located at the call, for what cannot be legalized.
void legalize_qnn(module& m, const qnn_options& options = {});

}  // namespace fuse::relay
