// Compiled (never run) for a CPU with AVX512_BF16 whatever the build machine's CPU, so that every
// build proves the vdpbf16ps kernel of fuse/cpu/gemm_bf16.hpp compiles and lowers to the
// instruction (tests/CMakeLists.txt builds it with -mavx512bf16; `dpbf16_in_object` checks the
// object for vdpbf16ps).
#include <fuse/cpu/gemm_bf16.hpp>

static_assert(fuse::cpu::gemm::has_dpbf16, "fuse: this file is compiled with -mavx512bf16");

namespace fuse::cpu::gemm {
template void gemm_bf16<float>(index_t, index_t, index_t, strided<bfloat16>, strided<bfloat16>, float*, index_t,
                               index_t, const float*);
template void gemm_bf16<bfloat16>(index_t, index_t, index_t, strided<bfloat16>, strided<bfloat16>, bfloat16*, index_t,
                                  index_t, const float*);
template void gemm_bf16_prepacked<float>(index_t, index_t, strided<bfloat16>, const packed_pairs_b&, index_t, float*,
                                         index_t, index_t);
template void gemm_bf16_prepacked<bfloat16>(index_t, index_t, strided<bfloat16>, const packed_pairs_b&, index_t,
                                            bfloat16*, index_t, index_t);
}  // namespace fuse::cpu::gemm
