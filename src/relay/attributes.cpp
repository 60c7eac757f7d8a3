// Attribute values, their look-up with the op's defaults, and op_call's checked accessors
// (fuse/relay/attributes.hpp).
#include "fuse/relay/attributes.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/ops.hpp"

namespace fuse::relay {

// ---- attribute values used by the defaults table --------------------------------------------------

namespace attr {
attr_value integer(std::int64_t v) {
  attr_value a;
  a.k = attr_value::kind::integer;
  a.i = v;
  a.literal = dtype::int32();
  return a;
}
attr_value real(double v) {
  attr_value a;
  a.k = attr_value::kind::real;
  a.f = v;
  a.literal = dtype::float32();
  return a;
}
attr_value boolean(bool v) {
  attr_value a;
  a.k = attr_value::kind::boolean;
  a.b = v;
  return a;
}
attr_value string(std::string v) {
  attr_value a;
  a.k = attr_value::kind::string;
  a.s = std::move(v);
  return a;
}
}  // namespace attr

const attr_value* attr_or_default(const expr& call, const op_def& def, std::string_view name) {
  if (const attr_value* v = call.attributes.find(name)) return v;
  for (const auto& [n, v] : def.defaults)
    if (n == name) return &v;
  return nullptr;
}

const attr_value* attr_or_default(const expr& call, std::string_view name) {
  if (call.callee && call.callee->kind == expr_kind::op)
    if (const op_def* d = find_op(call.callee->name)) return attr_or_default(call, *d, name);
  return call.attributes.find(name);
}

// ---- op_call ----------------------------------------------------------------------------------

std::string_view op_call::op() const { return def_.name; }

const type& op_call::tensor(std::size_t i) const {
  if (!args_[i].is_tensor()) fail("argument " + std::to_string(i + 1) + " must be a tensor, not " + args_[i].str());
  return args_[i];
}

std::int64_t op_call::integer(std::string_view name) const {
  const attr_value* v = require(name);
  if (v->k == attr_value::kind::integer || v->k == attr_value::kind::boolean)
    return v->k == attr_value::kind::boolean ? v->b : v->i;
  if (v->k == attr_value::kind::real && v->f == std::floor(v->f) && std::fabs(v->f) < 9.0e15)
    return static_cast<std::int64_t>(v->f);
  fail_at(*v, "attribute " + std::string(name) + " must be an integer");
}

double op_call::real(std::string_view name) const {
  const attr_value* v = require(name);
  if (!v->is_number()) fail_at(*v, "attribute " + std::string(name) + " must be a number");
  return v->number();
}

bool op_call::boolean(std::string_view name) const {
  const attr_value* v = require(name);
  if (!v->is_number()) fail_at(*v, "attribute " + std::string(name) + " must be a boolean");
  return v->number() != 0;
}

std::string op_call::string(std::string_view name) const {
  const attr_value* v = require(name);
  if (v->k == attr_value::kind::none) return "";
  if (v->k != attr_value::kind::string) fail_at(*v, "attribute " + std::string(name) + " must be a string");
  return v->s;
}

std::vector<std::int64_t> op_call::integers(std::string_view name) const {
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

std::optional<dtype> op_call::dtype_attr(std::string_view name) const {
  const attr_value* v = find(name);
  if (!v || v->k == attr_value::kind::none || (v->k == attr_value::kind::string && v->s.empty())) return std::nullopt;
  if (v->k != attr_value::kind::string) fail_at(*v, "attribute " + std::string(name) + " must be a dtype string");
  auto d = dtype::parse(v->s);
  if (!d) fail_at(*v, "attribute " + std::string(name) + ": \"" + v->s + "\" is not a dtype");
  return d;
}

std::int64_t op_call::axis(std::int64_t a, std::int64_t rank, std::string_view what) const {
  if (a < -rank || a >= rank)
    fail(std::string(what) + " " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return a < 0 ? a + rank : a;
}

// ---- attributes that three readers share (type relation, interpreter, emitter) ----------------

std::vector<std::int64_t> op_call::transpose_axes(std::int64_t rank) const {
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

std::vector<bool> op_call::reduced_axes(std::int64_t rank) const {
  const std::vector<std::int64_t> listed = is_none("axis") ? std::vector<std::int64_t>{} : integers("axis");
  std::vector<bool> red(static_cast<std::size_t>(rank), listed.empty());
  if (listed.empty()) return red;
  for (std::int64_t a : listed) red[static_cast<std::size_t>(axis(a, rank))] = true;
  if (boolean("exclude")) red.flip();
  return red;
}

op_call::slice op_call::slice_of(const std::vector<std::int64_t>& shape) const {
  const std::int64_t r = static_cast<std::int64_t>(shape.size());
  const std::vector<std::int64_t> b = integers("begin"), e = integers("end");
  const std::vector<std::int64_t> strides = is_none("strides") ? std::vector<std::int64_t>{1} : integers("strides");
  std::vector<std::int64_t> axes;
  if (is_none("axes"))
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(b.size()); ++i) axes.push_back(i);
  else axes = integers("axes");
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

void op_call::fail(const std::string& message) const {
  throw m_.error_at(call_.at, std::string(def_.name) + ": " + message);
}

void op_call::fail_at(const attr_value& v, const std::string& message) const {
  throw m_.error_at(v.at.line ? v.at : call_.at, std::string(def_.name) + ": " + message);
}

const attr_value* op_call::require(std::string_view name) const {
  const attr_value* v = find(name);
  if (!v) fail("missing attribute " + std::string(name));
  return v;
}

}  // namespace fuse::relay
