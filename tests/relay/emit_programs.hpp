// Programs and a runner the emitter's suites share (test_emit.cpp, the CPU's header;
// test_cuda_target.cpp, CUDA's): small programs as TVM prints them, one with every op of
// fuse's table, and `fuse-relay check` run on a program's text.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fuse/expr/ops.hpp>

#include "support/random.hpp"

namespace fuse::test {

// One node returned twice and an input returned as it is: every output must be written.
inline const char* returned_twice = R"(
def @main(%x: Tensor[(5, 3), float32]) {
  %0 = exp(%x);
  (%0, %0, %x)
})";

// Inputs named as the generated code names its own things (a keyword, the CUDA model's stream
// and view alias, a kernel's locals e0.., constants c0.., outputs out0..): renamed, not clashing.
inline const char* clashing_names = R"(
def @main(%stream: Tensor[(3, 5), float32], %e1: Tensor[(3, 5), float32], %float: Tensor[(5), float32],
          %view: Tensor[(3, 5), float32], %out0: Tensor[(3, 5), float32], %c0: Tensor[(3, 5), float32]) {
  %0 = add(%stream, %e1);
  %1 = multiply(%0, %float);
  %2 = subtract(%view, %out0);
  %3 = add(%1, %c0);
  %4 = mean(%3, axis=[-1], keepdims=True);
  %5 = subtract(%3, %4);
  (%5, %2)
})";

// Integer shifts (TVM's fixed-point requantization): int64 products shifted right with rounding,
// amounts in and out of range, and a left shift of int8 that wraps.
inline const char* shifts = R"(
def @main(%x: Tensor[(7, 17), int32], %s: Tensor[(17), int32], %b: Tensor[(7, 17), int8]) {
  %0 = cast(%x, dtype="int64");
  %1 = multiply(%0, 1518500250i64);
  %2 = add(%1, 1073741824i64);
  %3 = right_shift(%2, 31i64);
  %4 = cast(%3, dtype="int32");
  %5 = right_shift(%x, %s);
  %6 = left_shift(%b, 3i8);
  (%4, %5, %6)
})";

/// One call of every op of fuse's table that Relay has (fuse::ops::relay_elementwise), written
/// from the table itself: float ops on %f and %g, integer ops on %i and %j, logical ops on
/// comparisons, a channel operand (nn.prelu's alpha) %h along axis 1, attributes -0.5 then 0.5. So an op added to ops.hpp is checked end to end
/// (registry, type relation, interpreter, emitter, builder) without a line here.
inline std::string every_op_program() {
  std::string body, results;
  int n = 0;
  const auto call = [&](std::string text) {
    body += "  %" + std::to_string(n) + " = " + text + ";\n";
    results += (n ? ", %" : "%") + std::to_string(n);
    return "%" + std::to_string(n++);
  };
  const std::string c = call("less(%f, %g)"), d = call("greater(%f, 0.25f)");
  [&]<class... Op>(fuse::ops::op_list<Op...>) {
    (
        [&] {
          if constexpr (fuse::ops::in_relay<Op>) {
            using K = fuse::ops::rule_kind;
            std::string args;
            if constexpr (fuse::ops::has_channel_operand<Op>) args = "%f, %h";  // %h: one value per column
            else if constexpr (Op::kind == K::where) args = c + ", %f, %g";
            else if constexpr (Op::kind == K::integer) args = Op::arity == 1 ? "%i" : "%i, %j";
            else if constexpr (Op::kind == K::logical) args = Op::arity == 1 ? c : c + ", " + d;
            else args = Op::arity == 1 ? "%f" : "%f, %g";
            if constexpr (fuse::ops::has_attributes<Op>) {
              int k = 0;
              Op op{};
              Op::attributes(op, [&](fuse::ops::attribute a, double&) {
                args += std::string(", ") + a.name + (a.integer ? "=1" : k++ ? "=0.5f" : "=-0.5f");
              });
            }
            call(std::string(Op::name) + "(" + args + ")");
          }
        }(),
        ...);
  }(fuse::ops::relay_elementwise{});
  return "def @main(%f: Tensor[(7, 17), float32], %g: Tensor[(7, 17), float32], %h: Tensor[(17), float32], "
         "%i: Tensor[(7, 17), int32], %j: Tensor[(17), int32]) {\n" +
         body + "  (" + results + ")\n}\n";
}

