// fuse: chains of tensor operations evaluated as one loop nest.
//
//   #include <fuse/fuse.hpp>
//   fuse::tensor<float, 2> a({1, 30}), out({1, 10});
//   auto s = fuse::split<3>(a, /*axis=*/1);
//   fuse::eval(out, fuse::sigmoid(s[0]) + fuse::tanh(s[1]) * fuse::exp(s[2]));
//
// This umbrella header gives the whole public API of the CPU side: tensors and views, every
// elementwise op, the views, the reductions, and fuse::eval. <fuse/eigen.hpp> adds views of
// Eigen objects; <fuse/reference.hpp> the double-precision reference evaluator.
#pragma once

#include "fuse/core/config.hpp"
#include "fuse/core/dtype.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/half.hpp"
#include "fuse/core/shape.hpp"
#include "fuse/core/tensor.hpp"
#include "fuse/cpu/eval.hpp"
#include "fuse/cpu/pack.hpp"
#include "fuse/expr/contract.hpp"
#include "fuse/expr/elementwise.hpp"
#include "fuse/expr/reduce.hpp"
#include "fuse/expr/same_tree.hpp"
#include "fuse/expr/static_views.hpp"
#include "fuse/expr/views.hpp"
