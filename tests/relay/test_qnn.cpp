// qnn legalization (fuse/relay/qnn.hpp): each qnn op of a small program, legalized and run in
// the interpreter on fresh random inputs, is compared element by element with a reference
// written here from TVM v0.19's formulas in exact int64 (or float32, for compute_dtype float32)
// arithmetic: int8/uint8 saturation extremes, zero points, per-tensor and per-channel
// parameters, and rounding ties of both modes (also checked against hand-computed values).
// Then composite quantized programs go through check_model (the compiled header against the
// interpreter), and the errors are located and say what is needed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fuse/relay/check.hpp>
#include <fuse/relay/interpreter.hpp>
#include <fuse/relay/metadata.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/passes.hpp>
#include <fuse/relay/qnn.hpp>
#include <fuse/relay/structural_equal.hpp>
#include <fuse/relay/typecheck.hpp>

#include "relay/model_check.hpp"
#include "support/random.hpp"

using namespace fuse::relay;

namespace {

const dtype i8{dtype::int_code, 8, 1}, u8{dtype::uint_code, 8, 1}, i32 = dtype::int32(), f32 = dtype::float32();

// ---- the reference: TVM v0.19's formulas, per element ---------------------------------------------

std::int64_t wrap32(std::int64_t v) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v)));
}
std::int64_t lowest(dtype d) { return d.is_uint() ? 0 : -(std::int64_t{1} << (d.bits - 1)); }
std::int64_t highest(dtype d) {
  return d.is_uint() ? (std::int64_t{1} << d.bits) - 1 : (std::int64_t{1} << (d.bits - 1)) - 1;
}
std::int64_t saturate(std::int64_t v, dtype d) { return std::clamp(v, lowest(d), highest(d)); }

enum class mode { upward, tonearest };
const char* name_of(mode r) { return r == mode::upward ? "UPWARD" : "TONEAREST"; }

/// qnn.requantize's fixed-point multiply (utils.cc GetFixedPointMultiplierShift, then the TIR
/// lowering of q_multiply_shift, or FixedPointMultiplyToNearest): x is the int32 input less its
/// zero point. Right shifts are C++20 arithmetic shifts, as TVM's.
std::int64_t fixed_point_multiply(std::int64_t x, double m, bool per_tensor, mode r) {
  int e = 0;
  std::int64_t sig = 0;
  if (m != 0) {
    sig = static_cast<std::int64_t>(std::round(std::frexp(m, &e) * 2147483648.0));
    if (sig == (std::int64_t{1} << 31)) sig >>= 1, ++e;
  }
  if (per_tensor && r == mode::upward && sig == (std::int64_t{1} << 30)) {  // a power of two: int32 shifts
    const int k = e - 1;
    if (k > 0) return wrap32(x * (std::int64_t{1} << k));
    if (k < 0) return static_cast<std::int32_t>(wrap32(x + (std::int64_t{1} << (-k - 1)))) >> -k;
    return x;
  }
  const int left = std::max(e, 0), total = std::max(-e, 0) + 31;
  const auto p = static_cast<std::int64_t>(static_cast<std::uint64_t>(x * (std::int64_t{1} << left)) *
                                           static_cast<std::uint64_t>(sig));
  std::int64_t rounder = std::int64_t{1} << (total - 1);
  if (r == mode::tonearest && p < 0) rounder -= 1;
  return wrap32(static_cast<std::int64_t>(static_cast<std::uint64_t>(p) + static_cast<std::uint64_t>(rounder)) >>
                total);  // wrapping, as TVM's
}

struct requant {
  std::int32_t zin = 0, zout = 0;
  float sin = 1, sout = 1;
  mode r = mode::upward;
  bool fp32 = false;        ///< compute_dtype float32
  bool per_tensor = true;   ///< the input scale is a scalar
  bool same_scale = false;  ///< the input and output scales are the same constant (no multiply)
};

/// qnn.requantize of one element q to dtype out.
std::int64_t requantize(std::int64_t q, const requant& p, dtype out) {
  const double m = static_cast<double>(p.sin) / static_cast<double>(p.sout);
  std::int64_t y;
  if (!p.fp32) {
    const std::int64_t x = wrap32(wrap32(q) - p.zin);
    y = wrap32((p.same_scale ? x : fixed_point_multiply(x, m, p.per_tensor, p.r)) + p.zout);
  } else {
    float t = static_cast<float>(q) - static_cast<float>(p.zin);
    if (!p.same_scale) t = static_cast<float>(m) * t;
    t = t + static_cast<float>(p.zout);
    t = p.r == mode::upward ? std::floor(t + 0.5f) : std::round(t);
    y = static_cast<std::int64_t>(std::clamp(static_cast<double>(t), -2147483648.0, 2147483647.0));
  }
  return out == i32 ? y : saturate(y, out);
}

// ---- programs -----------------------------------------------------------------------------------------

std::string lit(float v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.9gf", static_cast<double>(v));
  return b;
}
std::string lit(std::int64_t v) { return std::to_string(v); }
std::string tensor_type(const std::vector<std::int64_t>& s, dtype d) { return type::tensor(s, d).str(); }

/// Constants with data for a program's metadata section (per-channel scales and zero points).
struct metadata_builder {
  std::vector<constant_data> constants;

