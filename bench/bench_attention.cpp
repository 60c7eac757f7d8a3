// Attention's score epilogues on the CPU (issue 15): the products of Q K^T computed by blocks
// inside the pass that consumes them, beside the same computations with the scores evaluated
// whole first and op by op. Shapes: heads x sequence x sequence with head dimension 64 (BERT-base
// at batch 8 and sequence 384 is 96 x 384 x 384).
//
//   scores_softmax/VARIANT/H/S   softmax(batch_matmul(q, k) * 0.125 + mask), float
//     fused      one eval: row blocks of whole rows, each block's products in cache
//     unfused    the scores evaluated whole (one eval), then softmax(scores * 0.125 + mask)
//     tvm        op by op, one temporary each: batch_matmul, multiply, add, softmax (TVM's
//                unfused ops; its FuseOps would group multiply, add and softmax: between the two)
//   scores_requantize/VARIANT/H/S   cast<int8>(clip(round(cast<float>(batch_matmul(q8, k8)) * s)))
//     fused      one eval: the int32 products by blocks, requantized in cache
//     unfused    the int32 scores whole, then the requantize
//   attention/VARIANT/H/S   batch_matmul(softmax(batch_matmul(q, k) * 0.125 + mask), v), float
//     fused      one eval, chained: the probabilities by blocks of query rows inside the second
//                product, each block's scores its own small product (what the Relay planner
//                emits for attention)
//     unfused    three evals: the scores, the probabilities, the product (the plan before)
//     tvm        op by op: batch_matmul, multiply, add, softmax, batch_matmul
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <fuse/fuse.hpp>

