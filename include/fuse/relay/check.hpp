// `fuse-relay check`: generates a model's header, compiles it into a small driver with the
// compiler and flags the project was configured with, runs it on random inputs and compares
// every output with the reference interpreter.
//
// Float outputs: the largest error relative to max(1, |reference|), within 1e-4 (float16 and
// bfloat16 results: 4 ulps of their dtype, rounded at every op in the reference) of the double
// reference or of the float32-rounded one (where float32 itself is far from exact). Integer outputs must match
// exactly. Outputs that depend on rounding a float intermediate (a float -> integer cast, round,
// a float comparison: requantized integers and the floats dequantized from them) are compared
// with a reference that rounds float32 ops as the fused code does; a reordered float sum can
// still flip a tie there, so up to 0.1% of their elements may differ. Inputs that make every output zero or saturated prove nothing, so the
// magnitude of each random input is chosen on the interpreter (below, `choose_scales`) so that
// most output elements are live if they can be, and the report gives that share.
//
// The library runs no process itself: check_options::run compiles and runs the driver (fuse-relay
// passes one that goes through the shell).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fuse/relay/interpreter.hpp"
#include "fuse/relay/ir.hpp"
#include "fuse/relay/plan.hpp"

namespace fuse::relay {

struct check_options {
  std::string cxx;                ///< the compiler
  std::string flags;              ///< its flags, include directories among them
  std::uint64_t seed = 1;         ///< random inputs
  std::string workdir;            ///< where the header, driver and .npy files go
  double float_tolerance = 1e-4;  ///< float32/float64 outputs; 16-bit floats: 4 ulps of their dtype, if more
  plan_options planning;          ///< how the header is planned (fuse's planner by default)
  /// The executor checked: the CPU's (the header compiled with cxx and flags), or CUDA's (the
  /// .cuh compiled with nvcc and nvcc_flags, run on the GPU when the machine has one, else on
  /// the host emulator: check_report::ran_on says which; where the machine has no NVIDIA device
  /// node, -G is added: the device code, compiled but not run, is not optimized).
  plan_target target = plan_target::cpu;
  std::string nvcc, nvcc_flags;
  /// Runs `command`, a shell command line (the compiler on the driver; then the driver on the work
  /// directory), with its standard output and error written to the file `log_path`, and returns its
  /// exit status (0: success). check_model throws relay::error when it is empty: there is no default,
  /// as the library spawns no process itself.
  std::function<int(const std::string& command, const std::string& log_path)> run;
};

struct check_report {
  std::size_t kernels = 0;
  double max_rel_err = 0;            ///< over float outputs
  double differing = 0;              ///< share of the outputs' elements after a float rounding that differ
  double live = 0;                   ///< share of output elements neither zero nor saturated
  std::vector<double> input_scales;  ///< the magnitude chosen for each random input (see random_input)
  bool tie_allowance = false;
  bool ok = false;
  bool internal = false;  ///< fuse's fault, not the input's: the generated header did not compile
  bool refused = false;   ///< fuse does not run the model (check_models only): detail says why
  std::string detail;     ///< what failed, when it did
  std::string ran_on;     ///< "cpu", "emulator" or "gpu NAME" (the device's name)
};

namespace check_detail {

/// Random contents for an input: floats in [-scale, scale], integers in [-100 scale, 100 scale]
/// within the dtype's range (unsigned from 0), bools at random; the same for a given seed and
/// input position.
value random_input(const type& t, std::uint64_t seed, std::size_t position, double scale = 1.0);

/// The magnitudes a scale search tries, most ordinary first.
inline constexpr double candidate_scales[] = {1.0, 10.0, 0.1, 100.0, 0.01, 1000.0, 0.001};

/// Chooses one magnitude per input to maximise the share of live output elements: `live(scales)`
/// runs the reference on inputs of those magnitudes. First one scale for all inputs (the first
/// candidate that leaves `enough` live, else the best); then, while short of `enough`, each input
/// in turn tries the other candidates with the rest fixed (two rounds at most), keeping a change
/// only when it makes more elements live, within `budget` runs of the reference (a model with
/// many constants as inputs would otherwise take minutes). One scale for all cannot serve a
/// quantized program, whose int8 data wants its full range while its float scales want 0.01.
template <class Live>
std::vector<double> choose_scales(std::size_t inputs, Live&& live, double enough = 0.9, int budget = 48) {
  std::vector<double> best(inputs, 1.0);
  double best_live = -1;
  for (double c : candidate_scales) {
    std::vector<double> s(inputs, c);
    const double l = live(s);
    if (l > best_live) best_live = l, best = s;
    if (best_live >= enough) return best;
  }
  for (int round = 0; round < 2 && best_live < enough; ++round) {
    bool improved = false;
    for (std::size_t i = 0; i < inputs && best_live < enough; ++i)
      for (double c : candidate_scales) {
        if (c == best[i]) continue;
        if (budget-- <= 0) return best;
        std::vector<double> s = best;
        s[i] = c;
        const double l = live(s);
        if (l > best_live) best_live = l, best = s, improved = true;
        if (best_live >= enough) break;
      }
    if (!improved) break;
  }
  return best;
}

/// "1" when every input has one scale, else the list: "1,100,0.01".
std::string scales_text(const std::vector<double>& s);

/// For each result of the plan: whether its value depends on a rounding of a float (a cast of a
/// float to an integer or bool, round, floor, ceil, trunc, or a comparison of floats).
std::vector<bool> results_after_rounding(const plan& p);

}  // namespace check_detail

/// Checks @main of a type-checked module (see the file comment). Constants without data get the
/// random values the generated code was given. Throws relay::error for input fuse cannot run and
/// when `opt.run` is empty; a failed comparison or build is reported, not thrown.
check_report check_model(module& m, const std::string& source_name, const check_options& opt);

/// A model of check_models: the module, the name its errors and header cite, and how its header
/// is planned (null: check_options::planning; TVM's planner is a model's own: tvm_planner_options).
struct check_subject {
  module* m;
  std::string source_name;
  const plan_options* planning = nullptr;
};

/// Checks several modules as check_model checks one, with one compile: their headers go into one
/// driver (a compile is most of a check's time: nvcc takes ~20 s a driver, the host compiler a few
/// seconds), each in its own namespace, run once per model. A report per subject, in order. A
/// model fuse cannot run is reported (refused, its error in detail) rather than thrown, so the
/// others are still checked; when the shared driver does not compile, each model is compiled
/// alone so that the failure names its model.
std::vector<check_report> check_models(const std::vector<check_subject>& subjects, const check_options& opt);

}  // namespace fuse::relay
