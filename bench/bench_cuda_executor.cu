// fuse::cuda::eval against the anchors issue 14 names, in the same run (and so on the same card)
// as bench_cuda.cu's copy bandwidth:
//   gate_chain_fused/N       sigmoid(s0) * tanh(s1) + exp(s2) * sigmoid(s3) over split<4> of
//                            x [N / 1024, 4 * 1024] into [N / 1024, 1024]: one kernel
//   gate_chain_op_by_op/N    the same, one eval (one launch, one temporary) per op: 7 kernels
//   softmax_fused/R/C        softmax over the last axis of x [R, C]: one row kernel
//   softmax_unfused/R/C      max, subtract, exp, sum, divide: 5 kernels, 2 temporaries
//   layer_norm_fused/R/C     layer_norm(x, gamma, beta) over the last axis: one row kernel
//   layer_norm_unfused/R/C   TVM's decomposed form op by op: mean, subtract, multiply, mean,
//                            add, sqrt, divide, multiply, add: 9 kernels
//   softmax_staged/R/C,      the fused kernels with stage_rows(true): the row staged in shared
//   layer_norm_staged/R/C    memory, read from device memory once (fuse/cuda/row_staging.hpp)
//   group_norm_fused/N/C/S/G group norm of x [N, C, S, S] in G groups as TVM's SimplifyInference
//                            writes it (reshape, mean, variance, normalise, reshape back, scale and
//                            shift per channel): one row kernel iterated inside the reshape
//   group_norm_unfused/...   the plan without that (the statistics stored first): 3 kernels
//   instance_norm_fused/N/C/S instance norm of x [N, C, S, S] as exporters decompose it (mean
//                            and variance over H, W; normalise; scale and shift): one row kernel,
//                            a group of threads owning each (n, c) plane
//   instance_norm_unfused/...  the statistics stored first: 3 kernels
//   evals_one_by_one         100 small evals (4096 floats each) launched one after another
//   evals_graph              the same 100 captured once in a CUDA graph and replayed
// Bandwidth is what the fused form must move (inputs read once, the output written once);
// `of_copy_bw` is its time as a fraction of copy_d2d's. The unfused forms report the same bytes,
// so their `of_copy_bw` is directly comparable. `max_diff` compares a fused result with its
// unfused chain; `per_eval` is one eval's time in the launch benchmarks.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fuse/cuda.hpp>

#include "cuda_bench.cuh"

