// The reference interpreter against hand-written double loops, the .npy reader and writer, and
// the command line (exit codes, messages, .npy in and out).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fuse/relay/interpreter.hpp>
#include <fuse/relay/npy.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/typecheck.hpp>

#include "relay/seed_programs.hpp"
#include "relay/programs.hpp"
#include "support/random.hpp"

using namespace fuse::relay;

namespace {

using fuse::test::checked;

value random_tensor(const char* dt, std::vector<std::int64_t> shape, std::uint64_t salt, double lo = -1,
                    double hi = 1) {
  auto gen = fuse::test::rng(salt);
  value v = value::tensor(*dtype::parse(dt), std::move(shape));
  std::uniform_real_distribution<double> ud(lo, hi);
  for (auto& x : v.f) x = static_cast<float>(ud(gen));  // float32 inputs
  for (auto& x : v.i) x = static_cast<std::int64_t>(std::floor(ud(gen)));
  return v;
}

value run1(const std::string& text, const std::vector<value>& inputs) {
  module m = checked(text);
  interpreter ip(m);
  return ip.run("main", inputs);
}

}  // namespace

TEST_CASE("interpreter: the seed's cell, dense -> split -> sigmoid/tanh/exp -> multiply/add") {
  const std::string text = fuse::test::seed_cell_relay(3);
  const value x = random_tensor("float32", {3, 10}, 1), w = random_tensor("float32", {30, 10}, 2);
  const value out = run1(text, {x, w});
  REQUIRE(out.shape == std::vector<std::int64_t>{3, 10});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 10; ++j) {
      double g[3];
      for (int s = 0; s < 3; ++s) {
        g[s] = 0;
        for (int k = 0; k < 10; ++k) g[s] += x.f[i * 10 + k] * w.f[(s * 10 + j) * 10 + k];
      }
      const double want = 1 / (1 + std::exp(-g[0])) + std::tanh(g[1]) * std::exp(g[2]);
      CHECK(out.f[i * 10 + j] == doctest::Approx(want).epsilon(1e-14));
    }
}

TEST_CASE("interpreter: views, reductions, softmax and layer_norm against direct loops") {
  const value x = random_tensor("float32", {2, 3, 4}, 3, -3, 3);
  SUBCASE("reshape + transpose + strided_slice") {
    const value out = run1(R"(
def @main(%x: Tensor[(2, 3, 4), float32]) {
  %0 = reshape(%x, newshape=[6, 4]);
  %1 = transpose(%0, axes=[1, 0]);
  strided_slice(%1, begin=[1, 5], end=[4, 0], strides=[2, -2])
})",
                           {x});
    // rows 1, 3 of the [4, 6] transpose; columns 5, 3, 1
    REQUIRE(out.shape == std::vector<std::int64_t>{2, 3});
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 3; ++c) {
        const int row = 1 + 2 * r, col = 5 - 2 * c;  // transpose(i, j) = reshaped(j, i)
        CHECK(out.f[r * 3 + c] == x.f[col * 4 + row]);
      }
  }
  SUBCASE("mean over the last axis with keepdims, then subtract") {
    const value out = run1(R"(
def @main(%x: Tensor[(2, 3, 4), float32]) {
  %0 = mean(%x, axis=[-1], keepdims=True);
  subtract(%x, %0)
})",
                           {x});
    for (int r = 0; r < 6; ++r) {
      double m = 0;
      for (int c = 0; c < 4; ++c) m += x.f[r * 4 + c];
      m /= 4;
      for (int c = 0; c < 4; ++c) CHECK(out.f[r * 4 + c] == doctest::Approx(x.f[r * 4 + c] - m).epsilon(1e-14));
    }
  }
  SUBCASE("softmax over axis 1") {
    const value out = run1("def @main(%x: Tensor[(2, 3, 4), float32]) { nn.softmax(%x, axis=1) }", {x});
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 4; ++c) {
        double s = 0;
        for (int r = 0; r < 3; ++r) s += std::exp(x.f[(b * 3 + r) * 4 + c]);
        for (int r = 0; r < 3; ++r)
          CHECK(out.f[(b * 3 + r) * 4 + c] == doctest::Approx(std::exp(x.f[(b * 3 + r) * 4 + c]) / s).epsilon(1e-13));
      }
  }
  SUBCASE("layer_norm") {
    const value g = random_tensor("float32", {4}, 4), be = random_tensor("float32", {4}, 5);
    const value out = run1(R"(
def @main(%x: Tensor[(2, 3, 4), float32], %g: Tensor[(4), float32], %b: Tensor[(4), float32]) {
  nn.layer_norm(%x, %g, %b, epsilon=1e-05f)
})",
                           {x, g, be});
    for (int r = 0; r < 6; ++r) {
      double m = 0, v = 0;
      for (int c = 0; c < 4; ++c) m += x.f[r * 4 + c];
      m /= 4;
      for (int c = 0; c < 4; ++c) v += (x.f[r * 4 + c] - m) * (x.f[r * 4 + c] - m);
      v /= 4;
      for (int c = 0; c < 4; ++c) {
        const double want = (x.f[r * 4 + c] - m) / std::sqrt(v + double(1e-05f)) * g.f[c] + be.f[c];
        CHECK(out.f[r * 4 + c] == doctest::Approx(want).epsilon(1e-12));
      }
    }
  }
  SUBCASE("concatenate, take and squeeze") {
    const value idx = [] {
      value v = value::tensor(dtype::int32(), {3});
      v.i = {2, -1, 7};  // clip mode: 2, 0, 3
      return v;
    }();
    const value out = run1(R"(
def @main(%x: Tensor[(2, 3, 4), float32], %i: Tensor[(3), int32]) {
  %0 = (%x, %x);
  %1 = concatenate(%0, axis=0);
  %2 = take(%1, %i, axis=2);
  %3 = strided_slice(%2, begin=[3], end=[4]);
  squeeze(%3, axis=[0])
})",
                           {x, idx});
    REQUIRE(out.shape == std::vector<std::int64_t>{3, 3});  // batch 3 of [4, 3, 3] = batch 1 of x
    const int cols[3] = {2, 0, 3};
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) CHECK(out.f[r * 3 + c] == x.f[(1 * 3 + r) * 4 + cols[c]]);
  }
}

