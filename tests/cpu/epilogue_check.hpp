// The checks of the blocked-epilogue suites (test_epilogue*.cpp): a scoped block budget, evals
// that return their counters, the tolerance of a product of length k.
#pragma once

#include "support/check.hpp"

namespace fuse::test::epilogue {

using namespace fuse;
using fuse::test::tolerance;

/// The blocked epilogue's buffer size for the evals of a scope (fuse::epilogue_block): small
/// budgets cross many blocks (one row by a few columns each) on small shapes.
inline index_t block_elements = epilogue_block{}.elements;
struct block_budget {
  index_t saved = block_elements;
  explicit block_budget(index_t b) { block_elements = b; }
  ~block_budget() { block_elements = saved; }
  block_budget(const block_budget&) = delete;
  block_budget& operator=(const block_budget&) = delete;
};

/// fuse::eval with the scope's block budget; returns what the pass did.
template <class... A>
eval_statistics eval_blocked(A&&... a) {
  return eval(static_cast<A&&>(a)..., epilogue_block{block_elements});
}

/// What the last eval whose counters a test checks did.
inline eval_statistics stats;

inline tolerance cell_tol(index_t k) { return {2e-6, 6e-7 * static_cast<double>(k + 1)}; }

}  // namespace fuse::test::epilogue
