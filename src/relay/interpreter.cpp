// The reference interpreter (fuse/relay/interpreter.hpp).
#include "fuse/relay/interpreter.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fuse/core/half.hpp"
#include "fuse/expr/ops.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/ops.hpp"

namespace fuse::relay {

value value::tensor(relay::dtype dt, std::vector<std::int64_t> shape) {
  value v;
  v.dt = dt;
  v.shape = std::move(shape);
  const std::size_t n = static_cast<std::size_t>(v.count());
  if (dt.is_float()) v.f.assign(n, 0.0);
  else v.i.assign(n, 0);
  return v;
}

value value::tuple(std::vector<value> fields) {
  value v;
  v.is_tuple = true;
  v.fields = std::move(fields);
  return v;
}

namespace interp {

std::int64_t wrap(std::int64_t x, dtype d) {
  if (d.is_bool()) return x != 0;
  if (d.bits >= 64) return x;
  const auto u = static_cast<std::uint64_t>(x) & ((std::uint64_t{1} << d.bits) - 1);
  if (d.is_int() && (u >> (d.bits - 1)) & 1) return static_cast<std::int64_t>(u | ~((std::uint64_t{1} << d.bits) - 1));
  return static_cast<std::int64_t>(u);
}

double hold(double v, dtype d, bool round_float32) {
  if (round_float32 && d.code == dtype::float_code && d.bits == 32) return static_cast<double>(static_cast<float>(v));
  if (d.bits == 16 && d.code == dtype::float_code)
    return static_cast<double>(static_cast<float>(fuse::half(static_cast<float>(v))));
  if (d.code == dtype::bfloat_code)
    return static_cast<double>(static_cast<float>(fuse::bfloat16(static_cast<float>(v))));
  if (d.bits == 32) {
    constexpr double overflow = 0x1.ffffffp127;
    if (v >= overflow) return std::numeric_limits<double>::infinity();
    if (v <= -overflow) return -std::numeric_limits<double>::infinity();
  }
  return v;
}

void convert(const value& v, std::size_t k, value& out, std::size_t o, bool round_float32) {
  const dtype to = out.dt;
  if (to.is_float()) {
    out.f[o] = hold(v.as_double(k), to, round_float32);
    return;
  }
  if (to.is_bool()) {
    out.i[o] = v.floating() ? (v.f[k] != 0 || std::isnan(v.f[k])) : v.i[k] != 0;
    return;
  }
  if (!v.floating()) {
    out.i[o] = wrap(v.i[k], to);
    return;
  }
  const double x = v.f[k];
  double lo, hi;  // the target's range
  if (to.is_int()) lo = -std::ldexp(1.0, to.bits - 1), hi = std::ldexp(1.0, to.bits - 1) - 1;
  else lo = 0, hi = std::ldexp(1.0, to.bits) - 1;
  if (std::isnan(x)) out.i[o] = 0;
  else if (x <= lo)
    out.i[o] = to.is_int() && to.bits == 64 ? std::numeric_limits<std::int64_t>::min() : static_cast<std::int64_t>(lo);
  else if (x >= hi + 1)
    out.i[o] = to.bits >= 63 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(hi);
  else out.i[o] = static_cast<std::int64_t>(std::trunc(x));
}

std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

std::vector<std::int64_t> broadcast_strides(const std::vector<std::int64_t>& in, const std::vector<std::int64_t>& out) {
  const std::vector<std::int64_t> s = strides_of(in);
  std::vector<std::int64_t> b(out.size(), 0);
  const std::size_t off = out.size() - in.size();
  for (std::size_t d = 0; d < in.size(); ++d) b[off + d] = in[d] == 1 ? 0 : s[d];
  return b;
}

}  // namespace interp

value interpreter::run(const std::string& name, const std::vector<value>& inputs, bool float32_rounding) {
  const definition* d = m_.find(name);
  if (!d) throw relay::error("the module has no @" + name);
  round_float32_ = float32_rounding;
  return call(*d->fn, inputs, 0);
}

std::vector<value> interpreter::flatten(const value& v) {
  std::vector<value> out;
  std::vector<const value*> stack{&v};
  while (!stack.empty()) {
    const value* x = stack.back();
    stack.pop_back();
    if (!x->is_tuple) out.push_back(*x);
    else
      for (std::size_t k = x->fields.size(); k-- > 0;) stack.push_back(&x->fields[k]);
  }
  return out;
}

constant_data interpreter::to_constant(const value& v) {
  if (v.is_tuple) throw relay::error("a tuple is not a tensor");
  constant_data c;
  c.dt = v.dt;
  c.shape = v.shape;
  const auto n = static_cast<std::size_t>(v.count());
  c.bytes.resize(n * v.dt.bytes());
  for (std::size_t k = 0; k < n; ++k) {
    if (v.floating()) c.set_real(k, v.f[k]);
    else c.set_integer(k, v.i[k]);
  }
  return c;
}

value interpreter::from_constant(const constant_data& c) {
  value v = value::tensor(c.dt, c.shape);
  const auto n = static_cast<std::size_t>(v.count());
  for (std::size_t k = 0; k < n; ++k) {
    if (v.floating()) v.f[k] = c.real(k);
    else v.i[k] = c.integer(k);
  }
  return v;
}

value interpreter::call(const expr& fn, const std::vector<value>& args, int depth) {
  if (depth > max_call_depth) throw m_.error_at(fn.at, "calls nested deeper than " + std::to_string(max_call_depth));
  if (args.size() != fn.args.size())
    throw m_.error_at(fn.at, "the function takes " + std::to_string(fn.args.size()) + " arguments, not " +
                                 std::to_string(args.size()));
  std::unordered_map<const expr*, value> env;
  for (std::size_t k = 0; k < args.size(); ++k) {
    const type& t = fn.args[k]->checked.known() ? fn.args[k]->checked : fn.args[k]->annotated;
    if (t.is_tensor() && !args[k].is_tuple && (t.shape.size() != args[k].shape.size() || !(t.dt == args[k].dt)))
      throw m_.error_at(fn.args[k]->at, "input %" + fn.args[k]->name + " must be " + t.str());
    env[fn.args[k]] = args[k];
  }
  return eval(fn.body, env, depth);
}

value interpreter::eval(const expr* root, std::unordered_map<const expr*, value>& env, int depth) {
  count_uses(root);
  std::vector<std::pair<const expr*, bool>> stack{{root, false}};
  while (!stack.empty()) {
    auto [e, expanded] = stack.back();
    stack.pop_back();
    if (env.count(e)) continue;
    if (!expanded) {
      stack.push_back({e, true});
      if (e->kind == expr_kind::let) {
        // The value first, bound to the variable, then the body.
        if (!env.count(e->args[1])) {
          stack.push_back({e->args[1], false});
        }
        continue;
      }
      if (e->kind == expr_kind::if_else) {
        if (!env.count(e->args[0])) stack.push_back({e->args[0], false});
        continue;
      }
      if (e->kind == expr_kind::function) continue;  // a closure value: evaluated when called
      for (const expr* c : e->args)
        if (!env.count(c)) stack.push_back({c, false});
      if (e->kind == expr_kind::call && e->callee->kind != expr_kind::op && e->callee->kind != expr_kind::global &&
          e->callee->kind != expr_kind::function && !env.count(e->callee))
        stack.push_back({e->callee, false});
      continue;
    }
    switch (e->kind) {
      case expr_kind::let: {
        if (!env.count(e->args[0])) env[e->args[0]] = env.at(e->args[1]);
        if (!env.count(e->args[2])) {
          stack.push_back({e, true});
          stack.push_back({e->args[2], false});
          continue;
        }
        env[e] = env.at(e->args[2]);
        break;
      }
      case expr_kind::if_else: {
        const value& c = env.at(e->args[0]);
        const bool t = c.floating() ? c.f.at(0) != 0 : c.i.at(0) != 0;
        const expr* branch = e->args[t ? 1 : 2];
        if (!env.count(branch)) {
          stack.push_back({e, true});
          stack.push_back({branch, false});
          continue;
        }
        env[e] = env.at(branch);
        break;
      }
      default: env[e] = compute(*e, env, depth);
    }
  }
  return env.at(root);
}

void interpreter::count_uses(const expr* root) {
  // The shared walk less a call's callee (a called function is run, not read); each argument
  // edge counts, the body edge does not.
  walk_post_order(
      std::vector<const expr*>{root}, enter_all{},
      [&](const expr* e, expr* const& c) {
        if (&c == &e->callee) return false;
        if (&c == &e->body) return true;
        const bool reads = e->kind == expr_kind::call || e->kind == expr_kind::tuple || e->kind == expr_kind::tuple_get;
        uses_[c] += reads ? 1 : std::int64_t{1} << 40;  // let and if keep what they read
        return true;
      },
      [](const expr*) {});
  uses_[root] += std::int64_t{1} << 40;
}

value interpreter::consume(const expr* a, std::unordered_map<const expr*, value>& env) {
  auto it = env.find(a);
  const bool last = a->kind != expr_kind::var && --uses_[a] == 0;
  if (!last) return it->second;
  value v = std::move(it->second);
  env.erase(it);
  return v;
}

value interpreter::compute(const expr& e, std::unordered_map<const expr*, value>& env, int depth) {
  switch (e.kind) {
    case expr_kind::var: throw m_.error_at(e.at, "%" + e.name + " has no value here");
    case expr_kind::constant:
      if (!e.data)
        throw m_.error_at(e.at, "this constant's data is unknown (no metadata section): give it as an input");
      return from_constant(*e.data);
    case expr_kind::tuple: {
      std::vector<value> f;
      for (const expr* a : e.args) f.push_back(consume(a, env));
      return value::tuple(std::move(f));
    }
    case expr_kind::tuple_get: {  // only the field is copied (or moved, at the last use)
      const expr* t = e.args[0];
      auto it = env.find(t);
      const auto i = static_cast<std::size_t>(e.index);
      if (t->kind == expr_kind::var || --uses_[t] > 0) return it->second.fields.at(i);
      value f = std::move(it->second.fields.at(i));
      env.erase(it);
      return f;
    }
    case expr_kind::call: {
      std::vector<value> args;
      for (const expr* a : e.args) args.push_back(consume(a, env));
      if (e.callee->kind == expr_kind::op) return apply_op(e, args);
      if (e.callee->kind == expr_kind::global) return call(*m_.find(e.callee->name)->fn, args, depth + 1);
      if (e.callee->kind == expr_kind::function) return call(*e.callee, args, depth + 1);
      throw m_.error_at(e.at, "calling a closure held in a variable is not supported by the interpreter");
    }
    default: throw m_.error_at(e.at, "the interpreter cannot evaluate this expression");
  }
}

template <class Op>
value interpreter::unary(const Op& op, const value& a, dtype out) {
  value r = value::tensor(out, a.shape);
  for (std::size_t k = 0; k < r.f.size() + r.i.size(); ++k) {
    if (a.floating()) {
      const auto v = op.reference(a.f[k]);
      if (r.floating()) r.f[k] = hold(static_cast<double>(v), out);
      else r.i[k] = static_cast<std::int64_t>(v);  // a bool result (isnan, ...)
    } else if constexpr (requires { op.reference(std::int64_t{}); }) r.i[k] = interp::wrap(op.reference(a.i[k]), out);
  }
  return r;
}

template <class Op>
value interpreter::binary(const Op& op, const value& a, const value& b, const type& t) {
  value r = value::tensor(t.dt, t.shape);
  const std::vector<std::int64_t>* ins[2] = {&a.shape, &b.shape};
  interp::for_each_broadcast<2>(t.shape, ins, [&](std::size_t k, const std::size_t* off) {
    if (a.floating()) {
      const auto v = op.reference(a.f[off[0]], b.f[off[1]]);
      if (r.floating()) r.f[k] = hold(static_cast<double>(v), t.dt);
      else r.i[k] = static_cast<std::int64_t>(v);
    } else if constexpr (requires { op.reference(std::int64_t{}, std::int64_t{}); }) {
      r.i[k] = interp::wrap(static_cast<std::int64_t>(op.reference(a.i[off[0]], b.i[off[1]])), t.dt);
    }
  });
  return r;
}

template <class Op>
value interpreter::elementwise(const op_call& c, const std::vector<value>& args, const type& t) {
  Op op{};
  if constexpr (ops::has_attributes<Op>) Op::attributes(op, [&](ops::attribute a, double& v) { v = c.real(a.name); });
  if constexpr (Op::arity == 1) {
    return unary(op, args[0], t.dt);
  } else if constexpr (ops::has_channel_operand<Op>) {
    // The channel operand placed along `axis` (extent there, 1 elsewhere), then broadcast.
    value ch = args[Op::channel_operand];
    const auto rank = static_cast<std::int64_t>(args[0].shape.size());
    const std::int64_t ax = c.axis(c.integer("axis"), rank);
    ch.shape.assign(static_cast<std::size_t>(rank), 1);
    ch.shape[static_cast<std::size_t>(ax)] = args[Op::channel_operand].shape[0];
    return binary(op, args[0], ch, t);
  } else if constexpr (Op::arity == 2) {
    return binary(op, args[0], args[1], t);
  } else {
    return where(args, t);
  }
}

value interpreter::apply_op(const expr& e, const std::vector<value>& args) {
  const std::string& name = e.callee->name;
  const op_def* d = find_op(name);
  if (!d) throw m_.error_at(e.callee->at, "unsupported op " + name);
  std::vector<type> at;
  for (const expr* a : e.args) at.push_back(a->checked);
  const op_call c(m_, e, *d, at);
  const type& t = e.checked;
  // The elementwise ops of fuse's table (fuse/expr/ops.hpp), each computed by its reference.
  if (value r; with_elementwise_op(name, [&]<class Op>(std::type_identity<Op>) { r = elementwise<Op>(c, args, t); }))
    return r;
  if (name == "copy" || name == "annotation.stop_fusion" || name == "on_device" || name == "device_copy")
    return args[0];
  if (name == "zeros_like" || name == "ones_like") {
    value r = value::tensor(t.dt, t.shape);
    std::fill(r.f.begin(), r.f.end(), name == "ones_like" ? 1.0 : 0.0);
    std::fill(r.i.begin(), r.i.end(), name == "ones_like" ? 1 : 0);
    return r;
  }
  if (name == "cast") {
    value r = value::tensor(t.dt, t.shape);
    for (std::size_t k = 0; k < static_cast<std::size_t>(r.count()); ++k)
      interp::convert(args[0], k, r, k, round_float32_);
    return r;
  }
  if (name == "nn.bias_add") return bias_add(c, args, t);
  if (name == "nn.dense") return matmul(args[0], args[1], false, true, t);
  if (name == "nn.matmul") return matmul(args[0], args[1], c.boolean("transpose_a"), c.boolean("transpose_b"), t);
  if (name == "nn.batch_matmul")
    return batch_matmul(args[0], args[1], c.boolean("transpose_a"), c.boolean("transpose_b"), t);
  if (name == "reshape" || name == "squeeze" || name == "expand_dims") {
    value r = args[0];
    r.shape = t.shape;
    return r;
  }
  if (name == "transpose") return transpose(c, args[0], t);
  if (name == "split") return split(c, args[0], t);
  if (name == "concatenate") return concatenate(c, args[0], t);
  if (name == "stack") return stack(c, args[0], t);
  if (name == "strided_slice") return strided_slice(c, args[0], t);
  if (name == "take") return take(c, args[0], args[1], t);
  if (name == "sum" || name == "mean" || name == "max" || name == "min" || name == "prod")
    return reduce(c, name, args[0], t);
  if (name == "variance") return variance(c, args, t);
  if (name == "full") {
    value r = value::tensor(t.dt, t.shape);
    value one = value::tensor(t.dt, {});
    interp::convert(args[0], 0, one, 0, round_float32_);
    std::fill(r.f.begin(), r.f.end(), one.floating() ? one.f[0] : 0.0);
    std::fill(r.i.begin(), r.i.end(), one.floating() ? 0 : one.i[0]);
    return r;
  }
  if (name == "one_hot") return one_hot(c, args, t);
  if (name == "collapse_sum_like") return collapse_sum(args[0], t);
  if (name == "broadcast_to" || name == "broadcast_to_like") {
    value r = value::tensor(t.dt, t.shape);
    const std::vector<std::int64_t>* ins[1] = {&args[0].shape};
    interp::for_each_broadcast<1>(t.shape, ins, [&](std::size_t k, const std::size_t* off) {
      if (r.floating()) r.f[k] = args[0].f[off[0]];
      else r.i[k] = args[0].i[off[0]];
    });
    return r;
  }
  if (name == "nn.softmax" || name == "nn.log_softmax") return softmax(c, args[0], name == "nn.log_softmax");
  if (name == "nn.layer_norm") return layer_norm(c, args);
  if (name == "nn.batch_norm") return batch_norm(c, args, t);
  if (name == "nn.dropout") {
    value mask = value::tensor(args[0].dt, args[0].shape);
    std::fill(mask.f.begin(), mask.f.end(), 1.0);
    std::fill(mask.i.begin(), mask.i.end(), 1);
    return value::tuple({args[0], mask});
  }
  throw m_.error_at(e.at, "the interpreter does not run " + name + " yet (legalize it first)");
}

value interpreter::where(const std::vector<value>& a, const type& t) {
  value r = value::tensor(t.dt, t.shape);
  const std::vector<std::int64_t>* ins[3] = {&a[0].shape, &a[1].shape, &a[2].shape};
  interp::for_each_broadcast<3>(t.shape, ins, [&](std::size_t k, const std::size_t* off) {
    const bool cond = a[0].floating() ? a[0].f[off[0]] != 0 : a[0].i[off[0]] != 0;
    const value& src = cond ? a[1] : a[2];
    const std::size_t o = cond ? off[1] : off[2];
    if (r.floating()) r.f[k] = src.f[o];
    else r.i[k] = src.i[o];
  });
  return r;
}

value interpreter::bias_add(const op_call& c, const std::vector<value>& a, const type& t) {
  const std::int64_t ax = c.axis(c.integer("axis"), static_cast<std::int64_t>(t.shape.size()));
  std::vector<std::int64_t> bshape(t.shape.size() - static_cast<std::size_t>(ax), 1);
  bshape[0] = t.shape[static_cast<std::size_t>(ax)];
  value b = a[1];
  b.shape = bshape;
  return binary(ops::add{}, a[0], b, t);
}

namespace {

/// The reference's matrix products: out[p] = A[p] B[p] for `batch` products of m x k by k x n
/// (an operand with one batch is broadcast), each dot product summed in k order in Acc (double
/// for floats, int64 for integers). A's rows and B's columns are first copied into contiguous
/// rows (A when transposed, B when not), so that the inner loop reads memory in order: the same
/// sums in the same order as walking the operands in place, without a strided read per product
/// (seed 002's 96 x 384 x 384 x 64 batch_matmuls: the largest part of its check). Two rows by
/// four columns are summed side by side: eight independent chains of additions instead of one,
/// each sum still in k order, so the results are the same bits.
template <class Acc, class Store>
void reference_products(const std::vector<Acc>& a, const std::vector<Acc>& b, bool a_batched, bool b_batched,
                        std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb,
                        Store&& store) {
  const auto M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n), K = static_cast<std::size_t>(k);
  std::vector<Acc> rows(M * K), cols(N * K);
  const auto store_dot = [&](std::size_t p, std::size_t i, std::size_t j) {
    const Acc* x = rows.data() + i * K;
    const Acc* y = cols.data() + j * K;
    Acc sum = 0;
    for (std::size_t q = 0; q < K; ++q) sum += x[q] * y[q];
    store((p * M + i) * N + j, sum);
  };
  for (std::size_t p = 0; p < static_cast<std::size_t>(batch); ++p) {
    if (p == 0 || a_batched) {
      const std::size_t base = (a_batched ? p : 0) * M * K;
      for (std::size_t i = 0; i < M; ++i)
        for (std::size_t q = 0; q < K; ++q) rows[i * K + q] = a[base + (ta ? q * M + i : i * K + q)];
    }
    if (p == 0 || b_batched) {
      const std::size_t base = (b_batched ? p : 0) * N * K;
      for (std::size_t j = 0; j < N; ++j)
        for (std::size_t q = 0; q < K; ++q) cols[j * K + q] = b[base + (tb ? j * K + q : q * N + j)];
    }
    // Two rows by four columns: eight chains of additions; the rest one row or column at a time.
    std::size_t i = 0;
    for (; i + 2 <= M; i += 2) {
      const Acc* x0 = rows.data() + i * K;
      const Acc* x1 = x0 + K;
      std::size_t j = 0;
      for (; j + 4 <= N; j += 4) {
        const Acc* y = cols.data() + j * K;
        Acc s[2][4] = {};
        for (std::size_t q = 0; q < K; ++q) {
          const Acc y0 = y[q], y1 = y[K + q], y2 = y[2 * K + q], y3 = y[3 * K + q];
          s[0][0] += x0[q] * y0;
          s[0][1] += x0[q] * y1;
          s[0][2] += x0[q] * y2;
          s[0][3] += x0[q] * y3;
          s[1][0] += x1[q] * y0;
          s[1][1] += x1[q] * y1;
          s[1][2] += x1[q] * y2;
          s[1][3] += x1[q] * y3;
        }
        for (std::size_t r = 0; r < 2; ++r)
          for (std::size_t c = 0; c < 4; ++c) store((p * M + i + r) * N + j + c, s[r][c]);
      }
      for (; j < N; ++j) store_dot(p, i, j), store_dot(p, i + 1, j);
    }
    for (; i < M; ++i)
      for (std::size_t j = 0; j < N; ++j) store_dot(p, i, j);
  }
}

/// `batch` products of m x k by k x n (n: t's last extent) into a value of type t, held in t's
/// dtype as interp::hold does with `round_float32`; an operand not batched is read for every
/// product.
value products(const value& a, const value& b, bool a_batched, bool b_batched, std::int64_t batch, std::int64_t m,
               std::int64_t k, bool ta, bool tb, const type& t, bool round_float32) {
  value r = value::tensor(t.dt, t.shape);
  const std::int64_t n = t.shape.back();
  if (a.floating())
    reference_products(a.f, b.f, a_batched, b_batched, batch, m, n, k, ta, tb, [&](std::size_t o, double s) {
      if (r.floating()) r.f[o] = interp::hold(s, t.dt, round_float32);
      else r.i[o] = interp::wrap(0, t.dt);  // (the type relations give float operands a float result)
    });
  else
    reference_products(a.i, b.i, a_batched, b_batched, batch, m, n, k, ta, tb, [&](std::size_t o, std::int64_t s) {
      if (r.floating()) r.f[o] = interp::hold(static_cast<double>(s), t.dt, round_float32);
      else r.i[o] = interp::wrap(s, t.dt);
    });
  return r;
}

}  // namespace

