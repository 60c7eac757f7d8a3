// The static checks of the CUDA executor's kernels, made without a GPU (ctest `cuda_static`):
// this file is compiled to PTX and scripts/check_kernels.py reads it. Each function below
// makes one fuse::cuda::eval of a representative tree; the checks are that each made exactly
// ONE kernel entry, and that no elementwise kernel calls a routine or divides in 64 bits (both
// are calls into software sequences on the GPU). Spills are refused at build time elsewhere
// (test_cuda_eval is compiled with -Xptxas -warn-spills,-Werror). Trees whose ops divide 64-bit
// integers by their meaning (int64 division and modulo, take's wrap mode) are left out: the
// check is on the executor's own index arithmetic.
//
// The line `fuse-static-kernels: N` gives the number of evals here: the checker expects exactly
// that many entries; `fuse-static-instructions:` names the vector accesses that must appear
// (contiguous float rows read and written 16 bytes at a time, half 8 and int8 4).
#include <cstdint>

#include <fuse/cuda.hpp>

// fuse-static-kernels: 13
// fuse-static-instructions: ld.global.v4.f32 st.global.v4.f32 st.global.v4.u16 st.global.v4.u8

namespace check {

using namespace fuse;

/// The seed's gate tree: split, a broadcast bias, sigmoid/tanh/exp, a cast to half.
void gates(const float* x, const float* bias, half* out, index_t rows, index_t n, cuda::stream_t s) {
  const auto xv = cuda::view(x, {rows, 4 * n}), bv = cuda::view(bias, {1, 4 * n});
  const auto g = split<4>(xv + bv, 1);
  cuda::eval(cuda::view(out, {rows, n}), cast<half>(sigmoid(g[0]) * tanh(g[1]) + exp(g[2]) * sigmoid(g[3])),
             cuda::on(s));
}

/// An LSTM cell's two outputs in one kernel.
void lstm(const float* gates_, float* h, float* c, index_t rows, index_t n, cuda::stream_t s) {
  const auto gv = cuda::view(gates_, {rows, 4 * n});
  const auto hv = cuda::view(h, {rows, n}), cv = cuda::view(c, {rows, n});
  const auto g = split<4>(gv, 1);
  const auto c_new = sigmoid(g[1]) * cv + sigmoid(g[0]) * tanh(g[2]);
  cuda::eval(outputs(hv, cv), sigmoid(g[3]) * tanh(c_new), c_new, cuda::on(s));
}

/// A rank-4 transpose (the attention heads' layout change) with a requantize to int8.
void heads(const float* q, std::int8_t* out, index_t b, index_t sq, index_t h, index_t d, cuda::stream_t s) {
  const auto qv = cuda::view(q, {b, sq, h, d});
  cuda::eval(cuda::view(out, {b, h, sq, d}),
             cast<std::int8_t>(clip(round(transpose(qv, {0, 2, 1, 3}) * 16.0f), -128.0, 127.0)), cuda::on(s));
}

/// GELU (erf) over a strided slice, fast math.
void gelu_fast(const float* x, float* out, index_t rows, index_t n, cuda::stream_t s) {
  const auto xv = cuda::view(x, {rows, 2 * n});
  cuda::eval(cuda::view(out, {rows, n}), gelu(strided_slice(xv, {0, 0}, {rows, 2 * n}, {1, 2})), cuda::on(s),
             fast_math);
}

/// A concatenation of int32 tensors along the last axis, one of them broadcast.
void concat(const std::int32_t* a, const std::int32_t* tail, std::int32_t* out, index_t m, index_t k,
            cuda::stream_t s) {
  const auto av = cuda::view(a, {m, k});
  const auto tv = cuda::view(tail, {1, 3});
  const auto tails = broadcast_to(tv, {m, 3});
  cuda::eval(cuda::view(out, {m, k + 3}), concatenate(std::tie(av, tails), 1) * 3, cuda::on(s));
}

/// A row reduction over the last axis of a fused tree (double partials).
void row_sum(const float* x, const float* bias, float* out, index_t rows, index_t n, cuda::stream_t s) {
  const auto xv = cuda::view(x, {rows, n});
  const auto bv = cuda::view(bias, {n});
  cuda::eval(cuda::view(out, {rows}), sum(exp(xv + bv), -1), cuda::on(s));
}

/// An int8 row max over a rank-3 transposed view (int32 partials).
void row_max_int8(const std::int8_t* x, std::int8_t* out, index_t b, index_t m, index_t n, cuda::stream_t s) {
  cuda::eval(cuda::view(out, {b, n}), max(transpose(cuda::view(x, {b, m, n}), {0, 2, 1}), -1), cuda::on(s));
}

/// Attention's probabilities: scores scaled, an additive mask broadcast over heads, softmax,
/// a requantize to int8 (row program: two phases, a warp a row).
void attention_probs(const float* scores, const float* mask, std::int8_t* out, index_t b, index_t h, index_t sq,
                     index_t sk, cuda::stream_t s) {
  const auto sv = cuda::view(scores, {b, h, sq, sk});
  const auto mv = cuda::view(mask, {b, 1, 1, sk});
  cuda::eval(cuda::view(out, {b, h, sq, sk}),
             cast<std::int8_t>(clip(round(softmax(sv * 0.125f + mv) * 127.0f), -128.0, 127.0)), cuda::on(s));
}

/// A residual add under a layer norm (BERT's).
void residual_layer_norm(const float* x, const float* res, const float* gamma, const float* beta, float* out,
                         index_t rows, index_t n, cuda::stream_t s) {
  const auto xv = cuda::view(x, {rows, n}), rv = cuda::view(res, {rows, n});
  cuda::eval(cuda::view(out, {rows, n}), layer_norm(xv + rv, cuda::view(gamma, {n}), cuda::view(beta, {n})),
             cuda::on(s));
}

/// The decomposed layer norm TVM's SimplifyInference writes (mean, variance, add, sqrt,
/// divide, multiply, add): three phases.
void decomposed_layer_norm(const float* x, const float* gamma, const float* beta, float* out, index_t rows, index_t n,
                           cuda::stream_t s) {
  const auto xv = cuda::view(x, {rows, n});
  const auto d = xv - mean(xv, -1, keepdims);
  cuda::eval(cuda::view(out, {rows, n}),
             d / sqrt(mean(d * d, -1, keepdims) + 1e-12f) * cuda::view(gamma, {n}) + cuda::view(beta, {n}),
             cuda::on(s));
}

/// A column reduction (over the first axis: a thread an output) of a fused tree.
void column_sum(const float* x, float* out, index_t m, index_t n, cuda::stream_t s) {
  const auto xv = cuda::view(x, {m, n});
  cuda::eval(cuda::view(out, {n}), sum(xv * xv, 0), cuda::on(s));
}

/// NCHW's global average pool: the two spatial axes a block of sub-rows.
void global_pool(const float* x, float* out, index_t b, index_t c, index_t h, index_t w, cuda::stream_t s) {
  cuda::eval(cuda::view(out, {b, c, 1, 1}), mean(cuda::view(x, {b, c, h, w}), {2, 3}, keepdims), cuda::on(s));
}

/// Instance norm as exporters decompose it (statistics over H and W of NCHW, a per-channel scale
/// and shift): reductions over two axes inside the tree, each a block of sub-rows.
void instance_norm(const float* x, const float* gamma, const float* beta, float* out, index_t b, index_t c, index_t h,
                   index_t w, cuda::stream_t s) {
  const auto xv = cuda::view(x, {b, c, h, w});
  const auto d = xv - mean(xv, {2, 3}, keepdims);
  cuda::eval(
      cuda::view(out, {b, c, h, w}),
      d / sqrt(mean(d * d, {2, 3}, keepdims) + 1e-5f) * cuda::view(gamma, {c, 1, 1}) + cuda::view(beta, {c, 1, 1}),
      cuda::on(s));
}

}  // namespace check
