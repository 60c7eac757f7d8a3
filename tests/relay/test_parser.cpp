// The Relay text parser: every construct of every TVM printer version with checks on the IR it
// builds, errors with their positions, nesting limits and long inputs, TVM's own programs
// (FUSE_RELAY_CORPUS_DIR), the programs embedded in the seeds (FUSE_SEEDS_DIR), and truncated
// or damaged input that must give an error, never a crash.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fuse/relay/parser.hpp>
#include <fuse/relay/printer.hpp>
#include <fuse/relay/structural_equal.hpp>
#include <fuse/relay/typecheck.hpp>

#include "relay/programs.hpp"
#include "relay/seed_programs.hpp"
#include "support/random.hpp"
#include "support/small_stack.hpp"

using namespace fuse::relay;
namespace relay = fuse::relay;
using fuse::test::embedded_programs;
using fuse::test::main_body;
using fuse::test::read_file;
using fuse::test::restore_ty_comments;

namespace {

// Parses `text`, which must fail; returns the error.
relay::error parse_error(const std::string& text, const std::string& name = "t.relay") {
  try {
    parse(name, text);
  } catch (const relay::error& e) {
    return e;
  }
  FAIL("parsed without an error: " << text);
  return relay::error("unreachable");
}

// The one argument of `f(LIT)` in a def.
const expr* literal_of(const std::string& lit) {
  static std::deque<module> keep;  // the nodes live in their module
  keep.push_back(parse("lit.relay", "def @main() { f(" + lit + ") }"));
  const expr* call = main_body(keep.back());
  REQUIRE(call->kind == expr_kind::call);
  REQUIRE(call->args.size() == 1);
  return call->args[0];
}

template <class T>
std::vector<unsigned char> le_bytes(T v) {
  std::vector<unsigned char> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

// Parses text that may be malformed: success, or a relay::error with a position. Anything else
// (another exception, a crash under the sanitizers) fails the test.
void parse_or_error(const std::string& text) {
  try {
    parse("fuzz.relay", text);
  } catch (const relay::error& e) {
    CHECK(e.where().line >= 1);
  } catch (const std::exception& e) {
    FAIL("not a relay::error: " << e.what() << "\ninput:\n" << text);
  }
}

}  // namespace

// ---- headers and module structure ----------------------------------------------------------------

TEST_CASE("parser: version headers of each printer") {
  CHECK(parse("a", "#[version = \"0.0.5\"]\ndef @main() { 1 }").version == "0.0.5");
  CHECK(parse("a", "v0.0.4\ndef @main() { 1 }").version == "0.0.4");
  CHECK(parse("a", "def @main() { 1 }").version == "");
  CHECK(parse("a", "// licence\n/* more */\n#[version = \"0.0.5\"]\ndef @main() { 1 }").version == "0.0.5");
  CHECK(parse_error("def @main() { 1 }\n#[version = \"0.0.5\"]").message().find("version header must come first") !=
        std::string::npos);
}

TEST_CASE("parser: several defs, types, calls of globals") {
  const module m = parse("a",
                         "type List[A] { Cons(A, List[A]), Nil, }\n"
                         "extern type Storage\n"
                         "def @f(%x: Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32] { %x }\n"
                         "def @main(%y: Tensor[(2, 3), float32], %l: List[int32]) { @f(%y) }\n");
  REQUIRE(m.defs.size() == 2);
  CHECK(m.defs[0].name == "f");
  CHECK(m.defs[0].at == location{3, 1});
  const expr* f = m.defs[0].fn;
  CHECK(f->kind == expr_kind::function);
  REQUIRE(f->args.size() == 1);
  CHECK(f->body == f->args[0]);
  CHECK(f->args[0]->annotated == type::tensor({2, 3}, dtype::float32()));
  CHECK(f->ret.str() == "Tensor[(2, 3), float32]");
  const expr* body = main_body(m);
  CHECK(body->kind == expr_kind::call);
  CHECK(body->callee->kind == expr_kind::global);
  CHECK(body->callee->name == "f");
  CHECK(body->args[0] == m.defs[1].fn->args[0]);
  CHECK(m.defs[1].fn->args[1]->annotated.k == type::kind::named);
  CHECK(m.defs[1].fn->args[1]->annotated.name == "List");
  CHECK(m.defs[1].fn->args[1]->annotated.fields.at(0) == type::tensor({}, dtype::int32()));
  CHECK(parse_error("def @f() { 1 }\ndef @f() { 2 }").message() == "@f is defined twice");
}

TEST_CASE("parser: bindings with ';', without (v0.5), let, free_var and bare expressions") {
  // Graph bindings name nodes; a reference is the node itself.
  const module a = parse("a", "def @main(%x) { %0 = add(%x, %x); %1 = multiply(%0, %0); %1 }");
  const expr* b = main_body(a);
  CHECK(b->kind == expr_kind::call);
  CHECK(b->callee->name == "multiply");
  CHECK(b->args[0] == b->args[1]);
  CHECK(b->args[0]->callee->name == "add");

  // v0.5: newline-separated, `# ty=` comments.
  const module v5 = parse(
      "a",
      "fn (%x: Tensor[(1, 10), float32]) {\n  %0 = exp(%x) # ty=Tensor[(1, 10), float32]\n  %1 = log(%0)\n  %1\n}");
  const expr* l = main_body(v5);
  CHECK(l->callee->name == "log");
  CHECK(l->args[0]->annotated == type::tensor({1, 10}, dtype::float32()));
  CHECK(parse_error("def @main(%x) { %0 = exp(%x) %1 = log(%0); %1 }").message() ==
        "expected ';' after the binding of %0, found '%1'");
  CHECK(parse_error("def @main(%x) { %0 = exp(%x); }").message() ==
        "expected an expression after the binding of %0, found '}'");

  // let: a chain of let nodes, the var node shared by its uses.
  const module lt = parse("a", "def @main(%x) { let %a: float32 = 1f; let %b = add(%a, %x); multiply(%a, %b) }");
  const expr* let1 = main_body(lt);
  REQUIRE(let1->kind == expr_kind::let);
  REQUIRE(let1->args.size() == 3);
  CHECK(let1->args[0]->kind == expr_kind::var);
  CHECK(let1->args[0]->name == "a");
  CHECK(let1->args[0]->annotated == type::tensor({}, dtype::float32()));
  const expr* let2 = let1->args[2];
  REQUIRE(let2->kind == expr_kind::let);
  CHECK(let2->args[1]->args[0] == let1->args[0]);
  CHECK(let2->args[2]->args[0] == let1->args[0]);
  CHECK(let2->args[2]->args[1] == let2->args[0]);

  // A bare expression with free variables: main takes them as parameters.
  const module fv = parse("a", "free_var %x: Tensor[(3), float32];\nfree_var %y: Tensor[(3), float32];\nadd(%x, %y)");
  REQUIRE(fv.defs.size() == 1);
  const expr* fn = fv.find("main")->fn;
  REQUIRE(fn->args.size() == 2);
  CHECK(fn->args[0]->name == "x");
  CHECK(fn->body->args[1] == fn->args[1]);
  // A bare fn is main itself.
  const module bf = parse("a", "#[version = \"0.0.5\"]\nfn (%p) { negative(%p) }");
  CHECK(bf.find("main")->fn->kind == expr_kind::function);
  CHECK(bf.find("main")->fn->args.size() == 1);
}

// ---- comments ------------------------------------------------------------------------------------

TEST_CASE("parser: comments, ty= and span comments") {
  const module m =
      parse("a",
            "// line\n/* outer /* nested */ still comment */\n"
            "def @main(%x: Tensor[(2), float32] /* ty=Tensor[(2), float32] span=index:0:5 */) {\n"
            "  %0 = exp(%x) /* ty=Tensor[(2), float32] span=Exp_0.onnx::Exp:0:0 */;\n"
            "  %1 = reshape(%0, newshape=[1, 2]) /* bert/encoder/Reshape */ /* ty=Tensor[(1, 2), float32] */;\n"
            "  %2 = (%1, %0) /* ty=(Tensor[(1, 2), float32], Tensor[(2), float32]) */;\n"
            "  %3 = %2.1 /* ty=Tensor[(2), float32] */;\n"
            "  %4 = add(%3, 1f /* ty=float32 */) /* ty=not a type at all */;\n"
            "  %5 = fn (%p) { %p } /* ty=fn (Tensor[(2), float32]) -> Tensor[(2), float32] */;\n"
            "  %5(%4)\n}");
  const expr* fn = m.find("main")->fn;
  CHECK(fn->args[0]->span == "index:0:5");
  const expr* call5 = fn->body;
  const expr* add = call5->args[0];
  CHECK_FALSE(add->annotated.known());  // the unparseable ty= is ignored
  CHECK(add->args[1]->annotated == type::tensor({}, dtype::float32()));
  const expr* get = add->args[0];
  REQUIRE(get->kind == expr_kind::tuple_get);
  CHECK(get->index == 1);
  CHECK(get->annotated.str() == "Tensor[(2), float32]");
  const expr* tup = get->args[0];
  CHECK(tup->annotated.str() == "(Tensor[(1, 2), float32], Tensor[(2), float32])");
  CHECK(tup->args[0]->span == "bert/encoder/Reshape");
  CHECK(tup->args[0]->annotated.str() == "Tensor[(1, 2), float32]");
  CHECK(tup->args[1]->span == "Exp_0.onnx::Exp:0:0");
  CHECK(call5->callee->annotated.str() == "fn (Tensor[(2), float32]) -> Tensor[(2), float32]");
  CHECK(parse_error("def @main() { 1 } /* open /* nested */").message().find("unterminated comment") == 0);
}

// ---- literals ------------------------------------------------------------------------------------

TEST_CASE("parser: scalar literals become 0-d constants with their bytes") {
  struct scalar_case {
    const char* text;
    dtype dt;
    std::vector<unsigned char> bytes;
  };
  const dtype f16{dtype::float_code, 16, 1}, f64{dtype::float_code, 64, 1}, i16{dtype::int_code, 16, 1},
      i8{dtype::int_code, 8, 1};
  const std::vector<scalar_case> cases = {
      {"3", dtype::int32(), le_bytes<std::int32_t>(3)},
      {"-1", dtype::int32(), le_bytes<std::int32_t>(-1)},
      {"3000000000", dtype::int64(), le_bytes<std::int64_t>(3000000000)},
      {"3i64", dtype::int64(), le_bytes<std::int64_t>(3)},
      {"3i16", i16, le_bytes<std::int16_t>(3)},
      {"int64(3)", dtype::int64(), le_bytes<std::int64_t>(3)},
      {"int8(-3)", i8, {0xfd}},
      {"1f", dtype::float32(), le_bytes(1.0f)},
      {"0.5f", dtype::float32(), le_bytes(0.5f)},
      {"0.5f16", f16, {0x00, 0x38}},
      {"1e-05f", dtype::float32(), le_bytes(1e-05f)},
      {"-127f", dtype::float32(), le_bytes(-127.0f)},
      {"1.5f64", f64, le_bytes(1.5)},
      {"0.5", f64, le_bytes(0.5)},
      {"float16(0.5)", f16, {0x00, 0x38}},
      {"inff", dtype::float32(), le_bytes(INFINITY)},
      {"-inff", dtype::float32(), le_bytes(-INFINITY)},
      {"True", dtype::boolean(), {1}},
      {"False", dtype::boolean(), {0}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    const expr* e = literal_of(c.text);
    REQUIRE(e->kind == expr_kind::constant);
    REQUIRE(e->data);
    CHECK(e->data->dt == c.dt);
    CHECK(e->data->shape.empty());
    CHECK(e->data->bytes == c.bytes);
    CHECK(e->annotated == type::tensor({}, c.dt));
    CHECK_FALSE(e->meta);
  }
  const expr* nan = literal_of("nanf");
  float v;
  std::memcpy(&v, nan->data->bytes.data(), 4);
  CHECK(std::isnan(v));
  CHECK(parse_error("def @main() { f(int8(300)) }").message() == "300 does not fit int8");
  CHECK(parse_error("def @main() { f(99999999999999999999) }").message().find("does not fit int64") !=
        std::string::npos);
  CHECK(parse_error("def @main() { f(1.5i32) }").message().find("malformed number") == 0);
  CHECK(parse_error("def @main() { f(3f8) }").message().find("malformed number") == 0);
}

// ---- meta and the metadata section ---------------------------------------------------------------

TEST_CASE("parser: meta references without a metadata section") {
  const module m =
      parse("a",
            "def @main(%x) {\n"
            "  %0 = nn.conv2d(%x, meta[relay.Constant][3] /* ty=Tensor[(8, 1, 5, 5), float32] */, channels=8);\n"
            "  %1 = on_device(%0, meta[relay.attrs.OnDeviceAttrs][0]);\n"
            "  split(%1, indices_or_sections=meta[runtime.BoxInt][0])\n}");
  CHECK_FALSE(m.has_metadata);
  const expr* split = main_body(m);
  CHECK(split->attributes.find("indices_or_sections")->k == attr_value::kind::meta);
  CHECK(split->attributes.find("indices_or_sections")->meta == meta_ref{"runtime.BoxInt", 0});
  const expr* dev = split->args[0];
  REQUIRE(dev->args.size() == 1);
  CHECK(dev->attributes.find("attrs")->meta == meta_ref{"relay.attrs.OnDeviceAttrs", 0});
  const expr* c = dev->args[0]->args[1];
  CHECK(c->kind == expr_kind::constant);
  REQUIRE(c->meta);
  CHECK(*c->meta == meta_ref{"relay.Constant", 3});
  CHECK_FALSE(c->data);
  CHECK(c->annotated == type::tensor({8, 1, 5, 5}, dtype::float32()));
  CHECK(parse_error("def @main() { f(meta[relay.Constant]) }").message().find("malformed meta reference") == 0);
}

namespace {
// A section holding one float32 [[1, 2, 3], [4, 5, 6]] constant (blob built with Python struct).
const std::string one_constant_json = R"({"root": 1, "nodes": [{"type_key": ""},
  {"type_key": "Map", "keys": ["relay.Constant"], "data": [2]},
  {"type_key": "Array", "data": [3]},
  {"type_key": "relay.Constant", "attrs": {"_checked_type_": "0", "data": "0", "span": "0"}}],
  "b64ndarrays": ["P6G0lvBAXt0AAAAAAAAAAAEAAAAAAAAAAgAAAAIgAQACAAAAAAAAAAMAAAAAAAAAGAAAAAAAAAAAAIA/AAAAQAAAQEAAAIBAAACgQAAAwEA="],
  "attrs": {"tvm_version": "0.19.0"}})";
