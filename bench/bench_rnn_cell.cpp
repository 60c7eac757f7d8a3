// One step of an LSTM cell and of a GRU cell: dense -> split -> gates, beside its anchors in the
// same run. Single thread; ./scripts/bench rnn prints the ratios.
//
// LSTM (BATCH, INPUT, HIDDEN): W [4H, I+H], bias [4H]; gates = [x, h] W^T + bias; i, f, g, o =
// split 4; c' = sigmoid(f) c + sigmoid(i) tanh(g); h' = sigmoid(o) tanh(c').
//   lstm/fused/B/I/H     ONE fuse::eval producing h' and c': dense(concatenate(x, h), Wp) split
//                        4 ways is a leaf of the gate tree (the GEMM runs with the gates in its
//                        epilogue); Wp = fuse::pack(W), packed once, as inference code does
//   lstm/fused_unpacked  the same over W itself (packed on every call)
//   lstm/openblas/B/I/H  [x, h] copied into one buffer, cblas_sgemm into gates [B, 4H], then one
//                        fused fuse::eval over the gates (bias added there) producing h', c'
//   lstm/eigen/B/I/H     the same copy, Eigen's GEMM into gates, then the gate math as Eigen
//                        array expressions (logistic, tanh)
//   lstm/floor/1/I/H     the time to stream W (32 MiB) from memory once: a vectorized sum
// GRU (PyTorch's convention): gi = x W_ih^T + b_ih, gh = h W_hh^T + b_hh (each [B, 3H]);
// r = sigmoid(gi_r + gh_r); z = sigmoid(gi_z + gh_z); n = tanh(gi_n + r gh_n);
// h' = (1 - z) n + z h.
//   gru/fused/B/I/H      ONE fuse::eval: two dense leaves (different K), each split 3 ways
//   gru/unfused/B/I/H    the two GEMMs as fuse::evals into buffers, then one fused elementwise
//                        pass for the gates (biases added there): how TVM runs the cell
//   (both over weights packed once, so that the ratio is the fusion's alone)
//
// Each call reads its weights from memory: every variant cycles through 3 copies of them (96 MiB
// for the LSTM), more than the 32 MiB L3. Inputs are uniform in [-1, 1], weights scaled by
// 1/sqrt(I+H). Before timing, every variant's h' (and c') is checked against an anchor made once
// per shape (OpenBLAS's GEMM, then the gate math in double). Items are the cell's GEMM FLOPs.
// The fused variants' counter one_pass is 1 when fuse ran the cell as one blocked pass (every
// contraction computed block by block inside it), 0 when it fell back to evaluating one whole.
#include <Eigen/Core>
#include <xsimd/xsimd.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>
#include <vector>

#include "bench_support.hpp"

namespace {

using fuse::index_t;
using fuse_bench::set_flops;
using tensor2 = fuse::tensor<float, 2>;
using tensor1 = fuse::tensor<float, 1>;
using row_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using row_array = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr int weight_copies = 3;
constexpr double tolerance = 1e-4;  // relative to 1 + |anchor|

double sigmoid_d(double v) { return 1.0 / (1.0 + std::exp(-v)); }

/// Copies of one weight matrix at different addresses, cycled through so that no call finds it
/// in cache.
std::vector<tensor2> weight_set(index_t rows, index_t cols, std::uint32_t seed, float scale) {
  std::vector<tensor2> w;
  w.reserve(weight_copies);
  w.emplace_back(fuse::index_array<2>{rows, cols});
  fuse_bench::fill_uniform(w[0], seed, scale);
  for (int i = 1; i < weight_copies; ++i) w.push_back(w[0]);
  return w;
}

/// [x, h] row by row into xh [B, I+H]: the concatenation a BLAS-based runtime materializes.
void concat_rows(const tensor2& x, const tensor2& h, tensor2& xh) {
  const index_t b = x.extent(0), in = x.extent(1), hd = h.extent(1);
  for (index_t r = 0; r < b; ++r) {
    std::memcpy(xh.data() + r * (in + hd), x.data() + r * in, sizeof(float) * static_cast<std::size_t>(in));
    std::memcpy(xh.data() + r * (in + hd) + in, h.data() + r * hd, sizeof(float) * static_cast<std::size_t>(hd));
  }
}

// ---- LSTM --------------------------------------------------------------------------------------

/// The LSTM gate math on four gate blocks (views of a split) and the cell state: (h', c').
template <class Gates, class C>
auto lstm_outputs(const Gates& g, const C& c) {
  auto c_next = fuse::sigmoid(g[1]) * c + fuse::sigmoid(g[0]) * fuse::tanh(g[2]);
  auto h_next = fuse::sigmoid(g[3]) * fuse::tanh(c_next);
  return std::make_pair(h_next, c_next);
}

struct lstm_data {
  index_t b, in, hd;
  tensor2 x, h, c;
  std::vector<tensor2> w;                       // [4H, I+H]
  std::vector<fuse::packed_weights<float>> wp;  // the same, packed once (fuse::pack)
  tensor1 bias;                                 // [4H]
  tensor2 h_ref, c_ref;                         // the anchor: OpenBLAS's GEMM, gate math in double