TEST_CASE("interpreter: integer semantics are exact (int8 dense into int32, wrapping, saturating casts)") {
  value a = random_tensor("int8", {5, 17}, 6, -128, 128), b = random_tensor("int8", {7, 17}, 7, -128, 128);
  a.i[0] = -128;
  b.i[0] = -128;  // saturation corners
  const value out = run1(R"(
def @main(%a: Tensor[(5, 17), int8], %b: Tensor[(7, 17), int8]) {
  nn.dense(%a, %b, units=None, out_dtype="int32")
})",
                         {a, b});
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) {
      std::int64_t s = 0;
      for (int k = 0; k < 17; ++k) s += a.i[i * 17 + k] * b.i[j * 17 + k];
      CHECK(out.i[i * 7 + j] == s);
    }
  value x = value::tensor(dtype::float32(), {6});
  x.f = {300.7, -300.2, 2.5, -2.5, NAN, 126.9};
  const value q = run1(R"(
def @main(%x: Tensor[(6), float32]) {
  %0 = round(%x);
  %1 = cast(%0, dtype="int8");
  %2 = add(%1, %1);
  (%1, %2)
})",
                       {x});
  const std::vector<std::int64_t> sat = {127, -128, 3, -3, 0, 127};  // half away from zero; NaN -> 0
  CHECK(q.fields[0].i == sat);
  const std::vector<std::int64_t> wrapped = {-2, 0, 6, -6, 0, -2};  // 254 and -256 wrap in int8
  CHECK(q.fields[1].i == wrapped);
  value n = value::tensor(dtype::int32(), {3}), d = value::tensor(dtype::int32(), {3});
  n.i = {7, -7, 5};
  d.i = {2, 2, 0};
  const value div = run1("def @main(%n: Tensor[(3), int32], %d: Tensor[(3), int32]) { divide(%n, %d) }", {n, d});
  CHECK(div.i == std::vector<std::int64_t>{3, -3, 0});  // truncating; x / 0 = 0 as fuse defines it
}

TEST_CASE("interpreter: let, closures, global calls and tuples") {
  const value x = random_tensor("float32", {4}, 8);
  const value out = run1(R"(
def @double(%y: Tensor[(4), float32]) -> Tensor[(4), float32] {
  add(%y, %y)
}
def @main(%x: Tensor[(4), float32]) {
  let %t = (%x, negative(%x));
  %0 = fn (%p0: Tensor[(4), float32], Primitive=1) -> Tensor[(4), float32] { exp(%p0) };
  %1 = %0(%t.1);
  @double(%1)
})",
                         {x});
  for (int k = 0; k < 4; ++k) CHECK(out.f[k] == doctest::Approx(2 * std::exp(-x.f[k])).epsilon(1e-15));
}

