// The Relay op registry: every op the frontend knows, with its TVM fusion pattern (v0.19,
// for `--planner tvm`), its arity, the defaults of the attributes printers leave out (they print
// only non-default attributes), and its type relation (shape and dtype of the result from those
// of the arguments).
//
// An op missing here is unsupported: the error names it and lists what is supported.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "fuse/expr/ops.hpp"
#include "fuse/relay/ir.hpp"

namespace fuse::relay {

/// TVM's OpPatternKind (fuse/expr/ops.hpp); `none` for ops TVM lowers before FuseOps (qnn.*,
/// nn.layer_norm), which the TVM planner mode sees only after legalization.
using fuse::op_pattern;

class op_call;

/// One registered op.
struct op_def {
  std::string_view name;
  op_pattern pattern;
  int min_args, max_args;
  /// Attribute defaults, written as Relay attribute text would be ("axis=-1"); read through
  /// op_call's accessors.
  std::vector<std::pair<std::string_view, attr_value>> defaults;
  type (*infer)(const op_call&);
};

// ---- attribute values used by the defaults table --------------------------------------------------

namespace attr {
inline attr_value integer(std::int64_t v) {
  attr_value a;
  a.k = attr_value::kind::integer;
  a.i = v;
  a.literal = dtype::int32();
  return a;
}
inline attr_value real(double v) {
  attr_value a;
  a.k = attr_value::kind::real;
  a.f = v;
  a.literal = dtype::float32();
  return a;
}
inline attr_value boolean(bool v) {
  attr_value a;
  a.k = attr_value::kind::boolean;
  a.b = v;
  return a;
}
inline attr_value string(std::string v) {
  attr_value a;
  a.k = attr_value::kind::string;
  a.s = std::move(v);
  return a;
}
inline attr_value none() { return attr_value{}; }
}  // namespace attr

/// Attribute `name` of a call of op `def` as written, or the op's default (printers leave
/// defaults out); null when neither exists.
inline const attr_value* attr_or_default(const expr& call, const op_def& def, std::string_view name) {
  if (const attr_value* v = call.attributes.find(name)) return v;
  for (const auto& [n, v] : def.defaults)
    if (n == name) return &v;
  return nullptr;
}

/// A call being typed: its argument types and its attributes, with the op's defaults behind
/// them. Accessors throw relay::error at the call (or at the attribute) naming the op.
class op_call {
 public:
  op_call(const module& m, const expr& call, const op_def& def, std::vector<type> args)
      : m_(m), call_(call), def_(def), args_(std::move(args)) {}

  const expr& node() const { return call_; }
  std::string_view op() const { return def_.name; }
  std::size_t arity() const { return args_.size(); }
  const type& arg(std::size_t i) const { return args_[i]; }
  /// Argument i, which must be a tensor type.
  const type& tensor(std::size_t i) const {
    if (!args_[i].is_tensor()) fail("argument " + std::to_string(i + 1) + " must be a tensor, not " + args_[i].str());
    return args_[i];
  }
  std::int64_t rank(std::size_t i) const { return static_cast<std::int64_t>(tensor(i).shape.size()); }

