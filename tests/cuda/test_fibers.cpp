// The cooperative emulator (fuse/cuda/fibers.hpp), which the row-reduction kernels will run on:
// barriers and warp shuffles between fibers, in three thread orders. A block sum written as a
// GPU would run it (warp shuffles, partial sums through shared memory, one barrier) must give
// the same bits under every order; the same body without its barrier must not (the emulator
// must be able to catch a missing barrier), and a barrier in divergent code is an error.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include <fuse/cuda/fibers.hpp>

namespace {

using namespace fuse;
using namespace fuse::cuda;

/// out[b] = the sum of block b's values: a warp's lanes by shuffles, the warps' partials through
/// shared memory, read by warp 0 after the barrier (skipped when Barrier is false: a bug).
template <bool Barrier, class Block>
void block_sum(const float* in, float* out, const thread_coords& t, Block& blk) {
  const std::uint32_t i = t.thread.x, warps = t.block_dim.x / warp_size;
  const std::uint32_t b = t.block.x + t.block.y * t.grid_dim.x;
  float v = in[b * t.block_dim.x + i];
  for (std::uint32_t m = warp_size / 2; m > 0; m /= 2) v += blk.shuffle_xor(v, m);
  float* partial = blk.template shared<float>();
  if (i % warp_size == 0) partial[i / warp_size] = v;
  if constexpr (Barrier) blk.barrier();
  if (i < warp_size) {
    float s = i < warps ? partial[i] : 0.0f;
    for (std::uint32_t m = warp_size / 2; m > 0; m /= 2) s += blk.shuffle_xor(s, m);
    if (i == 0) out[b] = s;
  }
}

/// The same sums in the same association, sequentially.
std::vector<float> block_sum_reference(const std::vector<float>& in, std::uint32_t blocks, std::uint32_t threads) {
  std::vector<float> out(blocks);
  for (std::uint32_t b = 0; b < blocks; ++b) {
    std::vector<float> lane(threads);
    for (std::uint32_t i = 0; i < threads; ++i) lane[i] = in[b * threads + i];
    for (std::uint32_t m = warp_size / 2; m > 0; m /= 2) {
      std::vector<float> next(threads);
      for (std::uint32_t i = 0; i < threads; ++i)
        next[i] = lane[i] + lane[(i & ~(warp_size - 1)) | ((i % warp_size) ^ m)];
      lane = next;
    }
    std::vector<float> s(warp_size, 0.0f);
    for (std::uint32_t w = 0; w < threads / warp_size; ++w) s[w] = lane[w * warp_size];
    for (std::uint32_t m = warp_size / 2; m > 0; m /= 2) {
      std::vector<float> next(warp_size);
      for (std::uint32_t i = 0; i < warp_size; ++i) next[i] = s[i] + s[i ^ m];
      s = next;
    }
    out[b] = s[0];
  }
  return out;
}

constexpr schedule orders[] = {schedule::forward, schedule::reverse, schedule::shuffled};

}  // namespace

TEST_CASE("cuda fibers: a block sum by shuffles, shared memory and a barrier, the same bits under every order") {
  std::mt19937 g(5);
  std::uniform_real_distribution<float> d(-1e3f, 1e3f);
  for (const std::uint32_t threads : {32u, 64u, 256u, 1024u}) {
    for (const dim grid : {dim{1, 1, 1}, dim{3, 1, 1}, dim{2, 3, 1}}) {
      CAPTURE(threads);
      CAPTURE(grid.x * grid.y);
      const std::uint32_t blocks = grid.x * grid.y;
      std::vector<float> in(static_cast<std::size_t>(blocks) * threads);
      for (float& x : in) x = d(g);
      const auto want = block_sum_reference(in, blocks, threads);
      launch_config cfg{grid, dim{threads, 1, 1}, sizeof(float) * (threads / warp_size)};
      for (const schedule order : orders) {
        std::vector<float> out(blocks, -1.0f);
        emulate_cooperative_grid(cfg, order, [&](const thread_coords& t, emulated_block& blk) {
          block_sum<true>(in.data(), out.data(), t, blk);
        });
        CHECK(out == want);
      }
    }
  }
}

