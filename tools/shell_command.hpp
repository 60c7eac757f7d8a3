// check_options::run for the programs of this repository (fuse-relay, the test suites): the
// library spawns no process itself (fuse/relay/check.hpp), so its callers say how commands run.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <string>

namespace fuse::tools {

/// `command` through the shell, its output and errors to `log_path`; its exit status, or -1
/// when it could not run or was killed.
inline int run_shell_command(const std::string& command, const std::string& log_path) {
  const int raw = std::system((command + " > " + log_path + " 2>&1").c_str());
  return raw == -1 || !WIFEXITED(raw) ? -1 : WEXITSTATUS(raw);
}

}  // namespace fuse::tools