value interpreter::matmul(const value& a, const value& b, bool ta, bool tb, const type& t) {
  const std::int64_t n = t.shape.back(), k = ta ? a.shape.front() : a.shape.back();
  std::int64_t count = 1;
  for (std::int64_t d : t.shape) count *= d;
  return products(a, b, false, false, 1, count / std::max<std::int64_t>(n, 1), k, ta, tb, t, round_float32_);
}

value interpreter::batch_matmul(const value& a, const value& b, bool ta, bool tb, const type& t) {
  return products(a, b, a.shape[0] != 1, b.shape[0] != 1, t.shape[0], t.shape[1], ta ? a.shape[1] : a.shape[2], ta, tb,
                  t, round_float32_);
}

template <class F>
value interpreter::gather(const value& in, const type& t, F&& input_offset) {
  value r = value::tensor(t.dt, t.shape);
  std::vector<std::int64_t> idx(t.shape.size(), 0);
  for (std::size_t k = 0; k < static_cast<std::size_t>(r.count()); ++k) {
    const auto o = static_cast<std::size_t>(input_offset(idx));
    if (r.floating()) r.f[k] = in.f[o];
    else r.i[k] = in.i[o];
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return r;
}

value interpreter::transpose(const op_call& c, const value& x, const type& t) {
  const std::vector<std::int64_t> axes = c.transpose_axes(static_cast<std::int64_t>(x.shape.size()));
  const auto s = interp::strides_of(x.shape);
  return gather(x, t, [&](const std::vector<std::int64_t>& idx) {
    std::int64_t o = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) o += idx[d] * s[static_cast<std::size_t>(axes[d])];
    return o;
  });
}

