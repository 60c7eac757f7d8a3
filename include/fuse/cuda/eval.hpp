// fuse::cuda::eval: an elementwise tree (ops, casts and every view) into one or more outputs in
// ONE kernel launch.
//
//   fuse::cuda::eval(out, sigmoid(s[0]) + tanh(s[1]) * exp(s[2]), fuse::cuda::on(stream));
//   fuse::cuda::eval(fuse::outputs(h, c), eh, ec, fuse::cuda::on(stream));  // one kernel, two outputs
//   fuse::cuda::eval(out, expr, fuse::cuda::emulated);   // the same kernel body on the host
//
// The tree is bound on the host by bind() (fuse/bind/), exactly as the CPU executor binds it,
// and the bound evaluators are the kernel's parameter: the body (fuse/cuda/elementwise.hpp)
// defines no op. eval never allocates device memory and never synchronizes: it launches on the
// given stream and returns, so a sequence of evals can be captured in a CUDA graph.
//
// Options: fuse::cuda::on(stream) (the stream to launch on; required for a real launch, never
// the legacy default stream), fuse::cuda::emulated (run the body on the host, block by block,
// in a chosen thread order: every CUDA test runs this way in CI), fuse::cuda::log_to(log) (append
// each launch to a launch_log), fuse::cuda::stage_rows(true) (long rows staged in shared memory,
// read from device memory once: measured slower on an H100 in two cases of three, so opt-in), fuse::fast_math /
// fuse::accurate_math.
//
// Memory: a real launch reads and writes device views only (fuse::cuda::tensor, fuse::cuda::view;
// fuse/cuda/memory.hpp), the emulator host memory only; anything else is a named static_assert.
//
// A tree that holds row nodes (sum, mean, max, min, prod over any axes; softmax and
// log_softmax; layer_norm), anywhere in it, is one launch of the row kernel
// (fuse/cuda/row_kernel.hpp, bound as fuse/cuda/row_program.hpp says): `x - mean(x, -1,
// keepdims)`, a residual add under a layer norm, TVM's decomposed layer norm, softmax of a scaled
// and masked tree with a requantize after it. A reduction at the root of an eval, over any
// axes, writes one value per output element.
//
// Row nodes may reduce or normalise any axis inside a tree (`x - mean(x, 0)`,
// `softmax(x, 1) * 2`): where their rows would run along the output's last axis the kernel
// iterates with another axis last (run_row_program).
//
// A reduction over several axes inside a tree walks its block as sub-rows along coordinates
// its kept axes leave free (fuse/cuda/row_program.hpp); a root reduction over any axes may hold
// row nodes that stay fixed along its reduced axes.
//
// Row nodes read through a reshape (group norm as TVM writes it) run inside the reshape: the
// tree and the output are reshaped instead (fuse/cuda/row_reshape.hpp), still one launch.
//
// Not yet (issue 14): contractions, outputs that overlap inputs at other addresses, 32-bit
// indexing inside the evaluators.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fuse/bind/aliasing.hpp"
#include "fuse/bind/bind.hpp"
#include "fuse/bind/outputs.hpp"
#include "fuse/core/error.hpp"
#include "fuse/core/small_vector.hpp"
#include "fuse/cuda/check.hpp"
#include "fuse/cuda/elementwise.hpp"
#include "fuse/cuda/emulate.hpp"
#include "fuse/cuda/fibers.hpp"
#include "fuse/cuda/launch.hpp"
#include "fuse/cuda/memory.hpp"
#include "fuse/cuda/row_kernel.hpp"
#include "fuse/cuda/row_program.hpp"
#include "fuse/cuda/row_reshape.hpp"
#include "fuse/expr/reduce.hpp"
#include "fuse/math/mode.hpp"