const char* one_constant_program = "def @main(%x: Tensor[(2, 3), float32]) {\n  add(%x, meta[relay.Constant][0])\n}\n";

void check_one_constant(const module& m) {
  CHECK(m.has_metadata);
  REQUIRE(m.constants.size() == 1);
  const expr* c = main_body(m)->args[1];
  REQUIRE(c->data);
  CHECK(c->data == m.constants[0]);
  CHECK(c->data->shape == std::vector<std::int64_t>{2, 3});
  CHECK(c->annotated == type::tensor({2, 3}, dtype::float32()));
  float v[6];
  REQUIRE(c->data->bytes.size() == sizeof v);
  std::memcpy(v, c->data->bytes.data(), sizeof v);
  CHECK(v[5] == 6.0f);
}
}  // namespace

TEST_CASE("parser: the metadata section of each printer") {
  SUBCASE("#[metadata] (v0.7+)") {
    check_one_constant(parse(
        "a", std::string("#[version = \"0.0.5\"]\n") + one_constant_program + "#[metadata]\n" + one_constant_json));
  }
  SUBCASE("METADATA: (v0.6)") {
    check_one_constant(parse("a", std::string("v0.0.4\n") + one_constant_program + "METADATA:\n" + one_constant_json));
  }
  SUBCASE("# meta data + r\"\"\" (v0.5)") {
    check_one_constant(
        parse("a", std::string(one_constant_program) + "# meta data\nr\"\"\"\n" + one_constant_json + "\n\"\"\"\n"));
  }
  SUBCASE("an index past the table") {
    const std::string text =
        std::string("def @main(%x) {\n  add(%x, meta[relay.Constant][1])\n}\n#[metadata]\n") + one_constant_json;
    const relay::error e = parse_error(text);
    CHECK(e.where() == location{2, 11});
    CHECK(e.message() == "meta[relay.Constant][1] is out of range: the metadata section has 1 constants");
  }
  SUBCASE("the reader's errors point into the section") {
    const relay::error e = parse_error("def @main() { 1 }\n#[metadata]\n{\"root\": 1, ");
    CHECK(e.where().line == 3);
  }
}