  std::string add(constant_data c) {
    constants.push_back(c);
    return "meta[relay.Constant][" + std::to_string(constants.size() - 1) +
           "] /* ty=" + type::tensor(c.shape, c.dt).str() + " */";
  }
  std::string floats(const std::vector<float>& v) {
    constant_data c;
    c.dt = f32;
    c.shape = {static_cast<std::int64_t>(v.size())};
    c.bytes.resize(4 * v.size());
    for (std::size_t k = 0; k < v.size(); ++k) c.set_real(k, v[k]);
    return add(std::move(c));
  }
  std::string ints(dtype d, const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& v) {
    constant_data c;
    c.dt = d;
    c.shape = shape;
    c.bytes.resize(d.bytes() * v.size());
    for (std::size_t k = 0; k < v.size(); ++k) c.set_integer(k, v[k]);
    return add(std::move(c));
  }
  /// The program: the version header, `body`, and the section when there are constants.
  std::string program(const std::string& body) const {
    std::string text = "#[version = \"0.0.5\"]\n" + body + "\n";
    if (constants.empty()) return text;
    std::string nodes =
        R"([{"type_key": ""}, {"type_key": "Map", "keys": ["relay.Constant"], "data": [2]}, {"type_key": "Array", "data": [)";
    for (std::size_t k = 0; k < constants.size(); ++k) nodes += (k ? ", " : "") + std::to_string(3 + k);
    nodes += "]}";
    std::string blobs;
    for (std::size_t k = 0; k < constants.size(); ++k) {
      nodes += R"(, {"type_key": "relay.Constant", "attrs": {"data": ")" + std::to_string(k) + R"(", "span": "0"}})";
      blobs += (k ? ", \"" : "\"") + encode_ndarray_base64(constants[k]) + "\"";
    }
    return text + "#[metadata]\n{\"root\": 1, \"nodes\": " + nodes + "], \"b64ndarrays\": [" + blobs +
           "], \"attrs\": {\"tvm_version\": \"0.19.0\"}}\n";
  }
};

/// Whether a qnn op is still reachable (the arena keeps the replaced nodes).
bool has_qnn(module& m) {
  for (const expr* e : post_order(def_roots(m)))
    if (e->kind == expr_kind::call && e->callee && e->callee->kind == expr_kind::op &&
        e->callee->name.starts_with("qnn."))
      return true;
  return false;
}

/// Parses, legalizes (checking that no qnn op is left) and returns the module.
module legalized(const std::string& text, const qnn_options& opt = {}) {
  module m = parse("q.relay", text);
  legalize_qnn(m, opt);
  CHECK_FALSE(has_qnn(m));
  return m;
}

/// @main's result, float32 ops rounded to float32 as TVM computes them.
value run(const module& m, const std::vector<value>& in) { return interpreter(m).run("main", in, true); }

// ---- inputs ---------------------------------------------------------------------------------------------

/// Random integers of dtype d over its range (int32: +-2^20), the extremes and 0, +-1 first.
value ints(dtype d, const std::vector<std::int64_t>& shape, std::mt19937_64& g) {
  value v = value::tensor(d, shape);
  const std::int64_t lo = d == i32 ? -(1 << 20) : lowest(d), hi = d == i32 ? (1 << 20) : highest(d);
  std::uniform_int_distribution<std::int64_t> u(lo, hi);
  for (auto& x : v.i) x = u(g);
  const std::vector<std::int64_t> edges = {lowest(d),     highest(d),    0, 1, d.is_uint() ? 128 : -1,
                                           lowest(d) + 1, highest(d) - 1};
  for (std::size_t k = 0; k < edges.size() && k < v.i.size(); ++k) v.i[k] = edges[k];
  return v;
}
value floats(const std::vector<std::int64_t>& shape, double lim, std::mt19937_64& g) {
  value v = value::tensor(f32, shape);
  std::uniform_real_distribution<double> u(-lim, lim);
  for (auto& x : v.f) x = static_cast<float>(u(g));
  return v;
}

/// The channel of flat element k along `axis` of `shape`.
std::size_t channel(std::size_t k, const std::vector<std::int64_t>& shape, std::size_t axis) {
  std::size_t stride = 1;
  for (std::size_t d = shape.size(); d-- > axis + 1;) stride *= static_cast<std::size_t>(shape[d]);
  return (k / stride) % static_cast<std::size_t>(shape[axis]);
}

/// Every integer element of got equals want(k); the first mismatches are reported.
void check_ints(const value& got, dtype d, const std::vector<std::int64_t>& shape,
                const std::function<std::int64_t(std::size_t)>& want) {
  REQUIRE(got.dt == d);
  REQUIRE(got.shape == shape);
  std::size_t bad = 0;
  for (std::size_t k = 0; k < got.i.size(); ++k) {
    const std::int64_t w = want(k);
    if (got.i[k] != w && ++bad <= 5) MESSAGE("element " << k << ": got " << got.i[k] << ", TVM's formula gives " << w);
  }
  CHECK(bad == 0);
}
void check_floats(const value& got, const std::vector<std::int64_t>& shape,
                  const std::function<float(std::size_t)>& want) {
  REQUIRE(got.dt == f32);
  REQUIRE(got.shape == shape);
  std::size_t bad = 0;
  for (std::size_t k = 0; k < got.f.size(); ++k) {
    const float w = want(k);
    if (static_cast<float>(got.f[k]) != w && ++bad <= 5)
      MESSAGE("element " << k << ": got " << got.f[k] << ", TVM's formula gives " << w);
  }
  CHECK(bad == 0);
}

std::vector<float> random_scales(std::size_t n, double lo, double hi, std::mt19937_64& g) {
  std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
  std::vector<float> s;
  for (std::size_t k = 0; k < n; ++k) s.push_back(static_cast<float>(std::exp(u(g))));
  return s;
}
std::vector<std::int64_t> random_zps(std::size_t n, std::int64_t lo, std::int64_t hi, std::mt19937_64& g) {
  std::uniform_int_distribution<std::int64_t> u(lo, hi);
  std::vector<std::int64_t> z;
  for (std::size_t k = 0; k < n; ++k) z.push_back(u(g));
  return z;
}

}  // namespace

// ---- quantize ------------------------------------------------------------------------------------------

