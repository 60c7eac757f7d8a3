// The plan drawn for Graphviz: each kernel a cluster holding its ops, edges along the dataflow,
// inputs and constants outside every cluster; materialized values (what a kernel writes to
// memory) drawn with a double border. `fuse-relay compile --dot PLAN.dot`.
#pragma once

#include <string>

#include "fuse/relay/plan.hpp"

namespace fuse::relay {

/// The plan p as a Graphviz digraph titled `title` (see the file comment).
std::string plan_dot(const plan& p, const std::string& title);

}  // namespace fuse::relay
