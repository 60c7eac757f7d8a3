// Options of fuse::eval, passed as trailing arguments, and what eval reports back:
//   fuse::eval(out, expr, fuse::fast_math);                 // Eigen-class math, faster
//   fuse::eval(out, expr, fuse::streaming_stores::on);      // force non-temporal stores
//   fuse::eval(out, expr, fuse::epilogue_block{4096});      // smaller blocks in a blocked epilogue
//   const fuse::eval_statistics st = fuse::eval(out, expr);  // st.passes, st.blocks, ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "fuse/math/mode.hpp"

namespace fuse {

/// Non-temporal ("streaming") stores write output lines without reading them first and without
/// keeping them in cache: right for outputs far larger than the cache, wrong for small ones.
enum class streaming_stores { automatic, on, off };

/// Outputs of at least this many bytes use streaming stores under streaming_stores::automatic
/// (half the L3 of the machines fuse is tuned on: such an output cannot stay cached anyway).
inline constexpr std::size_t streaming_threshold_bytes = std::size_t{16} << 20;

/// Elements in one contraction leaf's block buffer in a blocked epilogue (fuse/cpu/epilogue.hpp;
/// 32 Ki: 128 KiB of float, so that the gate blocks of a cell stay in L2 beside the weights
/// streaming through). A tuning knob; tests lower it to cross many blocks with small shapes.
struct epilogue_block {
  std::int64_t elements = 32768;
};

/// What one fuse::eval did, counted over every pass it ran (nested evaluations included): lets
/// tests and users see that a tree fused.
struct eval_statistics {
  std::size_t passes = 0;               ///< blocked epilogue passes run
  std::size_t blocks = 0;               ///< blocks over all those passes
  std::size_t partial_leaves = 0;       ///< contraction blocks computed for one block each
  std::size_t whole_leaves = 0;         ///< nodes evaluated whole (once per pass)
  std::size_t through_temporaries = 0;  ///< blocked passes whose outputs went through temporaries
  std::size_t row_packings = 0;         ///< row blocks of A packed for the GEMM and shared by its products
  std::size_t prologue_row_blocks = 0;  ///< row blocks of expression operands evaluated (prologue by rows)

  /// Sums the counts of several evals (the steps of a sequence).
  eval_statistics& operator+=(const eval_statistics& o) {
    passes += o.passes;
    blocks += o.blocks;
    partial_leaves += o.partial_leaves;
    whole_leaves += o.whole_leaves;
    through_temporaries += o.through_temporaries;
    row_packings += o.row_packings;
    prologue_row_blocks += o.prologue_row_blocks;
    return *this;
  }
};

template <class T>
inline constexpr bool is_eval_option = std::is_same_v<T, accurate_math_t> || std::is_same_v<T, fast_math_t> ||
                                       std::is_same_v<T, streaming_stores> || std::is_same_v<T, epilogue_block>;

namespace detail {
/// The last option of type T among opt, or `value` when there is none.
template <class T, class... Opt>
T option_of(T value, const Opt&... opt) {
  (
      [&] {
        if constexpr (std::is_same_v<Opt, T>) value = opt;
      }(),
      ...);
  return value;
}

template <class... Opt>
streaming_stores streaming_of(const Opt&... o) {
  return option_of(streaming_stores::automatic, o...);
}
}  // namespace detail

}  // namespace fuse
