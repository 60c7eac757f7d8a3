// QNN legalization (fuse/relay/qnn.hpp).
#include "fuse/relay/qnn.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fuse/expr/ops.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/ops.hpp"
#include "fuse/relay/passes.hpp"
#include "fuse/relay/typecheck.hpp"

namespace fuse::relay {

namespace qnn_detail {

/// TVM's GetFixedPointMultiplierShift: m = M * 2^(e - 31), M an int32 significand.
struct fixed_point {
  std::int64_t significand = 0;
  int exponent = 0;
};

namespace {

fixed_point fixed_point_of(double m) {
  if (m == 0.0) return {};
  int e = 0;
  const double sig = std::frexp(m, &e);
  auto q = static_cast<std::int64_t>(std::round(sig * 2147483648.0));
  if (q == (std::int64_t{1} << 31)) {
    q /= 2;
    ++e;
  }
  return {q, e};
}

}  // namespace

/// Lowers one qnn op call at a time into primitive ops built in the module (legalize_qnn's
/// worker; see the file comment for each op's rewrite).
class legalizer {
 public:
  legalizer(module& m, qnn_options opt) : m_(m), opt_(std::move(opt)) {}

  expr* lower(expr* e);

 private:
  // ---- errors and attributes ------------------------------------------------------------------

  [[noreturn]] void fail(const std::string& message) const { throw m_.error_at(at_, op_ + ": " + message); }

  op_call attrs_of(const expr* e) const;

  std::string resolve(const std::string& written, const std::string& option, const char* what) const;

  // ---- building ----------------------------------------------------------------------------------

  /// Sets e's type from its arguments' (the registry's relation for an op call).
  expr* typed(expr* e);

  /// An op call; evaluated into a constant when all its operands are constants with data.
  expr* call(const std::string& op, std::vector<expr*> args, relay::attrs a = {});
  /// A new op call typed, and evaluated into a constant when all its operands have data.
  expr* folded(expr* c);

  expr* constant(constant_data d);

  /// A constant of dtype dt and the given shape holding v: integers exactly (int64 multipliers
  /// do not fit a double), reals rounded once to dt.
  template <class T>
  expr* values(dtype dt, const std::vector<T>& v, std::vector<std::int64_t> shape);
  expr* ints(dtype dt, const std::vector<std::int64_t>& v, std::vector<std::int64_t> shape);
  expr* reals(dtype dt, const std::vector<double>& v, std::vector<std::int64_t> shape);
  expr* scalar_int(dtype dt, std::int64_t v);
  expr* scalar_real(dtype dt, double v);

  static relay::attrs dtype_attr(dtype d);
  expr* cast(expr* e, dtype d);
  expr* clip(expr* e, double lo, double hi);
  /// clip to d's range, then cast (TVM's ConvertDtype).
  expr* saturate(expr* e, dtype d);
  expr* sum(expr* e, std::int64_t axis, bool keepdims);
  expr* reshape(expr* e, std::vector<std::int64_t> shape);
  /// A scalar or 1-d parameter laid along `axis` of a rank-`rank` tensor (TVM's
  /// ExpandBiasToMatchAxis); a 1-element or 0-d one broadcasts as it is.
  expr* along(expr* p, std::int64_t rank, std::int64_t axis);

  /// a >> t (arithmetic: floor(a / 2^t)) for an integer a and constant amounts t, one per
  /// channel along `axis` or one for all (TVM's right shift).
  expr* shift_right(expr* a, const std::vector<std::int64_t>& t, const std::vector<std::int64_t>& shape,
                    std::int64_t rank, std::int64_t axis);

  // ---- constants ---------------------------------------------------------------------------------

  /// The value of e when it is a constant with data or an expression of such constants.
  std::shared_ptr<const constant_data> value_of(expr* e) const;

  /// TVM's IsEqualScalar: both constants of the same dtype, shape and value.
  bool same_constant(expr* a, expr* b) const;
  bool is_zero(expr* e) const;

  /// The float32 values of a scale that must be known (to compute multipliers here).
  std::vector<double> scale_values(expr* e, const std::string& what) const;

  /// Checks a scale (float32) or zero point (int32) argument: a scalar, or 1-d of 1 element or
  /// of the extent of `axis`.
  void check_param(const expr* p, bool scale, const std::string& what, const type* data = nullptr,
                   std::int64_t axis = 0) const;

  static std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank) {
    return axis < 0 ? (rank > 0 ? rank + axis : 0) : axis;
  }
  void check_axis(std::int64_t axis, std::int64_t rank) const;
  static bool is_qtype(dtype d) { return (d.is_int() || d.is_uint()) && d.bits <= 32 && d.lanes == 1 && !d.is_bool(); }

  // ---- requantize ----------------------------------------------------------------------------------

