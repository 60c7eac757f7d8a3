// The emitter: one self-contained header per model, made of fuse's templates.
//
//   namespace NS {
//   struct model {
//     model();                                     // constants filled (and weights packed) once;
//                                                  // model(weights_path) when some are in a file
//     void operator()(inputs..., outputs...);      // one fuse::eval per kernel of the plan
//   };
//   }
//
// Inputs are `fuse::tensor_view<const T, R>` in parameter order (then the constants whose
// bytes the text did not carry: `print(mod)` drops the metadata section), outputs are
// `fuse::tensor_view<T, R>`, one per result tensor. Each kernel is one `fuse::eval` with a
// comment listing the Relay ops it covers. Constants up to emit_options::inline_limit bytes
// are literals; larger ones go to the weights file (emitted::weights, fuse/core/weights_file.hpp)
// that the constructor reads. The stored intermediates are views into one arena, values whose
// lifetimes do not overlap sharing bytes. The header includes only fuse's headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuse/core/weights_file.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/plan.hpp"

namespace fuse::relay {

/// How the emitter writes constants.
struct emit_options {
  /// Constants of more bytes than this go to the weights file (`emitted::weights`), read when
  /// the model is constructed; smaller ones are literals in the header.
  std::size_t inline_limit = 4096;
  /// The weights file's path the generated constructor defaults to (the caller writes the file
  /// there); the constructor also takes another.
  std::string weights_path = "model.weights";
  /// The executor the header is written for: the CPU's (the model above) or CUDA's, planned
  /// for it (plan_options::target), as `basic_model<Target>` (see emit_header).
  plan_target target = plan_target::cpu;
};

/// What the emitter produced besides the text: the model's interface, for tools that drive it.
struct emitted {
  std::string header;
  /// The large constants, to be written (weights.write(stream)) where emit_options::weights_path
  /// says; empty when every constant is inline. It points into the module's constants: write it
  /// while the module lives.
  fuse::weights_file_writer weights;
  struct port {
    std::string name;   ///< the C++ parameter name
    std::string relay;  ///< the Relay name (%x) or the constant (meta[relay.Constant][i])
    type t;
  };
  std::vector<port> inputs, outputs;
  std::size_t kernels = 0;
  /// Bytes of the arena the intermediates share (values whose lifetimes do not overlap share
  /// memory), and what they would take each in its own tensor.
  std::size_t arena_bytes = 0, intermediate_bytes = 0;
};

namespace emit_detail {

/// A brace list of integers, `{1, 2, 3}`: a shape or axes as the generated C++ spells them.
std::string int_list(const std::vector<std::int64_t>& v);

}  // namespace emit_detail

/// Writes the header of @main's plan p (see the file comment). Throws relay::error for what
/// fuse cannot run.
///
/// For CUDA (options.target, p planned for it) the header (a .cuh) has the same structure over
/// a target (fuse/cuda/target.hpp):
///
///   template <class Target> struct basic_model {
///     explicit basic_model(fuse::cuda::stream_t stream);   // constants uploaded once, the arena
///                                                           // allocated; (stream, weights_path)
///     void run(inputs..., outputs..., fuse::cuda::stream_t stream);  // one fuse::cuda::eval per
///   };                                                      // kernel: launches, nothing else
///   using emulated_model = basic_model<fuse::cuda::emulator>;  // host views, any machine
///   using model = basic_model<fuse::cuda::gpu>;                 // device views (CUDA runtime)
emitted emit_header(const module& m, const plan& p, const std::string& ns, const std::string& source_name,
                    const emit_options& options = {});

}  // namespace fuse::relay