  lstm_data(index_t b_, index_t in_, index_t hd_)
      : b(b_),
        in(in_),
        hd(hd_),
        x({b_, in_}),
        h({b_, hd_}),
        c({b_, hd_}),
        w(weight_set(4 * hd_, in_ + hd_, 31, 1.0f / std::sqrt(static_cast<float>(in_ + hd_)))),
        bias({4 * hd_}),
        h_ref({b_, hd_}),
        c_ref({b_, hd_}) {
    fuse_bench::fill_uniform(x, 11);
    fuse_bench::fill_uniform(h, 12);
    fuse_bench::fill_uniform(c, 13);
    fuse_bench::fill_uniform(bias, 14);
    for (const tensor2& wc : w) wp.push_back(fuse::pack(wc));
    tensor2 xh({b, in + hd}), gates({b, 4 * hd});
    concat_rows(x, h, xh);
    fuse_bench::openblas_abt(xh.data(), w[0].data(), gates.data(), b, 4 * hd, in + hd);
    for (index_t r = 0; r < b; ++r)
      for (index_t j = 0; j < hd; ++j) {
        auto gate = [&](index_t q) { return static_cast<double>(gates(r, q * hd + j)) + bias(q * hd + j); };
        const double cn = sigmoid_d(gate(1)) * c(r, j) + sigmoid_d(gate(0)) * std::tanh(gate(2));
        c_ref(r, j) = static_cast<float>(cn);
        h_ref(r, j) = static_cast<float>(sigmoid_d(gate(3)) * std::tanh(cn));
      }
  }
  double flops() const {
    return 2.0 * static_cast<double>(b) * static_cast<double>(4 * hd) * static_cast<double>(in + hd);
  }
};

/// Runs one LSTM variant: step(w, h', c') once and checked against the anchor, then timed,
/// cycling through the copies of W.
template <class Step>
void run_lstm(benchmark::State& state, const char* variant, Step step) {
  const lstm_data& d = fuse_bench::inputs_of<lstm_data>(state);
  tensor2 hn({d.b, d.hd}), cn({d.b, d.hd});
  std::fill(hn.begin(), hn.end(), std::nanf(""));
  std::fill(cn.begin(), cn.end(), std::nanf(""));
  fuse_bench::last_stats = {};
  step(d.w[0], hn, cn);
  const double one_pass = fuse_bench::last_eval_was_one_pass();
  const auto n = static_cast<std::size_t>(hn.size());
  std::string err =
      fuse_bench::compare((std::string(variant) + " c'").c_str(), cn.data(), d.c_ref.data(), n, tolerance);
  if (err.empty())
    err = fuse_bench::compare((std::string(variant) + " h'").c_str(), hn.data(), d.h_ref.data(), n, tolerance);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  int next = 0;
  for (auto _ : state) {
    step(d.w[static_cast<std::size_t>(next)], hn, cn);
    next = next + 1 == weight_copies ? 0 : next + 1;
    benchmark::DoNotOptimize(hn.data());
    benchmark::DoNotOptimize(cn.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, d.flops());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * d.w[0].size() * 4);  // W read once
  if (std::string_view(variant) == "fused") state.counters["one_pass"] = one_pass;
}

/// The copy of W that `w` is, for the packed copy beside it.
std::size_t copy_index(const std::vector<tensor2>& set, const tensor2& w) {
  return static_cast<std::size_t>(&w - set.data());
}

template <class Weights>
void lstm_step(const lstm_data& d, const Weights& w, tensor2& hn, tensor2& cn) {
  auto xh = fuse::concatenate(std::make_tuple(d.x.view(), d.h.view()), 1);
  auto gates = fuse::split<4>(fuse::bias_add(fuse::dense(xh, w), d.bias.view()), 1);
  auto [h_next, c_next] = lstm_outputs(gates, d.c.view());
  fuse_bench::last_stats = fuse::eval(fuse::outputs(hn, cn), h_next, c_next);
}

void lstm_fused(benchmark::State& state) {
  const lstm_data& d = fuse_bench::inputs_of<lstm_data>(state);
  run_lstm(state, "fused",
           [&](const tensor2& w, tensor2& hn, tensor2& cn) { lstm_step(d, d.wp[copy_index(d.w, w)], hn, cn); });
}

void lstm_fused_unpacked(benchmark::State& state) {
  const lstm_data& d = fuse_bench::inputs_of<lstm_data>(state);
  run_lstm(state, "fused_unpacked",
           [&](const tensor2& w, tensor2& hn, tensor2& cn) { lstm_step(d, w.view(), hn, cn); });
}

void lstm_openblas(benchmark::State& state) {
  const lstm_data& d = fuse_bench::inputs_of<lstm_data>(state);
  tensor2 xh({d.b, d.in + d.hd}), gates({d.b, 4 * d.hd});
  run_lstm(state, "openblas", [&](const tensor2& w, tensor2& hn, tensor2& cn) {
    concat_rows(d.x, d.h, xh);
    fuse_bench::openblas_abt(xh.data(), w.data(), gates.data(), d.b, 4 * d.hd, d.in + d.hd);
    auto g = fuse::split<4>(fuse::bias_add(gates.view(), d.bias.view()), 1);
    auto [h_next, c_next] = lstm_outputs(g, d.c.view());
    fuse::eval(fuse::outputs(hn, cn), h_next, c_next);
  });
}

void lstm_eigen(benchmark::State& state) {
  const lstm_data& d = fuse_bench::inputs_of<lstm_data>(state);
  tensor2 xh({d.b, d.in + d.hd}), gates({d.b, 4 * d.hd});
  const index_t hd = d.hd;
  run_lstm(state, "eigen", [&](const tensor2& w, tensor2& hn, tensor2& cn) {
    concat_rows(d.x, d.h, xh);
    Eigen::Map<const row_matrix> a(xh.data(), d.b, d.in + d.hd), wm(w.data(), 4 * hd, d.in + d.hd);
    Eigen::Map<row_matrix> gm(gates.data(), d.b, 4 * hd);
    gm.noalias() = a * wm.transpose();
    Eigen::Map<const row_array> ga(gates.data(), d.b, 4 * hd), c(d.c.data(), d.b, hd);
    Eigen::Map<const Eigen::Array<float, 1, Eigen::Dynamic>> bias(d.bias.data(), 4 * hd);
    Eigen::Map<row_array> h_out(hn.data(), d.b, hd), c_out(cn.data(), d.b, hd);
    auto gate = [&](index_t q) { return ga.middleCols(q * hd, hd).rowwise() + bias.segment(q * hd, hd); };
    c_out = gate(1).logistic() * c + gate(0).logistic() * gate(2).tanh();
    h_out = gate(3).logistic() * c_out.tanh();
  });
}

/// Sum of n floats, vectorized, four accumulators: a read-only pass at memory bandwidth.
float stream_sum(const float* p, index_t n) {
  using V = xsimd::batch<float>;
  constexpr index_t W = static_cast<index_t>(V::size);
  V a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
  index_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    a0 += V::load_unaligned(p + i);
    a1 += V::load_unaligned(p + i + W);
    a2 += V::load_unaligned(p + i + 2 * W);
    a3 += V::load_unaligned(p + i + 3 * W);
  }
  float s = xsimd::hadd((a0 + a1) + (a2 + a3));
  for (; i < n; ++i) s += p[i];
  return s;
}