TEST_CASE("npy: round trips and every malformed header") {
  for (const char* dt : {"float32", "float64", "float16", "int8", "uint8", "int32", "int64", "bool"}) {
    CAPTURE(dt);
    for (const auto& shape : std::vector<std::vector<std::int64_t>>{{}, {0}, {7}, {2, 3}, {1, 17, 3}}) {
      constant_data c;
      c.dt = *dtype::parse(dt);
      c.shape = shape;
      auto gen = fuse::test::rng(shape.size());
      c.bytes.resize(static_cast<std::size_t>(c.elements()) * c.dt.bytes());
      for (auto& b : c.bytes) b = static_cast<unsigned char>(c.dt.is_bool() ? gen() % 2 : gen());
      const std::string file = npy::write(c);
      CHECK((file.size() - c.bytes.size()) % 64 == 0);  // the header pads the data to 64 bytes
      const constant_data back = npy::read(file, "t.npy");
      CHECK(back.dt == c.dt);
      CHECK(back.shape == c.shape);
      CHECK(back.bytes == c.bytes);
    }
  }
  constant_data c;
  c.dt = dtype::float32();
  c.shape = {2, 3};
  c.bytes.assign(24, 0);
  const std::string good = npy::write(c);
  auto error_of = [](const std::string& bytes) -> std::string {
    try {
      npy::read(bytes, "bad.npy");
    } catch (const error& e) {
      return e.what();
    }
    return "(no error)";
  };
  CHECK(error_of(good.substr(0, good.size() - 1)).find("needs 24 data bytes, the file has 23") != std::string::npos);
  CHECK(error_of(good + "x").find("the file has 25") != std::string::npos);
  CHECK(error_of("\x93NUMPX" + good.substr(6)).find("bad magic") != std::string::npos);
  std::string big_endian = good;
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  CHECK(error_of(big_endian).find("unsupported descr") != std::string::npos);
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  CHECK(error_of(fortran).find("Fortran") != std::string::npos);
  std::string huge = good;
  huge[8] = '\xff';
  huge[9] = '\xff';
  CHECK(error_of(huge).find("runs past the end") != std::string::npos);
  CHECK(error_of("").find("bad magic") != std::string::npos);
  for (std::size_t cut = 0; cut < good.size(); ++cut) CHECK(error_of(good.substr(0, cut)) != "(no error)");
}

#ifdef FUSE_RELAY_TOOL
#include "relay/tool.hpp"

TEST_CASE("fuse-relay: exit codes, located errors, run over .npy files") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fuse_relay_cli_" + std::to_string(fuse::test::base_seed()));
  std::filesystem::create_directories(dir / "in");
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  CHECK(fuse::test::run_tool("").status == 2);
  CHECK(fuse::test::run_tool("frobnicate x.relay").status == 2);
  CHECK(fuse::test::run_tool("run").err.find("missing MODEL.relay") != std::string::npos);
  CHECK(fuse::test::run_tool("run m.relay --bogus 1").status == 2);
  CHECK(fuse::test::run_tool("types " + (dir / "missing.relay").string()).status == 1);

  const std::string bad = write("bad.relay", "def @main(%x: Tensor[(2), float32]) {\n  %0 = exp(%x;\n  %0\n}\n");
  const fuse::test::tool_run r = fuse::test::run_tool("types " + bad);
  CHECK(r.status == 1);
  CHECK(r.err.find(bad + ":2:") != std::string::npos);
  CHECK(r.err.find("error:") != std::string::npos);
  CHECK(r.err.find("\n    %0 = exp(%x;\n") != std::string::npos);  // the line, then the caret
  CHECK(r.err.find("^") != std::string::npos);

  const std::string unsupported = write(
      "conv.relay",
      "def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {\n  nn.conv2d(%x, %w)\n}\n");
  const fuse::test::tool_run u = fuse::test::run_tool("types " + unsupported);
  CHECK(u.status == 1);
  CHECK(u.err.find("unsupported op nn.conv2d") != std::string::npos);

  const std::string model = write("cell.relay", R"(
def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(6, 3), float32]) {
  %0 = nn.dense(%x, %w);
  %1 = split(%0, indices_or_sections=2, axis=1);
  (sigmoid(%1.0), tanh(%1.1))
})");
  const value x = random_tensor("float32", {2, 3}, 9), w = random_tensor("float32", {6, 3}, 10);
  npy::write_file((dir / "in" / "x.npy").string(), interpreter::to_constant(x));
  npy::write_file((dir / "in" / "w.npy").string(), interpreter::to_constant(w));
  const fuse::test::tool_run ok = fuse::test::run_tool("run " + model + " --inputs " + (dir / "in").string() +
                                                       " --outputs " + (dir / "out").string());
  REQUIRE(ok.status == 0);
  const value o0 = interpreter::from_constant(npy::read_file((dir / "out" / "out0.npy").string()));
  const value o1 = interpreter::from_constant(npy::read_file((dir / "out" / "out1.npy").string()));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      double a = 0, b = 0;
      for (int k = 0; k < 3; ++k) a += x.f[i * 3 + k] * w.f[j * 3 + k], b += x.f[i * 3 + k] * w.f[(3 + j) * 3 + k];
      CHECK(o0.f[i * 3 + j] == doctest::Approx(static_cast<float>(1 / (1 + std::exp(-a)))).epsilon(1e-7));
      CHECK(o1.f[i * 3 + j] == doctest::Approx(static_cast<float>(std::tanh(b))).epsilon(1e-7));
    }
  // A wrong input shape is bad input, not a crash.
  npy::write_file((dir / "in" / "x.npy").string(), interpreter::to_constant(random_tensor("float32", {3, 3}, 11)));
  const fuse::test::tool_run shape = fuse::test::run_tool("run " + model + " --inputs " + (dir / "in").string() +
                                                          " --outputs " + (dir / "out").string());
  CHECK(shape.status == 1);
  CHECK(shape.err.find("input %x must be Tensor[(2, 3), float32], the file holds Tensor[(3, 3), float32]") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}
#endif