TEST_CASE("qnn.quantize: round(x / scale) + zero point, clipped: ties away from zero, saturation, per channel") {
  // Ties by hand: x / 0.25 = -2.5, -1.5, -0.5, 0.5, 1.5, 2.5 round away from zero (TVM's
  // llvm.round), not to even; then saturation of uint8 at 0 and 255.
  {
    module m = legalized("def @main(%x: Tensor[(7), float32]) { qnn.quantize(%x, 0.25f, 0, out_dtype=\"int8\") }");
    value x = value::tensor(f32, {7});
    x.f = {-0.625, -0.375, -0.125, 0.125, 0.375, 0.625, 100.0};
    CHECK(run(m, {x}).i == std::vector<std::int64_t>{-3, -2, -1, 1, 2, 3, 127});
    module u = legalized("def @main(%x: Tensor[(7), float32]) { qnn.quantize(%x, 0.5f, 128, out_dtype=\"uint8\") }");
    x.f = {-1000.0, -64.25, -63.25, 0.25, 63.25, 63.75, 1000.0};  // / 0.5: -128.5, -126.5, 0.5, 126.5, 127.5
    CHECK(run(u, {x}).i == std::vector<std::int64_t>{0, 0, 1, 129, 255, 255, 255});
  }
  auto g = fuse::test::rng(101);
  const std::vector<std::int64_t> shape{7, 17};
  for (int variant = 0; variant < 6; ++variant) {
    CAPTURE(variant);
    const dtype out = variant % 2 ? u8 : i8;
    const bool per_channel = variant >= 2;
    const std::size_t axis = variant >= 4 ? 0 : 1;
    const std::size_t n = per_channel ? static_cast<std::size_t>(shape[axis]) : 1;
    std::vector<float> s = random_scales(n, 0.01, 0.08, g);
    std::vector<std::int64_t> z = random_zps(n, out.is_uint() ? 100 : -20, out.is_uint() ? 160 : 20, g);
    metadata_builder meta;
    const std::string st = per_channel ? meta.floats(s) : lit(s[0]),
                      zt = per_channel ? meta.ints(i32, {static_cast<std::int64_t>(n)}, z) : lit(z[0]);
    module m =
        legalized(meta.program("def @main(%x: Tensor[(7, 17), float32]) {\n  qnn.quantize(%x, " + st + ", " + zt +
                               ", axis=" + std::to_string(axis) + ", out_dtype=\"" + out.name() + "\")\n}"));
    value x = floats(shape, 10.0, g);  // |x| / scale up to 1000: saturates both ways
    for (std::size_t k = 0; k < 7; ++k)
      x.f[k] = static_cast<float>((static_cast<double>(k) - 3.5) * s[per_channel && axis == 1 ? k : 0]);
    check_ints(run(m, {x}), out, shape, [&](std::size_t k) {
      const std::size_t c = per_channel ? channel(k, shape, axis) : 0;
      const float q = std::round(static_cast<float>(x.f[k]) / s[c]);
      return saturate(static_cast<std::int64_t>(q) + z[c], out);
    });
  }
}

// ---- dequantize -----------------------------------------------------------------------------------------

TEST_CASE("qnn.dequantize: (q - zero point) * scale, per tensor and per channel, int8 and uint8 extremes") {
  auto g = fuse::test::rng(102);
  const std::vector<std::int64_t> shape{7, 17};
  for (int variant = 0; variant < 6; ++variant) {
    CAPTURE(variant);
    const dtype in = variant % 2 ? u8 : i8;
    const bool per_channel = variant >= 2;
    const std::size_t axis = variant >= 4 ? 0 : 1;
    const std::size_t n = per_channel ? static_cast<std::size_t>(shape[axis]) : 1;
    std::vector<float> s = random_scales(n, 0.001, 0.5, g);
    std::vector<std::int64_t> z = random_zps(n, in.is_uint() ? 100 : -20, in.is_uint() ? 160 : 20, g);
    metadata_builder meta;
    const std::string st = per_channel ? meta.floats(s) : lit(s[0]),
                      zt = per_channel ? meta.ints(i32, {static_cast<std::int64_t>(n)}, z) : lit(z[0]);
    module m = legalized(meta.program("def @main(%q: Tensor[(7, 17), " + in.name() + "]) {\n  qnn.dequantize(%q, " +
                                      st + ", " + zt + ", axis=" + std::to_string(axis) + ")\n}"));
    const value q = ints(in, shape, g);
    check_floats(run(m, {q}), shape, [&](std::size_t k) {
      const std::size_t c = per_channel ? channel(k, shape, axis) : 0;
      return static_cast<float>(q.i[k] - z[c]) * s[c];
    });
  }
}

// ---- requantize ------------------------------------------------------------------------------------------

TEST_CASE("qnn.requantize: ties of both rounding modes, by hand, fixed point and float32") {
  // x * 0.75 = -2.25, -1.5, -0.75, 0, 0.75, 1.5, 2.25 and x * 0.5 = -1.5, -1, -0.5, 0, ...:
  // UPWARD rounds halves towards +infinity, TONEAREST away from zero.
  struct want {
    const char* in_scale;
    const char* rounding;
    std::vector<std::int64_t> out;
  };
  const std::vector<want> cases = {
      {"0.75f", "UPWARD", {-2, -1, -1, 0, 1, 2, 2}}, {"0.75f", "TONEAREST", {-2, -2, -1, 0, 1, 2, 2}},
      {"0.5f", "UPWARD", {-1, -1, 0, 0, 1, 1, 2}},   {"0.5f", "TONEAREST", {-2, -1, -1, 0, 1, 1, 2}},
      {"0.375f", "UPWARD", {-1, -1, 0, 0, 0, 1, 1}}, {"0.375f", "TONEAREST", {-1, -1, 0, 0, 0, 1, 1}},
  };
  value x = value::tensor(i32, {7});
  x.i = {-3, -2, -1, 0, 1, 2, 3};
  for (const char* compute : {"int64", "float32", "float64"})
    for (const want& w : cases) {
      CAPTURE(compute);
      CAPTURE(w.in_scale);
      CAPTURE(w.rounding);
      // Written on the call, and as the pass's option for "None".
      module a = legalized("def @main(%x: Tensor[(7), int32]) { qnn.requantize(%x, " + std::string(w.in_scale) +
                           ", 0, 1f, 0, rounding=\"" + w.rounding + "\", compute_dtype=\"" + compute +
                           "\", out_dtype=\"int32\") }");
      CHECK(run(a, {x}).i == w.out);
      module b = legalized("def @main(%x: Tensor[(7), int32]) { qnn.requantize(%x, " + std::string(w.in_scale) +
                               ", 0, 1f, 0, out_dtype=\"int32\") }",
                           qnn_options{w.rounding, compute});
      CHECK(run(b, {x}).i == w.out);
    }
  // With zero points: (q - 3) * 0.5 + 10, q = 0 -> -1.5 + 10 -> UPWARD 9 (-1 + 10), TONEAREST 8.
  value q = value::tensor(i8, {1});
  q.i = {0};
  CHECK(run(legalized("def @main(%q: Tensor[(1), int8]) { qnn.requantize(%q, 0.5f, 3, 1f, 10) }"), {q}).i ==
        std::vector<std::int64_t>{9});
  CHECK(
      run(legalized("def @main(%q: Tensor[(1), int8]) { qnn.requantize(%q, 0.5f, 3, 1f, 10, rounding=\"TONEAREST\") }"),
          {q})
          .i == std::vector<std::int64_t>{8});
  // The default ("None") is UPWARD: TVM's RequantizeConfig.
  CHECK(
      run(legalized("def @main(%q: Tensor[(1), int8]) { qnn.requantize(%q, 0.5f, 3, 1f, 10, rounding=\"None\") }"), {q})
          .i == std::vector<std::int64_t>{9});
}