// ---- calls and attributes ------------------------------------------------------------------------

TEST_CASE("parser: calls, dotted ops and every kind of attribute value") {
  const module m = parse(
      "a",
      "def @main(%x) {\n"
      "  %0 = nn.conv2d(%x, %x, strides=[2, 2], padding=[[0, 0], [2, 2]], channels=64i64, out_dtype=\"int32\",\n"
      "                 scale=0.5f, eps=0.001, flag=True, units=None, ptr=nullptr, relay.reshape_only=1,\n"
      "                 sections=int64(3), wrapped=(7), neg=-1, name=\"a\\\"b\\\\c\\n\\td\", glob=@g,\n"
      "                 virtual_device=VirtualDevice(device_type=1, target=Target(id=0, kind='llvm', keys={'cpu'})),\n"
      "                 map={k=v, w=[1, 2]}, empty=[]);\n"
      "  qnn.requantize(%0)\n}");
  const expr* conv = main_body(m)->args[0];
  CHECK(conv->callee->kind == expr_kind::op);
  CHECK(conv->callee->name == "nn.conv2d");
  CHECK(main_body(m)->callee->name == "qnn.requantize");
  const attrs& a = conv->attributes;
  REQUIRE(a.items.size() == 18);
  CHECK(a.items[0].first == "strides");
  const attr_value* strides = a.find("strides");
  REQUIRE(strides->k == attr_value::kind::array);
  CHECK(strides->items.size() == 2);
  CHECK(strides->items[1].i == 2);
  const attr_value* pad = a.find("padding");
  CHECK(pad->items[1].items[0].i == 2);
  CHECK(a.find("channels")->i == 64);
  CHECK(a.find("channels")->literal == dtype::int64());
  CHECK(a.find("out_dtype")->s == "int32");
  CHECK(a.find("scale")->k == attr_value::kind::real);
  CHECK(a.find("scale")->f == 0.5);
  CHECK(a.find("eps")->literal == dtype{dtype::float_code, 64, 1});
  CHECK(a.find("eps")->f == 0.001);
  CHECK(a.find("flag")->k == attr_value::kind::boolean);
  CHECK(a.find("flag")->b);
  CHECK(a.find("units")->k == attr_value::kind::none);
  CHECK(a.find("ptr")->k == attr_value::kind::none);
  CHECK(a.find("relay.reshape_only")->i == 1);
  CHECK(a.find("sections")->i == 3);
  CHECK(a.find("sections")->literal == dtype::int64());
  CHECK(a.find("wrapped")->i == 7);
  CHECK(a.find("neg")->i == -1);
  CHECK(a.find("name")->s == "a\"b\\c\n\td");
  CHECK(a.find("glob")->k == attr_value::kind::expr);
  CHECK(a.find("glob")->e->kind == expr_kind::global);
  CHECK(a.find("virtual_device")->k == attr_value::kind::string);
  CHECK(a.find("virtual_device")->s == "VirtualDevice(device_type=1, target=Target(id=0, kind='llvm', keys={'cpu'}))");
  CHECK(a.find("map")->s == "{k=v, w=[1, 2]}");
  CHECK(a.find("empty")->k == attr_value::kind::array);
  CHECK(a.find("empty")->items.empty());
  CHECK(a.find("scale")->at == location{3, 24});
}