  /// The attribute as written, or the op's default; null when neither exists.
  const attr_value* find(std::string_view name) const { return attr_or_default(call_, def_, name); }
  bool is_none(std::string_view name) const {
    const attr_value* v = find(name);
    return !v || v->k == attr_value::kind::none;
  }
  std::int64_t integer(std::string_view name) const {
    const attr_value* v = require(name);
    if (v->k == attr_value::kind::integer || v->k == attr_value::kind::boolean) return v->k == attr_value::kind::boolean ? v->b : v->i;
    if (v->k == attr_value::kind::real && v->f == std::floor(v->f) && std::fabs(v->f) < 9.0e15) return static_cast<std::int64_t>(v->f);
    fail_at(*v, "attribute " + std::string(name) + " must be an integer");
  }
  double real(std::string_view name) const {
    const attr_value* v = require(name);
    if (!v->is_number()) fail_at(*v, "attribute " + std::string(name) + " must be a number");
    return v->number();
  }
  bool boolean(std::string_view name) const {
    const attr_value* v = require(name);
    if (!v->is_number()) fail_at(*v, "attribute " + std::string(name) + " must be a boolean");
    return v->number() != 0;
  }
  std::string string(std::string_view name) const {
    const attr_value* v = require(name);
    if (v->k == attr_value::kind::none) return "";
    if (v->k != attr_value::kind::string) fail_at(*v, "attribute " + std::string(name) + " must be a string");
    return v->s;
  }
  /// An integer list (a single integer reads as a list of one).
  std::vector<std::int64_t> integers(std::string_view name) const {
    const attr_value* v = require(name);
    std::vector<std::int64_t> out;
    if (v->k == attr_value::kind::integer) return {v->i};
    if (v->k != attr_value::kind::array) fail_at(*v, "attribute " + std::string(name) + " must be a list of integers");
    for (const attr_value& x : v->items) {
      if (x.k == attr_value::kind::integer) out.push_back(x.i);
      else if (x.k == attr_value::kind::real && x.f == std::floor(x.f)) out.push_back(static_cast<std::int64_t>(x.f));
      else fail_at(x, "attribute " + std::string(name) + " must be a list of integers");
    }
    return out;
  }
  /// A dtype attribute ("" or absent: nullopt, meaning "the input's").
  std::optional<dtype> dtype_attr(std::string_view name) const {
    const attr_value* v = find(name);
    if (!v || v->k == attr_value::kind::none || (v->k == attr_value::kind::string && v->s.empty())) return std::nullopt;
    if (v->k != attr_value::kind::string) fail_at(*v, "attribute " + std::string(name) + " must be a dtype string");
    auto d = dtype::parse(v->s);
    if (!d) fail_at(*v, "attribute " + std::string(name) + ": \"" + v->s + "\" is not a dtype");
    return d;
  }
  /// An axis in [-rank, rank), normalized.
  std::int64_t axis(std::int64_t a, std::int64_t rank, std::string_view what = "axis") const {
    if (a < -rank || a >= rank)
      fail(std::string(what) + " " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    return a < 0 ? a + rank : a;
  }

  // ---- attributes that three readers share (type relation, interpreter, emitter) ----------

  /// transpose: the permutation, normalized and checked (axes None: the axes reversed).
  std::vector<std::int64_t> transpose_axes(std::int64_t rank) const {
    std::vector<std::int64_t> axes;
    if (is_none("axes")) {
      for (std::int64_t i = rank - 1; i >= 0; --i) axes.push_back(i);
      return axes;
    }
    const std::vector<std::int64_t> written = integers("axes");
    if (static_cast<std::int64_t>(written.size()) != rank) fail("axes must list all " + std::to_string(rank) + " axes");
    std::vector<bool> seen(static_cast<std::size_t>(rank), false);
    for (std::int64_t a : written) {
      const std::int64_t n = axis(a, rank);
      if (seen[static_cast<std::size_t>(n)]) fail("axes are not a permutation");
      seen[static_cast<std::size_t>(n)] = true;
      axes.push_back(n);
    }
    return axes;
  }

  /// sum/mean/max/min/prod/variance: which axes are reduced. As TVM's GetReduceAxes: axis None
  /// or an empty list reduces every axis (whatever exclude says); otherwise the listed axes, or
  /// with exclude the others.
  std::vector<bool> reduced_axes(std::int64_t rank) const {
    const std::vector<std::int64_t> listed = is_none("axis") ? std::vector<std::int64_t>{} : integers("axis");
    std::vector<bool> red(static_cast<std::size_t>(rank), listed.empty());
    if (listed.empty()) return red;
    for (std::int64_t a : listed) red[static_cast<std::size_t>(axis(a, rank))] = true;
    if (boolean("exclude")) red.flip();
    return red;
  }

  /// strided_slice over a tensor of `shape`, per axis: the first element read, the step and the
  /// count (-1 on a dynamic axis). Relay's rules: negative begin/end count from the end, then
  /// clamp to [0, n] (step > 0) or [-1, n - 1] (step < 0); in size mode `end` holds sizes.
  struct slice {
    std::vector<std::int64_t> begin, step, count;
  };
  slice slice_of(const std::vector<std::int64_t>& shape) const {
    const std::int64_t r = static_cast<std::int64_t>(shape.size());
    const std::vector<std::int64_t> b = integers("begin"), e = integers("end");
    const std::vector<std::int64_t> strides = is_none("strides") ? std::vector<std::int64_t>{1} : integers("strides");
    std::vector<std::int64_t> axes;
    if (is_none("axes"))
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(b.size()); ++i) axes.push_back(i);
    else
      axes = integers("axes");
    if (b.size() != axes.size() || e.size() != axes.size()) fail("begin, end and axes must have the same length");
    const bool size_mode = string("slice_mode") == "size";
    slice sl{std::vector<std::int64_t>(shape.size(), 0), std::vector<std::int64_t>(shape.size(), 1), shape};
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const auto a = static_cast<std::size_t>(axis(axes[i], r));
      const std::int64_t n = shape[a];
      const std::int64_t s = size_mode ? 1 : (i < strides.size() ? strides[i] : strides.back());
      if (s == 0) fail("a stride of 0");
      sl.step[a] = s;
      if (n < 0) continue;  // dynamic: count stays -1
      std::int64_t first = b[i] < 0 ? b[i] + n : b[i];
      std::int64_t last = size_mode ? (e[i] < 0 ? n : first + e[i]) : (e[i] < 0 ? e[i] + n : e[i]);
      if (s > 0) {
        first = std::clamp<std::int64_t>(first, 0, n);
        last = std::clamp<std::int64_t>(last, 0, n);
        sl.count[a] = last > first ? (last - first + s - 1) / s : 0;
      } else {
        first = std::clamp<std::int64_t>(first, -1, n - 1);
        last = std::clamp<std::int64_t>(last, -1, n - 1);
        sl.count[a] = first > last ? (first - last - s - 1) / -s : 0;
      }
      sl.begin[a] = first;
    }
    return sl;
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw m_.error_at(call_.at, std::string(def_.name) + ": " + message);
  }
  [[noreturn]] void fail_at(const attr_value& v, const std::string& message) const {
    throw m_.error_at(v.at.line ? v.at : call_.at, std::string(def_.name) + ": " + message);
  }

 private:
  const attr_value* require(std::string_view name) const {
    const attr_value* v = find(name);
    if (!v) fail("missing attribute " + std::string(name));
    return v;
  }
  const module& m_;
  const expr& call_;
  const op_def& def_;
  std::vector<type> args_;
};