namespace fuse::cuda {

// ---- options ---------------------------------------------------------------------------------------------

/// Run on the host emulator instead of a GPU, threads in the given order.
struct emulated_t {
  schedule order = schedule::forward;
  constexpr emulated_t operator()(schedule s) const { return emulated_t{s}; }
};
inline constexpr emulated_t emulated{};

/// Append every launch to this log.
struct log_to {
  launch_log* log = nullptr;
  explicit log_to(launch_log& l) : log(&l) {}
};

/// Whether a block that owns a long row stages the leaves it reads again in shared memory, so
/// that the row comes from device memory once (fuse/cuda/row_staging.hpp). Off by default: on an
/// H100 (2026-11-27, docs/performance.md) it made a [8192, 4096] softmax 10% and a [4096, 32768]
/// layer norm 8% slower, a [4096, 32768] softmax 3% faster (a staged row holds the SM's shared
/// memory: fewer blocks in flight). The results are the same bits either way.
struct stage_rows {
  bool on = false;
  explicit stage_rows(bool b) : on(b) {}
};

/// The memory an eval with options Opt... reads and writes: the host's for the emulator, the
/// device's for a launch.
template <class... Opt>
using memory_of_options = std::conditional_t<(std::is_same_v<Opt, emulated_t> || ...), host_memory, device_memory>;

template <class T>
inline constexpr bool is_option =
    std::is_same_v<T, emulated_t> || std::is_same_v<T, on> || std::is_same_v<T, log_to> ||
    std::is_same_v<T, stage_rows> || std::is_same_v<T, accurate_math_t> || std::is_same_v<T, fast_math_t>;

namespace detail {

/// The options of one eval, gathered.
struct settings {
  bool emulate = false;
  schedule order = schedule::forward;
  stream_t stream = nullptr;  ///< none given, or the legacy default stream: refused for a launch
  launch_log* log = nullptr;
  bool stage_rows = false;
};
template <class... Opt>
settings settings_of(const Opt&... opt) {
  settings s;
  (
      [&] {
        if constexpr (std::is_same_v<Opt, emulated_t>) s.emulate = true, s.order = opt.order;
        else if constexpr (std::is_same_v<Opt, on>) s.stream = opt.stream;
        else if constexpr (std::is_same_v<Opt, log_to>) s.log = opt.log;
        else if constexpr (std::is_same_v<Opt, stage_rows>) s.stage_rows = opt.on;
      }(),
      ...);
  return s;
}
/// Whether output O and tree E live in memory M (the options' memory_of_options); the
/// assertions say what is wrong when not.
template <class M, class O, class E>
constexpr bool in_memory_of_eval() {
  constexpr bool output_ok = std::is_same_v<typename O::memory_space_type, M>;
  constexpr bool inputs_ok = (memory_read_by<E>() & (std::is_same_v<M, device_memory> ? host_read : device_read)) == 0;
  if constexpr (std::is_same_v<M, device_memory>) {
    static_assert(output_ok,
                  "fuse::cuda::eval: the output is host memory (a fuse::tensor or a host view), which a kernel "
                  "cannot write: give a device view (fuse::cuda::tensor, fuse::cuda::view), or run the kernel body "
                  "on the host (fuse::cuda::emulated)");
    static_assert(inputs_ok,
                  "fuse::cuda::eval: the expression reads host memory (a fuse::tensor or a host view), which a "
                  "kernel cannot read: copy it to the device (fuse::cuda::tensor, fuse::cuda::copy), or run the "
                  "kernel body on the host (fuse::cuda::emulated)");
  } else {
    static_assert(output_ok,
                  "fuse::cuda::eval(..., fuse::cuda::emulated): the output is a device view; the emulator runs the "
                  "kernel body on the host, which cannot write device memory: give it host memory");
    static_assert(inputs_ok,
                  "fuse::cuda::eval(..., fuse::cuda::emulated): the expression reads a device view; the emulator "
                  "runs the kernel body on the host, which cannot read device memory: give it host memory");
  }
  return output_ok && inputs_ok;
}

/// bind()'s context on CUDA: nothing inside an elementwise tree is materialised (a tree that
/// would need it is rejected before binding).
struct bind_context {
  template <class N>
  int materialize(const N&) {
    static_assert(sizeof(N) == 0, "fuse::cuda::eval: contractions do not run on CUDA yet");
    return 0;
  }
};

#if defined(__CUDACC__)
/// This thread's coordinates from CUDA's built-in variables (every kernel's first step).
__device__ inline thread_coords device_coords() {
  thread_coords t;
  t.block = {blockIdx.x, blockIdx.y, blockIdx.z};
  t.thread = {threadIdx.x, threadIdx.y, threadIdx.z};
  t.block_dim = {blockDim.x, blockDim.y, blockDim.z};
  t.grid_dim = {gridDim.x, gridDim.y, gridDim.z};
  return t;
}

/// The row kernel: its body over the device's coordinates and block. At most 64 registers a
/// thread (blocks of up to 512 threads, two an SM): the occupancy measured on an H100, which the
/// staging code would otherwise cost some kernels (up to 80 registers); the checked kernels do
/// not spill (tests/cuda/static_kernels.cu, test_cuda_eval's -Werror).
template <std::size_t Q, class Phases, class Final>
__global__ void __launch_bounds__(row_long_threads, 2)
    row_kernel(const __grid_constant__ row_params<Q, Phases, Final> p) {
  device_block blk;
  row_body(p, device_coords(), blk);
}

/// The kernel: the body over the device's own coordinates.
template <std::size_t Q, class Outs, class Evs>
__global__ void elementwise_kernel(const __grid_constant__ elementwise_params<Q, Outs, Evs> p) {
  elementwise_body(p, device_coords());
}
#endif

/// Kernel parameters beyond this many bytes do not fit a launch (CUDA 12.1+ on Volta and later).
inline constexpr std::size_t max_parameter_bytes = 32764;
/// Dynamic shared memory a block gets without opting in (cudaFuncSetAttribute).
inline constexpr std::size_t default_shared_bytes = 48 * 1024;

/// Throws unless each output either lies apart from every leaf or is read only at the very
/// addresses it is written (x = f(x) in place): the kernel writes outputs while other threads
/// still read, so any other overlap would race; and a CUDA eval allocates no temporary.
template <std::size_t Q, class Outs, class Evs>
void check_aliasing(const elementwise_params<Q, Outs, Evs>& p) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    small_vector<bind::written_range<Q>, 8> outs;
    (outs.push_back(bind::written_range<Q>::of(fuse::get<I>(p.outs).data, p.extent, fuse::get<I>(p.outs).stride)), ...);
    const auto read_elsewhere =
        bind::outputs_read_elsewhere(outs, bind::leaves_of(p.extent, fuse::get<I>(p.evs)...), p.extent, "cuda::eval");
    for (std::size_t o = 0; o < outs.size(); ++o)
      if (read_elsewhere[o])
        throw memory_error(
            "cuda::eval: an output overlaps an input that is read at other addresses (x = transpose(x), a "
            "shifted slice, a broadcast of itself); a CUDA eval allocates no temporary: evaluate into another "
            "buffer");
  }(std::make_index_sequence<Evs::size>{});
}

