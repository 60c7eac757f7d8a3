// libFuzzer target for the Relay frontend's parser and type checker (`./scripts/fuzz`).
//
// Properties checked on every input, under AddressSanitizer and UndefinedBehaviorSanitizer:
//   * parse() either returns a module or throws relay::error carrying a position (line >= 1);
//     any other exception, a crash, a hang or a stack overflow is a finding;
//   * typecheck() on a parsed module either succeeds or throws relay::error;
//   * a module that type-checks prints to text that parses and type-checks again and is
//     structurally equal to it (the printer and parser agree on everything they accept);
//   * what `fuse-relay compile` runs next (qnn legalization, pipeline.hpp's compile_pipeline:
//     relay.build's prefix, TVM's count, prepare_for_planning; then the planner and the
//     emitter) either succeeds or throws relay::error. FoldConstant folds no value larger than
//     the constants it is computed from, so a fuzzed broadcast_to cannot ask it for terabytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <fuse/relay/emit.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/pipeline.hpp>
#include <fuse/relay/plan.hpp>
#include <fuse/relay/printer.hpp>
#include <fuse/relay/qnn.hpp>
#include <fuse/relay/structural_equal.hpp>
#include <fuse/relay/typecheck.hpp>

namespace {

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_relay: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fuse::relay;
  const std::string text(reinterpret_cast<const char*>(data), size);
  module m;
  try {
    m = parse("fuzz.relay", text);
  } catch (const error& e) {
    if (e.where().line < 1) finding("a parse error without a position", e.what());
    return 0;
  } catch (const std::exception& e) {
    finding("parse threw something other than relay::error", e.what());
  }
  try {
    typecheck(m);
  } catch (const error&) {
    return 0;
  } catch (const std::exception& e) {
    finding("typecheck threw something other than relay::error", e.what());
  }
  std::string printed;
  try {
    printed = print(m);
  } catch (const error&) {
    return 0;  // a module the printer refuses, with a reason (constants with and without data)
  } catch (const std::exception& e) {
    finding("print threw something other than relay::error", e.what());
  }
  try {
    module again = parse("printed.relay", printed);
    typecheck(again);
    if (!structurally_equal(m, again)) finding("the printed module differs from the parsed one", printed);
  } catch (const error& e) {
    finding("the printed module does not parse or type-check again", std::string(e.what()) + "\n" + printed);
  }
  try {
    legalize_qnn(m);
    const pipeline_result prepared = compile_pipeline(m);
    const plan p = make_plan(m, "main", prepared.planning);
    emit_header(m, p, "fuzzed", "fuzz.relay");
  } catch (const error&) {
    return 0;
  } catch (const std::exception& e) {
    finding("compiling threw something other than relay::error", std::string(e.what()) + "\n" + printed);
  }
  return 0;
}