TEST_CASE("parser: callees: ops, variables, globals, closures, f(x)(y)") {
  const module m = parse("a",
                         "def @main(%f, %x) {\n"
                         "  %0 = fn (%a, Primitive=1, Composite=\"x\") { %a };\n"
                         "  %1 = %0(%x, name=\"c\", attrs_type_key=\"attrs.TestAttrs\");\n"
                         "  %2 = %f(%1)(%x);\n"
                         "  %3 = @g(%2);\n"
                         "  fn (%b) { %b }(%3)\n}");
  const expr* last = main_body(m);
  CHECK(last->callee->kind == expr_kind::function);
  const expr* g = last->args[0];
  CHECK(g->callee->kind == expr_kind::global);
  const expr* fxy = g->args[0];
  CHECK(fxy->callee->kind == expr_kind::call);
  CHECK(fxy->callee->callee == m.find("main")->fn->args[0]);
  const expr* closure_call = fxy->callee->args[0];
  CHECK(closure_call->callee->kind == expr_kind::function);
  CHECK(closure_call->attributes.find("attrs_type_key")->s == "attrs.TestAttrs");
  CHECK(closure_call->callee->attributes.find("Primitive")->i == 1);
  CHECK(closure_call->callee->attributes.find("Composite")->s == "x");
  CHECK(parse_error("def @main(%x) { f(a=1, %x) }").message().find("arguments come before attributes") !=
        std::string::npos);
}

// ---- tuples, projections, functions, if ----------------------------------------------------------

TEST_CASE("parser: tuples and projections") {
  const module m = parse("a",
                         "def @main(%x, %t) {\n"
                         "  %5 = (%x, %x);\n"
                         "  %6 = %5.0;\n"
                         "  %7 = (%6,);\n"
                         "  %8 = ();\n"
                         "  %9 = (%t.1);\n"
                         "  (%7, %8, %9, %x.0)\n}");
  const expr* r = main_body(m);
  REQUIRE(r->kind == expr_kind::tuple);
  REQUIRE(r->args.size() == 4);
  CHECK(r->args[0]->kind == expr_kind::tuple);
  CHECK(r->args[0]->args.size() == 1);
  CHECK(r->args[0]->args[0]->kind == expr_kind::tuple_get);
  CHECK(r->args[0]->args[0]->index == 0);
  CHECK(r->args[0]->args[0]->args[0]->args.size() == 2);
  CHECK(r->args[1]->args.empty());
  CHECK(r->args[2]->kind == expr_kind::tuple_get);  // parentheses alone make no tuple
  CHECK(r->args[2]->index == 1);
  CHECK(r->args[3]->index == 0);
  CHECK(r->args[3]->args[0] == m.find("main")->fn->args[0]);
}

