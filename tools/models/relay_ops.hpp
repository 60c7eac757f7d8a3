// The Relay ops the model generators emit, each with its result type and its attributes as
// TVM v0.19 prints them: only the fields that differ from the C++ default
// (include/tvm/relay/attrs/*.h), fields without a default always. The defaults that decide
// what is printed are noted where they matter:
//   nn.batch_matmul   out_dtype "" , transpose_a false, transpose_b false (BatchMatmulAttrs; the
//                     Python wrapper's transpose_b=True default is therefore printed)
//   nn.dense          units has no default (printed, `units=None` when not given)
//   nn.bias_add       axis 1          nn.layer_norm  axis -1, epsilon 1e-5, center/scale true
//   nn.softmax        axis -1         nn.dropout     rate 0.5
//   take              axis None, batch_dims 0, mode "clip"
//   squeeze           axis None (an empty list is not None: `axis=[]` is printed)
//   strided_slice     begin, end, strides, axes have no default; slice_mode "end"
//   mean / variance   axis None, keepdims false, exclude false (variance: unbiased false)
//   expand_dims       axis has no default, num_newaxis 1
//   split             axis 0          one_hot  axis -1 (depth and dtype printed)
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/relay_writer.hpp"

namespace fuse::relay::models::op {

using shape_t = std::vector<std::int64_t>;
using relay::dtype;
using relay::type;

inline type tensor(shape_t s, dtype d) { return type::tensor(std::move(s), d); }
inline dtype dtype_of(const graph& g, int x) { return g.type_of(x).dt; }
inline std::int64_t rank(const graph& g, int x) { return static_cast<std::int64_t>(g.shape_of(x).size()); }
inline std::int64_t axis_of(std::int64_t a, std::int64_t r) { return a < 0 ? a + r : a; }

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::logic_error("relay model builder: " + what);
}