/// Refuses a real launch without a stream, or from a translation unit nvcc did not compile.
inline void check_launchable(const settings& s) {
#if defined(__CUDACC__)
  if (s.stream == nullptr)
    throw error(
        "cuda::eval: give the stream to launch on (fuse::cuda::on(stream), not the legacy default stream 0, which "
        "cannot be captured in a graph)");
#else
  (void)s;
  throw error(
      "cuda::eval: this translation unit was not compiled by nvcc, so it holds no kernel: compile it as CUDA, or "
      "pass fuse::cuda::emulated to run the kernel body on the host");
#endif
}

/// One launch of the elementwise body over p.
template <std::size_t Q, class Outs, class Evs>
void launch_elementwise(const elementwise_params<Q, Outs, Evs>& p, const settings& s) {
  static_assert(sizeof(p) <= max_parameter_bytes,
                "fuse::cuda::eval: the bound tree is larger than a kernel parameter may be (32,764 bytes)");
  const launch_config cfg = elementwise_launch(p);
  if (s.emulate) {
    emulate_grid(cfg, s.order, [&](const thread_coords& t) { elementwise_body(p, t); });
  } else {
    check_launchable(s);
#if defined(__CUDACC__)
    elementwise_kernel<Q, Outs, Evs><<<::dim3(cfg.grid.x, cfg.grid.y, cfg.grid.z),
                                       ::dim3(cfg.block.x, cfg.block.y, cfg.block.z), cfg.shared_bytes, s.stream>>>(p);
    check(cudaGetLastError(), "cuda::eval: the launch of the elementwise kernel", __FILE__, __LINE__);
#endif
  }
  if (s.log) s.log->launches.push_back(launch_record{"elementwise", cfg, s.emulate});
}

/// Throws unless the rows fit the kernel's 32-bit row coordinates.
inline void check_rows(index_t rows, const char* what) {
  if (rows > index_t{0xFFFFFFFF})
    throw_shape_error("cuda::eval: ", what, " over ", rows,
                      " rows; a kernel finds a row's coordinates in 32 bits, so at most 2^32 - 1 rows");
}

/// Every leaf the phases read, over ext with the last extent each phase's row length; a phase
/// whose rows are not the output's (another length) reports its leaves as not folded, so that
/// any overlap with an output is refused.
template <std::size_t Q, class Phases>
small_vector<bind::leaf_info, 16> phase_leaves(const Phases& phases, const index_array<Q>& ext) {
  small_vector<bind::leaf_info, 16> leaves;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&](const auto& ph) {
          index_array<Q> e = ext;
          e[Q - 1] = ph.n;
          for (std::size_t k = 0; k + 1 < Q; ++k)
            if ((ph.sub_mask >> k) & 1) e[k] = ph.sub_extent[k];  // (the coordinates its sub-rows walk)
          ph.ev.for_each_leaf(
              [&](bind::leaf_info l) {
                l.folded = l.folded && ph.n == ext[Q - 1] && ph.sub_mask == 0;
                leaves.push_back(l);
              },
              e);
        }(fuse::get<I>(phases)),
        ...);
  }(std::make_index_sequence<Phases::size>{});
  return leaves;
}

