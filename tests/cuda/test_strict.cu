// fuse::cuda::eval against the strict runtime (tests/cuda/strict_runtime.hpp): this program is
// linked without cudart, against a stand-in that defines only what a kernel launch needs, so it
// LINKS only because eval neither allocates, frees, copies nor synchronizes; here the launches
// are recorded and compared with eval's own launch log. Runs everywhere (label cuda_emulated):
// the kernels are never run, so the device views below may point at host memory nobody reads.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include <fuse/cuda.hpp>

#include "cuda/strict_runtime.hpp"

namespace {

using namespace fuse;
namespace strict = fuse::test::strict;

/// A stream handle for the records (never dereferenced: the strict runtime has no streams).
cudaStream_t fake_stream(std::uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

bool same_dim(const dim3& a, const cuda::dim& b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

}  // namespace

TEST_CASE("cuda eval on the strict runtime: 100 evals are 100 launches on the given stream, and nothing else") {
  const index_t rows = 37, n = 1023;
  std::vector<float> x(static_cast<std::size_t>(rows * 4 * n)), bias(static_cast<std::size_t>(4 * n)),
      h(static_cast<std::size_t>(rows * n)), c(static_cast<std::size_t>(rows * n));
  const auto xv = cuda::view(static_cast<const float*>(x.data()), {rows, 4 * n});
  const auto bv = cuda::view(static_cast<const float*>(bias.data()), {4 * n});
  const auto hv = cuda::view(h.data(), {rows, n}), cv = cuda::view(c.data(), {rows, n});
  const auto g = split<4>(xv + bv, 1);
  const auto c_new = sigmoid(g[1]) * cv + sigmoid(g[0]) * tanh(g[2]);

  strict::launches().clear();
  cuda::launch_log log;
  for (int i = 0; i < 50; ++i) {
    const cudaStream_t s = fake_stream(0x1000 + 16 * static_cast<std::uintptr_t>(i % 3));
    cuda::eval(hv, sigmoid(g[0]) * tanh(g[1]) + exp(g[2]) * sigmoid(g[3]), cuda::on(s), cuda::log_to(log));
    cuda::eval(outputs(hv, cv), sigmoid(g[3]) * tanh(c_new), c_new, cuda::on(s), cuda::log_to(log));  // one kernel
  }
  REQUIRE(strict::launches().size() == 100);
  REQUIRE(log.size() == 100);
  for (std::size_t i = 0; i < 100; ++i) {
    CAPTURE(i);
    const auto& l = strict::launches()[i];
    CHECK(l.stream == fake_stream(0x1000 + 16 * ((i / 2) % 3)));
    CHECK(same_dim(l.grid, log.launches[i].config.grid));
    CHECK(same_dim(l.block, log.launches[i].config.block));
    CHECK(l.shared_bytes == log.launches[i].config.shared_bytes);
    CHECK_FALSE(log.launches[i].emulated);
  }
  // The two trees are two kernels, each launched 50 times.
  CHECK(strict::launches()[0].kernel != strict::launches()[1].kernel);
  CHECK(strict::launches()[2].kernel == strict::launches()[0].kernel);
  CHECK(strict::registered_kernels().size() >= 2);
}

TEST_CASE("cuda eval on the strict runtime: an empty output launches nothing; errors launch nothing") {
  std::vector<float> buf(64);
  const cudaStream_t s = fake_stream(0x2000);
  strict::launches().clear();
  const auto empty = cuda::view(buf.data(), {0, 5});
  cuda::eval(empty, empty * 2.0f, cuda::on(s));
  CHECK(strict::launches().empty());
  const auto a = cuda::view(buf.data(), {4, 4});
  CHECK_THROWS_WITH_AS(cuda::eval(a, a * 2.0f), doctest::Contains("give the stream"), error);
  CHECK_THROWS_WITH_AS(cuda::eval(a, a * 2.0f, cuda::on(nullptr)), doctest::Contains("legacy default stream"), error);
  CHECK_THROWS_AS(cuda::eval(a, transpose(a), cuda::on(s)), memory_error);
  CHECK_THROWS_AS(cuda::eval(a, cuda::view(buf.data(), {4, 5}) + 1.0f, cuda::on(s)), shape_error);
  CHECK(strict::launches().empty());
  cuda::eval(a, a * 2.0f, cuda::on(s));  // in place: fine
  CHECK(strict::launches().size() == 1);
}