TEST_CASE(
    "qnn.requantize: random inputs against TVM's formulas (dtypes, zero points, per channel, both modes, int64 and "
    "float32)") {
  auto g = fuse::test::rng(103);
  const std::vector<std::int64_t> shape{7, 17};
  int run_count = 0;
  for (const dtype in : {i32, i8, u8})
    for (const dtype out : {i8, u8, i32})
      for (int layout = 0; layout < 3; ++layout)  // per tensor, per channel along 1, along 0
        for (const mode r : {mode::upward, mode::tonearest})
          for (const bool fp32 : {false, true}) {
            CAPTURE(in.name());
            CAPTURE(out.name());
            CAPTURE(layout);
            CAPTURE(name_of(r));
            CAPTURE(fp32);
            const std::size_t axis = layout == 2 ? 0 : 1;
            const std::size_t n = layout ? static_cast<std::size_t>(shape[axis]) : 1;
            // Multipliers below and above 1 (a left shift), and a power of two.
            std::vector<float> sin = random_scales(n, in == i32 ? 1e-4 : 0.05, in == i32 ? 1e-2 : 4.0, g);
            float sout = random_scales(1, 0.05, 1.0, g)[0];
            if (run_count++ % 5 == 0) sin[0] = 0.125f, sout = 0.5f;  // a power of two (per tensor: TVM's int32 shifts)
            std::vector<std::int64_t> zin = random_zps(n, in.is_uint() ? 100 : -30, in.is_uint() ? 160 : 30, g);
            const std::int64_t zout = random_zps(1, out.is_uint() ? 100 : -30, out.is_uint() ? 160 : 30, g)[0];
            metadata_builder meta;
            const std::string st = layout ? meta.floats(sin) : lit(sin[0]);
            const std::string zt = layout ? meta.ints(i32, {static_cast<std::int64_t>(n)}, zin) : lit(zin[0]);
            module m = legalized(meta.program("def @main(%q: " + tensor_type(shape, in) + ") {\n  qnn.requantize(%q, " +
                                              st + ", " + zt + ", " + lit(sout) + ", " + lit(zout) + ", axis=" +
                                              std::to_string(axis) + ", out_dtype=\"" + out.name() + "\")\n}"),
                                 qnn_options{name_of(r), fp32 ? "float32" : "int64"});
            const value q =
                ints(in, shape, g);  // int32: INT32_MIN and MAX first, where subtracting the zero point wraps
            check_ints(run(m, {q}), out, shape, [&](std::size_t k) {
              const std::size_t c = layout ? channel(k, shape, axis) : 0;
              requant p;
              p.zin = static_cast<std::int32_t>(zin[c]);
              p.zout = static_cast<std::int32_t>(zout);
              p.sin = sin[c];
              p.sout = sout;
              p.r = r;
              p.fp32 = fp32;
              p.per_tensor = layout == 0;
              return requantize(q.i[k], p, out);
            });
          }
}

TEST_CASE("qnn.requantize: full-range int32 inputs (the last bit of the fixed-point significand matters)") {
  // 0.7 * 2^31 = 1503238553.6: the significand rounds up; with |x| up to 2^31 its last bit moves
  // about every other result. Multipliers above 1 shift left first (the product wraps in int64
  // as TVM's does for 13.3).
  auto g = fuse::test::rng(108);
  std::uniform_int_distribution<std::int64_t> u(INT32_MIN, INT32_MAX);
  value q = value::tensor(i32, {17, 7});
  for (auto& x : q.i) x = u(g);
  q.i[0] = INT32_MIN, q.i[1] = INT32_MAX, q.i[2] = 0, q.i[3] = -1;
  for (const float sin : {0.7f, 0.0123f, 13.3f})
    for (const mode r : {mode::upward, mode::tonearest}) {
      CAPTURE(sin);
      CAPTURE(name_of(r));
      module m = legalized("def @main(%q: Tensor[(17, 7), int32]) { qnn.requantize(%q, " + lit(sin) +
                               ", 5, 1f, -7, out_dtype=\"int32\") }",
                           qnn_options{name_of(r), "int64"});
      check_ints(run(m, {q}), i32, {17, 7}, [&](std::size_t k) {
        requant p;
        p.sin = sin, p.zin = 5, p.zout = -7, p.r = r;
        return requantize(q.i[k], p, i32);
      });
    }
}

// ---- dense and batch_matmul ----------------------------------------------------------------------------