// ---- type relations ------------------------------------------------------------------------------

namespace infer {

inline std::string shape_str(const std::vector<std::int64_t>& s) { return type::tensor(s, dtype::float32()).str(); }

/// NumPy broadcasting of two shapes (-1, a dynamic extent, matches anything).
inline std::vector<std::int64_t> broadcast(const op_call& c, const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  const std::size_t r = std::max(a.size(), b.size());
  std::vector<std::int64_t> out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x == y || y == 1) out[i] = x;
    else if (x == 1) out[i] = y;
    else if (x < 0 || y < 0) out[i] = x < 0 ? y : x;
    else c.fail("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
  }
  return out;
}

inline type same(const op_call& c) { return c.tensor(0); }

inline type float_unary(const op_call& c) {
  const type& t = c.tensor(0);
  if (!t.dt.is_float()) c.fail("needs a floating-point input, not " + t.dt.name());
  return t;
}

inline type cast(const op_call& c) {
  type t = c.tensor(0);
  const auto d = c.dtype_attr("dtype");
  if (!d) c.fail("missing attribute dtype");
  t.dt = *d;
  return t;
}

/// Binary broadcast ops; `result` overrides the dtype (bool for comparisons).
inline type binary(const op_call& c, std::optional<dtype> result) {
  const type& a = c.tensor(0);
  const type& b = c.tensor(1);
  if (!(a.dt == b.dt)) c.fail("operands have different dtypes, " + a.dt.name() + " and " + b.dt.name());
  return type::tensor(broadcast(c, a.shape, b.shape), result ? *result : a.dt);
}
inline type arith(const op_call& c) { return binary(c, std::nullopt); }

inline type where(const op_call& c) {
  const type& cond = c.tensor(0);
  const type& a = c.tensor(1);
  const type& b = c.tensor(2);
  if (!(a.dt == b.dt)) c.fail("branches have different dtypes, " + a.dt.name() + " and " + b.dt.name());
  return type::tensor(broadcast(c, cond.shape, broadcast(c, a.shape, b.shape)), a.dt);
}

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
        c.fail("the channel operand " + ch.str() + " must have the extent of axis " + std::to_string(ax) + " of " + x.str());
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

inline type bias_add(const op_call& c) {
  const type& x = c.tensor(0);
  const type& b = c.tensor(1);
  const std::int64_t ax = c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size()));
  if (b.shape.size() != 1) c.fail("the bias must be 1-d, not " + b.str());
  const std::int64_t n = x.shape[static_cast<std::size_t>(ax)];
  if (n >= 0 && b.shape[0] >= 0 && n != b.shape[0])
    c.fail("bias of " + std::to_string(b.shape[0]) + " elements for axis " + std::to_string(ax) + " of extent " + std::to_string(n));
  if (!(x.dt == b.dt)) c.fail("bias dtype " + b.dt.name() + " differs from the input's " + x.dt.name());
  return x;
}

inline void same_extent(const op_call& c, std::int64_t a, std::int64_t b, const std::string& what) {
  if (a >= 0 && b >= 0 && a != b) c.fail(what + ": " + std::to_string(a) + " vs " + std::to_string(b));
}

/// dense(x [.., K], w [N, K]) -> [.., N]; matmul with transpose flags.
inline type dense_like(const op_call& c, bool transpose_a, bool transpose_b) {
  const type& x = c.tensor(0);
  const type& w = c.tensor(1);
  if (x.shape.empty()) c.fail("the data must have rank >= 1");
  if (w.shape.size() != 2) c.fail("the weight must be 2-d, not " + w.str());
  std::vector<std::int64_t> out = x.shape;
  const std::int64_t k = transpose_a ? x.shape.front() : x.shape.back();
  if (transpose_a && x.shape.size() != 2) c.fail("transpose_a needs 2-d data");
  const std::int64_t wk = transpose_b ? w.shape[1] : w.shape[0];
  const std::int64_t n = transpose_b ? w.shape[0] : w.shape[1];
  same_extent(c, k, wk, "the reduction extents differ (data " + x.str() + ", weight " + w.str() + ")");
  if (transpose_a) out = {x.shape[1], n};
  else out.back() = n;
  if (!c.is_none("units")) same_extent(c, c.integer("units"), n, "units differs from the weight's output extent");
  dtype d = c.dtype_attr("out_dtype").value_or(x.dt);
  return type::tensor(out, d);
}
inline type dense(const op_call& c) { return dense_like(c, false, true); }
inline type matmul(const op_call& c) { return dense_like(c, c.boolean("transpose_a"), c.boolean("transpose_b")); }

inline type batch_matmul(const op_call& c) {
  const type& a = c.tensor(0);
  const type& b = c.tensor(1);
  if (a.shape.size() != 3 || b.shape.size() != 3) c.fail("operands must be 3-d, not " + a.str() + " and " + b.str());
  const bool ta = c.boolean("transpose_a"), tb = c.boolean("transpose_b");
  const std::int64_t m = ta ? a.shape[2] : a.shape[1], ka = ta ? a.shape[1] : a.shape[2];
  const std::int64_t kb = tb ? b.shape[2] : b.shape[1], n = tb ? b.shape[1] : b.shape[2];
  same_extent(c, ka, kb, "the reduction extents differ (" + a.str() + ", " + b.str() + ")");
  const std::int64_t ba = a.shape[0], bb = b.shape[0];
  if (ba >= 0 && bb >= 0 && ba != bb && ba != 1 && bb != 1)
    c.fail("batch extents " + std::to_string(ba) + " and " + std::to_string(bb) + " do not broadcast");
  const std::int64_t batch = ba == 1 ? bb : ba;
  return type::tensor({batch, m, n}, c.dtype_attr("out_dtype").value_or(a.dt));
}

