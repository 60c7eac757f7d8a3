// Built against an installed fuse with find_package(fuse COMPONENTS cuda): a .cu file that calls
// fuse::cuda::eval. Run through the host emulator (no GPU needed): the seed's expression.
#include <fuse/cuda.hpp>

#include <cmath>
#include <cstdio>

int main() {
  fuse::tensor<float, 2> a({1, 30}), out({1, 10});
  for (int j = 0; j < 30; ++j) a(0, j) = 0.1f * static_cast<float>(j - 15);
  auto s = fuse::split<3>(a, 1);
  fuse::cuda::eval(out, fuse::sigmoid(s[0]) + fuse::tanh(s[1]) * fuse::exp(s[2]), fuse::cuda::emulated);
  const double want = 1 / (1 + std::exp(-a(0, 3))) + std::tanh(a(0, 13)) * std::exp(a(0, 23));
  std::printf("cuda emulated out(0, 3) = %.7f (want %.7f)\n", out(0, 3), want);
  return std::fabs(out(0, 3) - want) < 1e-5 ? 0 : 1;
}
