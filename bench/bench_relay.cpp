// The Relay frontend's speed goals (issue 4): "parse + plan + emit a 10,000-op program in under
// 1 s; decode metadata at >= 200 MB/s".
//
//   relay_program/STAGE/fuse/N   one stage of `fuse-relay compile` on a generated N-op program
//                                (parse, typecheck, passes, plan, emit; tvm_fuse is the FuseOps
//                                count that `compile --report` prints beside); ns/item is ns per
//                                op call
//   relay_program/total/fuse/N   parse -> typecheck -> passes -> plan -> emit, end to end
//   relay_program/total/goal/N   the goal, not timed: 1 s per 10,000 ops (goal / fuse above 1:
//                                met; the 100k row holds the 100k program to the same cost per op)
//   relay_metadata/fuse/MB       read_metadata on a #[metadata] section of MB MiB of float32
//                                constants (several b64 NDArrays): the JSON, the base64, every
//                                blob validated; items are bytes of the section's text
//   relay_metadata/goal/MB       200 MB/s, not timed
//   relay_metadata/floor/MB      a plain table-driven base64 decode of the same blobs into one
//                                preallocated buffer, no JSON, no checks: what decoding costs
//
// The program is what TVM's printer writes for an unrolled recurrent model: `#[version =
// "0.0.5"]`, graph bindings `%N = op(...) /* ty=... */;` with every projection bound, and per
// time step an LSTM cell (strided_slice and reshape of the step's input, concatenate, dense,
// bias_add, split, three sigmoids and two tanh, the state's multiply/add) and an output head
// (dense, bias_add, reshape, transpose, softmax, transpose, reshape, sum, accumulated with add):
// 24 op calls a step, then a tail of elementwise ops for the exact count, checked after
// parsing. Single thread. ./scripts/bench relay prints the table.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fuse/relay/emit.hpp>
#include <fuse/relay/metadata.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/passes.hpp>
#include <fuse/relay/plan.hpp>
#include <fuse/relay/tvm_fuse.hpp>
#include <fuse/relay/typecheck.hpp>