  /// TVM's RequantizeLower: x (integer) from (in_scale, in_zp) to (out_scale, out_zp), out_dt.
  expr* requantize(expr* x, expr* in_scale, expr* in_zp, expr* out_scale, expr* out_zp, std::int64_t written_axis,
                   dtype out_dt, const std::string& rounding, const std::string& compute,
                   const std::string& in = "input");

  /// x (int32) times the multipliers ms in fixed point (see the file comment), int32 result.
  expr* fixed_point_multiply(expr* x, const std::vector<double>& ms, bool per_tensor, const std::string& rounding,
                             std::int64_t rank, std::int64_t axis);

  /// TVM's q_multiply_shift in int64 (the TIR lowering): x << max(e, 0), times M, plus the
  /// rounder, >> 31 + max(-e, 0); one (M, e) for all or one per channel along `axis`.
  expr* q_multiply_shift(expr* x, const std::vector<fixed_point>& fps, bool per_tensor, const std::string& rounding,
                         std::int64_t rank, std::int64_t axis);

  /// fixed_point_multiply(x, multiplier=M, shift=s): TVM's op form of the same computation
  /// (topi.fixed_point_multiply: q_multiply_shift(x, M, 31, s), rounding upward).
  expr* fixed_point_multiply_call(expr* e);

  expr* requantize_or_upcast(expr* x, expr* s, expr* z, expr* out_s, expr* out_z, std::int64_t axis,
                             const std::string& side);

  // ---- the ops ---------------------------------------------------------------------------------------

  expr* requantize_call(expr* e);

  /// quantize's and dequantize's scale (args[1]) and zero point (args[2]) checked against the
  /// data (args[0]); returns their axis, normalized (checked when either is per channel).
  std::int64_t scale_and_zero_point_axis(const expr* e, const op_call& c) const;

  expr* quantize(expr* e);

  expr* dequantize(expr* e);

  void check_contraction_operands(const expr* e) const;

  /// (t1 - t2) + (t4 - t3), the terms left out where a constant zero point is 0 (TVM's order).
  expr* combine(expr* t1, expr* t2, expr* t3, expr* t4, bool zx, bool zy);

  expr* dense(expr* e);

  expr* batch_matmul(expr* e);

  void check_binary(const expr* e, std::int64_t& lhs_axis, std::int64_t& rhs_axis);

  expr* add(expr* e);

  expr* mul(expr* e);

  expr* concatenate(expr* e);