inline std::int64_t product(const std::vector<std::int64_t>& s) {
  std::int64_t p = 1;
  for (std::int64_t d : s) p *= d;
  return p;
}

/// reshape with Relay's codes: 0 copy, -1 infer, -2 copy the rest, -3 merge two, -4 split one.
inline type reshape(const op_call& c) {
  const type& x = c.tensor(0);
  const std::vector<std::int64_t> codes = c.integers("newshape");
  const auto& in = x.shape;
  for (std::int64_t d : in)
    if (d < 0) c.fail("a reshape of a dynamic shape is not supported");
  std::vector<std::int64_t> out;
  std::size_t src = 0;
  int infer_at = -1;
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const std::int64_t v = codes[i];
    if (v > 0) out.push_back(v), ++src;
    else if (v == 0) {
      if (src >= in.size()) c.fail("newshape code 0 at position " + std::to_string(i) + " has no input axis to copy");
      out.push_back(in[src++]);
    } else if (v == -1) {
      if (infer_at >= 0) c.fail("newshape has more than one -1");
      infer_at = static_cast<int>(out.size());
      out.push_back(1);
      ++src;
    } else if (v == -2) {
      while (src < in.size()) out.push_back(in[src++]);
    } else if (v == -3) {
      if (src + 1 >= in.size()) c.fail("newshape code -3 needs two input axes");
      out.push_back(in[src] * in[src + 1]);
      src += 2;
    } else if (v == -4) {
      if (i + 2 >= codes.size() || src >= in.size()) c.fail("newshape code -4 needs two following values and an input axis");
      std::int64_t d1 = codes[i + 1], d2 = codes[i + 2];
      const std::int64_t d0 = in[src++];
      if (d1 == -1 && d2 > 0 && d0 % d2 == 0) d1 = d0 / d2;
      else if (d2 == -1 && d1 > 0 && d0 % d1 == 0) d2 = d0 / d1;
      if (d1 <= 0 || d2 <= 0 || d1 * d2 != d0) c.fail("newshape code -4 cannot split extent " + std::to_string(d0));
      out.push_back(d1);
      out.push_back(d2);
      i += 2;
    } else {
      c.fail("bad newshape code " + std::to_string(v));
    }
  }
  const std::int64_t total = product(in);
  if (infer_at >= 0) {
    std::int64_t rest = 1;
    for (std::size_t i = 0; i < out.size(); ++i)
      if (static_cast<int>(i) != infer_at) rest *= out[i];
    if (rest == 0 || total % rest != 0) c.fail("cannot infer the -1 of newshape for " + x.str());
    out[static_cast<std::size_t>(infer_at)] = total / rest;
  }
  if (product(out) != total) c.fail("cannot reshape " + x.str() + " to " + shape_str(out));
  return type::tensor(out, x.dt);
}

inline type transpose(const op_call& c) {
  const type& x = c.tensor(0);
  std::vector<std::int64_t> out;
  for (std::int64_t a : c.transpose_axes(static_cast<std::int64_t>(x.shape.size()))) out.push_back(x.shape[static_cast<std::size_t>(a)]);
  return type::tensor(out, x.dt);
}

inline type squeeze(const op_call& c) {
  const type& x = c.tensor(0);
  const std::int64_t r = static_cast<std::int64_t>(x.shape.size());
  std::vector<bool> drop(static_cast<std::size_t>(r), false);
  if (c.is_none("axis")) {
    for (std::int64_t i = 0; i < r; ++i) drop[static_cast<std::size_t>(i)] = x.shape[static_cast<std::size_t>(i)] == 1;
  } else {
    for (std::int64_t a : c.integers("axis")) {
      const std::int64_t n = c.axis(a, r);
      if (x.shape[static_cast<std::size_t>(n)] != 1) c.fail("axis " + std::to_string(a) + " of " + x.str() + " is not 1");
      drop[static_cast<std::size_t>(n)] = true;
    }
  }
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < r; ++i)
    if (!drop[static_cast<std::size_t>(i)]) out.push_back(x.shape[static_cast<std::size_t>(i)]);
  return type::tensor(out, x.dt);
}

inline type expand_dims(const op_call& c) {
  const type& x = c.tensor(0);
  const std::int64_t r = static_cast<std::int64_t>(x.shape.size());
  const std::int64_t n = c.integer("num_newaxis");
  if (n < 0) c.fail("num_newaxis must not be negative");
  const std::int64_t a = c.axis(c.integer("axis"), r + 1);
  std::vector<std::int64_t> out = x.shape;
  out.insert(out.begin() + a, static_cast<std::size_t>(n), 1);
  return type::tensor(out, x.dt);
}