namespace {

namespace relay = fuse::relay;

// ---- the program ------------------------------------------------------------------------------

constexpr int batch = 4, input = 16, hidden = 32;  // H a multiple of 8 (the head's reshape)
constexpr int ops_per_step = 24;

std::string tensor(std::initializer_list<int> shape) {
  std::string s = "Tensor[(";
  bool first = true;
  for (int d : shape) s += (first ? "" : ", ") + std::to_string(d), first = false;
  return s + "), float32]";
}

/// TVM-printed text of an unrolled LSTM with an output head per step: exactly `ops` op calls.
std::string lstm_program(int ops) {
  const int steps = ops / ops_per_step;
  const int tail = ops - steps * ops_per_step;
  const std::string bh = tensor({batch, hidden}), b1 = tensor({batch, 1}), b4h = tensor({batch, 4 * hidden});
  std::string s;
  s.reserve(static_cast<std::size_t>(ops) * 110);
  s += "#[version = \"0.0.5\"]\n";
  s += "def @main(%x: " + tensor({steps > 0 ? steps : 1, batch, input}) + ", %h0: " + bh + ", %c0: " + bh +
       ", %acc0: " + b1 + ", %w: " + tensor({4 * hidden, input + hidden}) + ", %b: " + tensor({4 * hidden}) +
       ", %wo: " + tensor({hidden, hidden}) + ", %bo: " + tensor({hidden}) + ") -> (" + bh + ", " + bh + ", " + b1 +
       ") {\n";
  int n = 0;
  std::string h = "%h0", c = "%c0", acc = "%acc0";
  // One binding; returns its name.
  auto bind = [&](const std::string& value, const std::string& ty) {
    const std::string name = "%" + std::to_string(n++);
    s += "  " + name + " = " + value + " /* ty=" + ty + " */;\n";
    return name;
  };
  const std::string step_in = tensor({batch, input});
  for (int t = 0; t < steps; ++t) {
    const std::string x3 =
        bind("strided_slice(%x, begin=[" + std::to_string(t) + ", 0, 0], end=[" + std::to_string(t + 1) + ", " +
                 std::to_string(batch) + ", " + std::to_string(input) + "], strides=[1, 1, 1], axes=None)",
             tensor({1, batch, input}));
    const std::string xt =
        bind("reshape(" + x3 + ", newshape=[" + std::to_string(batch) + ", " + std::to_string(input) + "])", step_in);
    const std::string pair = bind("(" + xt + ", " + h + ")", "(" + step_in + ", " + bh + ")");
    const std::string cat = bind("concatenate(" + pair + ", axis=1)", tensor({batch, input + hidden}));
    const std::string d = bind("nn.dense(" + cat + ", %w, units=" + std::to_string(4 * hidden) + ")", b4h);
    const std::string ba = bind("nn.bias_add(" + d + ", %b)", b4h);
    const std::string sp =
        bind("split(" + ba + ", indices_or_sections=4, axis=1)", "(" + bh + ", " + bh + ", " + bh + ", " + bh + ")");
    std::array<std::string, 4> gate;
    for (int g = 0; g < 4; ++g) {
      const std::string part = bind(sp + "." + std::to_string(g), bh);
      gate[static_cast<std::size_t>(g)] = bind((g == 2 ? "tanh(" : "sigmoid(") + part + ")", bh);
    }
    const std::string keep = bind("multiply(" + gate[1] + ", " + c + ")", bh);
    const std::string write = bind("multiply(" + gate[0] + ", " + gate[2] + ")", bh);
    c = bind("add(" + keep + ", " + write + ")", bh);
    const std::string tc = bind("tanh(" + c + ")", bh);
    h = bind("multiply(" + gate[3] + ", " + tc + ")", bh);
    // The head: softmax over groups of 8 of dense(h) + bo, summed into the accumulator.
    const std::string groups = tensor({batch, hidden / 8, 8}), swapped = tensor({batch, 8, hidden / 8});
    const std::string y = bind("nn.dense(" + h + ", %wo, units=" + std::to_string(hidden) + ")", bh);
    const std::string yb = bind("nn.bias_add(" + y + ", %bo)", bh);
    const std::string r = bind(
        "reshape(" + yb + ", newshape=[" + std::to_string(batch) + ", " + std::to_string(hidden / 8) + ", 8])", groups);
    const std::string tr = bind("transpose(" + r + ", axes=[0, 2, 1])", swapped);
    const std::string sm = bind("nn.softmax(" + tr + ")", swapped);
    const std::string back = bind("transpose(" + sm + ", axes=[0, 2, 1])", groups);
    const std::string flat =
        bind("reshape(" + back + ", newshape=[" + std::to_string(batch) + ", " + std::to_string(hidden) + "])", bh);
    const std::string total = bind("sum(" + flat + ", axis=[1], keepdims=True)", b1);
    acc = bind("add(" + acc + ", " + total + ")", b1);
  }
  static constexpr const char* tail_ops[] = {"tanh", "sigmoid", "negative", "exp"};
  for (int i = 0; i < tail; ++i) acc = bind(std::string(tail_ops[i % 4]) + "(" + acc + ")", b1);
  s += "  (" + h + ", " + c + ", " + acc + ") /* ty=(" + bh + ", " + bh + ", " + b1 + ") */\n}\n";
  return s;
}

/// The number of op calls reachable from @main.
std::size_t count_ops(const relay::module& m) {
  std::size_t n = 0;
  for (const relay::expr* e : relay::post_order({m.find("main")->fn}))
    n += e->kind == relay::expr_kind::call && e->callee->kind == relay::expr_kind::op;
  return n;
}

/// The text of an N-op program, made and checked (its op count) once per N.
const std::string& program_text(int ops) {
  static std::map<int, std::string> cache;
  auto& s = cache[ops];
  if (s.empty()) {
    s = lstm_program(ops);
    relay::module m = relay::parse("lstm.relay", s);
    if (count_ops(m) != static_cast<std::size_t>(ops))
      throw std::logic_error("the generator wrote " + std::to_string(count_ops(m)) + " op calls, not " +
                             std::to_string(ops));
  }
  return s;
}

// The stages, as tools/fuse-relay.cpp's `compile` runs them.
relay::module parse_stage(const std::string& text) { return relay::parse("lstm.relay", text); }
void passes_stage(relay::module& m) {
  relay::remove_unused_functions(m);
  relay::inline_calls(m);
  relay::simplify_inference(m);
  relay::fold_scale_axis(m);
  relay::combine_parallel_dense(m);
  relay::eliminate_dead_code(m);
}
relay::module prepared(const std::string& text) {
  relay::module m = parse_stage(text);
  relay::typecheck(m);
  passes_stage(m);
  return m;
}

void per_op(benchmark::State& state, int ops) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * ops);
  state.counters["ops"] = ops;
}

enum class stage { parse, typecheck, passes, plan, emit, tvm_fuse, total };