  module& m_;
  qnn_options opt_;
  location at_;
  std::string op_;
};

expr* legalizer::lower(expr* e) {
  at_ = e->at;
  op_ = e->callee->name;
  if (op_ == "qnn.quantize") return quantize(e);
  if (op_ == "qnn.dequantize") return dequantize(e);
  if (op_ == "qnn.requantize") return requantize_call(e);
  if (op_ == "qnn.dense") return dense(e);
  if (op_ == "qnn.batch_matmul") return batch_matmul(e);
  if (op_ == "qnn.add") return add(e);
  if (op_ == "qnn.mul") return mul(e);
  if (op_ == "qnn.concatenate") return concatenate(e);
  if (op_ == "fixed_point_multiply") return fixed_point_multiply_call(e);
  fail("no legalization for this op");
}

op_call legalizer::attrs_of(const expr* e) const {
  std::vector<type> t;
  for (const expr* a : e->args) t.push_back(a->checked);
  return op_call(m_, *e, *find_op(e->callee->name), std::move(t));
}

std::string legalizer::resolve(const std::string& written, const std::string& option, const char* what) const {
  const std::string v = written.empty() || written == "None" ? option : written;
  if (std::string(what) == "rounding" && v != "UPWARD" && v != "TONEAREST")
    fail("rounding \"" + v + "\" is not supported: UPWARD or TONEAREST");
  if (std::string(what) == "compute_dtype" && v != "int64" && v != "float32" && v != "float64")
    fail("compute_dtype \"" + v + "\" is not supported: int64, float32 or float64");
  return v;
}

expr* legalizer::typed(expr* e) {
  switch (e->kind) {
    case expr_kind::constant: e->checked = type::tensor(e->data->shape, e->data->dt); break;
    case expr_kind::tuple: {
      std::vector<type> f;
      for (const expr* a : e->args) f.push_back(a->checked);
      e->checked = type::tuple(std::move(f));
      break;
    }
    case expr_kind::tuple_get: e->checked = e->args[0]->checked.fields.at(static_cast<std::size_t>(e->index)); break;
    case expr_kind::call: {
      const op_def* d = find_op(e->callee->name);
      const auto n = static_cast<int>(e->args.size());
      if (!d || n < d->min_args || n > d->max_args) fail("internal: bad call of " + e->callee->name);
      std::vector<type> t;
      for (const expr* a : e->args) t.push_back(a->checked);
      e->checked = d->infer(op_call(m_, *e, *d, std::move(t)));
      break;
    }
    default: fail("internal: cannot type this node");
  }
  return e;
}

expr* legalizer::call(const std::string& op, std::vector<expr*> args, relay::attrs a) {
  return folded(pass_detail::make_call(m_, op, std::move(args), at_, std::move(a)));
}

expr* legalizer::folded(expr* c) {
  typed(c);
  if (!std::all_of(c->args.begin(), c->args.end(), pass_detail::has_data)) return c;
  if (auto d = pass_detail::constant_value(c)) return typed(pass_detail::make_constant(m_, std::move(d), at_));
  return c;
}

expr* legalizer::constant(constant_data d) { return typed(pass_detail::make_constant(m_, std::move(d), at_)); }

template <class T>
expr* legalizer::values(dtype dt, const std::vector<T>& v, std::vector<std::int64_t> shape) {
  constant_data c;
  c.dt = dt;
  c.shape = std::move(shape);
  c.bytes.resize(v.size() * dt.bytes());
  for (std::size_t k = 0; k < v.size(); ++k) {
    if constexpr (std::is_integral_v<T>) c.set_integer(k, v[k]);
    else c.set_real(k, v[k]);
  }
  return constant(std::move(c));
}

expr* legalizer::ints(dtype dt, const std::vector<std::int64_t>& v, std::vector<std::int64_t> shape) {
  return values(dt, v, std::move(shape));
}

expr* legalizer::reals(dtype dt, const std::vector<double>& v, std::vector<std::int64_t> shape) {
  return values(dt, v, std::move(shape));
}

expr* legalizer::scalar_int(dtype dt, std::int64_t v) { return ints(dt, {v}, {}); }

expr* legalizer::scalar_real(dtype dt, double v) { return reals(dt, {v}, {}); }

relay::attrs legalizer::dtype_attr(dtype d) {
  relay::attrs a;
  a.items.emplace_back("dtype", attr::string(d.name()));
  return a;
}

expr* legalizer::cast(expr* e, dtype d) {
  if (e->checked.is_tensor() && e->checked.dt == d) return e;
  return call("cast", {e}, dtype_attr(d));
}

expr* legalizer::clip(expr* e, double lo, double hi) {
  relay::attrs a;
  attr_value l = attr::real(lo), h = attr::real(hi);
  l.literal = h.literal = dtype{dtype::float_code, 64, 1};  // printed exactly
  a.items.emplace_back("a_min", l);
  a.items.emplace_back("a_max", h);
  return call(ops::clip::name, {e}, std::move(a));
}

expr* legalizer::saturate(expr* e, dtype d) {
  return cast(clip(e, static_cast<double>(d.lowest()), static_cast<double>(d.highest())), d);
}

expr* legalizer::sum(expr* e, std::int64_t axis, bool keepdims) {
  relay::attrs a;
  a.items.emplace_back("axis", pass_detail::int_array({axis}));
  a.items.emplace_back("keepdims", attr::boolean(keepdims));
  return call("sum", {e}, std::move(a));
}

expr* legalizer::reshape(expr* e, std::vector<std::int64_t> shape) {
  relay::attrs a;
  a.items.emplace_back("newshape", pass_detail::int_array(std::move(shape)));
  return call("reshape", {e}, std::move(a));
}

expr* legalizer::along(expr* p, std::int64_t rank, std::int64_t axis) {
  const type& t = p->checked;
  if (t.shape.size() != 1 || t.shape[0] == 1 || axis >= rank - 1) return p;
  return folded(pass_detail::expand_to_axis(m_, p, rank, axis, at_));
}

expr* legalizer::shift_right(expr* a, const std::vector<std::int64_t>& t, const std::vector<std::int64_t>& shape,
                             std::int64_t rank, std::int64_t axis) {
  return call(ops::right_shift::name, {a, along(ints(a->checked.dt, t, shape), rank, axis)});
}

std::shared_ptr<const constant_data> legalizer::value_of(expr* e) const {
  if (e->kind == expr_kind::constant) return e->data;
  for (expr* x : post_order({e})) {
    if (x->kind == expr_kind::constant && !x->data) return nullptr;
    if (x->kind == expr_kind::var || x->kind == expr_kind::let || x->kind == expr_kind::function ||
        x->kind == expr_kind::if_else || x->kind == expr_kind::global)
      return nullptr;
    if (x->kind == expr_kind::call && (!x->callee || x->callee->kind != expr_kind::op)) return nullptr;
  }
  return pass_detail::constant_value(e);
}

bool legalizer::same_constant(expr* a, expr* b) const {
  const auto x = value_of(a), y = value_of(b);
  return x && y && x->dt == y->dt && x->shape == y->shape && x->bytes == y->bytes;
}

bool legalizer::is_zero(expr* e) const {
  const auto x = value_of(e);
  return x && x->dt == dtype::int32() && x->shape.empty() && x->integer(0) == 0;
}

std::vector<double> legalizer::scale_values(expr* e, const std::string& what) const {
  const auto v = value_of(e);
  if (!v) {
    if (e->kind == expr_kind::constant)
      fail("the " + what +
           " is a constant without data (print(mod) drops the metadata section): its value is needed here to "
           "compute the requantization multiplier; give the metadata section");
    fail("the " + what +
         " must be a constant: its value is needed here to compute the requantization multiplier, and it is " +
         (e->kind == expr_kind::var ? "the variable %" + e->name : std::string("an expression of non-constants")));
  }
  std::vector<double> out;
  for (std::size_t k = 0; k < static_cast<std::size_t>(v->elements()); ++k) out.push_back(v->real(k));
  return out;
}

void legalizer::check_param(const expr* p, bool scale, const std::string& what, const type* data,
                            std::int64_t axis) const {
  const type& t = p->checked;
  if (!t.is_tensor()) fail("the " + what + " must be a tensor, not " + t.str());
  if (!(t.dt == (scale ? dtype::float32() : dtype::int32())))
    fail("the " + what + " must be " + (scale ? "float32" : "int32") + ", not " + t.dt.name());
  if (t.shape.size() > 1 || (!data && !t.shape.empty() && t.shape[0] != 1))
    fail("the " + what + " must be a scalar, not " + t.str());
  if (data && t.shape.size() == 1 && t.shape[0] != 1 && !data->shape.empty()) {
    const std::int64_t n = data->shape[static_cast<std::size_t>(axis)];
    if (n >= 0 && t.shape[0] != n)
      fail("the " + what + " has " + std::to_string(t.shape[0]) + " values for axis " + std::to_string(axis) +
           " of extent " + std::to_string(n));
  }
}

void legalizer::check_axis(std::int64_t axis, std::int64_t rank) const {
  if (rank > 0 && (axis < 0 || axis >= rank))
    fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
}

expr* legalizer::requantize(expr* x, expr* in_scale, expr* in_zp, expr* out_scale, expr* out_zp,
                            std::int64_t written_axis, dtype out_dt, const std::string& rounding,
                            const std::string& compute, const std::string& in) {
  const type& xt = x->checked;
  const auto rank = static_cast<std::int64_t>(xt.shape.size());
  const std::int64_t axis = normalize_axis(written_axis, rank);
  check_axis(axis, rank);
  check_param(in_scale, true, in + " scale", &xt, axis);
  check_param(in_zp, false, in + " zero point", &xt, axis);
  check_param(out_scale, true, "output scale");
  check_param(out_zp, false, "output zero point");
  const std::vector<double> out_s = scale_values(out_scale, "output scale");
  if (out_s.size() != 1) fail("the output scale must be one value");
  if (out_s[0] == 0.0) fail("the output scale is 0");
  const std::vector<double> in_s = scale_values(in_scale, in + " scale");
  const bool per_tensor = in_scale->checked.shape.empty();
  std::vector<double> ms;
  for (double s : in_s) ms.push_back(s / out_s[0]);
  const bool skip = per_tensor && same_constant(in_scale, out_scale);
  const std::vector<std::int64_t> vshape{static_cast<std::int64_t>(ms.size())};

  if (compute == "int64") {
    expr* t = cast(x, dtype::int32());
    if (!is_zero(in_zp)) t = call(ops::subtract::name, {t, cast(along(in_zp, rank, axis), dtype::int32())});
    if (!skip) t = fixed_point_multiply(t, ms, per_tensor, rounding, rank, axis);
    if (!is_zero(out_zp)) t = call(ops::add::name, {cast(out_zp, dtype::int32()), t});
    return out_dt == dtype::int32() ? t : saturate(t, out_dt);
  }
  const dtype fb{dtype::float_code, static_cast<std::uint8_t>(compute == "float64" ? 64 : 32), 1};
  expr* t = cast(x, fb);
  if (!is_zero(in_zp)) t = call(ops::subtract::name, {t, cast(along(in_zp, rank, axis), fb)});
  if (per_tensor) {
    if (!skip) t = call(ops::multiply::name, {scalar_real(fb, ms[0]), t});
  } else {
    t = call(ops::multiply::name, {t, along(reals(fb, ms, vshape), rank, axis)});
  }
  if (!is_zero(out_zp)) t = call(ops::add::name, {t, cast(out_zp, fb)});
  if (rounding == "UPWARD") t = call(ops::floor::name, {call(ops::add::name, {t, scalar_real(fb, 0.5)})});
  else t = call(ops::round::name, {t});
  t = cast(t, dtype::int32());
  return out_dt == dtype::int32() ? t : saturate(t, out_dt);
}

expr* legalizer::fixed_point_multiply(expr* x, const std::vector<double>& ms, bool per_tensor,
                                      const std::string& rounding, std::int64_t rank, std::int64_t axis) {
  std::vector<fixed_point> fps;
  for (double m : ms) fps.push_back(fixed_point_of(m));
  const dtype i32 = dtype::int32();
  if (per_tensor && rounding == "UPWARD" && fps[0].significand == (std::int64_t{1} << 30)) {
    // A power of two: TVM's fixed_point_multiply shifts in int32.
    const int k = fps[0].exponent - 1;
    if (k == 0) return x;
    if (k > 0 && k <= 30) return call(ops::multiply::name, {x, scalar_int(i32, std::int64_t{1} << k)});
    if (k < 0 && -k <= 30)
      return shift_right(call(ops::add::name, {x, scalar_int(i32, std::int64_t{1} << (-k - 1))}), {-k}, {}, rank, axis);
  }
  return q_multiply_shift(x, fps, per_tensor, rounding, rank, axis);
}

expr* legalizer::q_multiply_shift(expr* x, const std::vector<fixed_point>& fps, bool per_tensor,
                                  const std::string& rounding, std::int64_t rank, std::int64_t axis) {
  const dtype i32 = dtype::int32(), i64 = dtype::int64();
  std::vector<std::int64_t> mult, half, shift;
  for (const fixed_point& f : fps) {
    const int left = f.exponent > 0 ? f.exponent : 0, right = f.exponent > 0 ? 0 : -f.exponent;
    const int total = right + 31;
    if (total > 62 || left > 31)
      fail("a requantization multiplier of " +
           std::to_string(std::ldexp(static_cast<double>(f.significand), f.exponent - 31)) +
           " is out of the range of the 64-bit fixed-point computation");
    mult.push_back(static_cast<std::int64_t>(static_cast<std::uint64_t>(f.significand) << left));
    half.push_back(std::int64_t{1} << (total - 1));
    shift.push_back(total);
  }
  const std::vector<std::int64_t> shape =
      per_tensor ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{static_cast<std::int64_t>(mult.size())};
  expr* p = call(ops::multiply::name, {cast(x, i64), along(ints(i64, mult, shape), rank, axis)});
  // TONEAREST's rounder is one less for a negative product: ties then go away from zero.
  expr* biased = rounding == "UPWARD"
                     ? p
                     : call(ops::subtract::name, {p, cast(call(ops::less::name, {p, scalar_int(i64, 0)}), i64)});
  expr* y =
      shift_right(call(ops::add::name, {biased, along(ints(i64, half, shape), rank, axis)}), shift, shape, rank, axis);
  return cast(y, i32);
}

expr* legalizer::fixed_point_multiply_call(expr* e) {
  const op_call c = attrs_of(e);
  expr* x = e->args[0];
  const dtype in = x->checked.dt;
  // relay.quantize's realize casts to int64 before it when the scale ratio is not a power of
  // two. TVM's type relation keeps the input's dtype, while the TIR intrinsic computes in
  // int64 and returns int32: the result is the int32-truncated value, widened back.
  if (!(in == dtype::int32() || in == dtype::int64())) fail("the input must be int32 or int64, not " + in.name());
  const std::int64_t m = c.integer("multiplier"), s = c.integer("shift");
  if (m < 0 || m > std::int64_t{INT32_MAX}) fail("multiplier " + std::to_string(m) + " is not a non-negative int32");
  if (s < -31 || s > 31) fail("shift " + std::to_string(s) + " is out of [-31, 31]");
  expr* r = q_multiply_shift(x, {fixed_point{m, static_cast<int>(s)}}, true, "UPWARD",
                             static_cast<std::int64_t>(x->checked.shape.size()), 0);
  return in == dtype::int64() ? cast(r, in) : r;
}

expr* legalizer::requantize_or_upcast(expr* x, expr* s, expr* z, expr* out_s, expr* out_z, std::int64_t axis,
                                      const std::string& side) {
  if (same_constant(s, out_s) && same_constant(z, out_z)) return cast(x, dtype::int32());
  return requantize(x, s, z, out_s, out_z, axis, dtype::int32(), opt_.rounding, opt_.compute_dtype, side);
}

expr* legalizer::requantize_call(expr* e) {
  const op_call c = attrs_of(e);
  const dtype in = e->args[0]->checked.dt;
  if (!(in.is_int() && (in.bits == 8 || in.bits == 16 || in.bits == 32 || in.bits == 64)) &&
      !(in.is_uint() && in.bits == 8))
    fail("the input must be int8, uint8, int16, int32 or int64, not " + in.name());
  const dtype out = e->checked.dt;
  if (!is_qtype(out) || (out.is_uint() && out.bits != 8) || out.bits == 64)
    fail("out_dtype must be int8, uint8, int16 or int32, not " + out.name());
  const std::string rounding = resolve(c.string("rounding"), opt_.rounding, "rounding");
  const std::string compute = resolve(c.string("compute_dtype"), opt_.compute_dtype, "compute_dtype");
  return requantize(e->args[0], e->args[1], e->args[2], e->args[3], e->args[4], c.integer("axis"), out, rounding,
                    compute);
}

std::int64_t legalizer::scale_and_zero_point_axis(const expr* e, const op_call& c) const {
  const type& data = e->args[0]->checked;
  const auto rank = static_cast<std::int64_t>(data.shape.size());
  const std::int64_t axis = normalize_axis(c.integer("axis"), rank);
  check_param(e->args[1], true, "scale", &data, axis);
  check_param(e->args[2], false, "zero point", &data, axis);
  if (!e->args[1]->checked.shape.empty() || !e->args[2]->checked.shape.empty()) check_axis(axis, rank);
  return axis;
}

expr* legalizer::quantize(expr* e) {
  const op_call c = attrs_of(e);
  expr* x = e->args[0];
  if (!(x->checked.dt == dtype::float32())) fail("the input must be float32, not " + x->checked.dt.name());
  const dtype out = e->checked.dt;
  if (!is_qtype(out) || out.bits == 64 || (out.is_uint() && out.bits == 32))
    fail("out_dtype must be int8, uint8, int16, uint16 or int32, not " + out.name());
  const auto rank = static_cast<std::int64_t>(x->checked.shape.size());
  const std::int64_t axis = scale_and_zero_point_axis(e, c);
  expr* t = call(ops::round::name, {call(ops::divide::name, {x, along(e->args[1], rank, axis)})});
  if (!is_zero(e->args[2])) t = call(ops::add::name, {t, cast(along(e->args[2], rank, axis), dtype::float32())});
  return saturate(t, out);
}

expr* legalizer::dequantize(expr* e) {
  const op_call c = attrs_of(e);
  expr* x = e->args[0];
  const dtype in = x->checked.dt;
  if (!is_qtype(in) || in.bits == 64 || (in.is_uint() && in.bits == 32))
    fail("the input must be int8, uint8, int16, uint16 or int32, not " + in.name());
  const auto rank = static_cast<std::int64_t>(x->checked.shape.size());
  const std::int64_t axis = scale_and_zero_point_axis(e, c);
  expr* t = cast(x, dtype::int32());
  if (!is_zero(e->args[2])) t = call(ops::subtract::name, {t, along(e->args[2], rank, axis)});
  expr* r = call(ops::multiply::name, {cast(t, dtype::float32()), along(e->args[1], rank, axis)});
  // out_dtype float16: computed in float32 and rounded once at the end.
  return e->checked.dt == dtype::float32() ? r : cast(r, e->checked.dt);
}

void legalizer::check_contraction_operands(const expr* e) const {
  for (int i = 0; i < 2; ++i) {
    const dtype d = e->args[static_cast<std::size_t>(i)]->checked.dt;
    if (!((d.is_int() || d.is_uint()) && d.bits == 8 && d.lanes == 1))
      fail(std::string(i ? "the second operand" : "the data") + " must be int8 or uint8, not " + d.name());
  }
  if (!(e->checked.dt == dtype::int32())) fail("out_dtype " + e->checked.dt.name() + " is not supported (int32 only)");
}

expr* legalizer::combine(expr* t1, expr* t2, expr* t3, expr* t4, bool zx, bool zy) {
  if (zx && zy) return t1;
  if (zx) return call(ops::subtract::name, {t1, t2});
  if (zy) return call(ops::subtract::name, {t1, t3});
  return call(ops::add::name, {call(ops::subtract::name, {t1, t2}), call(ops::subtract::name, {t4, t3})});
}

expr* legalizer::dense(expr* e) {
  check_contraction_operands(e);
  expr *x = e->args[0], *w = e->args[1], *zx = e->args[2], *zw = e->args[3];
  const type& wt = w->checked;
  check_param(zx, false, "input zero point");
  check_param(zw, false, "kernel zero point", &wt, 0);
  check_param(e->args[4], true, "input scale");
  check_param(e->args[5], true, "kernel scale", &wt, 0);
  const auto xr = static_cast<std::int64_t>(x->checked.shape.size());
  const std::int64_t k = x->checked.shape.back();
  if (k < 0) fail("the reduction extent must be static");
  relay::attrs a;
  if (const attr_value* u = e->attributes.find("units")) a.items.emplace_back("units", *u);
  a.items.emplace_back("out_dtype", attr::string("int32"));
  const dtype i32 = dtype::int32();
  expr* t1 = call("nn.dense", {x, w}, std::move(a));
  const bool x0 = is_zero(zx), w0 = is_zero(zw);
  expr* t2 = w0 ? nullptr : call(ops::multiply::name, {zw, sum(cast(x, i32), xr - 1, true)});
  expr* t3 = x0 ? nullptr : call(ops::multiply::name, {zx, sum(cast(w, i32), 1, false)});
  expr* t4 = x0 || w0 ? nullptr : call(ops::multiply::name, {call(ops::multiply::name, {zx, zw}), scalar_int(i32, k)});
  return combine(t1, t2, t3, t4, x0, w0);
}

expr* legalizer::batch_matmul(expr* e) {
  check_contraction_operands(e);
  const op_call c = attrs_of(e);
  expr *x = e->args[0], *y = e->args[1], *zx = e->args[2], *zy = e->args[3];
  check_param(zx, false, "x zero point");
  check_param(zy, false, "y zero point");
  check_param(e->args[4], true, "x scale");
  check_param(e->args[5], true, "y scale");
  const bool ta = c.boolean("transpose_a"), tb = c.boolean("transpose_b");
  const std::vector<std::int64_t>& xs = x->checked.shape;
  const std::vector<std::int64_t>& ys = y->checked.shape;
  const std::int64_t k = ta ? xs[1] : xs[2], m = ta ? xs[2] : xs[1], n = tb ? ys[1] : ys[2];
  if (k < 0 || m < 0 || n < 0) fail("the extents must be static");
  relay::attrs a;
  a.items.emplace_back("out_dtype", attr::string("int32"));
  a.items.emplace_back("transpose_a", attr::boolean(ta));
  a.items.emplace_back("transpose_b", attr::boolean(tb));
  const dtype i32 = dtype::int32();
  expr* t1 = call("nn.batch_matmul", {x, y}, std::move(a));
  const bool x0 = is_zero(zx), y0 = is_zero(zy);
  expr* t2 = nullptr;  // z_y * sum_k x, as [B, M, 1]
  if (!y0) {
    expr* sx = sum(cast(x, i32), ta ? 1 : 2, true);
    if (ta) sx = reshape(sx, {0, m, 1});
    t2 = call(ops::multiply::name, {zy, sx});
  }
  expr* t3 = nullptr;  // z_x * sum_k y, as [B, 1, N]
  if (!x0) {
    expr* sy = sum(cast(y, i32), tb ? 2 : 1, true);
    if (tb) sy = reshape(sy, {0, 1, n});
    t3 = call(ops::multiply::name, {zx, sy});
  }
  expr* t4 = x0 || y0 ? nullptr : call(ops::multiply::name, {call(ops::multiply::name, {zx, zy}), scalar_int(i32, k)});
  return combine(t1, t2, t3, t4, x0, y0);
}

void legalizer::check_binary(const expr* e, std::int64_t& lhs_axis, std::int64_t& rhs_axis) {
  const op_call c = attrs_of(e);
  const dtype d = e->args[0]->checked.dt;
  if (!is_qtype(d) || d.bits == 64) fail("the operands must be quantized integers, not " + d.name());
  const type& lt = e->args[0]->checked;
  const type& rt = e->args[1]->checked;
  const auto lr = static_cast<std::int64_t>(lt.shape.size()), rr = static_cast<std::int64_t>(rt.shape.size());
  lhs_axis = lr <= 1 ? 0 : normalize_axis(c.integer("lhs_axis"), lr);
  rhs_axis = rr <= 1 ? 0 : normalize_axis(c.integer("rhs_axis"), rr);
  check_param(e->args[2], true, "lhs scale", &lt, lhs_axis);
  check_param(e->args[3], false, "lhs zero point", &lt, lhs_axis);
  check_param(e->args[4], true, "rhs scale", &rt, rhs_axis);
  check_param(e->args[5], false, "rhs zero point", &rt, rhs_axis);
  check_param(e->args[6], true, "output scale");
  check_param(e->args[7], false, "output zero point");
}

expr* legalizer::add(expr* e) {
  std::int64_t la = 0, ra = 0;
  check_binary(e, la, ra);
  const dtype d = e->args[0]->checked.dt;
  expr* l = requantize_or_upcast(e->args[0], e->args[2], e->args[3], e->args[6], e->args[7], la, "lhs");
  expr* r = requantize_or_upcast(e->args[1], e->args[4], e->args[5], e->args[6], e->args[7], ra, "rhs");
  expr* out = call(ops::add::name, {l, r});
  if (!is_zero(e->args[7])) out = call(ops::subtract::name, {out, e->args[7]});
  return saturate(out, d);
}

expr* legalizer::mul(expr* e) {
  std::int64_t la = 0, ra = 0;
  check_binary(e, la, ra);
  const dtype d = e->args[0]->checked.dt, i32 = dtype::int32();
  expr *lhs = e->args[0], *rhs = e->args[1];
  const std::vector<double> ls = scale_values(e->args[2], "lhs scale"), rs = scale_values(e->args[4], "rhs scale");
  const bool per_tensor = e->args[2]->checked.shape.empty() && e->args[4]->checked.shape.empty();
  expr* zero = scalar_int(i32, 0);
  if (per_tensor) {
    expr* l = cast(lhs, i32);
    expr* r = cast(rhs, i32);
    if (!is_zero(e->args[3])) l = call(ops::subtract::name, {l, e->args[3]});
    if (!is_zero(e->args[5])) r = call(ops::subtract::name, {r, e->args[5]});
    // The product's scale, float32 as TVM computes it (a float product).
    const float s = static_cast<float>(ls[0]) * static_cast<float>(rs[0]);
    return requantize(call(ops::multiply::name, {l, r}), scalar_real(dtype::float32(), s), zero, e->args[6], e->args[7],
                      -1, d, opt_.rounding, opt_.compute_dtype);
  }
  const attr_value* written_l = attr_or_default(*e, "lhs_axis");
  const attr_value* written_r = attr_or_default(*e, "rhs_axis");
  if (written_l->number() != written_r->number())
    fail("per-channel scales need lhs_axis equal to rhs_axis (TVM supports no other case)");
  const auto rank = static_cast<std::int64_t>(lhs->checked.shape.size());
  expr* l = cast(lhs, i32);
  expr* r = cast(rhs, i32);
  if (!is_zero(e->args[3])) l = call(ops::subtract::name, {l, along(e->args[3], rank, la)});
  if (!is_zero(e->args[5]))
    r = call(ops::subtract::name, {r, along(e->args[5], static_cast<std::int64_t>(rhs->checked.shape.size()), ra)});
  const std::size_t n = std::max(ls.size(), rs.size());
  if ((ls.size() != n && ls.size() != 1) || (rs.size() != n && rs.size() != 1))
    fail("the lhs and rhs scales have different lengths");
  std::vector<double> prod;
  for (std::size_t i = 0; i < n; ++i)
    prod.push_back(static_cast<double>(static_cast<float>(ls[ls.size() == 1 ? 0 : i] * rs[rs.size() == 1 ? 0 : i])));
  expr* scale = reals(dtype::float32(), prod, {static_cast<std::int64_t>(n)});
  return requantize(call(ops::multiply::name, {l, r}), scale, zero, e->args[6], e->args[7],
                    static_cast<std::int64_t>(written_l->number()), d, opt_.rounding, opt_.compute_dtype);
}

expr* legalizer::concatenate(expr* e) {
  const op_call c = attrs_of(e);
  expr *data = e->args[0], *scales = e->args[1], *zps = e->args[2], *out_s = e->args[3], *out_z = e->args[4];
  if (scales->kind != expr_kind::tuple) fail("the input scales must be written as a tuple (s0, s1, ...)");
  if (zps->kind != expr_kind::tuple) fail("the input zero points must be written as a tuple (z0, z1, ...)");
  const type& dt = data->checked;
  if (scales->args.size() != dt.fields.size() || zps->args.size() != dt.fields.size())
    fail(std::to_string(dt.fields.size()) + " inputs with " + std::to_string(scales->args.size()) + " scales and " +
         std::to_string(zps->args.size()) + " zero points");
  check_param(out_s, true, "output scale");
  check_param(out_z, false, "output zero point");
  std::vector<expr*> parts;
  for (std::size_t i = 0; i < dt.fields.size(); ++i) {
    expr* x = data->kind == expr_kind::tuple ? data->args[i] : nullptr;
    if (!x) {
      x = m_.make(expr_kind::tuple_get, at_);
      x->args = {data};
      x->index = static_cast<std::int64_t>(i);
      typed(x);
    }
    const std::string n = std::to_string(i);
    check_param(scales->args[i], true, "input " + n + " scale");
    check_param(zps->args[i], false, "input " + n + " zero point");
    if (same_constant(scales->args[i], out_s) && same_constant(zps->args[i], out_z)) parts.push_back(x);
    else
      parts.push_back(requantize(x, scales->args[i], zps->args[i], out_s, out_z, -1, x->checked.dt, opt_.rounding,
                                 opt_.compute_dtype, "input " + n));
  }
  expr* tuple = m_.make(expr_kind::tuple, at_);
  tuple->args = parts;
  typed(tuple);
  relay::attrs a;
  a.items.emplace_back("axis", attr::integer(c.integer("axis")));
  return call("concatenate", {tuple}, std::move(a));
}

}  // namespace qnn_detail

void legalize_qnn(module& m, const qnn_options& options) {
  typecheck(m);
  qnn_detail::legalizer l(m, options);
  std::unordered_map<expr*, expr*> map;
  for (expr* e : post_order(def_roots(m)))
    if (e->kind == expr_kind::call && e->callee && e->callee->kind == expr_kind::op &&
        (e->callee->name.starts_with("qnn.") || e->callee->name == "fixed_point_multiply"))
      map[e] = l.lower(e);
  pass_detail::substitute(m, map);
  typecheck(m);
}

}  // namespace fuse::relay