/// The weight-streaming floor: W read once from memory, no math.
void lstm_floor(benchmark::State& state) {
  const lstm_data& d = fuse_bench::inputs_of<lstm_data>(state);
  int next = 0;
  for (auto _ : state) {
    const tensor2& w = d.w[static_cast<std::size_t>(next)];
    next = next + 1 == weight_copies ? 0 : next + 1;
    float s = stream_sum(w.data(), w.size());
    benchmark::DoNotOptimize(s);
  }
  set_flops(state, d.flops());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * d.w[0].size() * 4);
}

// ---- GRU ---------------------------------------------------------------------------------------

/// The GRU gate math on the three blocks of gi and of gh, and h: h'.
template <class GI, class GH, class H>
auto gru_output(const GI& gi, const GH& gh, const H& h) {
  auto r = fuse::sigmoid(gi[0] + gh[0]);
  auto z = fuse::sigmoid(gi[1] + gh[1]);
  auto n = fuse::tanh(gi[2] + r * gh[2]);
  return (1.0f - z) * n + z * h;
}

struct gru_data {
  index_t b, in, hd;
  tensor2 x, h;
  std::vector<tensor2> wi, wh;                        // [3H, I], [3H, H]
  std::vector<fuse::packed_weights<float>> wip, whp;  // the same, packed once
  tensor1 bi, bh;                                     // [3H]
  tensor2 h_ref;

