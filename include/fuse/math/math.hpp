// fuse's float32 transcendental math: one generic implementation per function for V = float
// (host and CUDA device) and, with fuse/simd/math_batch.hpp, for xsimd float batches.
//
//   fuse::math::exp(x)                       accurate mode (the default)
//   fuse::math::tanh<fuse::fast_math_t>(x)   fast mode
//
// Functions: exp, expm1, log, tanh, sigmoid, erf, erfc; TVM's fast_exp, fast_tanh, fast_erf. Accuracy (exhaustive sweep) and speed
// of each are measured in docs/math.md.
#pragma once

#include <fuse/math/mode.hpp>
#include <fuse/math/prims.hpp>
#include <fuse/math/exp.hpp>
#include <fuse/math/log.hpp>
#include <fuse/math/tanh.hpp>
#include <fuse/math/sigmoid.hpp>
#include <fuse/math/erf.hpp>
#include <fuse/math/fast.hpp>
