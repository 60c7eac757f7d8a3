// Relay text out of a module, as TVM v0.19 prints it (`#[version = "0.0.5"]`, graph normal form
// `%N = op(args, attrs) /* ty=T */;`, closures, tuples, projections, let, constants as literals
// or `meta[relay.Constant][i]` with a `#[metadata]` section). parse(print(m)) is structurally
// equal to m (structural_equal.hpp), and tests compare a pass's output with TVM's printed "after"
// program through the two.
//
//   std::string text = fuse::relay::print(m);
#pragma once

#include <string>

#include "fuse/relay/ir.hpp"

namespace fuse::relay {

namespace printer_detail {

/// Printed inline wherever used (no binding); structural equality compares these as values.
inline bool atomic(const expr* e) {
  return e->kind == expr_kind::var || e->kind == expr_kind::constant || e->kind == expr_kind::op ||
         e->kind == expr_kind::global;
}

/// Shortest text that reads back as the same value.
std::string shortest(double v);
std::string shortest(float v);

}  // namespace printer_detail

/// Relay text for `m` (TVM v0.19 style); parse(print(m)) is structurally equal to m.
/// Throws relay::error for what text cannot hold (see the printer's checks).
std::string print(const module& m);

}  // namespace fuse::relay