template <stage S>
void relay_stage(benchmark::State& state) {
  const int ops = static_cast<int>(state.range(0));
  const std::string& text = program_text(ops);
  std::size_t kernels = 0;
  if constexpr (S == stage::parse) {
    for (auto _ : state) {
      relay::module m = parse_stage(text);
      benchmark::DoNotOptimize(m.nodes.size());
      state.PauseTiming();  // the module's destruction is not the parser's
      { relay::module gone = std::move(m); }
      state.ResumeTiming();
    }
  } else if constexpr (S == stage::typecheck || S == stage::passes || S == stage::tvm_fuse) {
    for (auto _ : state) {
      state.PauseTiming();
      auto m = std::make_unique<relay::module>(parse_stage(text));
      if constexpr (S != stage::typecheck) relay::typecheck(*m);
      state.ResumeTiming();
      if constexpr (S == stage::typecheck) relay::typecheck(*m);
      if constexpr (S == stage::passes) passes_stage(*m);
      if constexpr (S == stage::tvm_fuse) kernels = relay::tvm_fuse_ops(*m).kernels();
      benchmark::DoNotOptimize(m->nodes.size());
      state.PauseTiming();
      m.reset();
      state.ResumeTiming();
    }
  } else if constexpr (S == stage::plan || S == stage::emit) {
    const relay::module m = prepared(text);
    const relay::plan p = relay::make_plan(m);
    kernels = p.kernels.size();
    for (auto _ : state) {
      if constexpr (S == stage::plan) {
        relay::plan q = relay::make_plan(m);
        benchmark::DoNotOptimize(q.kernels.data());
        state.PauseTiming();
        { relay::plan gone = std::move(q); }
        state.ResumeTiming();
      } else {
        const relay::emitted e = relay::emit_header(m, p, "model", "lstm.relay");
        benchmark::DoNotOptimize(e.header.data());
      }
    }
  } else {
    for (auto _ : state) {
      relay::module m = parse_stage(text);
      relay::typecheck(m);
      passes_stage(m);
      const relay::plan p = relay::make_plan(m);
      const relay::emitted e = relay::emit_header(m, p, "model", "lstm.relay");
      kernels = e.kernels;
      benchmark::DoNotOptimize(e.header.data());
    }
  }
  per_op(state, ops);
  if (kernels) state.counters["kernels"] = static_cast<double>(kernels);
}

/// The goal, not timed: 1 s per 10,000 ops.
void relay_goal(benchmark::State& state) {
  const int ops = static_cast<int>(state.range(0));
  for (auto _ : state) state.SetIterationTime(ops / 10000.0);
  per_op(state, ops);
}

// ---- the metadata section ---------------------------------------------------------------------

constexpr int metadata_arrays = 4;

/// A #[metadata] section (the JSON after it) holding `arrays` float32 constants of `mib` MiB in
/// all, as TVM's SaveJSON lays them out; and the whole Relay text around it.
struct metadata_text {
  std::string text;                                        // the program with its section
  std::size_t offset = 0;                                  // where the JSON starts
  std::size_t decoded = 0;                                 // bytes of tensor data
  std::vector<std::pair<std::size_t, std::size_t>> blobs;  // [begin, end) of each base64 string in text

  explicit metadata_text(int mib) {
    const std::int64_t rows = static_cast<std::int64_t>(mib) * (1 << 20) / 4 / metadata_arrays / 1024;
    std::string nodes =
        "[{\"type_key\": \"\"}, {\"type_key\": \"Map\", \"keys\": [\"relay.Constant\"], \"data\": [2]}, "
        "{\"type_key\": \"Array\", \"data\": [";
    for (int i = 0; i < metadata_arrays; ++i) nodes += (i ? ", " : "") + std::to_string(3 + i);
    nodes += "]}";
    std::vector<std::string> b64;
    std::uint32_t state = 12345;
    for (int i = 0; i < metadata_arrays; ++i) {
      relay::constant_data c;
      c.dt = relay::dtype::float32();
      c.shape = {rows, 1024};
      c.bytes.resize(static_cast<std::size_t>(rows) * 1024 * 4);
      for (std::size_t k = 0; k < c.bytes.size() / 4; ++k) {
        state = state * 1664525u + 1013904223u;
        const float v = static_cast<float>(static_cast<std::int32_t>(state)) * 0x1p-31f;
        std::memcpy(&c.bytes[k * 4], &v, 4);
      }
      decoded += c.bytes.size();
      b64.push_back(relay::encode_ndarray_base64(c));
      nodes += ", {\"type_key\": \"relay.Constant\", \"attrs\": {\"_checked_type_\": \"0\", \"data\": \"" +
               std::to_string(i) + "\", \"span\": \"0\", \"virtual_device_\": \"0\"}}";
    }
    nodes += "]";
    text = "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(" + std::to_string(rows) +
           ", 1024), float32]) {\n  add(%x, meta[relay.Constant][0])\n}\n\n#[metadata]\n";
    offset = text.size();
    text += "{\n  \"root\": 1,\n  \"nodes\": " + nodes + ",\n  \"b64ndarrays\": [\n";
    for (int i = 0; i < metadata_arrays; ++i) {
      text += "    \"";
      const std::size_t b = text.size();
      text += b64[static_cast<std::size_t>(i)];
      blobs.emplace_back(b, text.size());
      text += i + 1 < metadata_arrays ? "\",\n" : "\"\n";
    }
    text += "  ],\n  \"attrs\": {\"tvm_version\": \"0.19.0\"}\n}\n";
  }
  std::size_t section_bytes() const { return text.size() - offset; }
};

