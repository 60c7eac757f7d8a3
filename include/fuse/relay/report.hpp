// What `fuse-relay compile --report` prints about a plan: each kernel with its ops, and where
// the kernels go in a program that repeats (a model's layers): the repeating block of kernels,
// how often it repeats, and what lies before and after it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "fuse/relay/plan.hpp"

namespace fuse::relay {

/// A kernel's ops as the report names them: "add, sqrt, nn.batch_matmul".
std::string kernel_ops(const kernel& k);

/// What kernels of one layer have in common: their ops without the injective ones (reshape,
/// transpose, take: TVM's pattern) and annotations, which differ where a layer meets the
/// embedding or the pooler (the first layer norm's output reshaped, the last one's too).
std::string kernel_signature(const kernel& k);

/// A run of `repeats` consecutive copies of the `length` signatures from `first` on; length 0:
/// no signature sequence repeats.
struct repeating_block {
  std::size_t first = 0, length = 0, repeats = 0;
};

/// The repeating block of a sequence of kernel signatures that covers the most kernels (at least
/// two copies; the shortest block among equal covers, then the earliest). A layer of a model is
/// found whole wherever its kernels come out in the same order in every layer, starting at the
/// first kernel that repeats (which may be the last kernel of the layer before, as a layer
/// boundary is not visible in the kernels alone).
repeating_block find_repeating_block(const std::vector<std::string>& signatures);

/// The report: "kernel K: ops" lines, then "repeating block: ..." (or the ops per kernel where
/// nothing repeats).
std::string plan_report(const plan& p);

}  // namespace fuse::relay
