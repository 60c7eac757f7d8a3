// The CUDA executor (fuse::cuda::eval) with the expression builders it reads: usable from .cu
// files (nvcc) and from plain C++ (the host emulator, fuse::cuda::emulated). Includes nothing of
// the CPU executor or xsimd; a .cu file may include <fuse/fuse.hpp> beside it.
#pragma once

#include "fuse/cuda/eval.hpp"          // IWYU pragma: export
#include "fuse/cuda/target.hpp"        // IWYU pragma: export
#include "fuse/expr/broadcast.hpp"     // IWYU pragma: export
#include "fuse/expr/convert.hpp"       // IWYU pragma: export
#include "fuse/expr/elementwise.hpp"   // IWYU pragma: export
#include "fuse/expr/ops.hpp"           // IWYU pragma: export
#include "fuse/expr/static_views.hpp"  // IWYU pragma: export
#include "fuse/expr/views.hpp"         // IWYU pragma: export
