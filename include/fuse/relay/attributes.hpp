// Reading a call's attributes: the attribute values the defaults table is written with, the look-up
// of an attribute as written or its op's default (printers leave defaults out), and op_call, a
// call being typed, through which the type relations (type_relations.hpp), the interpreter and
// the emitter read attributes, checked, with errors that name the op.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuse/relay/ir.hpp"

namespace fuse::relay {

struct op_def;  // the registry's entry of an op (ops.hpp)

// ---- attribute values used by the defaults table --------------------------------------------------

namespace attr {
attr_value integer(std::int64_t v);
attr_value real(double v);
attr_value boolean(bool v);
attr_value string(std::string v);
inline attr_value none() { return attr_value{}; }
}  // namespace attr

/// Attribute `name` of a call of op `def` as written, or the op's default (printers leave
/// defaults out); null when neither exists.
const attr_value* attr_or_default(const expr& call, const op_def& def, std::string_view name);

/// Attribute `name` of any call as written, or its op's default when the callee is a
/// registered op.
const attr_value* attr_or_default(const expr& call, std::string_view name);

/// A call being typed: its argument types and its attributes, with the op's defaults behind
/// them. Accessors throw relay::error at the call (or at the attribute) naming the op.
class op_call {
 public:
  op_call(const module& m, const expr& call, const op_def& def, std::vector<type> args)
      : m_(m), call_(call), def_(def), args_(std::move(args)) {}

  const expr& node() const { return call_; }
  std::string_view op() const;
  std::size_t arity() const { return args_.size(); }
  const type& arg(std::size_t i) const { return args_[i]; }
  /// Argument i, which must be a tensor type.
  const type& tensor(std::size_t i) const;
  std::int64_t rank(std::size_t i) const { return static_cast<std::int64_t>(tensor(i).shape.size()); }

  /// The attribute as written, or the op's default; null when neither exists.
  const attr_value* find(std::string_view name) const { return attr_or_default(call_, def_, name); }
  bool is_none(std::string_view name) const {
    const attr_value* v = find(name);
    return !v || v->k == attr_value::kind::none;
  }
  std::int64_t integer(std::string_view name) const;
  double real(std::string_view name) const;
  bool boolean(std::string_view name) const;
  std::string string(std::string_view name) const;
  /// An integer list (a single integer reads as a list of one).
  std::vector<std::int64_t> integers(std::string_view name) const;
  /// A dtype attribute ("" or absent: nullopt, meaning "the input's").
  std::optional<dtype> dtype_attr(std::string_view name) const;
  /// An axis in [-rank, rank), normalized.
  std::int64_t axis(std::int64_t a, std::int64_t rank, std::string_view what = "axis") const;

  // ---- attributes that three readers share (type relation, interpreter, emitter) ----------

  /// transpose: the permutation, normalized and checked (axes None: the axes reversed).
  std::vector<std::int64_t> transpose_axes(std::int64_t rank) const;

  /// sum/mean/max/min/prod/variance: which axes are reduced. As TVM's GetReduceAxes: axis None
  /// or an empty list reduces every axis (whatever exclude says); otherwise the listed axes, or
  /// with exclude the others.
  std::vector<bool> reduced_axes(std::int64_t rank) const;

  /// strided_slice over a tensor of `shape`, per axis: the first element read, the step and the
  /// count (-1 on a dynamic axis). Relay's rules: negative begin/end count from the end, then
  /// clamp to [0, n] (step > 0) or [-1, n - 1] (step < 0); in size mode `end` holds sizes.
  struct slice {
    std::vector<std::int64_t> begin, step, count;
  };
  slice slice_of(const std::vector<std::int64_t>& shape) const;

  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void fail_at(const attr_value& v, const std::string& message) const;

 private:
  const attr_value* require(std::string_view name) const;
  const module& m_;
  const expr& call_;
  const op_def& def_;
  std::vector<type> args_;
};

}  // namespace fuse::relay