TEST_CASE("cuda fibers: a missing barrier changes the result under some order; divergent barriers are an error") {
  const std::uint32_t threads = 256;
  std::vector<float> in(threads);
  for (std::uint32_t i = 0; i < threads; ++i) in[i] = static_cast<float>(i % 7) - 3.0f;
  const auto want = block_sum_reference(in, 1, threads);
  const launch_config cfg{dim{1, 1, 1}, dim{threads, 1, 1}, sizeof(float) * (threads / warp_size)};
  int wrong = 0;
  for (const schedule order : orders) {
    std::vector<float> out(1, -1.0f);
    emulate_cooperative_grid(cfg, order, [&](const thread_coords& t, emulated_block& blk) {
      block_sum<false>(in.data(), out.data(), t, blk);
    });
    wrong += out != want;
  }
  CHECK(wrong > 0);

  // A barrier only some threads reach (in divergent code): a hang on a GPU, an error here.
  CHECK_THROWS_WITH_AS(emulate_cooperative_grid(cfg, schedule::forward,
                                                [&](const thread_coords& t, emulated_block& blk) {
                                                  if (t.thread.x < 32) blk.barrier();
                                                }),
                       doctest::Contains("wait at different barriers"), error);
  // A shuffle some lanes of a warp skip: the same.
  CHECK_THROWS_WITH_AS(emulate_cooperative_grid(cfg, schedule::reverse,
                                                [&](const thread_coords& t, emulated_block& blk) {
                                                  if (t.thread.x % 2) (void)blk.shuffle_xor(1.0f, 1);
                                                }),
                       doctest::Contains("wait at different barriers"), error);
  // An exception inside a thread reaches the caller.
  CHECK_THROWS_WITH_AS(emulate_cooperative_grid(cfg, schedule::shuffled,
                                                [&](const thread_coords& t, emulated_block& blk) {
                                                  blk.barrier();
                                                  if (t.thread.x == 77) throw std::runtime_error("thread 77");
                                                }),
                       doctest::Contains("thread 77"), std::runtime_error);
}

TEST_CASE("cuda fibers: a warp runs ahead: shared slots reused without a barrier are caught; shuffle broadcasts") {
  // Two rounds of "every warp writes its slot, barrier, every thread reads all slots"; the
  // second round's writes need a barrier after the first round's reads (Second = false: a bug
  // that a GPU shows when one warp runs ahead: the emulator must too).
  const std::uint32_t threads = 256, warps = threads / warp_size;
  const launch_config cfg{dim{1, 1, 1}, dim{threads, 1, 1}, sizeof(float) * warps};
  auto rounds = [&]<bool Second>(std::bool_constant<Second>, schedule order) {
    std::vector<float> seen(threads);
    emulate_cooperative_grid(cfg, order, [&](const thread_coords& t, emulated_block& blk) {
      const std::uint32_t i = t.thread.x;
      float* slot = blk.template shared<float>();
      float total = 0;
      for (int round = 0; round < 2; ++round) {
        // (a shuffle first: where a warp waits for its own lanes only)
        const float v = blk.shuffle(static_cast<float>(i / warp_size + 10 * round), 0);
        if (i % warp_size == 0) slot[i / warp_size] = v;
        blk.barrier();
        for (std::uint32_t w = 0; w < warps; ++w) total += slot[w] * static_cast<float>(w + 1);
        if (Second) blk.barrier();
      }
      seen[i] = total;
    });
    return seen;
  };
  float want = 0;
  for (int round = 0; round < 2; ++round)
    for (std::uint32_t w = 0; w < warps; ++w) want += static_cast<float>(w + 10 * round) * static_cast<float>(w + 1);
  int wrong = 0;
  for (const schedule order : orders) {
    for (const float s : rounds(std::true_type{}, order)) CHECK(s == want);
    for (const float s : rounds(std::false_type{}, order)) wrong += s != want;
  }
  CHECK(wrong > 0);
}