value interpreter::split(const op_call& c, const value& x, const type& t) {
  const std::size_t ax = static_cast<std::size_t>(c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size())));
  const auto s = interp::strides_of(x.shape);
  std::vector<value> parts;
  std::int64_t begin = 0;
  for (const type& p : t.fields) {
    parts.push_back(gather(x, p, [&](const std::vector<std::int64_t>& idx) {
      std::int64_t o = 0;
      for (std::size_t d = 0; d < idx.size(); ++d) o += (idx[d] + (d == ax ? begin : 0)) * s[d];
      return o;
    }));
    begin += p.shape[ax];
  }
  return value::tuple(std::move(parts));
}

value interpreter::concatenate(const op_call& c, const value& tup, const type& t) {
  const std::size_t ax = static_cast<std::size_t>(c.axis(c.integer("axis"), static_cast<std::int64_t>(t.shape.size())));
  value r = value::tensor(t.dt, t.shape);
  const auto rs = interp::strides_of(t.shape);
  std::int64_t at = 0;
  for (const value& f : tup.fields) {
    std::vector<std::int64_t> idx(f.shape.size(), 0);
    for (std::size_t k = 0; k < static_cast<std::size_t>(f.count()); ++k) {
      std::int64_t o = 0;
      for (std::size_t d = 0; d < idx.size(); ++d) o += (idx[d] + (d == ax ? at : 0)) * rs[d];
      if (r.floating()) r.f[static_cast<std::size_t>(o)] = f.f[k];
      else r.i[static_cast<std::size_t>(o)] = f.i[k];
      for (std::size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < f.shape[d]) break;
        idx[d] = 0;
      }
    }
    at += f.shape[ax];
  }
  return r;
}

