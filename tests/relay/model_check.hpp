// check_model from the test suites: the compiler and flags the project was configured with
// (FUSE_RELAY_CXX and FUSE_RELAY_CXX_FLAGS, defined for test_relay as for fuse-relay), else
// `c++` with this checkout's headers; commands run through the shell (std::system); a work
// directory per run, removed when the check passes.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>
#include <system_error>

#include <fuse/relay/check.hpp>
#include <fuse/relay/printer.hpp>

#include "shell_command.hpp"
#include "support/random.hpp"

namespace fuse::test {

/// Options for check_model of the program `name`; cxx is empty when no compiler setup is known
/// (no headers beside this file).
inline relay::check_options model_check_options(const std::string& name) {
  relay::check_options o;
  o.run = fuse::tools::run_shell_command;  // tools/shell_command.hpp
#if defined(FUSE_RELAY_CXX) && defined(FUSE_RELAY_CXX_FLAGS)
  o.cxx = FUSE_RELAY_CXX;
  o.flags = FUSE_RELAY_CXX_FLAGS;
#else
  const std::filesystem::path include =
      std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "include";
  if (!std::filesystem::exists(include / "fuse" / "fuse.hpp")) return o;
  o.cxx = "c++";
  o.flags = "-std=c++20 -O1 -ffp-contract=off -I" + include.string();
#endif
  o.seed = base_seed() % 1000000 + 1;
  o.workdir =
      (std::filesystem::temp_directory_path() / ("fuse_relay_check_" + std::to_string(base_seed())) / name).string();
  return o;
}

/// check_models on the type-checked modules `models` (module, name), one driver and one compile
/// for all: each compiled header runs on random inputs and is compared with the interpreter; at
/// least `min_live` of each one's output elements must be live. Returns the reports (kernels 0
/// when skipped).
inline std::vector<relay::check_report> check_compiled_all(
    const std::vector<std::pair<relay::module*, std::string>>& models, double min_live = 0.5) {
  REQUIRE(!models.empty());
  const relay::check_options o = model_check_options(models.front().second);
  if (o.cxx.empty()) {
    MESSAGE("skipped check_model of " << models.front().second << ": no headers beside " << __FILE__);
    return std::vector<relay::check_report>(models.size());
  }
  std::vector<relay::check_subject> subjects;
  for (const auto& [m, name] : models) subjects.push_back({m, name + ".relay"});
  const std::vector<relay::check_report> reports = relay::check_models(subjects, o);
  bool all_ok = true;
  for (std::size_t k = 0; k < models.size(); ++k) {
    const relay::check_report& r = reports[k];
    const std::string& name = models[k].second;
    CHECK_MESSAGE(r.ok, name << ": " << r.detail << "\n" << relay::print(*models[k].first));
    CHECK(r.live > min_live);
    MESSAGE(name << ": kernels=" << r.kernels << " max_rel_err=" << r.max_rel_err
                 << " rounded_differing=" << r.differing << " live=" << r.live
                 << " input_scale=" << relay::check_detail::scales_text(r.input_scales));
    all_ok = all_ok && r.ok;
  }
  if (all_ok) {
    std::filesystem::remove_all(o.workdir);
    std::error_code ignored;
    std::filesystem::remove(std::filesystem::path(o.workdir).parent_path(), ignored);  // when empty
  }
  return reports;
}

/// check_compiled_all of one module.
inline relay::check_report check_compiled(relay::module& m, const std::string& name, double min_live = 0.5) {
  return check_compiled_all({{&m, name}}, min_live).front();
}

}  // namespace fuse::test