const metadata_text& metadata_of(int mib) {
  static std::map<int, std::unique_ptr<metadata_text>> cache;
  auto& p = cache[mib];
  if (!p) p = std::make_unique<metadata_text>(mib);
  return *p;
}

void per_byte(benchmark::State& state, const metadata_text& md) {
  const auto bytes = static_cast<int64_t>(md.section_bytes());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * bytes);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * bytes);
  // The report's MB/s column (bytes of the section's text per second).
  state.counters["MB"] =
      benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsIterationInvariantRate);
}

void metadata_fuse(benchmark::State& state) {
  const metadata_text& md = metadata_of(static_cast<int>(state.range(0)));
  const relay::source src("model.relay", md.text);
  {
    const relay::metadata got = relay::read_metadata(src, md.offset);
    std::size_t n = 0;
    for (const auto& c : got.constants) n += c->bytes.size();
    if (got.constants.size() != metadata_arrays || n != md.decoded) {
      state.SkipWithError("read_metadata did not return the constants written");
      return;
    }
  }
  for (auto _ : state) {
    relay::metadata got = relay::read_metadata(src, md.offset);
    benchmark::DoNotOptimize(got.constants.data());
    state.PauseTiming();  // freeing 64 MiB is not decoding
    { relay::metadata gone = std::move(got); }
    state.ResumeTiming();
  }
  per_byte(state, md);
}

void metadata_goal(benchmark::State& state) {
  const metadata_text& md = metadata_of(static_cast<int>(state.range(0)));
  for (auto _ : state) state.SetIterationTime(static_cast<double>(md.section_bytes()) / 200e6);
  per_byte(state, md);
}

/// Base64 without checks: four characters through a 256-entry table, three bytes out.
void metadata_floor(benchmark::State& state) {
  const metadata_text& md = metadata_of(static_cast<int>(state.range(0)));
  std::array<std::uint8_t, 256> value{};
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) value[static_cast<unsigned char>(alphabet[i])] = static_cast<std::uint8_t>(i);
  std::size_t total = 0;
  for (const auto& [b, e] : md.blobs) total += (e - b) / 4 * 3;
  std::vector<unsigned char> out(total);
  const unsigned char* text = reinterpret_cast<const unsigned char*>(md.text.data());
  for (auto _ : state) {
    unsigned char* o = out.data();
    for (const auto& [b, e] : md.blobs) {
      for (std::size_t i = b; i < e; i += 4) {
        const std::uint32_t v = static_cast<std::uint32_t>(value[text[i]]) << 18 |
                                static_cast<std::uint32_t>(value[text[i + 1]]) << 12 |
                                static_cast<std::uint32_t>(value[text[i + 2]]) << 6 | value[text[i + 3]];
        o[0] = static_cast<unsigned char>(v >> 16);
        o[1] = static_cast<unsigned char>(v >> 8);
        o[2] = static_cast<unsigned char>(v);
        o += 3;
      }
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  per_byte(state, md);
}

constexpr int metadata_mib = 64;

}  // namespace

BENCHMARK(relay_stage<stage::parse>)
    ->Name("relay_program/parse/fuse")
    ->Arg(10000)
    ->Arg(100000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(relay_stage<stage::typecheck>)
    ->Name("relay_program/typecheck/fuse")
    ->Arg(10000)
    ->Arg(100000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(relay_stage<stage::passes>)
    ->Name("relay_program/passes/fuse")
    ->Arg(10000)
    ->Arg(100000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(relay_stage<stage::plan>)
    ->Name("relay_program/plan/fuse")
    ->Arg(10000)
    ->Arg(100000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(relay_stage<stage::emit>)
    ->Name("relay_program/emit/fuse")
    ->Arg(10000)
    ->Arg(100000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(relay_stage<stage::tvm_fuse>)
    ->Name("relay_program/tvm_fuse/fuse")
    ->Arg(10000)
    ->Arg(100000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(relay_stage<stage::total>)
    ->Name("relay_program/total/fuse")
    ->Arg(10000)
    ->Arg(100000)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(relay_goal)
    ->Name("relay_program/total/goal")
    ->Arg(10000)
    ->Arg(100000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(metadata_fuse)->Name("relay_metadata/fuse")->Arg(metadata_mib)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(metadata_goal)
    ->Name("relay_metadata/goal")
    ->Arg(metadata_mib)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(metadata_floor)
    ->Name("relay_metadata/floor")
    ->Arg(metadata_mib)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
