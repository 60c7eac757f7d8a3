// fuse::pack: constant weights packed once for the CPU GEMM (the types: fuse/cpu/packed.hpp).
//
//   auto Wp = fuse::pack(W);                               // W: [N, K], nn.dense's layout
//   fuse::eval(out, fuse::sigmoid(fuse::dense(x, Wp)));    // wherever W would be
#pragma once

#include <cstdint>
#include <type_traits>

#include "fuse/core/tensor.hpp"
#include "fuse/cpu/eval.hpp"
#include "fuse/cpu/packed.hpp"
#include "fuse/expr/node.hpp"

namespace fuse {

/// Packs constant weights W ([N, K], nn.dense's layout: a tensor, a view, or any rank-2
/// expression, evaluated once) for every later dense(x, Wp) / matmul(x, Wp, false, true).
/// float and double weights take the GEMM's panels, float16 and bfloat16 weights the float
/// GEMM's panels (widened to float once, here); int8 and uint8 weights the int8 GEMM's (VNNI
/// groups), for int8 or uint8 data.
template <expr_operand W>
auto pack(W&& w) {
  auto e = as_expr(static_cast<W&&>(w));
  using E = decltype(e);
  using T = std::remove_const_t<typename E::value_type>;
  static_assert(E::rank == 2, "fuse::pack: the weights must be a rank-2 [N, K] matrix (nn.dense's layout)");
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> ||
                    std::is_same_v<T, bfloat16> || std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t>,
                "fuse::pack: float32, float64, float16, bfloat16, int8 and uint8 weights are packed (the element "
                "type is none of these)");
  const auto ext = e.shape().array();
  if constexpr (is_tensor_view<E>::value) {
    return packed_weights<T>(e.data(), ext[0], ext[1], e.strides()[0], e.strides()[1]);
  } else {
    tensor<T, 2> dense_copy{dynamic_shape<2>(ext)};
    fuse::eval(dense_copy, e);
    return packed_weights<T>(dense_copy.data(), ext[0], ext[1], ext[1], 1);
  }
}

}  // namespace fuse