TEST_CASE("qnn.dense: the int32 product with the zero-point terms (scalar and per-channel kernel zero points)") {
  auto g = fuse::test::rng(104);
  struct variant {
    dtype x, w;
    std::int64_t rows, zx;
    std::vector<std::int64_t> zw;  // 1 value, or 7 (per output channel)
  };
  const std::vector<variant> variants = {
      {i8, i8, 7, 5, {-3}}, {u8, i8, 1, 128, {-7, 0, 1, 2, 3, -128, 127}},
      {i8, u8, 7, 0, {4}},  {i8, i8, 7, 2, {0}},
      {i8, i8, 7, 0, {0}},  {u8, u8, 7, 255, {255}},
  };
  for (const variant& v : variants) {
    CAPTURE(v.x.name());
    CAPTURE(v.w.name());
    CAPTURE(v.zx);
    CAPTURE(v.zw.size());
    metadata_builder meta;
    const std::string zw = v.zw.size() == 1 ? lit(v.zw[0]) : meta.ints(i32, {7}, v.zw);
    const std::vector<std::int64_t> xs{v.rows, 17}, ws{7, 17}, os{v.rows, 7};
    module m =
        legalized(meta.program("def @main(%x: " + tensor_type(xs, v.x) + ", %w: " + tensor_type(ws, v.w) +
                               ") {\n  qnn.dense(%x, %w, " + lit(v.zx) + ", " + zw + ", 0.5f, 0.25f, units=7)\n}"));
    const value x = ints(v.x, xs, g), w = ints(v.w, ws, g);
    check_ints(run(m, {x, w}), i32, os, [&](std::size_t k) {
      const std::size_t i = k / 7, n = k % 7;
      std::int64_t acc = 0;
      for (std::size_t q = 0; q < 17; ++q)
        acc += (x.i[i * 17 + q] - v.zx) * (w.i[n * 17 + q] - v.zw[v.zw.size() == 1 ? 0 : n]);
      return wrap32(acc);
    });
  }
  // A constant weight: its zero-point term is computed once, here (no sum over it is left).
  metadata_builder meta;
  std::vector<std::int64_t> wv(7 * 17);
  std::uniform_int_distribution<std::int64_t> u(-128, 127);
  for (auto& x : wv) x = u(g);
  const std::string wt = meta.ints(i8, {7, 17}, wv);
  module m = legalized(
      meta.program("def @main(%x: Tensor[(7, 17), int8]) {\n  qnn.dense(%x, " + wt + ", -9, 6, 0.5f, 0.25f)\n}"));
  int sums = 0;
  for (const expr* e : post_order({m.find("main")->fn})) sums += is_op_call(e, "sum");
  CHECK(sums == 1);  // the data's
  const value x = ints(i8, {7, 17}, g);
  check_ints(run(m, {x}), i32, {7, 7}, [&](std::size_t k) {
    std::int64_t acc = 0;
    for (std::size_t q = 0; q < 17; ++q) acc += (x.i[k / 7 * 17 + q] + 9) * (wv[k % 7 * 17 + q] - 6);
    return wrap32(acc);
  });
}

TEST_CASE("qnn.batch_matmul: the int32 batched product with the zero-point terms, broadcast batch and transposes") {
  auto g = fuse::test::rng(105);
  struct variant {
    dtype x, y;
    bool ta, tb;
    std::int64_t by, zx, zy;
  };
  const std::vector<variant> variants = {{i8, i8, false, true, 2, 3, -5},   {u8, i8, false, true, 1, 128, 7},
                                         {i8, i8, false, true, 2, 0, 9},    {i8, i8, false, true, 2, -4, 0},
                                         {i8, u8, true, false, 2, 11, 200}, {u8, u8, true, true, 2, 1, 255}};
  const std::int64_t b = 2, mm = 7, nn = 1, kk = 17;
  for (const variant& v : variants) {
    CAPTURE(v.x.name());
    CAPTURE(v.ta);
    CAPTURE(v.tb);
    CAPTURE(v.by);
    CAPTURE(v.zx);
    CAPTURE(v.zy);
    const std::vector<std::int64_t> xs =
        v.ta ? std::vector<std::int64_t>{b, kk, mm} : std::vector<std::int64_t>{b, mm, kk};
    const std::vector<std::int64_t> ys =
        v.tb ? std::vector<std::int64_t>{v.by, nn, kk} : std::vector<std::int64_t>{v.by, kk, nn};
    module m = legalized("def @main(%x: " + tensor_type(xs, v.x) + ", %y: " + tensor_type(ys, v.y) +
                         ") {\n  qnn.batch_matmul(%x, %y, " + lit(v.zx) + ", " + lit(v.zy) +
                         ", 0.5f, 0.25f, transpose_a=" + (v.ta ? "True" : "False") +
                         ", transpose_b=" + (v.tb ? "True" : "False") + ")\n}");
    const value x = ints(v.x, xs, g), y = ints(v.y, ys, g);
    check_ints(run(m, {x, y}), i32, {b, mm, nn}, [&](std::size_t k) {
      const std::int64_t p = static_cast<std::int64_t>(k) / (mm * nn), i = static_cast<std::int64_t>(k) / nn % mm,
                         j = static_cast<std::int64_t>(k) % nn;
      const std::int64_t py = v.by == 1 ? 0 : p;
      std::int64_t acc = 0;
      for (std::int64_t q = 0; q < kk; ++q) {
        const std::int64_t a = x.i[static_cast<std::size_t>(p * mm * kk + (v.ta ? q * mm + i : i * kk + q))];
        const std::int64_t c = y.i[static_cast<std::size_t>(py * nn * kk + (v.tb ? j * kk + q : q * nn + j))];
        acc += (a - v.zx) * (c - v.zy);
      }
      return wrap32(acc);
    });
  }
}

// ---- add, mul, concatenate -----------------------------------------------------------------------------