TEST_CASE("parser: closures, parameter attributes, type parameters, if") {
  const module m = parse("a",
                         "def @id[A](%v: A) -> A { %v }\n"
                         "def @main(%c: bool, %x: Tensor[(?, 3), float32]) {\n"
                         "  %0 = fn (%a {virtual_device=meta[VirtualDevice][0]},  // global\n"
                         "           virtual_device=meta[VirtualDevice][1], Primitive=1) -> Tensor[(?, 3), float32] {\n"
                         "    add(%a, %a)\n"
                         "  };\n"
                         "  if (%c) { %0(%x) } else { %1 = negative(%x); %1 }\n}");
  const expr* idf = m.find("id")->fn;
  CHECK(idf->args[0]->annotated.k == type::kind::named);
  CHECK(idf->ret.name == "A");
  const expr* main = m.find("main")->fn;
  CHECK(main->args[1]->annotated.shape == std::vector<std::int64_t>{-1, 3});
  const expr* ife = main->body;
  REQUIRE(ife->kind == expr_kind::if_else);
  CHECK(ife->args[0] == main->args[0]);
  const expr* clo = ife->args[1]->callee;
  REQUIRE(clo->kind == expr_kind::function);
  CHECK(clo->args[0]->attributes.find("virtual_device")->meta == meta_ref{"VirtualDevice", 0});
  CHECK(clo->attributes.find("virtual_device")->meta == meta_ref{"VirtualDevice", 1});
  CHECK(clo->attributes.find("Primitive")->i == 1);
  CHECK(clo->ret.str() == "Tensor[(?, 3), float32]");
  CHECK(clo->body->args[0] == clo->args[0]);
  CHECK(ife->args[2]->callee->name == "negative");
}

TEST_CASE("parser: match gives a clear error") {
  const relay::error e = parse_error("def @f(%x) {\n  match %x { _ => 1 }\n}");
  CHECK(e.where() == location{2, 3});
  CHECK(e.message().find("match is not supported") == 0);
}

TEST_CASE("parser: binary operators desugar with precedence") {
  const module m = parse("a", "def @main(%a, %b, %c) { %a + %b * %c - %a / %b < %c == %a - -%b }");
  // ((a + b*c) - a/b) < c  ==  (a - negative(b))
  const expr* eq = main_body(m);
  CHECK(eq->callee->name == "equal");
  const expr* lt = eq->args[0];
  CHECK(lt->callee->name == "less");
  const expr* sub = lt->args[0];
  CHECK(sub->callee->name == "subtract");
  CHECK(sub->args[0]->callee->name == "add");
  CHECK(sub->args[0]->args[1]->callee->name == "multiply");
  CHECK(sub->args[1]->callee->name == "divide");
  CHECK(eq->args[1]->callee->name == "subtract");
  CHECK(eq->args[1]->args[1]->callee->name == "negative");
  const module n = parse("a", "def @main(%a) { %a -1 }");  // after an operand, `-` is the operator
  CHECK(main_body(n)->callee->name == "subtract");
  CHECK(main_body(n)->args[1]->data->bytes == le_bytes<std::int32_t>(1));
}

TEST_CASE("parser: variable names from real dumps") {
  const module m =
      parse("a",
            "def @main(%bert/encoder/layer_._0/x: float32, %LAYERTYPE.CONV0_weight, %onnx::Conv_0, %tfl.quantize, "
            "%x:float32) {\n"
            "  %0 = (%bert/encoder/layer_._0/x, %LAYERTYPE.CONV0_weight, %onnx::Conv_0, %tfl.quantize, %x);\n"
            "  %0.4\n}");
  const expr* fn = m.find("main")->fn;
  REQUIRE(fn->args.size() == 5);
  CHECK(fn->args[0]->name == "bert/encoder/layer_._0/x");
  CHECK(fn->args[1]->name == "LAYERTYPE.CONV0_weight");
  CHECK(fn->args[2]->name == "onnx::Conv_0");
  CHECK(fn->args[3]->name == "tfl.quantize");
  CHECK(fn->args[4]->name == "x");
  CHECK(fn->args[4]->annotated == type::tensor({}, dtype::float32()));
  const expr* t = fn->body->args[0];
  for (std::size_t i = 0; i < 5; ++i) CHECK(t->args[i] == fn->args[i]);
  CHECK(fn->body->index == 4);
}

TEST_CASE("parser: types") {
  const module m =
      parse("a",
            "def @main(%a: Tensor[(1, 3), float32], %b: Tensor[(10), int8], %c: Tensor[(1i64, ?), float16],\n"
            "          %d: bool, %e: (float32, Tensor[(2), uint8]), %f: (int64,), %g: fn (float32) -> (),\n"
            "          %h: _, %i: Tuple[float32, int32], %j: Tensor[(), float32], %k: float32x4) { %a }");
  const auto& p = m.find("main")->fn->args;
  CHECK(p[0]->annotated.str() == "Tensor[(1, 3), float32]");
  CHECK(p[1]->annotated.str() == "Tensor[(10), int8]");
  CHECK(p[2]->annotated.shape == std::vector<std::int64_t>{1, -1});
  CHECK(p[2]->annotated.dt == dtype{dtype::float_code, 16, 1});
  CHECK(p[3]->annotated == type::tensor({}, dtype::boolean()));
  CHECK(p[4]->annotated.str() == "(float32, Tensor[(2), uint8])");
  CHECK(p[5]->annotated.str() == "(int64,)");
  CHECK(p[6]->annotated.str() == "fn (float32) -> ()");
  CHECK(p[7]->annotated.k == type::kind::incomplete);
  CHECK(p[8]->annotated.str() == "(float32, int32)");
  CHECK(p[9]->annotated.str() == "float32");
  CHECK(p[10]->annotated.dt.lanes == 4);
  CHECK(parse_error("def @main(%a: Tensor[(1), floaty32]) { %a }").message() == "unknown dtype 'floaty32'");
}