value interpreter::stack(const op_call& c, const value& tup, const type& t) {
  const auto ax = static_cast<std::ptrdiff_t>(c.axis(c.integer("axis"), static_cast<std::int64_t>(t.shape.size())));
  value unit = tup;
  for (value& f : unit.fields) f.shape.insert(f.shape.begin() + ax, 1);
  return concatenate(c, unit, t);
}

value interpreter::strided_slice(const op_call& c, const value& x, const type& t) {
  const op_call::slice sl = c.slice_of(x.shape);
  const auto xs = interp::strides_of(x.shape);
  return gather(x, t, [&](const std::vector<std::int64_t>& idx) {
    std::int64_t o = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) o += (sl.begin[d] + idx[d] * sl.step[d]) * xs[d];
    return o;
  });
}

value interpreter::take(const op_call& c, const value& data, const value& ind, const type& t) {
  const std::string mode = c.string("mode");
  const bool flat = c.is_none("axis");
  const std::size_t ax =
      flat ? 0 : static_cast<std::size_t>(c.axis(c.integer("axis"), static_cast<std::int64_t>(data.shape.size())));
  const std::int64_t extent = flat ? data.count() : data.shape[ax];
  const auto ds = interp::strides_of(data.shape);
  const auto is = interp::strides_of(ind.shape);
  const std::size_t ir = ind.shape.size();
  return gather(data, t, [&](const std::vector<std::int64_t>& idx) {
    std::int64_t io = 0;
    for (std::size_t d = 0; d < ir; ++d) io += idx[(flat ? 0 : ax) + d] * is[d];
    std::int64_t j = ind.i[static_cast<std::size_t>(io)];
    if (mode == "wrap") j = extent ? ((j % extent) + extent) % extent : 0;
    else j = std::clamp<std::int64_t>(j, 0, std::max<std::int64_t>(extent - 1, 0));
    if (flat) return j;
    std::int64_t o = 0;
    for (std::size_t d = 0; d < ax; ++d) o += idx[d] * ds[d];
    o += j * ds[ax];
    for (std::size_t d = ax + 1; d < data.shape.size(); ++d) o += idx[d + ir - 1] * ds[d];
    return o;
  });
}