/// NumPy broadcasting of two shapes.
inline shape_t broadcast(const shape_t& a, const shape_t& b) {
  const std::size_t r = std::max(a.size(), b.size());
  shape_t out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    require(x == y || x == 1 || y == 1, "shapes do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// ---- elementwise -----------------------------------------------------------------------------

inline int binary(graph& g, const std::string& name, int a, int b) {
  return g.call(name, {a, b}, "", tensor(broadcast(g.shape_of(a), g.shape_of(b)), dtype_of(g, a)));
}
inline int add(graph& g, int a, int b) { return binary(g, "add", a, b); }
inline int subtract(graph& g, int a, int b) { return binary(g, "subtract", a, b); }
inline int multiply(graph& g, int a, int b) { return binary(g, "multiply", a, b); }
inline int divide(graph& g, int a, int b) { return binary(g, "divide", a, b); }
inline int power(graph& g, int a, int b) { return binary(g, "power", a, b); }
inline int left_shift(graph& g, int a, int b) { return binary(g, "left_shift", a, b); }

inline int unary(graph& g, const std::string& name, int x) { return g.call(name, {x}, "", g.type_of(x)); }

inline int cast(graph& g, int x, dtype d) {
  return g.call("cast", {x}, "dtype=" + attr_text::str(d.name()), tensor(g.shape_of(x), d));
}

inline int clip(graph& g, int x, double lo, double hi) {
  return g.call("clip", {x}, "a_min=" + attr_text::real(lo) + ", a_max=" + attr_text::real(hi), g.type_of(x));
}

// ---- views -----------------------------------------------------------------------------------

/// reshape with TVM's newshape codes 0 (copy) and -1 (infer); the attribute as written.
inline int reshape(graph& g, int x, const shape_t& newshape) {
  const shape_t& in = g.shape_of(x);
  std::int64_t total = 1, known = 1, infer = -1;
  for (std::int64_t d : in) total *= d;
  shape_t out(newshape.size());
  for (std::size_t i = 0; i < newshape.size(); ++i) {
    if (newshape[i] == -1) infer = static_cast<std::int64_t>(i);
    else out[i] = newshape[i] == 0 ? in.at(i) : newshape[i];
    if (newshape[i] != -1) known *= out[i];
  }
  if (infer >= 0) out[static_cast<std::size_t>(infer)] = total / known;
  std::int64_t check = 1;
  for (std::int64_t d : out) check *= d;
  require(check == total, "reshape changes the element count");
  return g.call("reshape", {x}, "newshape=" + attr_text::ints(newshape), tensor(out, dtype_of(g, x)));
}

inline int transpose(graph& g, int x, const shape_t& axes) {
  shape_t out;
  for (std::int64_t a : axes) out.push_back(g.shape_of(x).at(static_cast<std::size_t>(axis_of(a, rank(g, x)))));
  return g.call("transpose", {x}, "axes=" + attr_text::ints(axes), tensor(out, dtype_of(g, x)));
}

inline int expand_dims(graph& g, int x, std::int64_t axis) {
  shape_t out = g.shape_of(x);
  out.insert(out.begin() + axis_of(axis, rank(g, x) + 1), 1);
  return g.call("expand_dims", {x}, "axis=" + std::to_string(axis), tensor(out, dtype_of(g, x)));
}

/// squeeze with an explicit axis list (`axis=[]` squeezes nothing, as the PyTorch frontend's
/// matmul writes it).
inline int squeeze(graph& g, int x, const shape_t& axes) {
  shape_t out;
  const shape_t& in = g.shape_of(x);
  for (std::size_t i = 0; i < in.size(); ++i) {
    bool drop = false;
    for (std::int64_t a : axes) drop = drop || axis_of(a, rank(g, x)) == static_cast<std::int64_t>(i);
    if (!drop) out.push_back(in[i]);
  }
  return g.call("squeeze", {x}, "axis=" + attr_text::ints(axes), tensor(out, dtype_of(g, x)));
}

inline int broadcast_to(graph& g, int x, const shape_t& shape) {
  return g.call("broadcast_to", {x}, "shape=" + attr_text::ints(shape), tensor(shape, dtype_of(g, x)));
}

/// strided_slice in "end" mode with non-negative begin < end (all the models need).
inline int strided_slice(graph& g, int x, const shape_t& begin, const shape_t& end, const shape_t& strides) {
  shape_t out = g.shape_of(x);
  for (std::size_t i = 0; i < begin.size(); ++i) {
    const std::int64_t s = strides.size() > i ? strides[i] : strides.back();
    out[i] = (std::min(end[i], out[i]) - begin[i] + s - 1) / s;
  }
  return g.call("strided_slice", {x},
                "begin=" + attr_text::ints(begin) + ", end=" + attr_text::ints(end) +
                    ", strides=" + attr_text::ints(strides) + ", axes=None",
                tensor(out, dtype_of(g, x)));
}

/// take(data, indices, axis) with the mode written when it is not "clip".
inline int take(graph& g, int data, int indices, std::int64_t axis, const std::string& mode = "clip") {
  const shape_t& d = g.shape_of(data);
  const std::int64_t a = axis_of(axis, rank(g, data));
  shape_t out(d.begin(), d.begin() + a);
  for (std::int64_t e : g.shape_of(indices)) out.push_back(e);
  out.insert(out.end(), d.begin() + a + 1, d.end());
  std::string attrs = "axis=" + std::to_string(axis);
  if (mode != "clip") attrs += ", mode=" + attr_text::str(mode);
  return g.call("take", {data, indices}, attrs, tensor(out, dtype_of(g, data)));
}

/// split into sections at `indices` along axis, or into `sections` equal parts (indices empty).
inline int split(graph& g, int x, const shape_t& indices, std::int64_t sections, std::int64_t axis) {
  const shape_t& in = g.shape_of(x);
  const std::size_t a = static_cast<std::size_t>(axis_of(axis, rank(g, x)));
  shape_t cuts = indices;
  if (cuts.empty())
    for (std::int64_t i = 1; i < sections; ++i) cuts.push_back(i * (in[a] / sections));
  std::vector<type> parts;
  std::int64_t prev = 0;
  for (std::size_t i = 0; i <= cuts.size(); ++i) {
    const std::int64_t cut = i < cuts.size() ? cuts[i] : in[a];
    shape_t s = in;
    s[a] = cut - prev;
    parts.push_back(tensor(s, dtype_of(g, x)));
    prev = cut;
  }
  std::string attrs = "indices_or_sections=" + (indices.empty() ? std::to_string(sections) : attr_text::ints(indices));
  if (axis != 0) attrs += ", axis=" + std::to_string(axis);
  return g.call("split", {x}, attrs, type::tuple(parts));
}

// ---- contractions ----------------------------------------------------------------------------

inline int dense(graph& g, int x, int w, const std::string& units, const std::string& out_dtype = "") {
  shape_t out = g.shape_of(x);
  out.back() = g.shape_of(w)[0];
  std::string attrs = "units=" + units;
  if (!out_dtype.empty()) attrs += ", out_dtype=" + attr_text::str(out_dtype);
  return g.call("nn.dense", {x, w}, attrs, tensor(out, out_dtype.empty() ? dtype_of(g, x) : *dtype::parse(out_dtype)));
}

inline int batch_matmul(graph& g, int a, int b, bool transpose_b, const std::string& out_dtype = "") {
  const shape_t& x = g.shape_of(a);
  const shape_t& y = g.shape_of(b);
  const shape_t out = {std::max(x[0], y[0]), x[1], transpose_b ? y[1] : y[2]};
  require((transpose_b ? y[2] : y[1]) == x[2], "batch_matmul reduction extents differ");
  std::string attrs;
  if (!out_dtype.empty()) attrs = "out_dtype=" + attr_text::str(out_dtype);
  if (transpose_b) attrs += std::string(attrs.empty() ? "" : ", ") + "transpose_b=True";
  return g.call("nn.batch_matmul", {a, b}, attrs,
                tensor(out, out_dtype.empty() ? dtype_of(g, a) : *dtype::parse(out_dtype)));
}

inline int bias_add(graph& g, int x, int b, std::int64_t axis) {
  return g.call("nn.bias_add", {x, b}, axis == 1 ? "" : "axis=" + std::to_string(axis), g.type_of(x));
}

// ---- normalization and reductions ------------------------------------------------------------

inline int layer_norm(graph& g, int x, int gamma, int beta, double epsilon) {
  return g.call("nn.layer_norm", {x, gamma, beta}, epsilon == 1e-5 ? "" : "epsilon=" + attr_text::real(epsilon),
                g.type_of(x));
}

inline int softmax(graph& g, int x) { return g.call("nn.softmax", {x}, "", g.type_of(x)); }

/// nn.dropout's (result, mask) tuple: the frontends take field 0.
inline int dropout(graph& g, int x, double rate) {
  return g.call("nn.dropout", {x}, rate == 0.5 ? "" : "rate=" + attr_text::real(rate),
                type::tuple({g.type_of(x), g.type_of(x)}));
}

inline shape_t reduced(const graph& g, int x, std::int64_t axis, bool keepdims) {
  shape_t out;
  const shape_t& in = g.shape_of(x);
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (static_cast<std::int64_t>(i) != axis_of(axis, rank(g, x))) out.push_back(in[i]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

inline int mean(graph& g, int x, std::int64_t axis, bool keepdims) {
  return g.call("mean", {x}, "axis=[" + std::to_string(axis) + "]" + (keepdims ? ", keepdims=True" : ""),
                tensor(reduced(g, x, axis, keepdims), dtype_of(g, x)));
}

/// variance(data, mean) as SimplifyInference makes it (biased; `unbiased` false is the default).
inline int variance(graph& g, int x, int m, std::int64_t axis, bool keepdims) {
  return g.call("variance", {x, m}, "axis=[" + std::to_string(axis) + "]" + (keepdims ? ", keepdims=True" : ""),
                tensor(reduced(g, x, axis, keepdims), dtype_of(g, x)));
}

// ---- creation --------------------------------------------------------------------------------

inline int one_hot(graph& g, int indices, int on, int off, std::int64_t depth, dtype d) {
  shape_t out = g.shape_of(indices);
  out.push_back(depth);
  return g.call("one_hot", {indices, on, off}, "depth=" + std::to_string(depth) + ", dtype=" + attr_text::str(d.name()),
                tensor(out, d));
}

inline int full(graph& g, int fill, const shape_t& shape, dtype d) {
  return g.call("full", {fill}, "shape=" + attr_text::ints(shape) + ", dtype=" + attr_text::str(d.name()),
                tensor(shape, d));
}

}  // namespace fuse::relay::models::op