TEST_CASE("parser: graph variables are scoped, shadowed, and must be defined") {
  const module m = parse("a",
                         "def @main(%x) {\n"
                         "  %0 = exp(%x);\n"
                         "  %1 = fn (%p) { %0 = log(%p); %0 };\n"  // shadows %0 inside the closure only
                         "  %2 = %1(%0);\n"
                         "  %2\n}");
  const expr* call = main_body(m);
  CHECK(call->args[0]->callee->name == "exp");
  CHECK(call->callee->body->callee->name == "log");
  relay::error e = parse_error("def @main(%x) {\n  %1 = fn (%p) { %0 = log(%p); %0 };\n  %0\n}");
  CHECK(e.where() == location{3, 3});
  CHECK(e.message() == "%0 is not defined");
  CHECK(parse_error("def @main(%x) { add(%x, %y) }").message() == "%y is not defined");
  CHECK(parse_error("def @main(%x, %x) { %x }").message().find("declared twice") != std::string::npos);
  // Outer bindings are visible in closures.
  const module c = parse("a", "def @main(%x) { %0 = exp(%x); %1 = fn () { %0 }; %1 }");
  CHECK(main_body(c)->body->callee->name == "exp");
}

// ---- errors --------------------------------------------------------------------------------------

TEST_CASE("parser: errors name the file, line and column and show a caret") {
  const std::string text = "def @main(%x: Tensor[(1, 4), float32]) {\n  %0 = nn.dense(%x, %x;\n  %0\n}";
  const relay::error e = parse_error(text, "model.relay");
  CHECK(e.file() == "model.relay");
  CHECK(e.where() == location{2, 23});
  CHECK(e.message() == "expected ')' to close the call of nn.dense, found ';'");
  CHECK(std::string(e.what()) ==
        "model.relay:2:23: error: expected ')' to close the call of nn.dense, found ';'\n"
        "    %0 = nn.dense(%x, %x;\n" +
            std::string(2 + 22, ' ') + "^");

  const relay::error tab = parse_error("def @main() {\n\tf(1,, 2)\n}");
  CHECK(tab.where() == location{2, 6});
  CHECK(tab.message() == "expected an expression, found ','");
  CHECK(std::string(tab.what()).ends_with("\n  \tf(1,, 2)\n  \t    ^"));

  CHECK(parse_error("def @main() { f(1) ").message() ==
        "expected '}' to close the body of @main, found the end of the input");
  CHECK(parse_error("def main() { 1 }").message() == "expected a global name such as @main after 'def', found 'main'");
  CHECK(parse_error("def @main() { f(\"abc) }").message().find("unterminated string") == 0);
  CHECK(parse_error("def @main() { f($) }").message() == "unexpected character '$'");
  CHECK(parse_error("def @main() { f(\x01) }").message() == "unexpected character byte 0x01");
  CHECK(parse_error("#[foo]\ndef @main() { 1 }").message().find("unknown attribute '#[foo]'") == 0);
  CHECK(parse_error("def @main() { 1 }\ndef @g() { 2 }\n%3").message().find("expected 'def', 'type' or the end") == 0);
  CHECK(parse_error("def @main(%x) { %x(%x }").message() == "expected ')' to close the call of %x, found '}'");

  // No position: a file that cannot be read.
  try {
    parse_file("/nonexistent/dir/x.relay");
    FAIL("read a missing file");
  } catch (const relay::error& err) {
    CHECK(std::string(err.what()) == "error: cannot read /nonexistent/dir/x.relay");
    CHECK(err.where() == location{});
  }
}

TEST_CASE("parser: nesting is bounded, long chains are not (on a small stack)") {
  // The bounded nesting is parsed by recursion (500 levels: at -O0 under ASan more than the small
  // stack), on the main stack; what must not recurse, on the small one.
  auto nested = [](int n, const std::string& open, const std::string& mid, const std::string& close) {
    std::string s;
    for (int i = 0; i < n; ++i) s += open;
    s += mid;
    for (int i = 0; i < n; ++i) s += close;
    return s;
  };
  for (int n : {fuse::test::small_stack_chain, 600}) {
    CAPTURE(n);
    CHECK(parse_error("def @main(%x) { " + nested(n, "(", "%x", ")") + " }").message() ==
          "nesting deeper than 500 levels");
    CHECK(parse_error("def @main(%x) { " + nested(n, "f(", "%x", ")") + " }").message() ==
          "nesting deeper than 500 levels");
    CHECK(parse_error("def @main(%x) { f(%x, a=" + nested(n, "[", "1", "]") + ") }").message() ==
          "nesting deeper than 500 levels");
    CHECK(parse_error("def @main(%x: " + nested(n, "(", "float32", ",)") + ") { %x }").message() ==
          "nesting deeper than 500 levels");
    CHECK(parse_error("def @main(%x) { " + nested(n, "fn () { ", "%x", " }") + " }").message() ==
          "nesting deeper than 500 levels");
    CHECK(parse_error("def @main(%x) { " + nested(n, "-", "%x", "") + " }").message() ==
          "nesting deeper than 500 levels");
    CHECK(parse_error("def @main(%x) { " + nested(n, "{", "%x", "}") + " }").message() ==
          "nesting deeper than 500 levels");
  }
  // Within the bound.
  const module ok = parse("a", "def @main(%x) { " + nested(120, "f(", "%x", ")") + " }");
  CHECK(main_body(ok)->callee->name == "f");
  fuse::test::on_small_stack([&] {
    // Comments nest to any depth without recursion.
    CHECK(parse("a", nested(fuse::test::small_stack_chain, "/*", "", "*/") + "def @main() { 1 }").defs.size() == 1);

    // Long chains of bindings, lets and a sum: constant stack depth.
    const int n = fuse::test::small_stack_chain;
    const module big = parse("big", fuse::test::add_chain_program("%x"));
    const expr* e = main_body(big);
    int length = 0;
    while (e->kind == expr_kind::call) e = e->args[0], ++length;
    CHECK(length == n);
    CHECK(big.nodes.size() < 3 * static_cast<std::size_t>(n) + 10);

    std::string lets = "def @main(%x) {\n";
    for (int i = 0; i < n; ++i) lets += "  let %v" + std::to_string(i) + " = %x;\n";
    lets += "  %v7\n}\n";
    CHECK(main_body(parse("lets", lets))->kind == expr_kind::let);

    std::string sum = "def @main(%x) { %x";
    for (int i = 0; i < n; ++i) sum += " + %x";
    sum += " }";
    CHECK(main_body(parse("sum", sum))->callee->name == "add");
  });
}