TEST_CASE(
    "qnn.add and qnn.mul: both inputs requantized to the output parameters (add), the product requantized (mul)") {
  auto g = fuse::test::rng(106);
  const std::vector<std::int64_t> shape{7, 17};
  int variant = 0;
  for (const dtype d : {i8, u8})
    for (const mode r : {mode::upward, mode::tonearest})
      for (const bool fp32 : {false, true})
        for (int layout = 0; layout < 3;
             ++layout, ++variant) {  // per tensor; lhs per channel (add) / both (mul); rhs [17] broadcast
          CAPTURE(d.name());
          CAPTURE(name_of(r));
          CAPTURE(fp32);
          CAPTURE(layout);
          const std::vector<std::int64_t> rshape = layout == 2 ? std::vector<std::int64_t>{17} : shape;
          const std::size_t n = layout == 1 ? 17 : 1;
          const std::vector<float> sa = random_scales(n, 0.01, 0.2, g), sb = random_scales(n, 0.01, 0.2, g);
          const float sc = random_scales(1, 0.02, 0.3, g)[0];
          const std::int64_t lo = d.is_uint() ? 90 : -40, hi = d.is_uint() ? 170 : 40;
          const std::int64_t za = random_zps(1, lo, hi, g)[0], zb = random_zps(1, lo, hi, g)[0],
                             zc = random_zps(1, lo, hi, g)[0];
          const qnn_options opt{name_of(r), fp32 ? "float32" : "int64"};
          const value a = ints(d, shape, g), b = ints(d, rshape, g);
          auto b_at = [&](std::size_t k) { return b.i[layout == 2 ? k % 17 : k]; };
          for (const char* op : {"qnn.add", "qnn.mul"}) {
            CAPTURE(op);
            const bool is_add = std::string(op) == "qnn.add";
            metadata_builder meta;
            const std::string sat = n > 1 ? meta.floats(sa) : lit(sa[0]);
            // add: the rhs with the output's own parameters (upcast only) in one layout in three.
            const bool rhs_same = is_add && variant % 3 == 0;
            const std::string sbt = rhs_same ? lit(sc) : n > 1 && !is_add ? meta.floats(sb) : lit(sb[0]);
            const std::string zbt = rhs_same ? lit(zc) : lit(zb);
            module m =
                legalized(meta.program("def @main(%a: " + tensor_type(shape, d) + ", %b: " + tensor_type(rshape, d) +
                                       ") {\n  " + op + "(%a, %b, " + sat + ", " + lit(za) + ", " + sbt + ", " + zbt +
                                       ", " + lit(sc) + ", " + lit(zc) + ")\n}"),
                          opt);
            check_ints(run(m, {a, b}), d, shape, [&](std::size_t k) {
              const std::size_t c = n > 1 ? k % 17 : 0;
              requant p;
              p.r = r;
              p.fp32 = fp32;
              p.sout = sc;
              p.zout = static_cast<std::int32_t>(zc);
              if (is_add) {
                p.per_tensor = n == 1;
                p.sin = sa[c], p.zin = static_cast<std::int32_t>(za);
                const std::int64_t ra = requantize(a.i[k], p, i32);
                p.per_tensor = true;
                p.sin = sb[0], p.zin = static_cast<std::int32_t>(zb);
                const std::int64_t rb = rhs_same ? b_at(k) : requantize(b_at(k), p, i32);
                return saturate(wrap32(ra + rb - zc), d);
              }
              // mul: (a - za)(b - zb) at the scale float32(sa * sb), zero point 0.
              p.per_tensor = n == 1;
              p.zin = 0;
              p.sin = static_cast<float>(static_cast<double>(sa[c]) * static_cast<double>(sb[n > 1 ? c : 0]));
              return requantize((a.i[k] - za) * (b_at(k) - zb), p, d);
            });
          }
        }
}

TEST_CASE("qnn.concatenate: each input requantized to the output parameters unless it has them") {
  auto g = fuse::test::rng(107);
  for (const mode r : {mode::upward, mode::tonearest})
    for (const bool tuple_variable : {false, true}) {
      CAPTURE(name_of(r));
      CAPTURE(tuple_variable);
      const std::string types = "Tensor[(7, 17), int8], Tensor[(7, 1), int8], Tensor[(7, 5), int8]";
      const std::string data = tuple_variable ? "%t" : "(%a, %b, %c)";
      const std::string params = tuple_variable
                                     ? "%t: (" + types + ")"
                                     : "%a: Tensor[(7, 17), int8], %b: Tensor[(7, 1), int8], %c: Tensor[(7, 5), int8]";
      // a has the output's parameters; b and c are requantized (c from a 0 zero point).
      module m = legalized("def @main(" + params + ") {\n  qnn.concatenate(" + data +
                               ", (0.125f, 0.3f, 0.0625f), (-3, 17, 0), 0.125f, -3, axis=1)\n}",
                           qnn_options{name_of(r), "int64"});
      const value a = ints(i8, {7, 17}, g), b = ints(i8, {7, 1}, g), c = ints(i8, {7, 5}, g);
      const value out = tuple_variable ? run(m, {value::tuple({a, b, c})}) : run(m, {a, b, c});
      check_ints(out, i8, {7, 23}, [&](std::size_t k) {
        const std::size_t i = k / 23, j = k % 23;
        if (j < 17) return a.i[i * 17 + j];
        requant p;
        p.r = r;
        p.sout = 0.125f;
        p.zout = -3;
        if (j == 17) {
          p.sin = 0.3f, p.zin = 17;
          return requantize(b.i[i], p, i8);
        }
        p.sin = 0.0625f, p.zin = 0;
        return requantize(c.i[i * 5 + (j - 18)], p, i8);
      });
    }
}

// ---- compiled headers ------------------------------------------------------------------------------------

