// Seed 002's quantized attention block (issue 15): the 50-op binding block the seed prints (a
// fused QKV projection's int32 result dequantized, split, reshaped and transposed to 8 x 12
// heads of 384 x 64, quantized to int8, an int8 batch_matmul, dequantize, scale, additive mask,
// softmax, requantize, the second int8 batch_matmul with V, transposed and reshaped back), at the
// seed's full size, compiled at build time by `fuse-relay compile` three ways:
//
//   seed_block/fused     --planner fuse: fuse's plan (one kernel)
//   seed_block/tvm       --planner tvm: TVM v0.19 FuseOps' groups, run on fuse's own kernels, so
//                        the ratio is fusion's alone
//   seed_block/unfused   --planner op-by-op: every op its own kernel (the naive executor)
//
// The goals: fused >= 2x tvm and >= 4x op-by-op. The three give the same int32 result
// (checked before timing). Single thread. ./scripts/bench seed prints the table.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <utility>

#include <fuse/fuse.hpp>

#include "seed_block_fuse.hpp"
#include "seed_block_op_by_op.hpp"
#include "seed_block_tvm.hpp"

namespace {

/// The block's inputs (the projection's int32 result, the mask) and its two constants, drawn as
/// `fuse-relay check` draws them (integers in [-100, 100], floats in [-1, 1]); its output.
struct block_io {
  fuse::tensor<std::int32_t, 3> qkv{{3, 3072, 768}};
  fuse::tensor<std::int32_t, 2> mask{{8, 384}};
  fuse::tensor<float, 3> bias{{3, 1, 768}}, mask_scale{{8, 384, 1}};
  fuse::tensor<std::int32_t, 2> out{{3072, 768}};
  block_io() {
    std::mt19937_64 g(2);
    std::uniform_int_distribution<int> i(-100, 100);
    std::uniform_real_distribution<float> f(-1, 1);
    for (auto* p = qkv.data(); p != qkv.data() + qkv.size(); ++p) *p = i(g);
    for (auto* p = mask.data(); p != mask.data() + mask.size(); ++p) *p = i(g);
    for (auto* p = bias.data(); p != bias.data() + bias.size(); ++p) *p = f(g);
    for (auto* p = mask_scale.data(); p != mask_scale.data() + mask_scale.size(); ++p) *p = f(g);
  }
  template <class Model>
  void run(Model& m) {
    m(std::as_const(qkv).view(), std::as_const(mask).view(), std::as_const(bias).view(),
      std::as_const(mask_scale).view(), out.view());
  }
};

block_io& io() {
  static block_io b;
  return b;
}

/// The fused plan's result, to which the other two are compared.
const fuse::tensor<std::int32_t, 2>& fused_result() {
  static const fuse::tensor<std::int32_t, 2> r = [] {
    seed_block_fuse::model m;
    io().run(m);
    return io().out;
  }();
  return r;
}

template <class Model>
void seed_block(benchmark::State& state) {
  Model m;
  block_io& b = io();
  const fuse::tensor<std::int32_t, 2>& want = fused_result();
  b.run(m);
  for (fuse::index_t k = 0; k < want.size(); ++k)
    if (b.out.data()[k] != want.data()[k]) {
      state.SkipWithError("the plans' results differ");
      return;
    }
  for (auto _ : state) {
    b.run(m);
    benchmark::DoNotOptimize(b.out.data());
    benchmark::ClobberMemory();
  }
}

}  // namespace

BENCHMARK(seed_block<seed_block_fuse::model>)->Name("seed_block/fused")->Unit(benchmark::kMillisecond);
BENCHMARK(seed_block<seed_block_tvm::model>)->Name("seed_block/tvm")->Unit(benchmark::kMillisecond);
BENCHMARK(seed_block<seed_block_op_by_op::model>)->Name("seed_block/unfused")->Unit(benchmark::kMillisecond);