value interpreter::reduce(const op_call& c, const std::string& name, const value& x, const type& t) {
  const std::int64_t rnk = static_cast<std::int64_t>(x.shape.size());
  const std::vector<bool> red = c.reduced_axes(rnk);
  // Output index of each input element: the kept axes in order.
  std::vector<std::int64_t> kept_shape;
  for (std::int64_t d = 0; d < rnk; ++d)
    if (!red[static_cast<std::size_t>(d)]) kept_shape.push_back(x.shape[static_cast<std::size_t>(d)]);
  const auto ks = interp::strides_of(kept_shape);
  std::int64_t outn = 1;
  for (std::int64_t d : kept_shape) outn *= d;
  const std::int64_t per = outn ? x.count() / outn : 0;
  const bool fl = x.floating();
  std::vector<double> accf(static_cast<std::size_t>(outn));
  std::vector<std::int64_t> acci(static_cast<std::size_t>(outn));
  const double init_f = name == "prod" ? 1.0 : name == "max" ? -INFINITY : name == "min" ? INFINITY : 0.0;
  std::int64_t init_i = name == "prod" ? 1 : 0;
  if (name == "max") init_i = x.dt.lowest();
  if (name == "min") init_i = x.dt.highest();
  std::fill(accf.begin(), accf.end(), init_f);
  std::fill(acci.begin(), acci.end(), init_i);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(rnk), 0);
  for (std::size_t k = 0; k < static_cast<std::size_t>(x.count()); ++k) {
    std::int64_t o = 0, kd = 0;
    for (std::int64_t d = 0; d < rnk; ++d)
      if (!red[static_cast<std::size_t>(d)]) o += idx[static_cast<std::size_t>(d)] * ks[static_cast<std::size_t>(kd++)];
    const auto ou = static_cast<std::size_t>(o);
    if (fl) {
      const double v = x.f[k];
      double& a = accf[ou];
      if (name == "sum" || name == "mean") a += v;
      else if (name == "prod") a *= v;
      else if (std::isnan(v) || std::isnan(a)) a = NAN;
      else a = name == "max" ? std::max(a, v) : std::min(a, v);
    } else {
      const std::int64_t v = x.i[k];
      std::int64_t& a = acci[ou];
      if (name == "sum" || name == "mean") a = interp::wrap(a + v, x.dt);
      else if (name == "prod") a = interp::wrap(a * v, x.dt);
      else a = name == "max" ? std::max(a, v) : std::min(a, v);
    }
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < x.shape[d]) break;
      idx[d] = 0;
    }
  }
  value r = value::tensor(t.dt, t.shape);
  for (std::size_t o = 0; o < static_cast<std::size_t>(outn); ++o) {
    if (fl) r.f[o] = hold(name == "mean" ? (per ? accf[o] / static_cast<double>(per) : NAN) : accf[o], t.dt);
    else r.i[o] = name == "mean" ? (per ? acci[o] / per : 0) : acci[o];
  }
  return r;
}