#ifdef FUSE_RELAY_TOOL
struct checked_run {
  int status;
  std::string out, err;
};

/// `fuse-relay check` of `programs` (each written to DIR/NAME.relay) with the suite's seed and
/// `extra` options; the paths of the files in order.
inline checked_run run_check(const std::filesystem::path& dir,
                             const std::vector<std::pair<std::string, std::string>>& programs, const std::string& extra,
                             std::vector<std::string>& paths) {
  std::filesystem::create_directories(dir);
  std::string files;
  for (const auto& [name, text] : programs) {
    paths.push_back((dir / (name + ".relay")).string());
    std::ofstream(paths.back()) << text;
    files += " " + paths.back();
  }
  const std::string cmd = std::string(FUSE_RELAY_TOOL) + " check" + files + " --seed " +
                          std::to_string(base_seed() % 1000000) + " " + extra + " > " + (dir / "out.txt").string() +
                          " 2> " + (dir / "err.txt").string();
  const int raw = std::system(cmd.c_str());
  auto read = [&](const char* f) {
    std::ifstream in(dir / f);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  checked_run r{WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read("out.txt"), read("err.txt")};
  std::filesystem::remove_all(dir);
  return r;
}

/// `fuse-relay check` of `text` (written to NAME.relay) with the suite's seed and `extra` options.
inline checked_run check_program(const std::string& name, const std::string& text, const std::string& extra = "") {
  std::vector<std::string> paths;
  return run_check(
      std::filesystem::temp_directory_path() / ("fuse_relay_emit_" + std::to_string(base_seed()) + "_" + name),
      {{name, text}}, extra, paths);
}

/// `fuse-relay check` of several programs in one call (one driver, one compile): the run, and
/// for each program its report line ("NAME.relay: passed kernels=..."; "" when none) and the
/// stderr text from its first mention on (its error or failure comes first there).
struct checked_batch {
  checked_run run;
  std::map<std::string, std::string> line, err;
  /// NAME's report line, "" when there is none.
  std::string line_of(const std::string& name) const {
    const auto l = line.find(name);
    return l == line.end() ? std::string() : l->second;
  }
  bool passed(const std::string& name) const { return line_of(name).find(": passed ") != std::string::npos; }
};
inline checked_batch check_programs(const std::string& batch,
                                    const std::vector<std::pair<std::string, std::string>>& programs,
                                    const std::string& extra = "") {
  std::vector<std::string> paths;
  checked_batch b{run_check(std::filesystem::temp_directory_path() /
                                ("fuse_relay_emit_" + std::to_string(base_seed()) + "_" + batch),
                            programs, extra, paths),
                  {},
                  {}};
  for (std::size_t k = 0; k < programs.size(); ++k) {
    const std::string& name = programs[k].first;
    std::istringstream lines(b.run.out);
    for (std::string l; std::getline(lines, l);)
      if (l.starts_with(paths[k] + ": ")) b.line[name] = l;
    if (const std::size_t at = b.run.err.find(paths[k]); at != std::string::npos) b.err[name] = b.run.err.substr(at);
  }
  return b;
}

/// The value after `key=` in fuse-relay check's report line ("" when absent).
inline std::string report_field(const std::string& out, const std::string& key) {
  const std::size_t at = out.find(key + "=");
  if (at == std::string::npos) return "";
  const std::size_t b = at + key.size() + 1;
  return out.substr(b, out.find_first_of(" \n", b) - b);
}
#endif

}  // namespace fuse::test