inline type split(const op_call& c) {
  const type& x = c.tensor(0);
  const std::int64_t r = static_cast<std::int64_t>(x.shape.size());
  const std::int64_t ax = c.axis(c.integer("axis"), r);
  const std::int64_t ext = x.shape[static_cast<std::size_t>(ax)];
  const attr_value* ios = c.find("indices_or_sections");
  if (!ios) c.fail("missing attribute indices_or_sections");
  std::vector<std::int64_t> cuts;
  if (ios->k == attr_value::kind::array) {
    cuts = c.integers("indices_or_sections");
  } else {
    const std::int64_t n = c.integer("indices_or_sections");
    if (n <= 0) c.fail("sections must be positive");
    if (ext >= 0 && ext % n) c.fail("axis " + std::to_string(ax) + " of " + x.str() + " does not divide into " + std::to_string(n) + " sections");
    for (std::int64_t i = 1; i < n; ++i) cuts.push_back(i * (ext / n));
  }
  std::vector<type> parts;
  std::int64_t prev = 0;
  for (std::size_t i = 0; i <= cuts.size(); ++i) {
    const std::int64_t cut = i < cuts.size() ? cuts[i] : ext;
    if (cut < prev || cut > ext) c.fail("split indices must increase within the axis");
    std::vector<std::int64_t> s = x.shape;
    s[static_cast<std::size_t>(ax)] = cut - prev;
    parts.push_back(type::tensor(s, x.dt));
    prev = cut;
  }
  return type::tuple(parts);
}

inline type concatenate(const op_call& c) {
  const type& t = c.arg(0);
  if (t.k != type::kind::tuple || t.fields.empty()) c.fail("needs a non-empty tuple of tensors");
  const type& f0 = t.fields[0];
  if (!f0.is_tensor()) c.fail("needs a tuple of tensors");
  const std::int64_t r = static_cast<std::int64_t>(f0.shape.size());
  const std::int64_t ax = c.axis(c.integer("axis"), r);
  std::vector<std::int64_t> out = f0.shape;
  for (std::size_t i = 1; i < t.fields.size(); ++i) {
    const type& f = t.fields[i];
    if (!f.is_tensor() || static_cast<std::int64_t>(f.shape.size()) != r || !(f.dt == f0.dt))
      c.fail("field " + std::to_string(i) + " (" + f.str() + ") does not match " + f0.str());
    for (std::int64_t d = 0; d < r; ++d) {
      const auto du = static_cast<std::size_t>(d);
      if (d == ax) out[du] = (out[du] < 0 || f.shape[du] < 0) ? -1 : out[du] + f.shape[du];
      else same_extent(c, out[du], f.shape[du], "extents off the axis differ");
    }
  }
  return type::tensor(out, f0.dt);
}

/// stack((t0, t1, ...), axis): fields of one shape and dtype, joined along a new axis inserted
/// at `axis` (in [-(rank + 1), rank + 1)), of extent the number of fields.
inline type stack(const op_call& c) {
  const type& t = c.arg(0);
  if (t.k != type::kind::tuple || t.fields.empty()) c.fail("needs a non-empty tuple of tensors, not " + t.str());
  const type& f0 = t.fields[0];
  if (!f0.is_tensor()) c.fail("field 0 must be a tensor, not " + f0.str());
  const std::int64_t r = static_cast<std::int64_t>(f0.shape.size());
  std::vector<std::int64_t> shape = f0.shape;
  for (std::size_t i = 1; i < t.fields.size(); ++i) {
    const type& f = t.fields[i];
    if (!f.is_tensor()) c.fail("field " + std::to_string(i) + " must be a tensor, not " + f.str());
    if (!(f.dt == f0.dt)) c.fail("field " + std::to_string(i) + " has dtype " + f.dt.name() + ", field 0 " + f0.dt.name());
    if (static_cast<std::int64_t>(f.shape.size()) != r)
      c.fail("field " + std::to_string(i) + " (" + f.str() + ") has another rank than field 0 (" + f0.str() + ")");
    for (std::size_t d = 0; d < shape.size(); ++d) {
      same_extent(c, shape[d], f.shape[d],
                  "field " + std::to_string(i) + " (" + f.str() + ") differs from field 0 (" + f0.str() + ") on axis " + std::to_string(d));
      if (shape[d] < 0) shape[d] = f.shape[d];
    }
  }
  const std::int64_t ax = c.axis(c.integer("axis"), r + 1);
  shape.insert(shape.begin() + ax, static_cast<std::int64_t>(t.fields.size()));
  return type::tensor(shape, f0.dt);
}

inline type strided_slice(const op_call& c) {
  const type& x = c.tensor(0);
  return type::tensor(c.slice_of(x.shape).count, x.dt);
}

inline type take(const op_call& c) {
  const type& data = c.tensor(0);
  const type& idx = c.tensor(1);
  if (!idx.dt.is_int() && !idx.dt.is_uint()) c.fail("indices must be integers, not " + idx.dt.name());
  if (c.integer("batch_dims") != 0) c.fail("batch_dims other than 0 are not supported");
  if (c.is_none("axis")) return type::tensor(idx.shape, data.dt);
  const std::int64_t r = static_cast<std::int64_t>(data.shape.size());
  const std::int64_t ax = c.axis(c.integer("axis"), r);
  std::vector<std::int64_t> out(data.shape.begin(), data.shape.begin() + ax);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), data.shape.begin() + ax + 1, data.shape.end());
  return type::tensor(out, data.dt);
}

