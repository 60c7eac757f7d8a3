// Built against an installed fuse: the seed's expression must compile, run and be right.
#include <fuse/fuse.hpp>

#include <cmath>
#include <cstdio>

int main() {
  fuse::tensor<float, 2> a({1, 30}), out({1, 10});
  for (int j = 0; j < 30; ++j) a(0, j) = 0.1f * static_cast<float>(j - 15);
  auto s = fuse::split<3>(a, 1);
  fuse::eval(out, fuse::sigmoid(s[0]) + fuse::tanh(s[1]) * fuse::exp(s[2]));
  const double want = 1 / (1 + std::exp(-a(0, 3))) + std::tanh(a(0, 13)) * std::exp(a(0, 23));
  std::printf("out(0, 3) = %.7f (want %.7f)\n", out(0, 3), want);
  return std::fabs(out(0, 3) - want) < 1e-5 ? 0 : 1;
}