TEST_CASE("check_model on legalized programs: quantize -> qnn.dense -> requantize -> dequantize; quantized attention") {
  // A quantized linear layer: the int8 result and its float value.
  const std::string linear = R"(
def @main(%x: Tensor[(7, 17), float32], %w: Tensor[(13, 17), int8]) {
  %0 = qnn.quantize(%x, 0.0078125f, 3, out_dtype="int8");
  %1 = qnn.dense(%0, %w, 3, -2, 0.0078125f, 0.05f, units=13);
  %2 = qnn.requantize(%1, 0.000390625f, 0, 0.04f, -5, out_dtype="int8");
  %3 = qnn.dequantize(%2, 0.04f, -5);
  (%2, %3)
})";
  // Attention: scores = Q K^T (int32), requantized to int8, softmax in float, probabilities
  // quantized to uint8, then probs x V (V given transposed), requantized to int8.
  const std::string attention = R"(
def @main(%q: Tensor[(2, 7, 17), int8], %k: Tensor[(2, 7, 17), int8], %vt: Tensor[(2, 17, 7), int8]) {
  %0 = qnn.batch_matmul(%q, %k, 1, -1, 0.05f, 0.05f, out_dtype="int32", transpose_b=True);
  %1 = qnn.requantize(%0, 0.0025f, 0, 0.1f, 2, out_dtype="int8");
  %2 = qnn.dequantize(%1, 0.1f, 2);
  %3 = nn.softmax(%2, axis=-1);
  %4 = qnn.quantize(%3, 0.00390625f, 0, out_dtype="uint8");
  %5 = qnn.batch_matmul(%4, %vt, 0, 4, 0.00390625f, 0.05f, out_dtype="int32", transpose_b=True);
  qnn.requantize(%5, 0.0001953125f, 0, 0.02f, 0, rounding="TONEAREST", out_dtype="int8")
})";
  // One driver for the three (one compile).
  std::vector<module> modules;
  std::vector<std::pair<module*, std::string>> checked;
  for (const auto& [name, text, options] : std::vector<std::tuple<std::string, std::string, qnn_options>>{
           {"linear", linear, qnn_options{}},
           {"linear_float32", linear, qnn_options{"UPWARD", "float32"}},
           {"attention", attention, qnn_options{}}}) {
    CAPTURE(name);
    modules.push_back(parse(name + ".relay", text));
    legalize_qnn(modules.back(), options);
    checked.emplace_back(nullptr, "qnn_" + name);
  }
  for (std::size_t k = 0; k < modules.size(); ++k) checked[k].first = &modules[k];
  fuse::test::check_compiled_all(checked);
}

// ---- errors ------------------------------------------------------------------------------------------------

TEST_CASE("qnn legalization errors: located at the call, saying what is needed") {
  struct bad {
    std::string text;
    std::string message;
  };
  const std::string x8 =
      "def @main(%x: Tensor[(7, 17), int8], %s: float32, %z: int32, %f: Tensor[(7, 17), float32]) {\n  ";
  const std::vector<bad> cases = {
      {x8 + "qnn.requantize(%x, %s, 0, 0.5f, 0)\n}",
       "qnn.requantize: the input scale must be a constant: its value is needed here to compute the requantization "
       "multiplier, and it is the variable %s"},
      {x8 + "qnn.requantize(%x, 0.5f, 0, %s, 0)\n}", "the output scale must be a constant"},
      {x8 + "qnn.requantize(%x, 0.5f, 0, meta[relay.Constant][0] /* ty=float32 */, 0)\n}",
       "the output scale is a constant without data"},
      {x8 + "qnn.requantize(%x, 0.5f, 0, 0.25f)\n}", "qnn.requantize takes 5 arguments, not 4"},
      {x8 + "qnn.requantize(%x, 0.5f, 0, 0.25f, 0, rounding=\"DOWNWARD\")\n}",
       "rounding \"DOWNWARD\" is not supported"},
      {x8 + "qnn.requantize(%x, 0.5f, 0, 0.25f, 0, compute_dtype=\"int32\")\n}",
       "compute_dtype \"int32\" is not supported"},
      {x8 + "qnn.requantize(%x, 0.5f, 0, 0f, 0)\n}", "the output scale is 0"},
      {x8 + "qnn.requantize(%x, 0.5f, 0, 0.25f, 0, axis=2)\n}", "axis 2 is out of range for rank 2"},
      {x8 + "qnn.requantize(%x, 0.5f, 0, 0.25f, 0, out_dtype=\"int64\")\n}",
       "out_dtype must be int8, uint8, int16 or int32, not int64"},
      {x8 + "qnn.dequantize(%x, 0.5f, 0f)\n}", "qnn.dequantize: the zero point must be int32, not float32"},
      {x8 + "qnn.quantize(%f, 1, 0)\n}", "qnn.quantize: the scale must be float32, not int32"},
      {x8 + "qnn.quantize(%x, 0.5f, 0)\n}", "qnn.quantize: quantizes a float tensor, not int8"},
      {x8 + "qnn.dense(%f, %x, 0, 0, 0.5f, 0.5f)\n}", "qnn.dense: the data must be int8 or uint8, not float32"},
      {x8 + "qnn.dense(%x, %x, 0, 0, 0.5f, 0.5f, out_dtype=\"int64\")\n}",
       "out_dtype int64 is not supported (int32 only)"},
      {x8 + "qnn.dense(%x, %x, %s, 0, 0.5f, 0.5f)\n}", "the input zero point must be int32, not float32"},
      {"def @main(%x: Tensor[(2, 7, 17), int8], %y: Tensor[(2, 5, 17), int8], %z: Tensor[(5), int32]) {\n  "
       "qnn.batch_matmul(%x, %y, 0, %z, 0.5f, 0.5f, transpose_b=True)\n}",
       "qnn.batch_matmul: the y zero point must be a scalar, not Tensor[(5), int32]"},
      {x8 + "qnn.add(%x, %x, %s, 0, 0.5f, 0, 0.25f, 0)\n}", "qnn.add: the lhs scale must be a constant"},
      {x8 + "qnn.add(%x, %x, 0.25f, 0, 0.5f, %z, %s, 0)\n}", "qnn.add: the output scale must be a constant"},
      {x8 + "qnn.mul(%x, %x, 0.5f, 0, 0.5f, 0, %s, 0)\n}", "qnn.mul: the output scale must be a constant"},
      {"def @main(%x: Tensor[(7, 17), int8], %s: (float32, float32)) {\n  qnn.concatenate((%x, %x), %s, (0, 0), 0.5f, "
       "0)\n}",
       "qnn.concatenate: the input scales must be written as a tuple (s0, s1, ...)"},
      {x8 + "qnn.concatenate((%x, %x), (0.5f, %s), (0, 0), 0.25f, 0)\n}",
       "qnn.concatenate: the input 1 scale must be a constant"},
  };
  for (const bad& b : cases) {
    CAPTURE(b.text);
    module m = parse("bad.relay", b.text);
    try {
      legalize_qnn(m);
      FAIL("no error");
    } catch (const error& e) {
      const std::string what = e.what();
      CHECK_MESSAGE(what.find(b.message) != std::string::npos, what);
      CHECK_MESSAGE(what.starts_with("bad.relay:2:3: error: "), what);  // at the call
    }
  }
  // Per-channel parameters of the wrong length, and per-channel qnn.mul on different axes.
  metadata_builder meta;
  const std::string s5 = meta.floats({0.1f, 0.2f, 0.3f, 0.4f, 0.5f});
  const std::string s17 = meta.floats(std::vector<float>(17, 0.25f));
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {"qnn.requantize(%x, " + s5 + ", 0, 0.5f, 0, axis=1)",
            "the input scale has 5 values for axis 1 of extent 17"},
           {"qnn.dequantize(%x, " + s5 + ", 0, axis=-1)", "the scale has 5 values for axis 1 of extent 17"},
           {"qnn.mul(%x, %y, " + s17 + ", 0, " + s17 + ", 0, 0.5f, 0, lhs_axis=1, rhs_axis=0)",
            "per-channel scales need lhs_axis equal to rhs_axis"}}) {
    CAPTURE(body);
    module m =
        parse("bad.relay",
              meta.program("def @main(%x: Tensor[(17, 17), int8], %y: Tensor[(17, 17), int8]) {\n  " + body + "\n}"));
    try {
      legalize_qnn(m);
      FAIL("no error");
    } catch (const error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(message) != std::string::npos, e.what());
      CHECK(e.where().line == 3);
    }
  }
}