/// sum/mean/max/min/prod over `axis` (None: all), keepdims, exclude.
inline type reduce(const op_call& c) {
  const type& x = c.tensor(0);
  const std::vector<bool> red = c.reduced_axes(static_cast<std::int64_t>(x.shape.size()));
  const bool keep = c.boolean("keepdims");
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < x.shape.size(); ++i) {
    if (!red[i]) out.push_back(x.shape[i]);
    else if (keep) out.push_back(1);
  }
  return type::tensor(out, x.dt);
}

/// variance(data, mean): the mean of (data - mean)^2 over the reduced axes (unbiased: the sum
/// over N - 1). TVM's VarianceRel checks only that mean has data's rank; here mean must also
/// broadcast against data, which it does in every program TVM writes (keepdims=True means).
inline type variance(const op_call& c) {
  const type& x = c.tensor(0);
  const type& m = c.tensor(1);
  if (x.shape.empty()) c.fail("the data must have rank >= 1");
  if (m.shape.size() != x.shape.size()) c.fail("the mean " + m.str() + " must have the data's rank (" + x.str() + ")");
  if (!(m.dt == x.dt)) c.fail("the mean has dtype " + m.dt.name() + ", the data " + x.dt.name());
  broadcast(c, x.shape, m.shape);
  return reduce(c);
}

/// collapse_sum_like(data, like): data summed down to like's type (leading extra axes and axes
/// where like has extent 1), as the gradient of a broadcast; like must broadcast to data.
inline type collapse_sum_like(const op_call& c) {
  const type& x = c.tensor(0);
  const type& like = c.tensor(1);
  if (!(x.dt == like.dt)) c.fail("data types " + x.dt.name() + " and " + like.dt.name() + " do not match");
  if (broadcast(c, x.shape, like.shape) != x.shape) c.fail(like.str() + " does not broadcast to " + x.str());
  return like;
}

/// broadcast_to(data, shape): data broadcast to exactly `shape`.
inline type broadcast_to(const op_call& c) {
  const type& x = c.tensor(0);
  const std::vector<std::int64_t> shape = c.integers("shape");
  if (broadcast(c, x.shape, shape) != shape) c.fail(x.str() + " does not broadcast to " + shape_str(shape));
  return type::tensor(shape, x.dt);
}
inline type broadcast_to_like(const op_call& c) {
  const type& x = c.tensor(0);
  const type& like = c.tensor(1);
  if (!(x.dt == like.dt)) c.fail("data types " + x.dt.name() + " and " + like.dt.name() + " do not match");
  if (broadcast(c, x.shape, like.shape) != like.shape) c.fail(x.str() + " does not broadcast to " + like.str());
  return like;
}

/// full(fill_value, shape, dtype): a tensor of `shape` filled with the 0-d fill_value, cast to
/// dtype (absent: the fill value's, as TVM's FullRel).
inline type full(const op_call& c) {
  const type& v = c.tensor(0);
  if (!v.shape.empty()) c.fail("the fill value must be 0-d, not " + v.str());
  return type::tensor(c.integers("shape"), c.dtype_attr("dtype").value_or(v.dt));
}

/// one_hot(indices, on_value, off_value, depth, axis, dtype): on_value where the index equals
/// the position along the new axis of extent depth, off_value elsewhere (an index outside
/// [0, depth) gives a row of off_value).
inline type one_hot(const op_call& c) {
  const type& i = c.tensor(0);
  if (!i.dt.is_int() && !i.dt.is_uint()) c.fail("indices must be integers, not " + i.dt.name());
  for (std::size_t k = 1; k < 3; ++k)
    if (!c.tensor(k).shape.empty()) c.fail(std::string(k == 1 ? "on_value" : "off_value") + " must be 0-d, not " + c.tensor(k).str());
  const std::int64_t depth = c.integer("depth");
  if (depth < 0) c.fail("depth must not be negative");
  const std::int64_t r = static_cast<std::int64_t>(i.shape.size());
  const std::int64_t a = c.axis(c.integer("axis"), r + 1);
  std::vector<std::int64_t> out = i.shape;
  out.insert(out.begin() + a, depth);
  return type::tensor(out, c.dtype_attr("dtype").value_or(c.tensor(1).dt));
}

inline type softmax(const op_call& c) {
  const type& x = float_unary(c);
  c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size()));
  return x;
}

inline type layer_norm(const op_call& c) {
  const type& x = float_unary(c);
  const std::int64_t ax = c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size()));
  for (std::size_t i = 1; i < 3; ++i) {
    const type& p = c.tensor(i);
    if (p.shape.size() != 1) c.fail("gamma and beta must be 1-d");
    same_extent(c, p.shape[0], x.shape[static_cast<std::size_t>(ax)], "gamma/beta extent vs the normalized axis");
  }
  return x;
}

inline type batch_norm(const op_call& c) {
  const type& x = float_unary(c);
  const std::int64_t ax = c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size()));
  for (std::size_t i = 1; i < 5; ++i) {
    const type& p = c.tensor(i);
    if (p.shape.size() != 1) c.fail("gamma, beta, mean and variance must be 1-d");
    same_extent(c, p.shape[0], x.shape[static_cast<std::size_t>(ax)], "parameter extent vs the channel axis");
  }
  const type p = c.tensor(1);
  return type::tuple({x, p, p});
}