/// The sub-rows of a block (coordinates `mask` of extents `ext`, below Q - 1): a kernel counts
/// them in 32 bits, so this throws from 2^32 on.
template <std::size_t Q>
index_t sub_rows(std::uint64_t mask, const index_array<Q>& ext, const char* what) {
  index_t count = 1;
  for (std::size_t k = 0; k + 1 < Q; ++k)
    if ((mask >> k) & 1) count *= ext[k];
  if (count > index_t{0xFFFFFFFF})
    throw_shape_error("cuda::eval: ", what, " walks ", count,
                      " sub-rows a row; a kernel counts them in 32 bits, so at most 2^32 - 1");
  return count;
}

/// The most elements a row's walk reads (any phase's block, or the final walk's: `outputs`
/// columns in each sub-row of p's block); throws where a block has 2^32 sub-rows or more.
template <std::size_t Q, class Phases, class Final>
index_t longest_row(const row_params<Q, Phases, Final>& p, index_t outputs, const char* what) {
  index_t n = outputs * sub_rows(p.block_mask, p.block_extent, what);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&](const auto& ph) {
          const index_t m = ph.n * sub_rows(ph.sub_mask, ph.sub_extent, what);
          n = m > n ? m : n;
        }(fuse::get<I>(p.phases)),
        ...);
  }(std::make_index_sequence<Phases::size>{});
  return n;
}

/// The coordinates along which no phase's value moves: those every phase borrows for its block
/// of sub-rows (a phase's value depends on its kept axes alone). A group may then own the whole
/// block of the iteration along them (row_params::block_mask); 0 where some phase walks its row
/// alone.
template <class Phases>
std::uint64_t common_block(const Phases& phases) {
  if constexpr (Phases::size == 0) return 0;
  std::uint64_t mask = ~std::uint64_t{0};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((mask &= fuse::get<I>(phases).sub_mask), ...);
  }(std::make_index_sequence<Phases::size>{});
  return mask;
}

#if defined(__CUDACC__)
/// Lets the row kernel's blocks have the most shared memory a staged row may ask for (once per
/// kernel and process); false where the device allows less.
template <std::size_t Q, class Phases, class Final>
bool raise_row_shared_limit() {
  static const bool raised = [] {
    const bool ok = cudaFuncSetAttribute(row_kernel<Q, Phases, Final>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(row_shared_bytes + row_stage_max_bytes)) == cudaSuccess;
    if (!ok) (void)cudaGetLastError();
    return ok;
  }();
  return raised;
}
#endif

/// One launch of the row body over p.
template <std::size_t Q, class Phases, class Final>
void launch_row(const row_params<Q, Phases, Final>& p, const settings& s, const char* name) {
  static_assert(sizeof(p) <= max_parameter_bytes,
                "fuse::cuda::eval: the bound tree is larger than a kernel parameter may be (32,764 bytes)");
  launch_config cfg = row_launch(p);
  if (s.emulate) {
    emulate_cooperative_grid(cfg, s.order, [&](const thread_coords& t, emulated_block& blk) { row_body(p, t, blk); });
  } else {
    check_launchable(s);
#if defined(__CUDACC__)
    const row_params<Q, Phases, Final>* q = &p;
    std::optional<row_params<Q, Phases, Final>> unstaged;  // (a copy only where it is needed)
    if (cfg.shared_bytes > default_shared_bytes && !raise_row_shared_limit<Q, Phases, Final>()) {
      // A device whose blocks may not have that much: the row is read as without staging.
      unstaged.emplace(p);
      unstaged->stage = {};
      q = &*unstaged;
      cfg = row_launch(*unstaged);
    }
    row_kernel<Q, Phases, Final><<<::dim3(cfg.grid.x, cfg.grid.y, cfg.grid.z),
                                   ::dim3(cfg.block.x, cfg.block.y, cfg.block.z), cfg.shared_bytes, s.stream>>>(*q);
    check(cudaGetLastError(), "cuda::eval: the launch of the row kernel", __FILE__, __LINE__);
#endif
  }
  if (s.log) {
    std::size_t passes = 1;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((passes += fuse::get<I>(p.phases).copy_from < 0), ...);
    }(std::make_index_sequence<Phases::size>{});
    s.log->launches.push_back(launch_record{name, cfg, s.emulate, passes, p.rows});
  }
}

