// A Relay model compiled by CMake: fuse_relay_generate() turns lstm_cell.relay into
// lstm_cell.hpp at build time; this program runs the generated model over a short sequence and
// checks every step against a plain double-precision loop. Exits 1 when a check fails.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "lstm_cell.hpp"

int main() {
  constexpr int B = 4, I = 16, H = 32, steps = 5;
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  fuse::tensor<float, 2> x({B, I}), h({B, H}), c({B, H}), w({4 * H, I + H}), h2({B, H}), c2({B, H});
  fuse::tensor<float, 1> b({4 * H});
  for (float* t : {x.data(), w.data(), b.data()})
    for (float* p = t; p != t + (t == x.data() ? x.size() : t == w.data() ? w.size() : b.size()); ++p) *p = u(gen);
  std::vector<double> hr(B * H, 0.0), cr(B * H, 0.0);  // the reference state
  for (auto* t : {&h, &c})
    for (float& v : *t) v = 0.0f;

  relay_lstm::model cell;  // generated: one kernel
  double worst = 0;
  for (int s = 0; s < steps; ++s) {
    cell(std::as_const(x).view(), std::as_const(h).view(), std::as_const(c).view(), std::as_const(w).view(),
         std::as_const(b).view(), h2.view(), c2.view());
    // Reference step in double.
    std::vector<double> hn(B * H), cn(B * H);
    for (int i = 0; i < B; ++i) {
      double g[4 * H];
      for (int j = 0; j < 4 * H; ++j) {
        double a = b(j);
        for (int k = 0; k < I; ++k) a += double(x(i, k)) * w(j, k);
        for (int k = 0; k < H; ++k) a += hr[i * H + k] * w(j, I + k);
        g[j] = a;
      }
      for (int j = 0; j < H; ++j) {
        auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
        cn[i * H + j] = sig(g[H + j]) * cr[i * H + j] + sig(g[j]) * std::tanh(g[2 * H + j]);
        hn[i * H + j] = sig(g[3 * H + j]) * std::tanh(cn[i * H + j]);
      }
    }
    hr = hn, cr = cn;
    for (int k = 0; k < B * H; ++k) {
      worst = std::max(worst, std::fabs(h2.data()[k] - hr[k]));
      worst = std::max(worst, std::fabs(c2.data()[k] - cr[k]));
    }
    std::swap(h, h2);
    std::swap(c, c2);
  }
  const bool ok = worst < 1e-5;
  std::printf("relay_lstm: %d steps of the generated cell, max error vs double %.2e: %s\n", steps, worst,
              ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
