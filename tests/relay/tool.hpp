// Running the fuse-relay command line from the suites (FUSE_RELAY_TOOL, defined for test_relay
// when the tool is built): exit status, standard output and standard error.
#pragma once

#ifdef FUSE_RELAY_TOOL
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "support/random.hpp"

namespace fuse::test {

struct tool_run {
  int status = -1;
  std::string out, err;
};

inline std::string read_text_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// `fuse-relay ARGS` (a shell command line after the tool's name).
inline tool_run run_tool(const std::string& args) {
  static int calls = 0;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fuse_relay_tool_" + std::to_string(base_seed()));
  std::filesystem::create_directories(dir);
  const std::string tag = std::to_string(calls++);
  const std::filesystem::path out = dir / ("out" + tag + ".txt"), err = dir / ("err" + tag + ".txt");
  const int raw =
      std::system((std::string(FUSE_RELAY_TOOL) + " " + args + " > " + out.string() + " 2> " + err.string()).c_str());
  tool_run r{WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text_file(out), read_text_file(err)};
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  std::error_code ignored;
  std::filesystem::remove(dir, ignored);  // when empty: no directory a run left behind in /tmp
  return r;
}

}  // namespace fuse::test
#endif