inline type dropout(const op_call& c) {
  const type& x = c.tensor(0);
  return type::tuple({x, x});
}

inline type identity(const op_call& c) { return c.arg(0); }

inline void scalar_param(const op_call& c, std::size_t i, const char* what) {
  const type& t = c.tensor(i);
  if (t.shape.size() > 1) c.fail(std::string(what) + " must be a scalar or 1-d, not " + t.str());
}

inline type qnn_quantize(const op_call& c) {
  type t = c.tensor(0);
  if (!t.dt.is_float()) c.fail("quantizes a float tensor, not " + t.dt.name());
  scalar_param(c, 1, "the scale");
  scalar_param(c, 2, "the zero point");
  t.dt = c.dtype_attr("out_dtype").value_or(dtype{dtype::int_code, 8, 1});
  return t;
}
inline type qnn_dequantize(const op_call& c) {
  type t = c.tensor(0);
  scalar_param(c, 1, "the scale");
  scalar_param(c, 2, "the zero point");
  t.dt = c.dtype_attr("out_dtype").value_or(dtype::float32());
  if (!(t.dt == dtype::float32() || t.dt == dtype{dtype::float_code, 16, 1})) c.fail("out_dtype must be float32 or float16, not " + t.dt.name());
  return t;
}
inline type qnn_requantize(const op_call& c) {
  type t = c.tensor(0);
  for (std::size_t i = 1; i < 5; ++i) scalar_param(c, i, "scales and zero points");
  t.dt = c.dtype_attr("out_dtype").value_or(dtype{dtype::int_code, 8, 1});
  return t;
}
inline type qnn_dense(const op_call& c) {
  for (std::size_t i = 2; i < 6; ++i) scalar_param(c, i, "scales and zero points");
  type t = dense_like(c, false, true);
  t.dt = c.dtype_attr("out_dtype").value_or(dtype::int32());
  return t;
}
inline type qnn_batch_matmul(const op_call& c) {
  for (std::size_t i = 2; i < 6; ++i) scalar_param(c, i, "scales and zero points");
  type t = batch_matmul(c);
  t.dt = c.dtype_attr("out_dtype").value_or(dtype::int32());
  return t;
}
inline type qnn_binary(const op_call& c) {
  for (std::size_t i = 2; i < 8; ++i) scalar_param(c, i, "scales and zero points");
  return arith(c);
}
inline type qnn_concatenate(const op_call& c) { return concatenate(c); }

}  // namespace infer

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
        if (a.has_default) defaults.emplace_back(a.name, a.integer ? attr::integer(static_cast<std::int64_t>(v)) : attr::real(v));
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
  return [&]<class... Op>(ops::op_list<Op...>) { return (detail::call_if_named<Op>(name, f) || ...); }(ops::relay_elementwise{});
}