// ---- TVM's programs and the seeds ----------------------------------------------------------------

TEST_CASE("parser: every program of the corpus") {
  const std::filesystem::path dir = FUSE_RELAY_CORPUS_DIR;
  if (!std::filesystem::is_directory(dir)) {
    MESSAGE("skipped: no corpus at " << dir.string());
    return;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.path().extension() == ".relay") files.push_back(f.path());
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 12);
  int parsed = 0;
  for (const auto& f : files) {
    CAPTURE(f.string());
    if (f.filename().string().starts_with("16_adt_match")) {
      // ADTs and match: the type definition is read, the first match is refused clearly.
      const std::string text = read_file(f);
      const relay::error e = parse_error(text, f.string());
      CHECK(e.message().find("match is not supported") == 0);
      CHECK(text.substr(text.find("match %x"), 8) == "match %x");
      CHECK(e.where() == source("x", text).locate(text.find("match %x")));
      continue;
    }
    module m;
    try {
      m = parse_file(f.string());
    } catch (const relay::error& e) {
      FAIL(std::string(e.what()));
    }
    REQUIRE(m.find("main"));
    CHECK(m.find("main")->fn->kind == expr_kind::function);
    ++parsed;
  }
  MESSAGE(parsed << " corpus programs parsed");
}

TEST_CASE("parser: details of corpus programs") {
  const std::filesystem::path dir = FUSE_RELAY_CORPUS_DIR;
  if (!std::filesystem::is_directory(dir)) {
    MESSAGE("skipped: no corpus at " << dir.string());
    return;
  }
  SUBCASE("09: printer output with ty= and span= everywhere") {
    const module m = parse_file((dir / "09_printer_output_ty_span_nested_fns.relay").string());
    const expr* tuple = main_body(m);
    REQUIRE(tuple->kind == expr_kind::tuple);
    CHECK(tuple->annotated.k == type::kind::tuple);
    CHECK(tuple->span.ends_with(":19:20"));
    const expr* cublas = tuple->args[1]->callee;
    REQUIRE(cublas->kind == expr_kind::function);
    CHECK(cublas->attributes.find("Compiler")->s == "cublas");
    CHECK(cublas->annotated.k == type::kind::func);
    const expr* dense = tuple->args[0]->args[0];
    CHECK(dense->callee->name == "nn.dense");
    CHECK(dense->args[1]->meta->index == 0);
    CHECK(dense->args[1]->annotated == type::tensor({2304, 768}, dtype{dtype::float_code, 16, 1}));
  }
  SUBCASE("03: batch_norm projections") {
    const module m = parse_file((dir / "03_resnet50_conv2d_batchnorm.relay").string());
    const expr* add = main_body(m);
    CHECK(add->callee->name == "add");
    CHECK(add->args[1]->meta->index == 258);
  }
  SUBCASE("10: a bare fn with let bindings") {
    const module m = parse_file((dir / "10_let_bindings_tuple_types_fn_expr.relay").string());
    const expr* fn = m.find("main")->fn;
    CHECK(fn->args.size() == 4);
    CHECK(fn->body->kind == expr_kind::let);
    CHECK(fn->ret.k == type::kind::tuple);
  }
}

TEST_CASE("parser: the programs in the seeds") {
  const std::filesystem::path dir = FUSE_SEEDS_DIR;
  if (!std::filesystem::is_directory(dir)) {
    MESSAGE("skipped: no seeds at " << dir.string());
    return;
  }
  int total = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".txt") continue;
    const std::string name = f.path().filename().string();
    std::string text = read_file(f.path());
    std::vector<std::string> programs;
    if (name.starts_with("001")) text = restore_ty_comments(text);
    if (name.starts_with("002")) programs.push_back(fuse::test::wrap_binding_block(text));
    else programs = embedded_programs(text);
    CAPTURE(name);
    if (name.starts_with("000")) CHECK(programs.size() == 2);
    if (name.starts_with("001")) CHECK(programs.size() >= 12);
    for (const std::string& p : programs) {
      CAPTURE(p);
      try {
        const module m = parse(name, p);
        CHECK(m.find("main"));
      } catch (const relay::error& e) {
        FAIL(std::string(e.what()));
      }
      ++total;
    }
    if (name.starts_with("002")) {
      // The quantized BERT block: spans, scalar ty= comments, a 3-way split.
      const module m = parse(name, programs.at(0));
      CHECK(m.find("main")->fn->args.size() == 2);  // %19 and %input_mask
      const expr* last = main_body(m);
      CHECK(last->callee->name == "reshape");
      CHECK(last->attributes.find("newshape")->items.size() == 2);
    }
    if (name.starts_with("000")) {
      const module m = parse(name, programs.at(0));
      const expr* add = main_body(m);
      CHECK(add->callee->name == "add");
      const expr* sig = add->args[0];
      CHECK(sig->callee->name == "sigmoid");
      CHECK(sig->args[0]->kind == expr_kind::tuple_get);
      const expr* split = sig->args[0]->args[0];
      CHECK(split->callee->name == "split");
      CHECK(split->attributes.find("indices_or_sections")->literal == dtype::int64());
      const module fused = parse(name, programs.at(1));
      CHECK(main_body(fused)->annotated.str() == "Tensor[(1, 10), float32]");
    }
  }
  MESSAGE(total << " seed programs parsed");
  CHECK(total >= 15);
}