value interpreter::one_hot(const op_call& c, const std::vector<value>& args, const type& t) const {
  value on = value::tensor(t.dt, {}), off = value::tensor(t.dt, {});
  interp::convert(args[1], 0, on, 0, round_float32_);
  interp::convert(args[2], 0, off, 0, round_float32_);
  const auto a =
      static_cast<std::size_t>(c.axis(c.integer("axis"), static_cast<std::int64_t>(args[0].shape.size()) + 1));
  value r = value::tensor(t.dt, t.shape);
  std::vector<std::int64_t> idx(t.shape.size(), 0);
  for (std::size_t k = 0; k < static_cast<std::size_t>(r.count()); ++k) {
    std::int64_t src = 0;  // the index's position: idx without axis a
    for (std::size_t d = 0, s = 0; d < idx.size(); ++d)
      if (d != a) src = src * args[0].shape[s++] + idx[d];
    const bool hit = args[0].i[static_cast<std::size_t>(src)] == idx[a];
    if (r.floating()) r.f[k] = hit ? on.f[0] : off.f[0];
    else r.i[k] = hit ? on.i[0] : off.i[0];
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return r;
}

value interpreter::variance(const op_call& c, const std::vector<value>& args, const type& t) {
  const value& x = args[0];
  const type xt = type::tensor(x.shape, x.dt);
  const value d = binary(ops::subtract{}, x, args[1], xt);
  value sum = reduce(c, "sum", binary(ops::multiply{}, d, d, xt), t);
  const std::vector<bool> red = c.reduced_axes(static_cast<std::int64_t>(x.shape.size()));
  std::int64_t count = 1;
  for (std::size_t k = 0; k < red.size(); ++k)
    if (red[k]) count *= x.shape[k];
  if (c.boolean("unbiased")) --count;
  for (double& v : sum.f) v = hold(v / static_cast<double>(count), t.dt);
  return sum;
}

value interpreter::collapse_sum(const value& x, const type& t) const {
  value r = value::tensor(t.dt, t.shape);
  const std::size_t lead = x.shape.size() - t.shape.size();
  const auto rs = interp::strides_of(t.shape);
  std::vector<std::int64_t> idx(x.shape.size(), 0);
  for (std::size_t k = 0; k < static_cast<std::size_t>(x.count()); ++k) {
    std::int64_t o = 0;
    for (std::size_t d = 0; d < t.shape.size(); ++d)
      if (t.shape[d] != 1) o += idx[d + lead] * rs[d];
    if (r.floating()) r.f[static_cast<std::size_t>(o)] += x.f[k];
    else r.i[static_cast<std::size_t>(o)] = interp::wrap(r.i[static_cast<std::size_t>(o)] + x.i[k], t.dt);
    for (std::size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < x.shape[d]) break;
      idx[d] = 0;
    }
  }
  for (double& v : r.f) v = hold(v, t.dt);
  return r;
}

