// The type relations of the Relay ops (fuse/relay/type_relations.hpp).
#include "fuse/relay/type_relations.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuse/relay/attributes.hpp"
#include "fuse/relay/ir.hpp"

namespace fuse::relay::infer {

std::string shape_str(const std::vector<std::int64_t>& s) { return type::tensor(s, dtype::float32()).str(); }

std::vector<std::int64_t> broadcast(const op_call& c, const std::vector<std::int64_t>& a,
                                    const std::vector<std::int64_t>& b) {
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

type same(const op_call& c) { return c.tensor(0); }

type float_unary(const op_call& c) {
  const type& t = c.tensor(0);
  if (!t.dt.is_float()) c.fail("needs a floating-point input, not " + t.dt.name());
  return t;
}

type cast(const op_call& c) {
  type t = c.tensor(0);
  const auto d = c.dtype_attr("dtype");
  if (!d) c.fail("missing attribute dtype");
  t.dt = *d;
  return t;
}

type binary(const op_call& c, std::optional<dtype> result) {
  const type& a = c.tensor(0);
  const type& b = c.tensor(1);
  if (!(a.dt == b.dt)) c.fail("operands have different dtypes, " + a.dt.name() + " and " + b.dt.name());
  return type::tensor(broadcast(c, a.shape, b.shape), result ? *result : a.dt);
}
type arith(const op_call& c) { return binary(c, std::nullopt); }

type where(const op_call& c) {
  const type& cond = c.tensor(0);
  const type& a = c.tensor(1);
  const type& b = c.tensor(2);
  if (!(a.dt == b.dt)) c.fail("branches have different dtypes, " + a.dt.name() + " and " + b.dt.name());
  return type::tensor(broadcast(c, cond.shape, broadcast(c, a.shape, b.shape)), a.dt);
}

type bias_add(const op_call& c) {
  const type& x = c.tensor(0);
  const type& b = c.tensor(1);
  const std::int64_t ax = c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size()));
  if (b.shape.size() != 1) c.fail("the bias must be 1-d, not " + b.str());
  const std::int64_t n = x.shape[static_cast<std::size_t>(ax)];
  if (n >= 0 && b.shape[0] >= 0 && n != b.shape[0])
    c.fail("bias of " + std::to_string(b.shape[0]) + " elements for axis " + std::to_string(ax) + " of extent " +
           std::to_string(n));
  if (!(x.dt == b.dt)) c.fail("bias dtype " + b.dt.name() + " differs from the input's " + x.dt.name());
  return x;
}

void same_extent(const op_call& c, std::int64_t a, std::int64_t b, const std::string& what) {
  if (a >= 0 && b >= 0 && a != b) c.fail(what + ": " + std::to_string(a) + " vs " + std::to_string(b));
}