  gru_data(index_t b_, index_t in_, index_t hd_)
      : b(b_),
        in(in_),
        hd(hd_),
        x({b_, in_}),
        h({b_, hd_}),
        wi(weight_set(3 * hd_, in_, 41, 1.0f / std::sqrt(static_cast<float>(in_)))),
        wh(weight_set(3 * hd_, hd_, 42, 1.0f / std::sqrt(static_cast<float>(hd_)))),
        bi({3 * hd_}),
        bh({3 * hd_}),
        h_ref({b_, hd_}) {
    fuse_bench::fill_uniform(x, 21);
    fuse_bench::fill_uniform(h, 22);
    fuse_bench::fill_uniform(bi, 23);
    fuse_bench::fill_uniform(bh, 24);
    for (const tensor2& wc : wi) wip.push_back(fuse::pack(wc));
    for (const tensor2& wc : wh) whp.push_back(fuse::pack(wc));
    tensor2 gi({b, 3 * hd}), gh({b, 3 * hd});
    fuse_bench::openblas_abt(x.data(), wi[0].data(), gi.data(), b, 3 * hd, in);
    fuse_bench::openblas_abt(h.data(), wh[0].data(), gh.data(), b, 3 * hd, hd);
    for (index_t r = 0; r < b; ++r)
      for (index_t j = 0; j < hd; ++j) {
        auto i_ = [&](index_t q) { return static_cast<double>(gi(r, q * hd + j)) + bi(q * hd + j); };
        auto h_ = [&](index_t q) { return static_cast<double>(gh(r, q * hd + j)) + bh(q * hd + j); };
        const double rg = sigmoid_d(i_(0) + h_(0));
        const double zg = sigmoid_d(i_(1) + h_(1));
        const double ng = std::tanh(i_(2) + rg * h_(2));
        h_ref(r, j) = static_cast<float>((1 - zg) * ng + zg * h(r, j));
      }
  }
  double flops() const {
    return 2.0 * static_cast<double>(b) * static_cast<double>(3 * hd) * static_cast<double>(in + hd);
  }
};