template <class F>
void interpreter::for_each_row(const std::vector<std::int64_t>& shape, std::size_t axis, F&& f) {
  const auto s = interp::strides_of(shape);
  const std::int64_t n = shape[axis];
  std::int64_t outer = 1;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (d != axis) outer *= shape[d];
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::int64_t r = 0; r < outer; ++r) {
    std::int64_t base = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) base += idx[d] * s[d];
    f(base, s[axis], n);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (d == axis) continue;
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

value interpreter::softmax(const op_call& c, const value& x, bool log) {
  const auto ax = static_cast<std::size_t>(c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size())));
  value r = x;
  for_each_row(x.shape, ax, [&](std::int64_t base, std::int64_t st, std::int64_t n) {
    double mx = -INFINITY;
    for (std::int64_t q = 0; q < n; ++q) mx = std::max(mx, x.f[static_cast<std::size_t>(base + q * st)]);
    double sum = 0;
    for (std::int64_t q = 0; q < n; ++q) sum += std::exp(x.f[static_cast<std::size_t>(base + q * st)] - mx);
    for (std::int64_t q = 0; q < n; ++q) {
      const auto o = static_cast<std::size_t>(base + q * st);
      const double v = x.f[o] - mx;
      r.f[o] = hold(log ? v - std::log(sum) : std::exp(v) / sum, x.dt);
    }
  });
  return r;
}