/// out = a reduction at the root of an eval, one launch of the row kernel. The tree is read
/// transposed, its kept axes first and its reduced axes last (a view: it folds into strides),
/// so that an output element's row is the block of reduced axes: the group of threads that owns
/// it walks the block's sub-rows one after another, its last axis by columns. Over the last axis
/// alone the tree may hold row nodes itself. Where the tree's last axis is kept (a column
/// reduction) a thread owns each output element, so that a warp reads consecutive columns.
template <class Mode, std::size_t R, class T, class M, reduce_kind K, class Child>
void run_root_reduction(const tensor_view<T, static_cast<int>(R), M>& out, const reduce_expr<K, Child, R>& n,
                        const settings& s) {
  constexpr std::size_t Q = Child::rank;
  using V = typename Child::value_type;
  static_assert(Q >= 1, "fuse::cuda::eval: a reduction of a rank-0 tree is the tree itself");
  static_assert(!tree_has<contraction_pred, Child>(), "fuse::cuda::eval: contractions do not run on CUDA yet");
  if (!(out.shape().array() == n.shape().array()))
    throw_shape_error("cuda::eval: ", reduce_name(K), ": output shape ", out.shape().array(),
                      " differs from the result's ", n.shape().array());
  if (out.size() == 0) return;
  // The iteration space: kept axes (in order), then reduced axes (in order).
  const index_array<Q> in = n.child.shape().array();
  index_t perm[Q] = {};
  index_array<Q> ext{}, stride{};
  std::size_t kept = 0;
  for (std::size_t d = 0; d < Q; ++d)
    if (!n.reduced[d]) {
      perm[kept] = static_cast<index_t>(d);
      // The output's axis of kept axis d: d itself with keepdims, its rank among the kept without.
      stride[kept] = out.stride(R == Q ? d : kept);
      ++kept;
    }
  for (std::size_t d = 0, r = kept; d < Q; ++d)
    if (n.reduced[d]) perm[r++] = static_cast<index_t>(d);
  for (std::size_t k = 0; k < Q; ++k) ext[k] = in[static_cast<std::size_t>(perm[k])];
  const auto child = transpose(n.child, perm);
  using Phases = phase_tuple_t<Mode, Q, decltype(child)>;
  using Ev = row_bound_t<Mode, decltype(child), bind::affine_map<Q, Q>>;
  using Ph = row_phase<K, reduce_partial_t<K, compute_t<V>>, phase_result::dtype, V, Ev>;
  row_params<Q, Phases, row_result<T, Q, Ph>> p{};
  row_binder<Phases> binder(&p.phases);
  // The reduced axes before the last are walked inside each output element's row (sub-rows):
  // the row nodes of the tree must not move along them (their values are computed once a row).
  std::uint64_t sub_axes = 0;
  for (std::size_t k = kept; k + 1 < Q; ++k) sub_axes |= std::uint64_t{1} << k;
  binder.walk_inside_rows(sub_axes);
  p.fin.phase = Ph{bind::bind<Mode>(child, bind::affine_map<Q, Q>::identity(), binder), ext[Q - 1]};
  if (!binder.complete()) throw error("cuda::eval: internal error: the row program's phases were not all bound");
  if (binder.rows_across())
    throw error(std::string("fuse::cuda::eval: ") + reduce_name(K) +
                " of a tree whose reductions, softmaxes or layer norms have rows across the reduced axis (a "
                "transpose of one?) does not run on CUDA: evaluate that part first");
  p.fin.out = out.data();
  p.fin.stride = stride;
  p.fin.count = 1;
  // The row's block: the reduced axes before the last (none when only one is reduced; an empty
  // block reduces nothing).
  const std::size_t first_reduced = kept < Q ? kept : Q - 1;
  for (std::size_t k = first_reduced; k < Q; ++k) p.fin.count *= ext[k];
  p.extent = ext;
  if (p.fin.count == 0) p.fin.phase.n = 0;
  else
    for (std::size_t k = first_reduced; k + 1 < Q; ++k)
      p.block_mask |= std::uint64_t{1} << k, p.block_extent[k] = ext[k], p.extent[k] = 1;
  p.rows = 1;
  for (std::size_t k = 0; k + 1 < Q; ++k) p.rows *= p.extent[k];
  check_rows(p.rows, reduce_name(K));
  const index_t longest = longest_row(p, p.fin.phase.n, reduce_name(K));
  p.row_threads = !n.reduced[Q - 1] ? 1 : row_threads_for(longest);
  // Groups write their rows' results while others still read: any overlap of the output with
  // what the tree reads would race (and a CUDA eval allocates no temporary).
  const auto w = bind::written_range<R>::of(out.data(), out.shape().array(), out.strides());
  auto leaves = phase_leaves(p.phases, ext);
  p.fin.phase.ev.for_each_leaf([&](const bind::leaf_info& l) { leaves.push_back(l); }, ext);
  for (std::size_t i = 0; i < leaves.size(); ++i)
    if (bind::overlaps(w.lo, w.hi, leaves[i].lo, leaves[i].hi))
      throw memory_error(std::string("cuda::eval: the output of ") + reduce_name(K) +
                         " overlaps what the reduced tree reads; a CUDA eval allocates no temporary: evaluate into "
                         "another buffer");
  launch_row(p, s, "row_reduce");
}

/// Map m over an iteration whose axis k walks the output's axis perm[k] (inverse: inv).
template <std::size_t Q, std::size_t R>
bind::affine_map<Q, R> iterated_by(bind::affine_map<Q, R> m, const index_t* inv) {
  for (std::size_t d = 0; d < R; ++d)
    if (m.src[d] >= 0) m.src[d] = inv[m.src[d]];
  return m;
}