type dense_like(const op_call& c, bool transpose_a, bool transpose_b) {
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
type dense(const op_call& c) { return dense_like(c, false, true); }
type matmul(const op_call& c) { return dense_like(c, c.boolean("transpose_a"), c.boolean("transpose_b")); }

type batch_matmul(const op_call& c) {
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

std::int64_t product(const std::vector<std::int64_t>& s) {
  std::int64_t p = 1;
  for (std::int64_t d : s) p *= d;
  return p;
}

type reshape(const op_call& c) {
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
      if (i + 2 >= codes.size() || src >= in.size())
        c.fail("newshape code -4 needs two following values and an input axis");
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

type transpose(const op_call& c) {
  const type& x = c.tensor(0);
  std::vector<std::int64_t> out;
  for (std::int64_t a : c.transpose_axes(static_cast<std::int64_t>(x.shape.size())))
    out.push_back(x.shape[static_cast<std::size_t>(a)]);
  return type::tensor(out, x.dt);
}

type squeeze(const op_call& c) {
  const type& x = c.tensor(0);
  const std::int64_t r = static_cast<std::int64_t>(x.shape.size());
  std::vector<bool> drop(static_cast<std::size_t>(r), false);
  if (c.is_none("axis")) {
    for (std::int64_t i = 0; i < r; ++i) drop[static_cast<std::size_t>(i)] = x.shape[static_cast<std::size_t>(i)] == 1;
  } else {
    for (std::int64_t a : c.integers("axis")) {
      const std::int64_t n = c.axis(a, r);
      if (x.shape[static_cast<std::size_t>(n)] != 1)
        c.fail("axis " + std::to_string(a) + " of " + x.str() + " is not 1");
      drop[static_cast<std::size_t>(n)] = true;
    }
  }
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < r; ++i)
    if (!drop[static_cast<std::size_t>(i)]) out.push_back(x.shape[static_cast<std::size_t>(i)]);
  return type::tensor(out, x.dt);
}

type expand_dims(const op_call& c) {
  const type& x = c.tensor(0);
  const std::int64_t r = static_cast<std::int64_t>(x.shape.size());
  const std::int64_t n = c.integer("num_newaxis");
  if (n < 0) c.fail("num_newaxis must not be negative");
  const std::int64_t a = c.axis(c.integer("axis"), r + 1);
  std::vector<std::int64_t> out = x.shape;
  out.insert(out.begin() + a, static_cast<std::size_t>(n), 1);
  return type::tensor(out, x.dt);
}

type split(const op_call& c) {
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
    if (ext >= 0 && ext % n)
      c.fail("axis " + std::to_string(ax) + " of " + x.str() + " does not divide into " + std::to_string(n) +
             " sections");
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

type concatenate(const op_call& c) {
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

type stack(const op_call& c) {
  const type& t = c.arg(0);
  if (t.k != type::kind::tuple || t.fields.empty()) c.fail("needs a non-empty tuple of tensors, not " + t.str());
  const type& f0 = t.fields[0];
  if (!f0.is_tensor()) c.fail("field 0 must be a tensor, not " + f0.str());
  const std::int64_t r = static_cast<std::int64_t>(f0.shape.size());
  std::vector<std::int64_t> shape = f0.shape;
  for (std::size_t i = 1; i < t.fields.size(); ++i) {
    const type& f = t.fields[i];
    if (!f.is_tensor()) c.fail("field " + std::to_string(i) + " must be a tensor, not " + f.str());
    if (!(f.dt == f0.dt))
      c.fail("field " + std::to_string(i) + " has dtype " + f.dt.name() + ", field 0 " + f0.dt.name());
    if (static_cast<std::int64_t>(f.shape.size()) != r)
      c.fail("field " + std::to_string(i) + " (" + f.str() + ") has another rank than field 0 (" + f0.str() + ")");
    for (std::size_t d = 0; d < shape.size(); ++d) {
      same_extent(c, shape[d], f.shape[d],
                  "field " + std::to_string(i) + " (" + f.str() + ") differs from field 0 (" + f0.str() + ") on axis " +
                      std::to_string(d));
      if (shape[d] < 0) shape[d] = f.shape[d];
    }
  }
  const std::int64_t ax = c.axis(c.integer("axis"), r + 1);
  shape.insert(shape.begin() + ax, static_cast<std::int64_t>(t.fields.size()));
  return type::tensor(shape, f0.dt);
}

type strided_slice(const op_call& c) {
  const type& x = c.tensor(0);
  return type::tensor(c.slice_of(x.shape).count, x.dt);
}

type take(const op_call& c) {
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

type reduce(const op_call& c) {
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

type variance(const op_call& c) {
  const type& x = c.tensor(0);
  const type& m = c.tensor(1);
  if (x.shape.empty()) c.fail("the data must have rank >= 1");
  if (m.shape.size() != x.shape.size()) c.fail("the mean " + m.str() + " must have the data's rank (" + x.str() + ")");
  if (!(m.dt == x.dt)) c.fail("the mean has dtype " + m.dt.name() + ", the data " + x.dt.name());
  broadcast(c, x.shape, m.shape);
  return reduce(c);
}

type collapse_sum_like(const op_call& c) {
  const type& x = c.tensor(0);
  const type& like = c.tensor(1);
  if (!(x.dt == like.dt)) c.fail("data types " + x.dt.name() + " and " + like.dt.name() + " do not match");
  if (broadcast(c, x.shape, like.shape) != x.shape) c.fail(like.str() + " does not broadcast to " + x.str());
  return like;
}

type broadcast_to(const op_call& c) {
  const type& x = c.tensor(0);
  const std::vector<std::int64_t> shape = c.integers("shape");
  if (broadcast(c, x.shape, shape) != shape) c.fail(x.str() + " does not broadcast to " + shape_str(shape));
  return type::tensor(shape, x.dt);
}
type broadcast_to_like(const op_call& c) {
  const type& x = c.tensor(0);
  const type& like = c.tensor(1);
  if (!(x.dt == like.dt)) c.fail("data types " + x.dt.name() + " and " + like.dt.name() + " do not match");
  if (broadcast(c, x.shape, like.shape) != like.shape) c.fail(x.str() + " does not broadcast to " + like.str());
  return like;
}

type full(const op_call& c) {
  const type& v = c.tensor(0);
  if (!v.shape.empty()) c.fail("the fill value must be 0-d, not " + v.str());
  return type::tensor(c.integers("shape"), c.dtype_attr("dtype").value_or(v.dt));
}

type one_hot(const op_call& c) {
  const type& i = c.tensor(0);
  if (!i.dt.is_int() && !i.dt.is_uint()) c.fail("indices must be integers, not " + i.dt.name());
  for (std::size_t k = 1; k < 3; ++k)
    if (!c.tensor(k).shape.empty())
      c.fail(std::string(k == 1 ? "on_value" : "off_value") + " must be 0-d, not " + c.tensor(k).str());
  const std::int64_t depth = c.integer("depth");
  if (depth < 0) c.fail("depth must not be negative");
  const std::int64_t r = static_cast<std::int64_t>(i.shape.size());
  const std::int64_t a = c.axis(c.integer("axis"), r + 1);
  std::vector<std::int64_t> out = i.shape;
  out.insert(out.begin() + a, depth);
  return type::tensor(out, c.dtype_attr("dtype").value_or(c.tensor(1).dt));
}

type softmax(const op_call& c) {
  const type& x = float_unary(c);
  c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size()));
  return x;
}

type layer_norm(const op_call& c) {
  const type& x = float_unary(c);
  const std::int64_t ax = c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size()));
  for (std::size_t i = 1; i < 3; ++i) {
    const type& p = c.tensor(i);
    if (p.shape.size() != 1) c.fail("gamma and beta must be 1-d");
    same_extent(c, p.shape[0], x.shape[static_cast<std::size_t>(ax)], "gamma/beta extent vs the normalized axis");
  }
  return x;
}

type batch_norm(const op_call& c) {
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

type dropout(const op_call& c) {
  const type& x = c.tensor(0);
  return type::tuple({x, x});
}

type identity(const op_call& c) { return c.arg(0); }

void scalar_param(const op_call& c, std::size_t i, const char* what) {
  const type& t = c.tensor(i);
  if (t.shape.size() > 1) c.fail(std::string(what) + " must be a scalar or 1-d, not " + t.str());
}

type qnn_quantize(const op_call& c) {
  type t = c.tensor(0);
  if (!t.dt.is_float()) c.fail("quantizes a float tensor, not " + t.dt.name());
  scalar_param(c, 1, "the scale");
  scalar_param(c, 2, "the zero point");
  t.dt = c.dtype_attr("out_dtype").value_or(dtype{dtype::int_code, 8, 1});
  return t;
}
type qnn_dequantize(const op_call& c) {
  type t = c.tensor(0);
  scalar_param(c, 1, "the scale");
  scalar_param(c, 2, "the zero point");
  t.dt = c.dtype_attr("out_dtype").value_or(dtype::float32());
  if (!(t.dt == dtype::float32() || t.dt == dtype{dtype::float_code, 16, 1}))
    c.fail("out_dtype must be float32 or float16, not " + t.dt.name());
  return t;
}
type qnn_requantize(const op_call& c) {
  type t = c.tensor(0);
  for (std::size_t i = 1; i < 5; ++i) scalar_param(c, i, "scales and zero points");
  t.dt = c.dtype_attr("out_dtype").value_or(dtype{dtype::int_code, 8, 1});
  return t;
}
type qnn_dense(const op_call& c) {
  for (std::size_t i = 2; i < 6; ++i) scalar_param(c, i, "scales and zero points");
  type t = dense_like(c, false, true);
  t.dt = c.dtype_attr("out_dtype").value_or(dtype::int32());
  return t;
}
type qnn_batch_matmul(const op_call& c) {
  for (std::size_t i = 2; i < 6; ++i) scalar_param(c, i, "scales and zero points");
  type t = batch_matmul(c);
  t.dt = c.dtype_attr("out_dtype").value_or(dtype::int32());
  return t;
}
type qnn_binary(const op_call& c) {
  for (std::size_t i = 2; i < 8; ++i) scalar_param(c, i, "scales and zero points");
  return arith(c);
}
type qnn_concatenate(const op_call& c) { return concatenate(c); }

}  // namespace fuse::relay::infer