namespace fuse::bench {
namespace {

/// Fills a device buffer of n floats with values in [-2, 2) (deterministic).
void fill(float* p, std::size_t n, unsigned salt) {
  std::vector<float> h(n);
  for (std::size_t i = 0; i < n; ++i)
    h[i] = static_cast<float>(((i + salt) * 2654435761u) % 4096) * (4.0f / 4096) - 2.0f;
  CUDA_CHECK(cudaMemcpy(p, h.data(), sizeof(float) * n, cudaMemcpyHostToDevice));
}

/// The largest |a - b| over two device tensors of one size.
template <class A, class B>
double max_diff(const A& a, const B& b) {
  CUDA_CHECK(cudaStreamSynchronize(stream()));
  const auto ha = cuda::to_host(a, stream()), hb = cuda::to_host(b, stream());
  double d = 0;
  for (index_t i = 0; i < ha.size(); ++i)
    d = std::max(d, std::abs(static_cast<double>(ha.data()[i]) - static_cast<double>(hb.data()[i])));
  return d;
}

/// Times body() per iteration with CUDA events on the benchmarks' stream.
template <class F>
void timed(benchmark::State& state, F&& body) {
  events ev;
  body();  // warm: first-launch costs out of the measurement
  for (auto _ : state) {
    CUDA_CHECK(cudaEventRecord(ev.start, stream()));
    body();
    CUDA_CHECK(cudaEventRecord(ev.stop, stream()));
    state.SetIterationTime(ev.seconds());
  }
}

// ---- the gate chain ---------------------------------------------------------------------------------

constexpr index_t gate_cols = 1024;

struct gate_inputs {
  index_t rows;
  cuda::tensor<float, 2> x, out, ref;
  explicit gate_inputs(index_t n)
      : rows(n / gate_cols),
        x({rows, 4 * gate_cols}, stream()),
        out({rows, gate_cols}, stream()),
        ref({rows, gate_cols}, stream()) {
    fill(x.data(), static_cast<std::size_t>(x.size()), 1);
  }
  auto gates() const { return split<4>(x.view(), 1); }
};

void gate_chain_fused(benchmark::State& state) {
  gate_inputs in(state.range(0));
  const auto g = in.gates();
  timed(state, [&] { cuda::eval(in.out, sigmoid(g[0]) * tanh(g[1]) + exp(g[2]) * sigmoid(g[3]), cuda::on(stream())); });
  report_bandwidth(state, sizeof(float) * 5.0 * static_cast<double>(state.range(0)));
}

void gate_chain_op_by_op(benchmark::State& state) {
  gate_inputs in(state.range(0));
  const auto g = in.gates();
  std::vector<cuda::tensor<float, 2>> t;
  for (int i = 0; i < 6; ++i) t.emplace_back(dynamic_shape<2>({in.rows, gate_cols}), stream());
  const auto s = [&] { return cuda::on(stream()); };
  timed(state, [&] {
    cuda::eval(t[0], sigmoid(g[0]), s());
    cuda::eval(t[1], tanh(g[1]), s());
    cuda::eval(t[2], t[0].view() * t[1].view(), s());
    cuda::eval(t[3], exp(g[2]), s());
    cuda::eval(t[4], sigmoid(g[3]), s());
    cuda::eval(t[5], t[3].view() * t[4].view(), s());
    cuda::eval(in.out, t[2].view() + t[5].view(), s());
  });
  report_bandwidth(state, sizeof(float) * 5.0 * static_cast<double>(state.range(0)));
  cuda::eval(in.ref, sigmoid(g[0]) * tanh(g[1]) + exp(g[2]) * sigmoid(g[3]), cuda::on(stream()));
  state.counters["max_diff"] = max_diff(in.out, in.ref);
}

// ---- softmax and layer norm ------------------------------------------------------------------------

struct row_inputs {
  index_t rows, cols;
  cuda::tensor<float, 2> x, out, ref, t1, t2;
  cuda::tensor<float, 2> r1, r2, r3;  // [rows, 1]
  cuda::tensor<float, 1> gamma, beta;
  explicit row_inputs(const benchmark::State& state)
      : rows(state.range(0)),
        cols(state.range(1)),
        x({rows, cols}, stream()),
        out({rows, cols}, stream()),
        ref({rows, cols}, stream()),
        t1({rows, cols}, stream()),
        t2({rows, cols}, stream()),
        r1({rows, 1}, stream()),
        r2({rows, 1}, stream()),
        r3({rows, 1}, stream()),
        gamma({cols}, stream()),
        beta({cols}, stream()) {
    fill(x.data(), static_cast<std::size_t>(x.size()), 2);
    fill(gamma.data(), static_cast<std::size_t>(cols), 3);
    fill(beta.data(), static_cast<std::size_t>(cols), 4);
  }
  double bytes() const { return sizeof(float) * 2.0 * static_cast<double>(rows * cols); }
};

void softmax_fused(benchmark::State& state) {
  row_inputs in(state);
  timed(state, [&] { cuda::eval(in.out, softmax(in.x.view()), cuda::on(stream())); });
  report_bandwidth(state, in.bytes());
}

// The same with the row staged in shared memory (opt-in): staging's gain or cost.
void softmax_staged(benchmark::State& state) {
  row_inputs in(state);
  timed(state, [&] { cuda::eval(in.out, softmax(in.x.view()), cuda::on(stream()), cuda::stage_rows(true)); });
  report_bandwidth(state, in.bytes());
}

void softmax_unfused(benchmark::State& state) {
  row_inputs in(state);
  const auto s = [&] { return cuda::on(stream()); };
  timed(state, [&] {
    cuda::eval(in.r1, max(in.x.view(), -1, keepdims), s());
    cuda::eval(in.t1, in.x.view() - in.r1.view(), s());
    cuda::eval(in.t2, exp(in.t1.view()), s());
    cuda::eval(in.r2, sum(in.t2.view(), -1, keepdims), s());
    cuda::eval(in.out, in.t2.view() / in.r2.view(), s());
  });
  report_bandwidth(state, in.bytes());
  cuda::eval(in.ref, softmax(in.x.view()), cuda::on(stream()));
  state.counters["max_diff"] = max_diff(in.out, in.ref);
}

void layer_norm_fused(benchmark::State& state) {
  row_inputs in(state);
  timed(state,
        [&] { cuda::eval(in.out, layer_norm(in.x.view(), in.gamma.view(), in.beta.view()), cuda::on(stream())); });
  report_bandwidth(state, in.bytes());
}

void layer_norm_staged(benchmark::State& state) {
  row_inputs in(state);
  timed(state, [&] {
    cuda::eval(in.out, layer_norm(in.x.view(), in.gamma.view(), in.beta.view()), cuda::on(stream()),
               cuda::stage_rows(true));
  });
  report_bandwidth(state, in.bytes());
}

void layer_norm_unfused(benchmark::State& state) {
  row_inputs in(state);
  const auto s = [&] { return cuda::on(stream()); };
  timed(state, [&] {
    cuda::eval(in.r1, mean(in.x.view(), -1, keepdims), s());
    cuda::eval(in.t1, in.x.view() - in.r1.view(), s());
    cuda::eval(in.t2, in.t1.view() * in.t1.view(), s());
    cuda::eval(in.r2, mean(in.t2.view(), -1, keepdims), s());
    cuda::eval(in.r3, in.r2.view() + 1e-5f, s());
    cuda::eval(in.r2, sqrt(in.r3.view()), s());
    cuda::eval(in.t2, in.t1.view() / in.r2.view(), s());
    cuda::eval(in.t1, in.t2.view() * in.gamma.view(), s());
    cuda::eval(in.out, in.t1.view() + in.beta.view(), s());
  });
  report_bandwidth(state, in.bytes());
  cuda::eval(in.ref, layer_norm(in.x.view(), in.gamma.view(), in.beta.view()), cuda::on(stream()));
  state.counters["max_diff"] = max_diff(in.out, in.ref);
}

// ---- group norm and instance norm -------------------------------------------------------------------------

/// Group norm of x [N, C, S, S] in G groups as TVM's SimplifyInference writes it: the statistics
/// over a reshape [N, G, C/G, S, S] (axes 2, 3, 4), the result reshaped back.
struct group_inputs {
  index_t n, c, side, groups;
  cuda::tensor<float, 4> x, out, ref;
  cuda::tensor<float, 5> m, v;         // [n, groups, 1, 1, 1]
  cuda::tensor<float, 3> gamma, beta;  // [c, 1, 1]
  explicit group_inputs(const benchmark::State& state)
      : n(state.range(0)),
        c(state.range(1)),
        side(state.range(2)),
        groups(state.range(3)),
        x({n, c, side, side}, stream()),
        out({n, c, side, side}, stream()),
        ref({n, c, side, side}, stream()),
        m({n, groups, 1, 1, 1}, stream()),
        v({n, groups, 1, 1, 1}, stream()),
        gamma({c, 1, 1}, stream()),
        beta({c, 1, 1}, stream()) {
    fill(x.data(), static_cast<std::size_t>(x.size()), 5);
    fill(gamma.data(), static_cast<std::size_t>(c), 6);
    fill(beta.data(), static_cast<std::size_t>(c), 7);
  }
  /// What the statistics are taken of, and one of them (a mean over its blocks).
  auto normed() const { return reshape(x.view(), {n, groups, c / groups, side, side}); }
  template <class E>
  auto statistic(const E& e) const {
    return mean(e, {2, 3, 4}, keepdims);
  }
  /// The normalised groups, reshaped back, scaled and shifted, given the mean and variance trees.
  template <class M, class V>
  auto result(const M& mean_of, const V& variance_of) const {
    return reshape((normed() - mean_of) / sqrt(variance_of + 1e-5f), {n, c, side, side}) * gamma.view() + beta.view();
  }
};

/// Instance norm of x [N, C, S, S] as exporters decompose it: the statistics over H, W.
struct instance_inputs {
  index_t n, c, side;
  cuda::tensor<float, 4> x, out, ref, m, v;  // m, v: [n, c, 1, 1]
  cuda::tensor<float, 3> gamma, beta;        // [c, 1, 1]
  explicit instance_inputs(const benchmark::State& state)
      : n(state.range(0)),
        c(state.range(1)),
        side(state.range(2)),
        x({n, c, side, side}, stream()),
        out({n, c, side, side}, stream()),
        ref({n, c, side, side}, stream()),
        m({n, c, 1, 1}, stream()),
        v({n, c, 1, 1}, stream()),
        gamma({c, 1, 1}, stream()),
        beta({c, 1, 1}, stream()) {
    fill(x.data(), static_cast<std::size_t>(x.size()), 8);
    fill(gamma.data(), static_cast<std::size_t>(c), 9);
    fill(beta.data(), static_cast<std::size_t>(c), 10);
  }
  auto normed() const { return x.view(); }
  template <class E>
  auto statistic(const E& e) const {
    return mean(e, {2, 3}, keepdims);
  }
  template <class M, class V>
  auto result(const M& mean_of, const V& variance_of) const {
    return (normed() - mean_of) / sqrt(variance_of + 1e-5f) * gamma.view() + beta.view();
  }
};

/// The whole norm as one tree: the statistics computed inside it.
template <class In>
auto fused_norm(const In& in) {
  const auto mu = in.statistic(in.normed());
  const auto d = in.normed() - mu;
  return in.result(mu, in.statistic(d * d));
}

/// One kernel (group_inputs or instance_inputs).
template <class In>
void norm_fused(benchmark::State& state) {
  In in(state);
  timed(state, [&] { cuda::eval(in.out, fused_norm(in), cuda::on(stream())); });
  report_bandwidth(state, sizeof(float) * 2.0 * static_cast<double>(in.x.size()));
}

/// The statistics stored first: 3 kernels.
template <class In>
void norm_unfused(benchmark::State& state) {
  In in(state);
  const auto s = [&] { return cuda::on(stream()); };
  timed(state, [&] {
    cuda::eval(in.m, in.statistic(in.normed()), s());
    const auto d = in.normed() - in.m.view();
    cuda::eval(in.v, in.statistic(d * d), s());
    cuda::eval(in.out, in.result(in.m.view(), in.v.view()), s());
  });
  report_bandwidth(state, sizeof(float) * 2.0 * static_cast<double>(in.x.size()));
  cuda::eval(in.ref, fused_norm(in), cuda::on(stream()));
  state.counters["max_diff"] = max_diff(in.out, in.ref);
}

// ---- launches one by one and as a graph ----------------------------------------------------------------

constexpr int small_evals = 100;
constexpr index_t small_size = 4096;

struct small_inputs {
  std::vector<cuda::tensor<float, 1>> a, b, out;
  small_inputs() {
    for (int i = 0; i < small_evals; ++i) {
      a.emplace_back(dynamic_shape<1>({small_size}), stream());
      b.emplace_back(dynamic_shape<1>({small_size}), stream());
      out.emplace_back(dynamic_shape<1>({small_size}), stream());
    }
  }
  void run() {
    for (int i = 0; i < small_evals; ++i) cuda::eval(out[i], a[i].view() + b[i].view() * 2.0f, cuda::on(stream()));
  }
};

void report_per_eval(benchmark::State& state) {
  state.counters["per_eval"] =
      benchmark::Counter(static_cast<double>(small_evals) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void evals_one_by_one(benchmark::State& state) {
  small_inputs in;
  timed(state, [&] { in.run(); });
  report_per_eval(state);
}

void evals_graph(benchmark::State& state) {
  small_inputs in;
  CUDA_CHECK(cudaStreamSynchronize(stream()));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
  in.run();  // eval only launches: nothing it does is refused inside a capture
  CUDA_CHECK(cudaStreamEndCapture(stream(), &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  timed(state, [&] { CUDA_CHECK(cudaGraphLaunch(exec, stream())); });
  report_per_eval(state);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace

void register_executor_benchmarks() {
  auto manual = [](benchmark::internal::Benchmark* b) { b->UseManualTime()->Unit(benchmark::kMicrosecond); };
  for (auto* f : {&gate_chain_fused, &gate_chain_op_by_op}) {
    auto* b = benchmark::RegisterBenchmark(f == &gate_chain_fused ? "gate_chain_fused" : "gate_chain_op_by_op", f);
    b->Arg(1 << 20)->Arg(1 << 24)->Arg(1 << 28);
    manual(b);
  }
  const std::pair<const char*, void (*)(benchmark::State&)> rows[] = {{"softmax_fused", &softmax_fused},
                                                                      {"softmax_unfused", &softmax_unfused},
                                                                      {"layer_norm_fused", &layer_norm_fused},
                                                                      {"layer_norm_unfused", &layer_norm_unfused}};
  for (const auto& [name, f] : rows) {
    auto* b = benchmark::RegisterBenchmark(name, f);
    b->Args({36864, 384})->Args({3072, 768})->Args({4096, 32768});
    manual(b);
  }
  // Staging applies to rows a block owns (above 1024 elements).
  manual(benchmark::RegisterBenchmark("softmax_staged", &softmax_staged)->Args({4096, 32768})->Args({8192, 4096}));
  manual(benchmark::RegisterBenchmark("layer_norm_staged", &layer_norm_staged)->Args({4096, 32768}));
  manual(benchmark::RegisterBenchmark("softmax_fused", &softmax_fused)->Args({8192, 4096}));
  // ResNet-50's first stage at batch 8 and a diffusion UNet's 64 x 64 stage, 32 groups.
  manual(benchmark::RegisterBenchmark("group_norm_fused", &norm_fused<group_inputs>)
             ->Args({8, 64, 56, 32})
             ->Args({2, 320, 64, 32}));
  manual(benchmark::RegisterBenchmark("group_norm_unfused", &norm_unfused<group_inputs>)
             ->Args({8, 64, 56, 32})
             ->Args({2, 320, 64, 32}));
  manual(benchmark::RegisterBenchmark("instance_norm_fused", &norm_fused<instance_inputs>)
             ->Args({8, 64, 56})
             ->Args({2, 320, 64}));
  manual(benchmark::RegisterBenchmark("instance_norm_unfused", &norm_unfused<instance_inputs>)
             ->Args({8, 64, 56})
             ->Args({2, 320, 64}));
  manual(benchmark::RegisterBenchmark("evals_one_by_one", &evals_one_by_one));
  manual(benchmark::RegisterBenchmark("evals_graph", &evals_graph));
}

}  // namespace fuse::bench