/// exprs (holding row nodes) into outs (views of one rank Q and one shape) as one launch of the
/// row kernel; a rank-0 output is iterated as one row of one element. The iteration walks the
/// output's axes in order, unless a row node's rows would then run along its last axis (`x -
/// mean(x, 0)`, `softmax(x, 0)`): it then walks last an axis along which no row node's other
/// coordinates move (the binder says which), the others in order, each group of threads owning
/// one line of the output along it (a thread each, where that line is strided in every output
/// and there are rows enough: consecutive threads then write consecutive addresses).
template <class Mode, std::size_t Q, class... T, class M, class... E>
void run_row_program(const std::tuple<tensor_view<T, static_cast<int>(Q), M>...>& outs, const std::tuple<E...>& exprs,
                     const settings& s) {
  static_assert(!(tree_has<contraction_pred, E>() || ...), "fuse::cuda::eval: contractions do not run on CUDA yet");
  constexpr std::size_t Qi = Q > 0 ? Q : 1;
  const index_array<Q> ext0 = pass_extents<Q>(outs, exprs, "cuda::eval");
  if (product(ext0) == 0) return;
  index_array<Qi> ext{};
  ext[Qi - 1] = 1;
  for (std::size_t k = 0; k < Q; ++k) ext[k] = ext0[k];
  using Phases = phase_tuple_t<Mode, Qi, E...>;
  using Outs = tuple<output_slot<T, Qi>...>;
  using Evs = tuple<row_bound_t<Mode, std::remove_cvref_t<E>, bind::affine_map<Qi, std::remove_cvref_t<E>::rank>>...>;
  index_t perm[Qi] = {}, inv[Qi] = {};
  for (std::size_t k = 0; k < Qi; ++k) perm[k] = inv[k] = static_cast<index_t>(k);
  for (int attempt = 0;; ++attempt) {
    index_array<Qi> it{};  // the iteration's extents
    for (std::size_t k = 0; k < Qi; ++k) it[k] = ext[static_cast<std::size_t>(perm[k])];
    row_params<Qi, Phases, row_outputs<Outs, Evs>> p{};
    row_binder<Phases> binder(&p.phases);
    bool strided = true;  // every output strided along the iteration's last axis
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      // (one at a time, in order: the binder numbers the row values as it meets them)
      ((fuse::get<I>(p.fin.evs) = bind::bind<Mode>(
            std::get<I>(exprs),
            iterated_by(
                bind::affine_map<Qi, std::remove_cvref_t<std::tuple_element_t<I, std::tuple<E...>>>::rank>::broadcast(
                    std::get<I>(exprs).shape().array(), ext),
                inv),
            binder)),
       ...);
      index_array<Qi> stride[sizeof...(I)] = {};
      if constexpr (Q > 0)
        for (std::size_t k = 0; k < Q; ++k)
          ((stride[I][k] = std::get<I>(outs).stride(static_cast<std::size_t>(perm[k]))), ...);
      ((strided = strided && stride[I][Qi - 1] != 1), ...);
      ((fuse::get<I>(p.fin.outs) = output_slot<T, Qi>{std::get<I>(outs).data(), stride[I]}), ...);
    }(std::index_sequence_for<E...>{});
    if (binder.rows_across()) {
      // The highest axis no row node's other coordinates move along goes last.
      std::size_t last = Qi;
      for (std::size_t k = Qi; k-- > 0 && last == Qi;)
        if (!((binder.row_axes() >> k) & 1)) last = k;
      if (attempt > 0 || last == Qi)
        throw error(
            "fuse::cuda::eval: the tree's reductions, softmaxes or layer norms need rows along different axes of the "
            "output (or a transpose of one runs its rows across the output's): no order of the iteration keeps every "
            "row apart; evaluate part of the tree first");
      for (std::size_t k = 0, j = 0; k < Qi; ++k)
        if (k != last) perm[j++] = static_cast<index_t>(k);
      perm[Qi - 1] = static_cast<index_t>(last);
      for (std::size_t k = 0; k < Qi; ++k) inv[perm[k]] = static_cast<index_t>(k);
      continue;
    }
    if (!binder.complete()) throw error("cuda::eval: internal error: the row program's phases were not all bound");
    p.extent = it;
    // Where every phase walks one block (group norm's statistics over a group's channels and
    // pixels), a group owns the block: it computes the values once and writes every sub-row,
    // rather than each sub-row's group computing the whole block's values again.
    p.block_mask = common_block(p.phases);
    for (std::size_t k = 0; k + 1 < Qi; ++k)
      if ((p.block_mask >> k) & 1) p.block_extent[k] = it[k], p.extent[k] = 1;
    p.rows = 1;
    for (std::size_t k = 0; k + 1 < Qi; ++k) p.rows *= p.extent[k];
    check_rows(p.rows, "the output");
    const index_t longest = longest_row(p, it[Qi - 1], "the output");
    p.row_threads = attempt > 0 && strided && p.rows >= 1024 ? 1 : row_threads_for(longest);
    // The same rule as the elementwise kernel's, for the leaves of the outputs' trees and of the
    // phases: a group reads its whole row (every phase) before it writes any of it.
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      small_vector<bind::written_range<Qi>, 8> w;
      (w.push_back(bind::written_range<Qi>::of(fuse::get<I>(p.fin.outs).data, it, fuse::get<I>(p.fin.outs).stride)),
       ...);
      auto leaves = phase_leaves(p.phases, it);
      (fuse::get<I>(p.fin.evs).for_each_leaf([&](const bind::leaf_info& l) { leaves.push_back(l); }, it), ...);
      const auto read_elsewhere = bind::outputs_read_elsewhere(w, leaves, it, "cuda::eval");
      for (std::size_t o = 0; o < w.size(); ++o)
        if (read_elsewhere[o])
          throw memory_error(
              "cuda::eval: an output overlaps an input that is read at other addresses (x = transpose(x), a "
              "shifted slice, a broadcast of itself, another row of a reduction); a CUDA eval allocates no "
              "temporary: evaluate into another buffer");
    }(std::index_sequence_for<E...>{});
    if (s.stage_rows) p.stage = plan_row_stage(p);
    launch_row(p, s, "row");
    return;
  }
}

