// The reference interpreter: runs a type-checked Relay module op by op, in double precision for
// floating dtypes and exact, wrapping integer arithmetic for integer dtypes. `fuse-relay check`
// compares the generated header against it; it is also an API of its own.
//
// Elementwise ops use the `reference` functions of fuse's op table (fuse/expr/ops.hpp), so the
// interpreter and the library agree on every edge the docs fix (integer division by zero, the
// rounding of ties, saturating casts); everything else (views, contractions, reductions, qnn)
// is written here from Relay's definitions. float32 values keep double precision (as
// fuse::reference does); float16/bfloat16 values are rounded after every op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "fuse/relay/ir.hpp"

namespace fuse::relay {

class op_call;  // a call being typed (fuse/relay/ops.hpp)

/// A runtime value: a tensor (row-major; floating elements in `f`, integer and bool elements
/// in `i`) or a tuple of values.
struct value {
  bool is_tuple = false;
  std::vector<value> fields;
  relay::dtype dt{};
  std::vector<std::int64_t> shape;
  std::vector<double> f;
  std::vector<std::int64_t> i;

  /// A tensor of dtype dt and the given shape, all zeros.
  static value tensor(relay::dtype dt, std::vector<std::int64_t> shape);
  /// A tuple of the given fields.
  static value tuple(std::vector<value> fields);
  std::int64_t count() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
  bool floating() const { return dt.is_float(); }
  double as_double(std::size_t k) const { return floating() ? f[k] : static_cast<double>(i[k]); }
};

namespace interp {

/// Two's-complement wrap of x to the integer dtype d (bool: x != 0).
std::int64_t wrap(std::int64_t x, dtype d);

/// A double held in floating dtype d: float16/bfloat16 rounded; float32 kept in double
/// precision but overflowing where float32 would (or rounded to float32 with round_float32).
double hold(double v, dtype d, bool round_float32 = false);

/// Converts element k of v to dtype `to` (fuse's cast semantics: docs/ops.md).
void convert(const value& v, std::size_t k, value& out, std::size_t o, bool round_float32);

/// Row-major strides of a tensor of the given shape.
std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& shape);

/// Strides of `in` broadcast to `out` (0 on broadcast axes).
std::vector<std::int64_t> broadcast_strides(const std::vector<std::int64_t>& in, const std::vector<std::int64_t>& out);

/// Calls f(output index, input offsets...) over out's shape with inputs broadcast.
template <std::size_t N, class F>
void for_each_broadcast(const std::vector<std::int64_t>& out, const std::vector<std::int64_t>* const (&ins)[N], F&& f) {
  std::vector<std::int64_t> bs[N];
  for (std::size_t a = 0; a < N; ++a) bs[a] = broadcast_strides(*ins[a], out);
  std::int64_t total = 1;
  for (std::int64_t d : out) total *= d;
  std::vector<std::int64_t> idx(out.size(), 0);
  std::size_t off[N] = {};
  for (std::int64_t k = 0; k < total; ++k) {
    f(static_cast<std::size_t>(k), off);
    for (std::size_t d = out.size(); d-- > 0;) {
      for (std::size_t a = 0; a < N; ++a) off[a] += static_cast<std::size_t>(bs[a][d]);
      if (++idx[d] < out[d]) break;
      for (std::size_t a = 0; a < N; ++a) off[a] -= static_cast<std::size_t>(bs[a][d] * out[d]);
      idx[d] = 0;
    }
  }
}

}  // namespace interp

/// Runs definitions of a type-checked module.
class interpreter {
 public:
  explicit interpreter(const module& m) : m_(m) {}

  /// Runs @name on `inputs` (one per parameter, in order) and returns its result. With
  /// `float32_rounding`, every float32 op's result is rounded to float32, as the fused code
  /// rounds it: integers computed from float intermediates (requantization: multiply, round,
  /// clip, cast) then differ from the fused code only where a reordered sum flips a tie, where
  /// double intermediates would flip every tie the float32 product lands on.
  value run(const std::string& name, const std::vector<value>& inputs, bool float32_rounding = false);

