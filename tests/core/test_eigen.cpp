// Eigen objects as operands and outputs, viewed in place.
#include <doctest/doctest.h>

#include <fuse/eigen.hpp>

#include "support/check.hpp"

using namespace fuse;

TEST_CASE("Eigen matrices, arrays, maps, blocks and tensors are views, in either storage order") {
  Eigen::MatrixXf m = Eigen::MatrixXf::Random(5, 7);
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> r = m;
  Eigen::VectorXf v = Eigen::VectorXf::Random(7);
  auto vm = as_expr(m);
  CHECK(vm.data() == m.data());
  CHECK(vm.shape()[0] == 5);
  CHECK(vm.stride(0) == 1);
  CHECK(vm.stride(1) == 5);
  auto vr = as_expr(r);
  CHECK(vr.stride(0) == 7);
  auto vv = as_expr(v);
  static_assert(decltype(vv)::rank == 1);

  tensor<float, 2> out({5, 7});
  eval(out,
       tanh(m) +
           multiply(
               r, v));  // (Eigen * Eigen is Eigen's product) column-major, row-major and a broadcast vector in one loop
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) CHECK(out(i, j) == doctest::Approx(std::tanh(m(i, j)) + r(i, j) * v(j)).epsilon(1e-6));

  // results assigned into Eigen objects, in place and through a block
  Eigen::MatrixXf dst(5, 7);
  eval(dst, multiply(m, 2.0f));  // m * 2.0f would be Eigen's own expression
  CHECK(dst(3, 4) == m(3, 4) * 2.0f);
  eval(m.block(1, 2, 3, 4), exp(r.block(0, 0, 3, 4)));
  CHECK(m(2, 3) == doctest::Approx(std::exp(r(1, 1))).epsilon(1e-6));
  Eigen::ArrayXXd arr = Eigen::ArrayXXd::Random(4, 3);
  eval(arr, fuse::abs(arr));
  CHECK((arr >= 0).all());
  float raw[12] = {};
  Eigen::Map<Eigen::MatrixXf> map(raw, 3, 4);
  eval(map, scalar_expr<float>{1.5f});
  CHECK(raw[11] == 1.5f);
  Eigen::MatrixXf wrong(2, 2);
  CHECK_THROWS_AS(eval(wrong, multiply(m, 1.0f)), shape_error);

  Eigen::Tensor<float, 3> t(2, 3, 4);
  t.setRandom();
  Eigen::Tensor<float, 3, Eigen::RowMajor> tr(2, 3, 4);
  tr.setRandom();
  tensor<float, 3> o({2, 3, 4});
  eval(o, add(t, tr));
  CHECK(o(1, 2, 3) == t(1, 2, 3) + tr(1, 2, 3));
  Eigen::TensorMap<Eigen::Tensor<float, 3>> tm(t.data(), 2, 3, 4);
  const float expect = t(1, 0, 2) * 0.5f;
  eval(tm, multiply(tm, 0.5f));
  CHECK(t(1, 0, 2) == expect);
}
