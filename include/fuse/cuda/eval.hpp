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
// each launch to a launch_log), fuse::fast_math / fuse::accurate_math.
//
// Memory: a real launch reads and writes device views only (fuse::cuda::tensor, fuse::cuda::view;
// fuse/cuda/memory.hpp), the emulator host memory only; anything else is a named static_assert.
//
// A reduction (sum, mean, max, min, prod) over the last axis at the root of an eval is one launch
// of the row-reduction body (fuse/cuda/row_reduce.hpp), its input tree fused into it.
//
// Not yet (issue 14): other reduction axes, softmax and layer norm, reductions inside a larger
// tree, contractions, outputs that overlap inputs at other addresses, 32-bit indexing inside
// the evaluators.
#pragma once

#include <cstddef>
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
#include "fuse/cuda/row_reduce.hpp"
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

/// The memory an eval with options Opt... reads and writes: the host's for the emulator, the
/// device's for a launch.
template <class... Opt>
using memory_of_options = std::conditional_t<(std::is_same_v<Opt, emulated_t> || ...), host_memory, device_memory>;

template <class T>
inline constexpr bool is_option = std::is_same_v<T, emulated_t> || std::is_same_v<T, on> || std::is_same_v<T, log_to> ||
                                  std::is_same_v<T, accurate_math_t> || std::is_same_v<T, fast_math_t>;

namespace detail {

/// The options of one eval, gathered.
struct settings {
  bool emulate = false;
  schedule order = schedule::forward;
  stream_t stream = nullptr;  ///< none given, or the legacy default stream: refused for a launch
  launch_log* log = nullptr;
};
template <class... Opt>
settings settings_of(const Opt&... opt) {
  settings s;
  (
      [&] {
        if constexpr (std::is_same_v<Opt, emulated_t>) s.emulate = true, s.order = opt.order;
        else if constexpr (std::is_same_v<Opt, on>) s.stream = opt.stream;
        else if constexpr (std::is_same_v<Opt, log_to>) s.log = opt.log;
      }(),
      ...);
  return s;
}
/// Whether a tree holds a node that needs a kernel of its own (a reduction, softmax, layer norm
/// or contraction): the CUDA executor does not run those yet.
template <class N>
constexpr bool has_own_kernel_node() {
  using D = std::remove_cvref_t<N>;
  if constexpr (needs_own_kernel<D>) {
    return true;
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (has_own_kernel_node<child_t<I, D>>() || ...);
    }(std::make_index_sequence<child_count<D>>{});
  }
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
    static_assert(sizeof(N) == 0, "fuse::cuda::eval: reductions and contractions are not run on CUDA yet");
    return 0;
  }
};

#if defined(__CUDACC__)
/// The row-reduction kernel: its body over the device's coordinates and block.
template <reduce_kind K, std::size_t Q, class T, class Ev>
__global__ void row_reduce_kernel(const __grid_constant__ row_reduce_params<K, Q, T, Ev> p) {
  thread_coords t;
  t.block = {blockIdx.x, blockIdx.y, blockIdx.z};
  t.thread = {threadIdx.x, threadIdx.y, threadIdx.z};
  t.block_dim = {blockDim.x, blockDim.y, blockDim.z};
  t.grid_dim = {gridDim.x, gridDim.y, gridDim.z};
  device_block blk;
  row_reduce_body(p, t, blk);
}

/// The kernel: the body over the device's own coordinates.
template <std::size_t Q, class Outs, class Evs>
__global__ void elementwise_kernel(const __grid_constant__ elementwise_params<Q, Outs, Evs> p) {
  thread_coords t;
  t.block = {blockIdx.x, blockIdx.y, blockIdx.z};
  t.thread = {threadIdx.x, threadIdx.y, threadIdx.z};
  t.block_dim = {blockDim.x, blockDim.y, blockDim.z};
  t.grid_dim = {gridDim.x, gridDim.y, gridDim.z};
  elementwise_body(p, t);
}
#endif

/// Kernel parameters beyond this many bytes do not fit a launch (CUDA 12.1+ on Volta and later).
inline constexpr std::size_t max_parameter_bytes = 32764;

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