template <class Step>
void run_gru(benchmark::State& state, const char* variant, Step step) {
  const gru_data& d = fuse_bench::inputs_of<gru_data>(state);
  tensor2 hn({d.b, d.hd});
  std::fill(hn.begin(), hn.end(), std::nanf(""));
  fuse_bench::last_stats = {};
  step(d.wi[0], d.wh[0], hn);
  const double one_pass = fuse_bench::last_eval_was_one_pass();
  const std::string err = fuse_bench::compare((std::string(variant) + " h'").c_str(), hn.data(), d.h_ref.data(),
                                              static_cast<std::size_t>(hn.size()), tolerance);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  int next = 0;
  for (auto _ : state) {
    step(d.wi[static_cast<std::size_t>(next)], d.wh[static_cast<std::size_t>(next)], hn);
    next = next + 1 == weight_copies ? 0 : next + 1;
    benchmark::DoNotOptimize(hn.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, d.flops());
  if (std::string_view(variant) == "fused") state.counters["one_pass"] = one_pass;
}

void gru_fused(benchmark::State& state) {
  const gru_data& d = fuse_bench::inputs_of<gru_data>(state);
  run_gru(state, "fused", [&](const tensor2& wi, const tensor2& wh, tensor2& hn) {
    const auto& wip = d.wip[copy_index(d.wi, wi)];
    const auto& whp = d.whp[copy_index(d.wh, wh)];
    auto gi = fuse::split<3>(fuse::bias_add(fuse::dense(d.x.view(), wip), d.bi.view()), 1);
    auto gh = fuse::split<3>(fuse::bias_add(fuse::dense(d.h.view(), whp), d.bh.view()), 1);
    fuse_bench::last_stats = fuse::eval(hn, gru_output(gi, gh, d.h.view()));
  });
}

void gru_unfused(benchmark::State& state) {
  const gru_data& d = fuse_bench::inputs_of<gru_data>(state);
  tensor2 gi_buf({d.b, 3 * d.hd}), gh_buf({d.b, 3 * d.hd});
  run_gru(state, "unfused", [&](const tensor2& wi, const tensor2& wh, tensor2& hn) {
    fuse::eval(gi_buf, fuse::dense(d.x.view(), d.wip[copy_index(d.wi, wi)]));
    fuse::eval(gh_buf, fuse::dense(d.h.view(), d.whp[copy_index(d.wh, wh)]));
    auto gi = fuse::split<3>(fuse::bias_add(gi_buf.view(), d.bi.view()), 1);
    auto gh = fuse::split<3>(fuse::bias_add(gh_buf.view(), d.bh.view()), 1);
    fuse::eval(hn, gru_output(gi, gh, d.h.view()));
  });
}

}  // namespace

BENCHMARK(lstm_fused)->Name("lstm/fused")->Args({64, 1024, 1024})->Args({1, 1024, 1024})->UseRealTime();
BENCHMARK(lstm_fused_unpacked)
    ->Name("lstm/fused_unpacked")
    ->Args({64, 1024, 1024})
    ->Args({1, 1024, 1024})
    ->UseRealTime();
BENCHMARK(lstm_openblas)->Name("lstm/openblas")->Args({64, 1024, 1024})->Args({1, 1024, 1024})->UseRealTime();
BENCHMARK(lstm_eigen)->Name("lstm/eigen")->Args({64, 1024, 1024})->Args({1, 1024, 1024})->UseRealTime();
BENCHMARK(lstm_floor)->Name("lstm/floor")->Args({1, 1024, 1024})->UseRealTime();
BENCHMARK(gru_fused)->Name("gru/fused")->Args({64, 1024, 1024})->UseRealTime();
BENCHMARK(gru_unfused)->Name("gru/unfused")->Args({64, 1024, 1024})->UseRealTime();
