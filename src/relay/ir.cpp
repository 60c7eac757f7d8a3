// The Relay program's data: dtype and type spellings, the constant element codec, attribute and
// definition look-ups, the module's arena (fuse/relay/ir.hpp).
#include "fuse/relay/ir.hpp"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuse/core/half.hpp"

namespace fuse::relay {

// ---- dtypes -----------------------------------------------------------------------------------

std::optional<dtype> dtype::parse(std::string_view s) {
  if (s == "bool") return boolean();
  dtype d;
  std::string_view rest;
  if (s.starts_with("uint")) d.code = uint_code, rest = s.substr(4);
  else if (s.starts_with("int")) d.code = int_code, rest = s.substr(3);
  else if (s.starts_with("float")) d.code = float_code, rest = s.substr(5);
  else if (s.starts_with("bfloat")) d.code = bfloat_code, rest = s.substr(6);
  else return std::nullopt;
  auto number = [](std::string_view t, unsigned& out) {
    if (t.empty() || t.size() > 5) return false;
    out = 0;
    for (char c : t) {
      if (c < '0' || c > '9') return false;
      out = out * 10 + static_cast<unsigned>(c - '0');
    }
    return true;
  };
  const std::size_t x = rest.find('x');
  unsigned bits = 0, lanes = 1;
  // TVM's String2DLDataType: the bits may be left out (int, uint, float: 32; bfloat: 16).
  if (x == 0 || rest.empty()) bits = d.code == bfloat_code ? 16 : 32;
  else if (!number(rest.substr(0, x), bits)) return std::nullopt;
  if (x != std::string_view::npos && !number(rest.substr(x + 1), lanes)) return std::nullopt;
  if (bits == 0 || bits > 64 || lanes == 0 || lanes > 65535) return std::nullopt;
  d.bits = static_cast<std::uint8_t>(bits);
  d.lanes = static_cast<std::uint16_t>(lanes);
  return d;
}

// ---- types ------------------------------------------------------------------------------------

type type::tensor(std::vector<std::int64_t> shape, relay::dtype dt) {
  type t;
  t.k = kind::tensor;
  t.shape = std::move(shape);
  t.dt = dt;
  return t;
}

type type::tuple(std::vector<type> fields) {
  type t;
  t.k = kind::tuple;
  t.fields = std::move(fields);
  return t;
}

std::string type::str() const {
  switch (k) {
    case kind::incomplete: return "_";
    case kind::tensor: {
      if (shape.empty()) return dt.name();
      std::string s = "Tensor[(";
      for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
      }
      return s + "), " + dt.name() + "]";
    }
    case kind::tuple: {
      std::string s = "(";
      for (std::size_t i = 0; i < fields.size(); ++i) s += (i ? ", " : "") + fields[i].str();
      return s + (fields.size() == 1 ? ",)" : ")");
    }
    case kind::func: {
      std::string s = "fn (";
      for (std::size_t i = 0; i < fields.size(); ++i) s += (i ? ", " : "") + fields[i].str();
      return s + ") -> " + (ret.empty() ? std::string("_") : ret[0].str());
    }
    case kind::named: return name;
  }
  return "_";
}

// ---- constants --------------------------------------------------------------------------------

std::uint64_t constant_data::raw(std::size_t k) const {
  const std::size_t es = dt.bytes();
  std::uint64_t bits = 0;
  for (std::size_t b = 0; b < es && b < 8; ++b) bits |= static_cast<std::uint64_t>(bytes[k * es + b]) << (8 * b);
  return bits;
}

void constant_data::set_raw(std::size_t k, std::uint64_t bits) {
  const std::size_t es = dt.bytes();
  for (std::size_t b = 0; b < es && b < 8; ++b) bytes[k * es + b] = static_cast<unsigned char>(bits >> (8 * b));
}

double constant_data::real(std::size_t k) const {
  const std::uint64_t bits = raw(k);
  if (dt.code == relay::dtype::bfloat_code)
    return static_cast<float>(fuse::bfloat16::from_bits(static_cast<std::uint16_t>(bits)));
  if (dt.bits == 16) return static_cast<float>(fuse::half::from_bits(static_cast<std::uint16_t>(bits)));
  if (dt.bits == 32) {
    float x;
    const auto u = static_cast<std::uint32_t>(bits);
    std::memcpy(&x, &u, 4);
    return x;
  }
  double x;
  std::memcpy(&x, &bits, 8);
  return x;
}

std::int64_t constant_data::integer(std::size_t k) const {
  const std::uint64_t bits = raw(k);
  if (dt.is_bool()) return bits != 0;
  if (dt.is_int() && dt.bits < 64 && ((bits >> (dt.bits - 1)) & 1))
    return static_cast<std::int64_t>(bits | ~((std::uint64_t{1} << dt.bits) - 1));
  return static_cast<std::int64_t>(bits);
}

void constant_data::set_real(std::size_t k, double v) {
  if (dt.code == relay::dtype::bfloat_code) return set_raw(k, fuse::bfloat16(v).bits());
  if (dt.bits == 16) return set_raw(k, fuse::half(v).bits());
  if (dt.bits == 32) {
    const float x = static_cast<float>(v);
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    return set_raw(k, u);
  }
  std::uint64_t u;
  std::memcpy(&u, &v, 8);
  set_raw(k, u);
}

// ---- attributes -------------------------------------------------------------------------------

const attr_value* attrs::find(std::string_view name) const {
  for (const auto& [n, v] : items)
    if (n == name) return &v;
  return nullptr;
}

// ---- the module -------------------------------------------------------------------------------

expr* module::make(expr_kind k, location at) {
  nodes.emplace_back();
  expr* e = &nodes.back();
  e->kind = k;
  e->at = at;
  return e;
}

const definition* module::find(std::string_view name) const {
  for (const auto& d : defs)
    if (d.name == name) return &d;
  return nullptr;
}

definition* module::find(std::string_view name) {
  for (auto& d : defs)
    if (d.name == name) return &d;
  return nullptr;
}

}  // namespace fuse::relay