value interpreter::layer_norm(const op_call& c, const std::vector<value>& a) {
  const value& x = a[0];
  const auto ax = static_cast<std::size_t>(c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size())));
  const double eps = static_cast<double>(static_cast<float>(c.real("epsilon")));
  const bool center = c.boolean("center"), scale = c.boolean("scale");
  value r = x;
  for_each_row(x.shape, ax, [&](std::int64_t base, std::int64_t st, std::int64_t n) {
    double mean = 0, var = 0;
    for (std::int64_t q = 0; q < n; ++q) mean += x.f[static_cast<std::size_t>(base + q * st)];
    mean /= static_cast<double>(n);
    for (std::int64_t q = 0; q < n; ++q) {
      const double d = x.f[static_cast<std::size_t>(base + q * st)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(n);
    for (std::int64_t q = 0; q < n; ++q) {
      const auto o = static_cast<std::size_t>(base + q * st);
      double v = (x.f[o] - mean) / std::sqrt(var + eps);
      if (scale) v *= a[1].f[static_cast<std::size_t>(q)];
      if (center) v += a[2].f[static_cast<std::size_t>(q)];
      r.f[o] = hold(v, x.dt);
    }
  });
  return r;
}

value interpreter::batch_norm(const op_call& c, const std::vector<value>& a, const type& t) {
  const value& x = a[0];
  const auto ax = static_cast<std::size_t>(c.axis(c.integer("axis"), static_cast<std::int64_t>(x.shape.size())));
  // Rounded to float32 as for layer_norm: SimplifyInference makes it a float scalar constant.
  const double eps = static_cast<double>(static_cast<float>(c.real("epsilon")));
  const bool center = c.boolean("center"), scale = c.boolean("scale");
  value r = x;
  const auto s = interp::strides_of(x.shape);
  for (std::size_t k = 0; k < static_cast<std::size_t>(x.count()); ++k) {
    const auto ch = static_cast<std::size_t>((static_cast<std::int64_t>(k) / s[ax]) % x.shape[ax]);
    double v = (x.f[k] - a[3].f[ch]) / std::sqrt(a[4].f[ch] + eps);
    if (scale) v *= a[1].f[ch];
    if (center) v += a[2].f[ch];
    r.f[k] = hold(v, x.dt);
  }
  (void)t;
  return value::tuple({r, a[3], a[4]});
}

}  // namespace fuse::relay