  /// The result as a list of tensors (a tuple result flattened, fields in order).
  static std::vector<value> flatten(const value& v);

  /// A tensor value as data of its dtype: floats rounded to their width (nearest even), integers
  /// in two's complement.
  static constant_data to_constant(const value& v);

  static value from_constant(const constant_data& c);

 private:
  static constexpr int max_call_depth = 256;

  value call(const expr& fn, const std::vector<value>& args, int depth);

  /// Evaluates e in env, iteratively over the bindings (printed programs are deep chains).
  value eval(const expr* root, std::unordered_map<const expr*, value>& env, int depth);

  /// How many times each node is read by the calls, tuples and projections under root, so that
  /// a value is freed (moved into its last reader) when nothing reads it any more: a BERT
  /// block's intermediates would otherwise all stay alive (gigabytes in double).
  void count_uses(const expr* root);

  /// The value of a, moved out of env at its last use.
  value consume(const expr* a, std::unordered_map<const expr*, value>& env);

  value compute(const expr& e, std::unordered_map<const expr*, value>& env, int depth);

  // ---- ops ---------------------------------------------------------------------------------------

  double hold(double v, dtype d) const { return interp::hold(v, d, round_float32_); }

  template <class Op>
  value unary(const Op& op, const value& a, dtype out);

  template <class Op>
  value binary(const Op& op, const value& a, const value& b, const type& t);

  /// The elementwise op Op of fuse's table applied to args by its reference.
  template <class Op>
  value elementwise(const op_call& c, const std::vector<value>& args, const type& t);

  value apply_op(const expr& e, const std::vector<value>& args);

  static value where(const std::vector<value>& a, const type& t);

  value bias_add(const op_call& c, const std::vector<value>& a, const type& t);

  /// C[i, j] = sum_k A[i, k] B[k, j] over 2-d views with transposes, leading axes of A kept.
  value matmul(const value& a, const value& b, bool ta, bool tb, const type& t);

  value batch_matmul(const value& a, const value& b, bool ta, bool tb, const type& t);

  /// out[idx] = in[map(idx)] for a view given as a function from output to input offset.
  template <class F>
  static value gather(const value& in, const type& t, F&& input_offset);

  static value transpose(const op_call& c, const value& x, const type& t);

  static value split(const op_call& c, const value& x, const type& t);

  static value concatenate(const op_call& c, const value& tup, const type& t);

  /// stack: the concatenate of the fields, each with a unit axis inserted at `axis` (as the
  /// emitter writes it).
  static value stack(const op_call& c, const value& tup, const type& t);

  static value strided_slice(const op_call& c, const value& x, const type& t);

  static value take(const op_call& c, const value& data, const value& ind, const type& t);

  value reduce(const op_call& c, const std::string& name, const value& x, const type& t);

  /// one_hot: on where the index equals the position along the new axis, off elsewhere.
  value one_hot(const op_call& c, const std::vector<value>& args, const type& t) const;

  /// variance(x, mean): sum((x - mean)^2) over the reduced axes, divided by their element count
  /// (less one when unbiased), as TVM's VarianceCompute.
  value variance(const op_call& c, const std::vector<value>& args, const type& t);

  /// collapse_sum_like: x summed down to the shape t (aligned at the end), over its leading
  /// extra axes and the axes where t has extent 1.
  value collapse_sum(const value& x, const type& t) const;

  /// Applies f(row offsets base, stride, n) over every row along `axis`.
  template <class F>
  static void for_each_row(const std::vector<std::int64_t>& shape, std::size_t axis, F&& f);

  value softmax(const op_call& c, const value& x, bool log);

  value layer_norm(const op_call& c, const std::vector<value>& a);

  value batch_norm(const op_call& c, const std::vector<value>& a, const type& t);

  const module& m_;
  std::unordered_map<const expr*, std::int64_t> uses_;
  bool round_float32_ = false;  ///< see run()
};

}  // namespace fuse::relay
