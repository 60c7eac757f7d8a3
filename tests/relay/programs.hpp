// Small helpers the frontend's suites share: a program parsed and type-checked, and random
// constant data of any dtype.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fuse/relay/ir.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/typecheck.hpp>

namespace fuse::test {

/// `text` parsed (as test.relay) and type-checked.
inline relay::module checked(const std::string& text) {
  relay::module m = relay::parse("test.relay", text);
  relay::typecheck(m);
  return m;
}

/// A tensor of random bytes of dtype dt (bool: 0 or 1): any bit pattern, NaNs included.
inline relay::constant_data random_constant(relay::dtype dt, std::vector<std::int64_t> shape, std::mt19937_64& g) {
  relay::constant_data c;
  c.dt = dt;
  c.shape = std::move(shape);
  c.bytes.resize(static_cast<std::size_t>(c.elements()) * dt.bytes());
  for (auto& b : c.bytes) b = static_cast<unsigned char>(dt.is_bool() ? g() & 1 : g());
  return c;
}

}  // namespace fuse::test