namespace {

using fuse::index_t;

struct operands {
  index_t heads, seq;
  fuse::tensor<float, 3> q, k, p, v, att;
  fuse::tensor<float, 2> mask;
  fuse::tensor<std::int8_t, 3> q8, k8, p8;
  operands(index_t h, index_t s)
      : heads(h),
        seq(s),
        q({h, s, 64}),
        k({h, s, 64}),
        p({h, s, s}),
        v({h, 64, s}),
        att({h, s, 64}),
        mask({s, s}),
        q8({h, s, 64}),
        k8({h, s, 64}),
        p8({h, s, s}) {
    std::mt19937 g(5);
    std::uniform_real_distribution<float> d(-1, 1);
    for (auto& v : q) v = d(g);
    for (auto& v : k) v = d(g);
    for (auto& x : v) x = d(g);
    for (auto& v : mask) v = d(g) < -0.8f ? -10000.0f : 0.0f;
    for (auto& v : q8) v = static_cast<std::int8_t>(d(g) * 127);
    for (auto& v : k8) v = static_cast<std::int8_t>(d(g) * 127);
  }
};

operands& inputs(const benchmark::State& s) {
  static std::vector<std::unique_ptr<operands>> cache;
  for (auto& o : cache)
    if (o->heads == s.range(0) && o->seq == s.range(1)) return *o;
  cache.push_back(std::make_unique<operands>(s.range(0), s.range(1)));
  return *cache.back();
}

/// f timed; FLOP counts `products` products of the scores' size (2 h n^2 64 each).
template <class F>
void timed(benchmark::State& s, F&& f, double products = 1) {
  for (auto _ : s) {
    f();
    benchmark::ClobberMemory();
  }
  const double h = static_cast<double>(s.range(0)), n = static_cast<double>(s.range(1));
  s.counters["FLOP"] =
      benchmark::Counter(products * 2.0 * h * n * n * 64, benchmark::Counter::kIsIterationInvariantRate);
}

auto probabilities(operands& o) { return fuse::softmax(fuse::batch_matmul(o.q, o.k) * 0.125f + o.mask); }

/// The probabilities into o.p with the scores evaluated whole first (two evals).
struct scores_whole {
  fuse::tensor<float, 3> scores;
  explicit scores_whole(const operands& o) : scores({o.heads, o.seq, o.seq}) {}
  void operator()(operands& o) {
    fuse::eval(scores, fuse::batch_matmul(o.q, o.k));
    fuse::eval(o.p, fuse::softmax(scores.view() * 0.125f + o.mask));
  }
};
/// The probabilities into o.p op by op, one temporary each (TVM's unfused ops).
struct op_by_op {
  fuse::tensor<float, 3> t1, t2, t3;
  explicit op_by_op(const operands& o)
      : t1({o.heads, o.seq, o.seq}), t2({o.heads, o.seq, o.seq}), t3({o.heads, o.seq, o.seq}) {}
  void operator()(operands& o) {
    fuse::eval(t1, fuse::batch_matmul(o.q, o.k));
    fuse::eval(t2, t1.view() * 0.125f);
    fuse::eval(t3, t2.view() + o.mask);
    fuse::eval(o.p, fuse::softmax(t3.view()));
  }
};

void scores_softmax_fused(benchmark::State& s) {
  auto& o = inputs(s);
  timed(s, [&] { fuse::eval(o.p, probabilities(o)); });
}
void scores_softmax_unfused(benchmark::State& s) {
  auto& o = inputs(s);
  scores_whole probs(o);
  timed(s, [&] { probs(o); });
}
void scores_softmax_tvm(benchmark::State& s) {
  auto& o = inputs(s);
  op_by_op probs(o);
  timed(s, [&] { probs(o); });
}

auto requantized(const fuse::tensor<std::int8_t, 3>& q8, const fuse::tensor<std::int8_t, 3>& k8) {
  return fuse::cast<std::int8_t>(
      fuse::clip(fuse::round(fuse::cast<float>(fuse::batch_matmul(q8, k8)) * 0.004f), -128.0, 127.0));
}
void scores_requantize_fused(benchmark::State& s) {
  auto& o = inputs(s);
  timed(s, [&] { fuse::eval(o.p8, requantized(o.q8, o.k8)); });
}
void scores_requantize_unfused(benchmark::State& s) {
  auto& o = inputs(s);
  fuse::tensor<std::int32_t, 3> scores({o.heads, o.seq, o.seq});
  timed(s, [&] {
    fuse::eval(scores, fuse::batch_matmul(o.q8, o.k8));
    fuse::eval(o.p8, fuse::cast<std::int8_t>(
                         fuse::clip(fuse::round(fuse::cast<float>(scores.view()) * 0.004f), -128.0, 127.0)));
  });
}

// Attention's two products (Q K^T and P V): twice the scores' FLOPs.
void attention_fused(benchmark::State& s) {
  auto& o = inputs(s);
  timed(
      s, [&] { fuse::eval(o.att, fuse::batch_matmul(probabilities(o), o.v)); }, 2);
}
void attention_unfused(benchmark::State& s) {
  auto& o = inputs(s);
  scores_whole probs(o);
  timed(
      s,
      [&] {
        probs(o);
        fuse::eval(o.att, fuse::batch_matmul(o.p, o.v));
      },
      2);
}
void attention_tvm(benchmark::State& s) {
  auto& o = inputs(s);
  op_by_op probs(o);
  timed(
      s,
      [&] {
        probs(o);
        fuse::eval(o.att, fuse::batch_matmul(o.p, o.v));
      },
      2);
}

void shapes(benchmark::internal::Benchmark* b) { b->Args({96, 384})->Args({12, 128})->Unit(benchmark::kMillisecond); }

}  // namespace

BENCHMARK(scores_softmax_fused)->Name("scores_softmax/fused")->Apply(shapes);
BENCHMARK(scores_softmax_unfused)->Name("scores_softmax/unfused")->Apply(shapes);
BENCHMARK(scores_softmax_tvm)->Name("scores_softmax/tvm")->Apply(shapes);
BENCHMARK(scores_requantize_fused)->Name("scores_requantize/fused")->Apply(shapes);
BENCHMARK(scores_requantize_unfused)->Name("scores_requantize/unfused")->Apply(shapes);
BENCHMARK(attention_fused)->Name("attention/fused")->Apply(shapes);
BENCHMARK(attention_unfused)->Name("attention/unfused")->Apply(shapes);
BENCHMARK(attention_tvm)->Name("attention/tvm")->Apply(shapes);