/// Every op the frontend supports, by Relay name.
inline const std::vector<op_def>& op_table() {
  using P = op_pattern;
  using namespace attr;
  static const std::vector<op_def> table = [] {
    std::vector<op_def> t;
    // The elementwise ops of fuse's table (fuse/expr/ops.hpp), each from its descriptor.
    [&]<class... Op>(ops::op_list<Op...>) { (add_elementwise<Op>(t), ...); }(ops::relay_elementwise{});
    for (std::string_view n : {"copy", "zeros_like", "ones_like"}) t.push_back({n, P::elemwise, 1, 1, {}, infer::same});
    t.push_back({"cast", P::elemwise, 1, 1, {}, infer::cast});
    t.push_back({"fixed_point_multiply", P::elemwise, 1, 1, {}, infer::same});
    t.push_back({"nn.bias_add", P::broadcast, 2, 2, {{"axis", integer(1)}}, infer::bias_add});
    t.push_back({"expand_dims", P::broadcast, 1, 1, {{"num_newaxis", integer(1)}}, infer::expand_dims});
    t.push_back({"nn.dense", P::out_ewise_fusable, 2, 2, {{"units", none()}, {"out_dtype", string("")}}, infer::dense});
    t.push_back({"nn.matmul", P::out_ewise_fusable, 2, 2,
                 {{"units", none()}, {"out_dtype", string("")}, {"transpose_a", boolean(false)}, {"transpose_b", boolean(false)}},
                 infer::matmul});
    // BatchMatmulAttrs' C++ defaults are false/false (the Python wrapper passes transpose_b=True,
    // so TVM's text writes it); text from printers before 0.8 meant a x b^T: the parser
    // writes transpose_b=True into such calls (parser.hpp, legacy_batch_matmul).
    t.push_back({"nn.batch_matmul", P::out_ewise_fusable, 2, 2,
                 {{"out_dtype", string("")}, {"transpose_a", boolean(false)}, {"transpose_b", boolean(false)}}, infer::batch_matmul});
    t.push_back({"reshape", P::injective, 1, 1, {{"allowzero", integer(0)}}, infer::reshape});
    t.push_back({"transpose", P::injective, 1, 1, {{"axes", none()}}, infer::transpose});
    t.push_back({"squeeze", P::injective, 1, 1, {{"axis", none()}}, infer::squeeze});
    t.push_back({"split", P::injective, 1, 1, {{"axis", integer(0)}}, infer::split});
    t.push_back({"concatenate", P::injective, 1, 1, {{"axis", integer(0)}}, infer::concatenate});
    t.push_back({"stack", P::injective, 1, 1, {{"axis", integer(0)}}, infer::stack});
    t.push_back({"strided_slice", P::injective, 1, 1, {{"strides", none()}, {"axes", none()}, {"slice_mode", string("end")}},
                 infer::strided_slice});
    t.push_back({"take", P::injective, 2, 2, {{"axis", none()}, {"batch_dims", integer(0)}, {"mode", string("clip")}}, infer::take});
    for (std::string_view n : {"sum", "mean", "max", "min", "prod"})
      t.push_back({n, P::comm_reduce, 1, 1, {{"axis", none()}, {"keepdims", boolean(false)}, {"exclude", boolean(false)}}, infer::reduce});
    t.push_back({"variance", P::comm_reduce, 2, 2,
                 {{"axis", none()}, {"keepdims", boolean(false)}, {"exclude", boolean(false)}, {"unbiased", boolean(false)}}, infer::variance});
    t.push_back({"collapse_sum_like", P::comm_reduce, 2, 2, {}, infer::collapse_sum_like});
    t.push_back({"broadcast_to", P::broadcast, 1, 1, {{"dtype", string("")}}, infer::broadcast_to});
    t.push_back({"full", P::elemwise, 1, 1, {{"dtype", string("")}}, infer::full});
    t.push_back({"one_hot", P::out_ewise_fusable, 3, 3, {{"depth", integer(1)}, {"axis", integer(-1)}, {"dtype", string("")}}, infer::one_hot});
    t.push_back({"broadcast_to_like", P::broadcast, 2, 2, {}, infer::broadcast_to_like});
    t.push_back({"nn.softmax", P::out_ewise_fusable, 1, 1, {{"axis", integer(-1)}}, infer::softmax});
    t.push_back({"nn.log_softmax", P::out_ewise_fusable, 1, 1, {{"axis", integer(-1)}}, infer::softmax});
    t.push_back({"nn.layer_norm", P::none, 3, 3, {{"axis", integer(-1)}, {"epsilon", real(1e-5)}, {"center", boolean(true)}, {"scale", boolean(true)}},
                 infer::layer_norm});
    t.push_back({"nn.batch_norm", P::out_ewise_fusable, 5, 5,
                 {{"axis", integer(1)}, {"epsilon", real(1e-5)}, {"center", boolean(true)}, {"scale", boolean(true)}}, infer::batch_norm});
    t.push_back({"nn.dropout", P::opaque, 1, 1, {{"rate", real(0.5)}}, infer::dropout});
    t.push_back({"annotation.stop_fusion", P::opaque, 1, 1, {}, infer::identity});
    t.push_back({"on_device", P::opaque, 1, 1, {}, infer::identity});
    t.push_back({"device_copy", P::opaque, 1, 1, {}, infer::identity});
    t.push_back({"qnn.quantize", P::none, 3, 3, {{"axis", integer(-1)}, {"out_dtype", string("int8")}}, infer::qnn_quantize});
    t.push_back({"qnn.dequantize", P::none, 3, 3, {{"axis", integer(-1)}, {"out_dtype", string("float32")}}, infer::qnn_dequantize});
    t.push_back({"qnn.requantize", P::none, 5, 5,
                 {{"axis", integer(-1)}, {"rounding", string("None")}, {"compute_dtype", string("None")}, {"out_dtype", string("int8")}},
                 infer::qnn_requantize});
    t.push_back({"qnn.dense", P::out_ewise_fusable, 6, 6, {{"units", none()}, {"out_dtype", string("int32")}}, infer::qnn_dense});
    t.push_back({"qnn.batch_matmul", P::none, 6, 6,
                 {{"out_dtype", string("int32")}, {"transpose_a", boolean(false)}, {"transpose_b", boolean(false)}}, infer::qnn_batch_matmul});
    t.push_back({"qnn.add", P::broadcast, 8, 8, {{"lhs_axis", integer(-1)}, {"rhs_axis", integer(-1)}}, infer::qnn_binary});
    t.push_back({"qnn.mul", P::broadcast, 8, 8, {{"lhs_axis", integer(-1)}, {"rhs_axis", integer(-1)}}, infer::qnn_binary});
    t.push_back({"qnn.concatenate", P::none, 5, 5, {{"axis", integer(0)}}, infer::qnn_concatenate});
    return t;
  }();
  return table;
}

/// The op named `name`, or null when it is not supported.
inline const op_def* find_op(std::string_view name) {
  for (const op_def& d : op_table())
    if (d.name == name) return &d;
  return nullptr;
}

/// Attribute `name` of any call as written, or its op's default when the callee is a
/// registered op.
inline const attr_value* attr_or_default(const expr& call, std::string_view name) {
  if (call.callee && call.callee->kind == expr_kind::op)
    if (const op_def* d = find_op(call.callee->name)) return attr_or_default(call, *d, name);
  return call.attributes.find(name);
}

/// "add, cast, clip, ..." (sorted), for the unsupported-op error.
inline std::string supported_ops() {
  std::vector<std::string_view> names;
  for (const op_def& d : op_table()) names.push_back(d.name);
  std::sort(names.begin(), names.end());
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + std::string(names[i]);
  return s;
}

}  // namespace fuse::relay