/// out = a reduction over the last axis of its tree, as one launch of the row-reduction body.
template <class Mode, std::size_t R, class T, class M, reduce_kind K, class Child>
void run_row_reduce(const tensor_view<T, static_cast<int>(R), M>& out, const reduce_expr<K, Child, R>& n,
                    const settings& s) {
  constexpr std::size_t Q = Child::rank;
  static_assert(Q >= 1, "fuse::cuda::eval: a reduction of a rank-0 tree is the tree itself");
  static_assert(!has_own_kernel_node<Child>(),
                "fuse::cuda::eval: the tree a reduction reads holds a reduction, softmax, layer norm or contraction: "
                "not run on CUDA yet");
  if (!(out.shape().array() == n.shape().array()))
    throw_shape_error("cuda::eval: ", reduce_name(K), ": output shape ", out.shape().array(),
                      " differs from the result's ", n.shape().array());
  for (std::size_t d = 0; d < Q; ++d)
    if ((n.reduced[d] != 0) != (d + 1 == Q))
      throw error(std::string("cuda::eval: ") + reduce_name(K) +
                  " over axes other than the last one alone does not run on CUDA yet (issue 14)");
  const index_array<Q> ext = n.child.shape().array();
  if (product(ext) == 0 && out.size() == 0) return;
  bind_context ctx;
  using Ev = decltype(bind::bind<Mode>(n.child, bind::affine_map<Q, Q>::identity(), ctx));
  row_reduce_params<K, Q, T, Ev> p{
      out.data(), {}, bind::bind<Mode>(n.child, bind::affine_map<Q, Q>::identity(), ctx), ext, 1};
  for (std::size_t k = 0; k + 1 < Q; ++k) p.out_stride[k] = out.stride(k), p.rows *= ext[k];
  if (p.rows > index_t{0xFFFFFFFF})
    throw_shape_error("cuda::eval: ", reduce_name(K), " over ", p.rows,
                      " rows; a kernel finds a row's coordinates in 32 bits, so at most 2^32 - 1 rows");
  // Warps write their rows' results while others still read: any overlap of the output with
  // what the tree reads would race (and a CUDA eval allocates no temporary).
  const auto w = bind::written_range<R>::of(out.data(), out.shape().array(), out.strides());
  const auto leaves = bind::leaves_of(ext, p.ev);
  for (std::size_t i = 0; i < leaves.size(); ++i)
    if (bind::overlaps(w.lo, w.hi, leaves[i].lo, leaves[i].hi))
      throw memory_error(std::string("cuda::eval: the output of ") + reduce_name(K) +
                         " overlaps what the reduced tree reads; a CUDA eval allocates no temporary: evaluate into "
                         "another buffer");
  static_assert(sizeof(p) <= max_parameter_bytes,
                "fuse::cuda::eval: the bound tree is larger than a kernel parameter may be (32,764 bytes)");
  const launch_config cfg = row_reduce_launch(p);
  if (s.emulate) {
    emulate_cooperative_grid(cfg, s.order,
                             [&](const thread_coords& t, emulated_block& blk) { row_reduce_body(p, t, blk); });
  } else {
    check_launchable(s);
#if defined(__CUDACC__)
    row_reduce_kernel<K, Q, T, Ev><<<::dim3(cfg.grid.x, cfg.grid.y, cfg.grid.z),
                                     ::dim3(cfg.block.x, cfg.block.y, cfg.block.z), cfg.shared_bytes, s.stream>>>(p);
    check(cudaGetLastError(), "cuda::eval: the launch of the row-reduction kernel", __FILE__, __LINE__);
#endif
  }
  if (s.log) s.log->launches.push_back(launch_record{"row_reduce", cfg, s.emulate});
}

/// exprs into outs (views of one rank Q and one shape) as one kernel.
template <class Mode, std::size_t Q, class... T, class M, class... E>
void run_elementwise(const std::tuple<tensor_view<T, static_cast<int>(Q), M>...>& outs, const std::tuple<E...>& exprs,
                     const settings& s) {
  static_assert(!(has_own_kernel_node<E>() || ...),
                "fuse::cuda::eval: softmax, layer norm, contractions, and reductions inside a larger tree do not run "
                "on CUDA yet (a sum/mean/max/min/prod over the last axis at the root of an eval does)");
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
  } else if constexpr (kind_of<E> == node_kind::reduction) {
    detail::run_row_reduce<math_mode_t<Opt...>>(tensor_view<T, static_cast<int>(Q), M>(out), expr,
                                                detail::settings_of(opt...));
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
    if constexpr ((detail::in_memory_of_eval<M, O, std::tuple_element_t<I, decltype(exprs)>>() && ...))
      detail::run_elementwise<math_mode_t<std::tuple_element_t<N + J, std::tuple<Args...>>...>, Q>(
          std::make_tuple(tensor_view<typename O::element_type, static_cast<int>(Q), M>(std::get<I>(outs.views))...),
          exprs, detail::settings_of(std::get<N + J>(all)...));
  }(std::make_index_sequence<N>{}, std::make_index_sequence<sizeof...(Args) - N>{});
}

}  // namespace fuse::cuda
