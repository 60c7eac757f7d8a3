// Random inputs for tests: a fresh seed every run (printed by main), replayable through the
// FUSE_TEST_SEED environment variable.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>

namespace fuse::test {

inline std::uint64_t base_seed() {
  static const std::uint64_t seed = []() -> std::uint64_t {
    if (const char* s = std::getenv("FUSE_TEST_SEED")) return std::uint64_t{std::strtoull(s, nullptr, 10)};
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(rd());
  }();
  return seed;
}

/// A generator seeded from the run's seed and a per-use salt, so each test case draws its own
/// stream but the whole run replays from one number.
inline std::mt19937_64 rng(std::uint64_t salt = 0) {
  return std::mt19937_64(base_seed() ^ (salt * 0x9E3779B97F4A7C15ull));
}

}  // namespace fuse::test