/// out = expr, whose row nodes are read through reshapes (is_reshape_of_rows): the tree and the
/// output reshaped to the shape inside, then one launch as any other row program or reduction.
template <class Mode, std::size_t R, class T, class M, class E>
void run_through_reshape(const tensor_view<T, static_cast<int>(R), M>& out, const E& expr, const settings& s) {
  constexpr std::size_t Rr = rows_reshape_rank<E>();
  if (!(out.shape().array() == expr.shape().array()))
    throw_shape_error("cuda::eval: output shape ", out.shape().array(), " differs from the expression's ",
                      expr.shape().array());
  if (out.size() == 0) return;
  index_array<Rr> inner{};
  find_rows_reshape_shape<Rr>(expr, inner);
  const auto tree = hoist_rows_reshape<Rr>(expr, out.shape().array(), inner);
  index_array<Rr> stride{};
  if (!bind::detail::reshape_strides(out.shape().array(), out.strides(), inner, stride))
    throw_shape_error(
        "cuda::eval: a reduction, softmax or layer norm read through a reshape runs inside the "
        "reshape, so the output of shape ",
        out.shape().array(), " is reshaped too; its strides do not allow the shape ", inner,
        ": evaluate into a contiguous output");
  const tensor_view<T, static_cast<int>(Rr), M> inner_out(out.data(), dynamic_shape<Rr>(inner), stride);
  using H = std::remove_cvref_t<decltype(tree)>;
  if constexpr (kind_of<H> == node_kind::reduction) run_root_reduction<Mode>(inner_out, tree, s);
  else run_row_program<Mode, Rr>(std::make_tuple(inner_out), std::tuple<const H&>(tree), s);
}

/// exprs into outs (views of one rank Q and one shape) as one kernel.
template <class Mode, std::size_t Q, class... T, class M, class... E>
void run_elementwise(const std::tuple<tensor_view<T, static_cast<int>(Q), M>...>& outs, const std::tuple<E...>& exprs,
                     const settings& s) {
  const index_array<Q> ext = pass_extents<Q>(outs, exprs, "cuda::eval");
  if (product(ext) == 0) return;
  bind_context ctx;
  // exprs[I] bound over the output's extents, broadcast to them, as the CPU binds it.
  const auto bound = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    using E_I = std::remove_cvref_t<std::tuple_element_t<I, std::tuple<E...>>>;
    return bind::bind<Mode>(std::get<I>(exprs),
                            bind::affine_map<Q, E_I::rank>::broadcast(std::get<I>(exprs).shape().array(), ext), ctx);
  };
  auto p = [&]<std::size_t... I>(std::index_sequence<I...>) {
    using Outs = tuple<output_slot<T, Q>...>;
    using Evs = tuple<decltype(bound(std::integral_constant<std::size_t, I>{}))...>;
    return elementwise_params<Q, Outs, Evs>{
        Outs{output_slot<T, Q>{std::get<I>(outs).data(), std::get<I>(outs).strides()}...},
        Evs{bound(std::integral_constant<std::size_t, I>{})...}, ext, 1};
  }(std::index_sequence_for<T...>{});
  for (std::size_t k = 0; k + 1 < Q; ++k) p.rows *= ext[k];
  if (p.rows > index_t{0xFFFFFFFF})
    throw_shape_error("cuda::eval: the output has ", p.rows, " rows (its outer extents ", ext,
                      "); a kernel finds a row's coordinates in 32 bits, so at most 2^32 - 1 rows");
  check_aliasing(p);
  launch_elementwise(p, s);
}

}  // namespace detail