TEST_CASE("qnn legalization: constant expressions count as constants; a program without qnn ops is left alone") {
  // A scale written as an expression of constants is its value.
  module m = legalized(
      "def @main(%q: Tensor[(3), int32]) { qnn.requantize(%q, divide(1f, 4f), 0, 1f, 0, out_dtype=\"int32\") }");
  value q = value::tensor(i32, {3});
  q.i = {-6, 2, 6};  // * 0.25 = -1.5, 0.5, 1.5: UPWARD
  CHECK(run(m, {q}).i == std::vector<std::int64_t>{-1, 1, 2});
  const std::string plain = "def @main(%x: Tensor[(3), float32]) { exp(%x) }";
  module a = parse("a.relay", plain);
  module b = parse("b.relay", plain);
  legalize_qnn(b);
  typecheck(a);
  CHECK(structurally_equal(a, b));
}

TEST_CASE("fixed_point_multiply: TVM's q_multiply_shift in int64, rounding upward, left and right shifts") {
  auto g = fuse::test::rng(109);
  std::uniform_int_distribution<std::int64_t> u(INT32_MIN, INT32_MAX);
  value x = value::tensor(i32, {17, 7});
  for (auto& v : x.i) v = u(g);
  x.i[0] = INT32_MIN, x.i[1] = INT32_MAX, x.i[2] = 0, x.i[3] = -1, x.i[4] = 1;
  for (const auto& [multiplier, shift] : std::vector<std::pair<std::int64_t, int>>{
           {1518500250, -3}, {1073741824, 0}, {2147483647, 2}, {1, -31}, {0, 5}}) {
    CAPTURE(multiplier);
    CAPTURE(shift);
    module m = legalized("def @main(%x: Tensor[(17, 7), int32]) { fixed_point_multiply(%x, multiplier=" +
                         std::to_string(multiplier) + ", shift=" + std::to_string(shift) + ") }");
    check_ints(run(m, {x}), i32, {17, 7}, [&](std::size_t k) {
      const int left = std::max(shift, 0), total = 31 + std::max(-shift, 0);
      const auto p = static_cast<std::int64_t>(static_cast<std::uint64_t>(x.i[k] * (std::int64_t{1} << left)) *
                                               static_cast<std::uint64_t>(multiplier));
      return wrap32(static_cast<std::int64_t>(static_cast<std::uint64_t>(p) + (std::uint64_t{1} << (total - 1))) >>
                    total);
    });
  }
  // By hand: 0.75 = 1610612736 * 2^-31; 3 * 0.75 = 2.25 -> 2, -3 * 0.75 = -2.25 -> -2, 2 * 0.75 = 1.5 -> 2 (upward).
  module m =
      legalized("def @main(%x: Tensor[(4), int32]) { fixed_point_multiply(%x, multiplier=1610612736, shift=0) }");
  value h = value::tensor(i32, {4});
  h.i = {3, -3, 2, -2};
  CHECK(run(m, {h}).i == std::vector<std::int64_t>{2, -2, 2, -1});
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"fixed_point_multiply(%f, multiplier=1, shift=0)", "the input must be int32 or int64, not float32"},
           {"fixed_point_multiply(%x, multiplier=-1, shift=0)", "multiplier -1 is not a non-negative int32"},
           {"fixed_point_multiply(%x, multiplier=1, shift=40)", "shift 40 is out of [-31, 31]"}}) {
    CAPTURE(text);
    module bad = parse("bad.relay", "def @main(%x: Tensor[(4), int32], %f: Tensor[(4), float32]) {\n  " + text + "\n}");
    try {
      legalize_qnn(bad);
      FAIL("no error");
    } catch (const error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(message) != std::string::npos, e.what());
      CHECK(e.where().line == 2);
    }
  }
}
