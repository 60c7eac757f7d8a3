// Eigen interop: Eigen objects are fuse operands and outputs, viewed in place (never copied).
//
//   Eigen::MatrixXf m(3, 4);
//   Eigen::VectorXf v(4);
//   fuse::eval(m, fuse::tanh(m) + fuse::transpose(...));   // m is read and written in place
//   fuse::tensor<float, 2> t = fuse::materialize(fuse::exp(m));
//
// Which Eigen types: any dense Matrix, Array, Map, Ref or Block with direct access (rank 2,
// coordinates (row, column) whatever the storage order; compile-time vectors are rank 1), and
// Tensor / TensorMap (rank = NumIndices, coordinates as Eigen's, either layout). A const object
// gives a read-only view; writing into it does not compile. Outputs are not resized: a shape
// that differs throws fuse::shape_error.
//
// Include this header yourself: it pulls Eigen, which the rest of fuse does not need.
#pragma once

#include <type_traits>

#include <Eigen/Core>
#include <unsupported/Eigen/CXX11/Tensor>

#include "fuse/core/tensor.hpp"
#include "fuse/expr/node.hpp"

namespace fuse {

namespace eigen_detail {

template <class X>
concept dense_direct =
    std::is_base_of_v<Eigen::DenseBase<X>, X> && ((Eigen::internal::traits<X>::Flags & Eigen::DirectAccessBit) != 0);

template <class X>
concept tensor_like = requires {
  X::NumIndices;
  X::Layout;
  typename X::Scalar;
} && requires(X& x) {
  x.data();
  x.dimensions();
};

template <class X>
inline constexpr bool is_vector = X::RowsAtCompileTime == 1 || X::ColsAtCompileTime == 1;

}  // namespace eigen_detail

/// Dense Matrix / Array / Map / Ref / Block with direct access.
template <class X>
  requires eigen_detail::dense_direct<std::remove_cv_t<X>>
struct view_traits<X> {
  using D = std::remove_cv_t<X>;
  template <class Y>
  static auto view(Y& x) {
    using Elem = std::remove_reference_t<decltype(*x.data())>;  // const for const objects
    constexpr bool row_major = (Eigen::internal::traits<D>::Flags & Eigen::RowMajorBit) != 0;
    const index_t rows = x.rows(), cols = x.cols();
    const index_t inner = x.innerStride(), outer = x.outerStride();
    if constexpr (eigen_detail::is_vector<D>) {
      // A vector's elements are inner-stride apart whichever way it lies.
      return tensor_view<Elem, 1>(x.data(), dynamic_shape<1>{{rows * cols}}, index_array<1>{{inner}});
    } else if constexpr (row_major) {
      return tensor_view<Elem, 2>(x.data(), dynamic_shape<2>{{rows, cols}}, index_array<2>{{outer, inner}});
    } else {
      return tensor_view<Elem, 2>(x.data(), dynamic_shape<2>{{rows, cols}}, index_array<2>{{inner, outer}});
    }
  }
};

/// Tensor and TensorMap.
template <class X>
  requires(eigen_detail::tensor_like<std::remove_cv_t<X>> && !eigen_detail::dense_direct<std::remove_cv_t<X>>)
struct view_traits<X> {
  using D = std::remove_cv_t<X>;
  template <class Y>
  static auto view(Y& x) {
    constexpr std::size_t R = static_cast<std::size_t>(D::NumIndices);
    using Elem = std::remove_reference_t<decltype(*x.data())>;
    index_array<R> ext{}, str{};
    for (std::size_t i = 0; i < R; ++i) ext[i] = static_cast<index_t>(x.dimensions()[i]);
    if constexpr (static_cast<int>(D::Layout) == static_cast<int>(Eigen::RowMajor)) {
      str = row_major_strides(ext);
    } else {
      index_t s = 1;
      for (std::size_t i = 0; i < R; ++i) str[i] = s, s *= ext[i];
    }
    return tensor_view<Elem, static_cast<int>(R)>(x.data(), dynamic_shape<R>(ext), str);
  }
};

}  // namespace fuse