/// Evaluates `expr` into `out` as one kernel (see the file's top for the options).
template <class Out, class Expr, class... Opt>
  requires(!is_outputs<std::remove_cvref_t<Out>> && (is_option<std::remove_cvref_t<Opt>> && ...) &&
           !is_option<std::remove_cvref_t<Expr>>)
void eval(Out&& out_, Expr&& expr_, const Opt&... opt) {
  auto out = as_output(static_cast<Out&&>(out_));
  auto&& expr = as_node(static_cast<Expr&&>(expr_));  // the tree lives until eval returns
  using O = decltype(out);
  using E = std::remove_cvref_t<decltype(expr)>;
  check_output<O, E>();
  constexpr std::size_t Q = O::rank;
  using T = typename O::element_type;
  using M = memory_of_options<Opt...>;
  if constexpr (!detail::in_memory_of_eval<M, O, E>()) {
    return;  // (its assertions said why)
  } else if constexpr (tree_has<contraction_pred, E>()) {
    static_assert(!tree_has<contraction_pred, E>(),
                  "fuse::cuda::eval: contractions (dense, matmul, batch_matmul) do not run on CUDA yet");
  } else if constexpr (kind_of<E> != node_kind::reduction && tree_has<reshape_of_rows_pred, E>()) {
    detail::run_through_reshape<math_mode_t<Opt...>, Q>(tensor_view<T, static_cast<int>(Q), M>(out), expr,
                                                        detail::settings_of(opt...));
  } else if constexpr (kind_of<E> == node_kind::reduction) {
    detail::run_root_reduction<math_mode_t<Opt...>>(tensor_view<T, static_cast<int>(Q), M>(out), expr,
                                                    detail::settings_of(opt...));
  } else if constexpr (tree_has<row_node_pred, E>()) {
    detail::run_row_program<math_mode_t<Opt...>, Q>(std::make_tuple(tensor_view<T, static_cast<int>(Q), M>(out)),
                                                    std::tuple<const E&>(expr), detail::settings_of(opt...));
  } else {
    detail::run_elementwise<math_mode_t<Opt...>, Q>(std::make_tuple(tensor_view<T, static_cast<int>(Q), M>(out)),
                                                    std::tuple<const E&>(expr), detail::settings_of(opt...));
  }
}

/// Evaluates one expression per output, all in one kernel (trailing options allowed).
template <class... O, class... Args>
void eval(outputs_t<O...> outs, Args&&... args) {
  constexpr std::size_t N = sizeof...(O);
  static_assert(sizeof...(Args) >= N, "fuse::cuda::eval: give one expression per output");
  auto all = std::forward_as_tuple(static_cast<Args&&>(args)...);
  [&]<std::size_t... I, std::size_t... J>(std::index_sequence<I...>, std::index_sequence<J...>) {
    static_assert((is_option<std::remove_cvref_t<std::tuple_element_t<N + J, std::tuple<Args...>>>> && ...),
                  "fuse::cuda::eval: after the expressions only options may follow");
    auto exprs = std::make_tuple(as_expr(std::get<I>(all))...);
    check_outputs<std::tuple<O...>, decltype(exprs)>();
    constexpr std::size_t Q = std::tuple_element_t<0, std::tuple<O...>>::rank;
    using M = memory_of_options<std::remove_cvref_t<std::tuple_element_t<N + J, std::tuple<Args...>>>...>;
    using Mode = math_mode_t<std::tuple_element_t<N + J, std::tuple<Args...>>...>;
    static_assert(!(tree_has<contraction_pred, std::tuple_element_t<I, decltype(exprs)>>() || ...),
                  "fuse::cuda::eval: contractions (dense, matmul, batch_matmul) do not run on CUDA yet");
    if constexpr ((detail::in_memory_of_eval<M, O, std::tuple_element_t<I, decltype(exprs)>>() && ...) &&
                  !(tree_has<contraction_pred, std::tuple_element_t<I, decltype(exprs)>>() || ...)) {
      auto views =
          std::make_tuple(tensor_view<typename O::element_type, static_cast<int>(Q), M>(std::get<I>(outs.views))...);
      if constexpr ((tree_has<row_node_pred, std::tuple_element_t<I, decltype(exprs)>>() || ...))
        detail::run_row_program<Mode, Q>(views, exprs, detail::settings_of(std::get<N + J>(all)...));
      else detail::run_elementwise<Mode, Q>(views, exprs, detail::settings_of(std::get<N + J>(all)...));
    }
  }(std::make_index_sequence<N>{}, std::make_index_sequence<sizeof...(Args) - N>{});
}

}  // namespace fuse::cuda
