// Compile-fail cases: each FUSE_CASE_* must be rejected at compile time with a diagnostic that
// names what is wrong (tests/CMakeLists.txt checks the compiler's output). Without any
// FUSE_CASE_* defined the file must compile: that is the control case.
#include <fuse/cuda.hpp>
#include <fuse/fuse.hpp>

int main() {
  fuse::tensor<float, fuse::fixed<2, 3>> a;
  fuse::tensor<float, fuse::fixed<4, 5>> b;
  fuse::tensor<float, fuse::fixed<3>> row;
  fuse::tensor<int, fuse::fixed<2, 3>> i;
  fuse::tensor<float, 2> d({2, 3});
  fuse::eval(a, a + row);       // fine: (2,3) + (3)
  float* device_ptr = nullptr;  // (never dereferenced: these cases do not compile)
  auto dv = fuse::cuda::view(device_ptr, {2, 3});
  fuse::cuda::eval(d, a * 2.0f, fuse::cuda::emulated);  // fine: the emulator reads host memory
  (void)dv;
#if defined(FUSE_CASE_STATIC_SHAPES)
  auto e = a + b;  // (2,3) and (4,5) do not broadcast
  (void)e;
#elif defined(FUSE_CASE_DTYPES)
  auto e = a + i;  // float32 and int32: Relay does not promote
  (void)e;
#elif defined(FUSE_CASE_OUTPUT_SHAPE)
  fuse::eval(b, a * 2.0f);  // (2,3) into (4,5)
#elif defined(FUSE_CASE_OUTPUT_DTYPE)
  fuse::eval(i, a * 2.0f);  // float32 into int32
#elif defined(FUSE_CASE_FLOAT_SCALAR_INTO_INT)
  auto e = i * 0.5;  // would truncate
  (void)e;
#elif defined(FUSE_CASE_EXP_OF_INT)
  auto e = fuse::exp(i);
  (void)e;
#elif defined(FUSE_CASE_SQUEEZE_DYNAMIC)
  auto e = fuse::squeeze(d);  // rank of the result unknown at compile time
  (void)e;
#elif defined(FUSE_CASE_TEMPORARY_TENSOR)
  auto e = fuse::exp(fuse::tensor<float, 1>({3}));  // the view would dangle
  (void)e;
#elif defined(FUSE_CASE_CONST_OUTPUT)
  const fuse::tensor<float, fuse::fixed<2, 3>>& ca = a;
  fuse::eval(ca.view(), a * 2.0f);
#elif defined(FUSE_CASE_WHERE_CONDITION)
  auto e = fuse::where(a, a, row);  // condition must be bool
  (void)e;
#elif defined(FUSE_CASE_SPLIT_SECTIONS)
  auto p = fuse::split<4>(a, fuse::axis<1>);  // 3 is not a multiple of 4
  (void)p;
#elif defined(FUSE_CASE_SPLIT_AXIS)
  auto p = fuse::split<2>(a, fuse::axis<2>);  // rank 2 has axes -2..1
  (void)p;
#elif defined(FUSE_CASE_TRANSPOSE_AXES)
  auto t = fuse::transpose<0, 0>(a);
  (void)t;
#elif defined(FUSE_CASE_RESHAPE_CODES)
  auto r = fuse::reshape<4, -1>(a);  // 6 elements do not reshape to (4, ?)
  (void)r;
#elif defined(FUSE_CASE_SQUEEZE_AXIS)
  auto q = fuse::squeeze<1>(a);  // extent 3, not 1
  (void)q;
#elif defined(FUSE_CASE_STATIC_VIEW_THEN_SHAPES)
  auto p = fuse::split<3>(a, fuse::axis<1>);  // parts are (2, 1): static
  auto e = p[0] + b;                          // (2, 1) and (4, 5)
  (void)e;
#elif defined(FUSE_CASE_CONCAT_OF_COPIES)
  auto c = fuse::concatenate(std::tuple(d, d), 0);  // the tuple's copies die with it
  (void)c;
#elif defined(FUSE_CASE_DENSE_STATIC_K)
  fuse::tensor<float, fuse::fixed<30, 12>> w;
  auto y = fuse::dense(a, w);  // a is (2, 3): K = 3 against 12
  (void)y;
#elif defined(FUSE_CASE_BATCH_MATMUL_STATIC_BATCH)
  fuse::tensor<float, fuse::fixed<3, 4, 5>> q;
  fuse::tensor<float, fuse::fixed<2, 6, 5>> k;
  auto y = fuse::batch_matmul<false, true>(q, k);  // batches 3 and 2
  (void)y;
#elif defined(FUSE_CASE_CONTRACT_DTYPES)
  fuse::tensor<std::int8_t, 2> x({2, 3});
  auto y = fuse::dense(x, a);  // int8 x float
  (void)y;
#elif defined(FUSE_CASE_PACKED_ELEMENTWISE)
  const auto wp = fuse::pack(d);
  fuse::eval(d, wp.view() * 2.0f);  // packed weights read by an elementwise tree
#elif defined(FUSE_CASE_PACKED_TEMPORARY)
  auto y = fuse::dense(d, fuse::pack(d));  // the packing is freed at the end of the statement
  (void)y;
#elif defined(FUSE_CASE_CPU_READS_DEVICE)
  fuse::eval(d, dv * 2.0f);
#elif defined(FUSE_CASE_CPU_WRITES_DEVICE)
  fuse::eval(dv, a * 2.0f);
#elif defined(FUSE_CASE_CPU_WRITES_DEVICE_OUTPUTS)
  fuse::eval(fuse::outputs(d, dv), a * 2.0f, a);
#elif defined(FUSE_CASE_CUDA_READS_HOST)
  fuse::cuda::eval(dv, a * 2.0f, fuse::cuda::on(nullptr));
#elif defined(FUSE_CASE_CUDA_WRITES_HOST)
  fuse::cuda::eval(fuse::transpose(d), fuse::transpose(dv), fuse::cuda::on(nullptr));
#elif defined(FUSE_CASE_EMULATOR_READS_DEVICE)
  fuse::cuda::eval(d, dv + 1.0f, fuse::cuda::emulated);
#elif defined(FUSE_CASE_CUDA_ROW_NODE_RESHAPED)
  // (a softmax between the reshape and the root: the kernel cannot iterate inside the reshape)
  fuse::cuda::eval(d, fuse::softmax(fuse::reshape(fuse::softmax(fuse::reshape(d, {3, 2})), {2, 3})),
                   fuse::cuda::emulated);
#elif defined(FUSE_CASE_CUDA_CONTRACTION)
  fuse::cuda::eval(d, fuse::dense(d, fuse::tensor_view<const float, 2>(d)) + 1.0f, fuse::cuda::emulated);
#elif defined(FUSE_CASE_DEVICE_VIEW_AS_HOST)
  fuse::tensor_view<const float, 2> hv = dv;  // no conversion between memory spaces
  (void)hv;
#endif
  return 0;
}
