// The doctest main shared by every suite: prints the random seed so a failure can be replayed
// with FUSE_TEST_SEED=<seed>.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "support/random.hpp"

int main(int argc, char** argv) {
  std::printf("fuse tests: random seed %llu (replay with FUSE_TEST_SEED=%llu)\n",
              static_cast<unsigned long long>(fuse::test::base_seed()),
              static_cast<unsigned long long>(fuse::test::base_seed()));
  doctest::Context context(argc, argv);
  return context.run();
}
