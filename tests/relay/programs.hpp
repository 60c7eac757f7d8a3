// Small helpers the frontend's suites share: a program parsed and type-checked, and random
// constant data of any dtype.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include <fuse/relay/ir.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/typecheck.hpp>

namespace fuse::test {

/// The length of the long-chain tests (bindings, lets, nesting in comments): 100k, or 50k in a
/// build under AddressSanitizer at -O0 (test_relay in ./scripts/test), where each takes ten
/// times as long. Either way a recursion per element would overflow the 8 MB stack (ASan's -O0
/// frames are hundreds of bytes) and a quadratic pass would not finish.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr int long_chain = 50000;
#else
inline constexpr int long_chain = 100000;
#endif

/// `text` parsed (as test.relay) and type-checked.
inline relay::module checked(const std::string& text) {
  relay::module m = relay::parse("test.relay", text);
  relay::typecheck(m);
  return m;
}

/// The body of `m`'s main function (which must exist).
inline const relay::expr* main_body(const relay::module& m) {
  REQUIRE(m.find("main"));
  REQUIRE(m.find("main")->fn);
  return m.find("main")->fn->body;
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
