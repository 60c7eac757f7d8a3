// Type inference: fills `checked` on every node reachable from the module's definitions, from
// the variables' annotations, the constants' data and the ops' type relations
// (type_relations.hpp), and checks it against every `/* ty=... */` the printer wrote (a
// disagreement is an error naming both types).
#pragma once

#include "fuse/relay/ir.hpp"

namespace fuse::relay {

/// Infers and checks the types of every definition of m (throws relay::error).
void typecheck(module& m);

}  // namespace fuse::relay
