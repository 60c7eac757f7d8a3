// Small helpers the frontend's suites share: a program parsed and type-checked, and random
// constant data of any dtype.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "support/small_stack.hpp"

#include <fuse/relay/ir.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/typecheck.hpp>

namespace fuse::test {

/// `small_stack_chain` bindings `%i = add(%i-1, %x)` from `%0 = add(%x, %x)`, the last returned
/// (the long-chain tests, run on a small stack: support/small_stack.hpp); `param` is @main's
/// parameter as written. (They ran 100k long on the 8 MB main stack, 50k under ASan: about 160
/// of test_relay's 300 sanitized seconds.)
inline std::string add_chain_program(const std::string& param = "%x: Tensor[(2), float32]") {
  std::string text = "def @main(" + param + ") {\n  %0 = add(%x, %x);\n";
  for (int i = 1; i < small_stack_chain; ++i)
    text += "  %" + std::to_string(i) + " = add(%" + std::to_string(i - 1) + ", %x);\n";
  return text + "  %" + std::to_string(small_stack_chain - 1) + "\n}\n";
}

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