// ---- truncated and damaged input -----------------------------------------------------------------

TEST_CASE("parser: every prefix of real programs gives a module or an error") {
  std::vector<std::string> texts = {
      "fn (%X: Tensor[(1, 10), float32],\n    %y: Tensor[(30, 10), float32])\n    -> Tensor[(1, 10), float32] {\n"
      "  %0 = nn.dense(%X, %y, units=None)\n  %1 = split(%0, indices_or_sections=int64(3), axis=1)\n  %2 = %1.0\n"
      "  %3 = sigmoid(%2)\n  %4 = %1.1 # ty=Tensor[(1, 10), float32]\n  %5 = tanh(%4)\n  %9 = add(%3, %5)\n  %9\n}\n"};
  const std::filesystem::path seeds = FUSE_SEEDS_DIR, corpus = FUSE_RELAY_CORPUS_DIR;
  if (std::filesystem::is_directory(seeds))
    for (const auto& f : std::filesystem::directory_iterator(seeds))
      if (f.path().filename().string().starts_with("000"))
        texts.push_back(embedded_programs(read_file(f.path())).at(0));
  if (std::filesystem::exists(corpus / "09_printer_output_ty_span_nested_fns.relay"))
    texts.push_back(read_file(corpus / "09_printer_output_ty_span_nested_fns.relay"));
  if (std::filesystem::exists(corpus / "08_primitive_fns_virtual_device_comments.relay"))
    texts.push_back(read_file(corpus / "08_primitive_fns_virtual_device_comments.relay"));
  texts.push_back(std::string(one_constant_program) + "#[metadata]\n" + one_constant_json);
  for (const std::string& t : texts)
    for (std::size_t n = 0; n <= t.size(); ++n) parse_or_error(t.substr(0, n));
}

TEST_CASE("parser: random damage gives a module or an error") {
  std::vector<std::string> texts = {
      "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(1, 4), float32], %w {virtual_device=meta[VirtualDevice][0]}) {\n"
      "  %0 = nn.dense(%x, meta[relay.Constant][0] /* ty=Tensor[(4, 4), float32] */, units=None) /* ty=Tensor[(1, 4), "
      "float32] */;\n"
      "  %1 = fn (%p: Tensor[(1, 4), float32], Primitive=1) { let %q = negative(%p); (%q, %q.0) };\n"
      "  %2 = %1(%0, f=[1, [2i64, 0.5f]], s=\"a\\\"b\", v=VirtualDevice(k='x'));\n"
      "  if (True) { %2.1 } else { %x * -1f + 2 }\n}\n"};
  const std::filesystem::path corpus = FUSE_RELAY_CORPUS_DIR;
  for (const char* f : {"09_printer_output_ty_span_nested_fns.relay", "14_closure_call_with_attrs_type_key.relay"})
    if (std::filesystem::exists(corpus / f)) texts.push_back(read_file(corpus / f));
  auto g = fuse::test::rng(0x7e1a7);
  const std::string interesting = "()[]{},;:=.%@#/*\"'-+0123456789afi \n\\";
  for (int round = 0; round < 3000; ++round) {
    std::string t = texts[g() % texts.size()];
    const int edits = 1 + static_cast<int>(g() % 4);
    for (int k = 0; k < edits && !t.empty(); ++k) {
      const std::size_t at = g() % t.size();
      const char c = (g() % 3 == 0) ? static_cast<char>(g() & 0xff) : interesting[g() % interesting.size()];
      switch (g() % 3) {
        case 0: t[at] = c; break;
        case 1: t.insert(t.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        default: t.erase(at, 1 + g() % 8); break;
      }
    }
    parse_or_error(t);
  }
}

// ---- findings of the libFuzzer target (tests/fuzz/fuzz_relay.cpp), kept as regressions -------

TEST_CASE("fuzz findings: what type-checks prints to text that parses back to the same module") {
  const char* programs[] = {
      // An integer attribute of a width without a literal suffix (int63): printed `int63(3)`,
      // not the `3i63` the lexer refuses.
      "fn (%x: Tensor[(1, 30), float32]) { %0 = split(%x, indices_or_sections=int63(3), axis=1); %0.1 }",
      "fn (%x: Tensor[(1, 30), float32]) { %0 = split(%x, indices_or_sections=int4(3), axis=1); %0.1 }",
      // `e1; e2` binds e1 to a variable nothing uses: the printer gave it no scope and threw
      // std::out_of_range.
      "fn (%x: Tensor[(2), float32]) { %0 = add(%x, %x); exp(%0); negative(%x) }",
  };
  for (const char* text : programs) {
    CAPTURE(text);
    module m = parse("finding.relay", text);
    typecheck(m);
    const std::string printed = print(m);
    INFO(printed);
    module again = parse("printed.relay", printed);
    typecheck(again);
    CHECK(structurally_equal(m, again));
  }
}

TEST_CASE("fuzz findings: an operator used as a value is an error, not typed by its annotation") {
  // The annotation gave the bare name a tensor type; the printer then wrote a program that did
  // not type-check again.
  for (const char* text : {"fn (%x: Tensor[(1, 10), float32]) { %6 = foo /* ty=Tensor[(1, 10), float32] */; exp(%6) }",
                           "fn (%x: Tensor[(1, 10), float32]) { %0 = exp /* ty=Tensor[(1, 10), float32] */; %0 }"}) {
    CAPTURE(text);
    module m = parse("finding.relay", text);
    try {
      typecheck(m);
      FAIL("no error");
    } catch (const error& e) {
      CHECK_MESSAGE(std::string(e.what()).find("used as a value: fuse runs operators only where they are called") !=
                        std::string::npos,
                    e.what());
      CHECK(e.where().col == 42);
    }
  }
}
