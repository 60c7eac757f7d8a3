// The Relay text parser: source text -> relay::module (fuse/relay/ir.hpp).
//
//   fuse::relay::module m = fuse::relay::parse("model.relay", text);
//   fuse::relay::module m = fuse::relay::parse_file("model.relay");
//
// It reads what every TVM printer wrote (v0.5 to v0.19; reference notes, section 1), not only
// what TVM's own parser accepts: the version header is optional, `;` after a binding may be a
// line break (v0.5), `/* ty=... */` and span comments are kept on the node they follow, debug
// blobs in attributes are kept as raw text, and a bare expression (`fn (...) {...}`, or
// `free_var` lines then an expression) becomes the definition "main".
//
// Graph bindings `%N = e;` just name the node of `e` (graph normal form); they are scoped to the
// function body, `if` branch or block that holds them and a later binding of the same name
// shadows an earlier one. Parameters, `let` and `free_var` variables are `var` nodes and every
// reference points at that one node. Binding chains are parsed in a loop, so their length does
// not grow the stack; real nesting (parentheses, calls in calls, nested functions, types,
// attribute arrays) is bounded at `max_depth` levels.
//
// Every error is a relay::error pointing into the text. Unknown operator names are not errors
// here (the op registry checks them); `match` is rejected with a clear message.
#pragma once

#include <string>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/source.hpp"

namespace fuse::relay {

namespace parser_detail {

/// How deep parentheses, calls, functions, types and attribute arrays may nest.
inline constexpr int max_depth = 500;

}  // namespace parser_detail

/// Parses Relay text; `name` is the file name errors show. Throws relay::error.
module parse(std::string name, std::string text);

/// Reads and parses a file. Throws relay::error ("cannot read FILE" when it cannot be read).
inline module parse_file(const std::string& path) { return parse(path, read_file_bytes(path)); }

}  // namespace fuse::relay
