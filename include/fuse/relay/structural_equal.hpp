// Structural equality of Relay expressions and modules: alpha-equivalence, as printed text
// would show a difference. parse(print(m)) is structurally equal to m (printer.hpp), and tests
// compare a pass's output with TVM's printed "after" program through it.
//
//   bool same = fuse::relay::structurally_equal(a_expr, b_expr);
#pragma once

#include "fuse/relay/ir.hpp"

namespace fuse::relay {

/// Alpha-equivalence of two expressions: variables are matched where they are bound (function
/// parameters, let), free variables by name; nodes must correspond one to one (a shared node
/// against two equal copies is a difference, as printed text would show), except constants,
/// ops and globals, which text repeats at each use; attributes are
/// compared after filling the op's defaults; numbers by value; constant data by bytes.
/// Types written on nodes (`ty=` comments) are ignored, variables' annotations are compared,
/// and a function's `-> R` only when both have one.
bool structurally_equal(const expr* a, const expr* b);

/// Two modules with the same definitions (by name, in any order), each structurally equal.
bool structurally_equal(const module& a, const module& b);

}  // namespace fuse::relay
