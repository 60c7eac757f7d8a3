// Type relations of the op registry and the type checker, on programs built node by node (the
// parser's own tests cover the text).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <fuse/relay/attributes.hpp>
#include <fuse/relay/ops.hpp>
#include <fuse/relay/type_relations.hpp>
#include <fuse/relay/typecheck.hpp>

#include "support/small_stack.hpp"

using namespace fuse::relay;

namespace {

type tensor(std::vector<std::int64_t> shape, const char* dt = "float32") {
  return type::tensor(std::move(shape), *dtype::parse(dt));
}

/// A module under construction: variables, op calls, and one definition around a body.
struct builder {
  module m = [] {
    module x;
    x.src = source("test.relay", "line one\nline two\n");
    return x;
  }();
  std::vector<expr*> params;
  int line = 1;

  expr* var(const std::string& name, type t) {
    expr* v = m.make(expr_kind::var, {1, 1});
    v->name = name;
    v->annotated = std::move(t);
    params.push_back(v);
    return v;
  }
  expr* call(const std::string& op, std::vector<expr*> args, std::vector<std::pair<std::string, attr_value>> at = {}) {
    expr* c = m.make(expr_kind::call, {line, 1});
    expr* o = m.make(expr_kind::op, {line, 1});
    o->name = op;
    c->callee = o;
    c->args = std::move(args);
    c->attributes.items = std::move(at);
    return c;
  }
  expr* tuple(std::vector<expr*> fields) {
    expr* t = m.make(expr_kind::tuple, {line, 1});
    t->args = std::move(fields);
    return t;
  }
  expr* get(expr* t, std::int64_t i) {
    expr* g = m.make(expr_kind::tuple_get, {line, 1});
    g->args = {t};
    g->index = i;
    return g;
  }
  /// Defines @main(params) { body } and type-checks the module; returns the body's type.
  type check(expr* body) {
    expr* fn = m.make(expr_kind::function, {1, 1});
    fn->args = params;
    fn->body = body;
    m.defs.push_back({"main", fn, {1, 1}});
    typecheck(m);
    return body->checked;
  }
};

attr_value ints(std::vector<std::int64_t> v) {
  attr_value a;
  a.k = attr_value::kind::array;
  for (auto x : v) a.items.push_back(attr::integer(x));
  return a;
}

std::string error_of(builder& b, expr* body) {
  try {
    b.check(body);
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("types: dense, matmul, batch_matmul and bias_add") {
  {
    builder b;
    CHECK(b.check(b.call("nn.dense", {b.var("x", tensor({4, 10})), b.var("w", tensor({30, 10}))})) == tensor({4, 30}));
  }
  {
    builder b;
    auto* d = b.call("nn.dense", {b.var("x", tensor({4, 10}, "int8")), b.var("w", tensor({30, 10}, "int8"))},
                     {{"out_dtype", attr::string("int32")}});
    CHECK(b.check(d) == tensor({4, 30}, "int32"));
  }
  {
    builder b;
    const std::string e = error_of(b, b.call("nn.dense", {b.var("x", tensor({4, 10})), b.var("w", tensor({30, 11}))}));
    CHECK(e.find("test.relay:1:1: error: nn.dense: the reduction extents differ") != std::string::npos);
    CHECK(e.find("\n  line one\n  ^") != std::string::npos);  // the line and its caret
  }
  {
    builder b;
    auto* m = b.call("nn.matmul", {b.var("a", tensor({10, 4})), b.var("b", tensor({10, 7}))},
                     {{"transpose_a", attr::boolean(true)}});
    CHECK(b.check(m) == tensor({4, 7}));
  }
  {
    builder b;  // transpose_b=True as TVM's text writes it; a batch of 1 broadcasts
    auto* m = b.call("nn.batch_matmul", {b.var("a", tensor({1, 5, 8})), b.var("b", tensor({12, 3, 8}))},
                     {{"transpose_b", attr::boolean(true)}});
    CHECK(b.check(m) == tensor({12, 5, 3}));
  }
  {
    builder b;  // BatchMatmulAttrs' C++ default: transpose_b=False, a x b
    auto* m = b.call("nn.batch_matmul", {b.var("a", tensor({1, 5, 8})), b.var("b", tensor({12, 8, 3}))});
    CHECK(b.check(m) == tensor({12, 5, 3}));
    builder c;
    const std::string e =
        error_of(c, c.call("nn.batch_matmul", {c.var("a", tensor({1, 5, 8})), c.var("b", tensor({12, 3, 8}))}));
    CHECK(e.find("the reduction extents differ") != std::string::npos);
  }
  {
    builder b;
    const std::string e =
        error_of(b, b.call("nn.batch_matmul", {b.var("a", tensor({2, 5, 8})), b.var("b", tensor({3, 3, 8}))},
                           {{"transpose_b", attr::boolean(true)}}));
    CHECK(e.find("batch extents 2 and 3 do not broadcast") != std::string::npos);
  }
  {
    builder b;
    auto* x = b.var("x", tensor({2, 6, 5}));
    CHECK(b.check(b.call("nn.bias_add", {x, b.var("b", tensor({6}))})) == tensor({2, 6, 5}));
    builder b2;
    const std::string e =
        error_of(b2, b2.call("nn.bias_add", {b2.var("x", tensor({2, 6, 5})), b2.var("b", tensor({5}))}));
    CHECK(e.find("bias of 5 elements for axis 1 of extent 6") != std::string::npos);
  }
}

TEST_CASE("types: broadcasting, comparisons, casts and where") {
  {
    builder b;
    CHECK(b.check(b.call("add", {b.var("a", tensor({4, 1})), b.var("b", tensor({3}))})) == tensor({4, 3}));
  }
  {
    builder b;
    CHECK(b.check(b.call("less", {b.var("a", tensor({4, 3})), b.var("b", tensor({}))})) == tensor({4, 3}, "bool"));
  }
  {
    builder b;
    const std::string e = error_of(b, b.call("multiply", {b.var("a", tensor({4, 2})), b.var("b", tensor({3}))}));
    CHECK(e.find("do not broadcast") != std::string::npos);
  }
  {
    builder b;
    const std::string e = error_of(b, b.call("add", {b.var("a", tensor({4})), b.var("b", tensor({4}, "int8"))}));
    CHECK(e.find("different dtypes, float32 and int8") != std::string::npos);
  }
  {
    builder b;
    CHECK(b.check(b.call("cast", {b.var("a", tensor({4}))}, {{"dtype", attr::string("int8")}})) == tensor({4}, "int8"));
  }
  {
    builder b;
    auto* w = b.call("where", {b.var("c", tensor({4, 1}, "bool")), b.var("a", tensor({3})), b.var("b", tensor({}))});
    CHECK(b.check(w) == tensor({4, 3}));
  }
  {
    builder b;
    const std::string e = error_of(b, b.call("exp", {b.var("a", tensor({4}, "int32"))}));
    CHECK(e.find("needs a floating-point input, not int32") != std::string::npos);
  }
  {
    builder b;
    CHECK(b.check(b.call("right_shift", {b.var("a", tensor({4, 1}, "int64")), b.var("b", tensor({3}, "int64"))})) ==
          tensor({4, 3}, "int64"));
  }
  {
    builder b;
    const std::string e = error_of(b, b.call("left_shift", {b.var("a", tensor({4})), b.var("b", tensor({4}))}));
    CHECK(e.find("needs integer operands, not float32") != std::string::npos);
  }
  {
    builder b;
    const std::string e =
        error_of(b, b.call("right_shift", {b.var("a", tensor({4}, "int32")), b.var("b", tensor({4}, "int8"))}));
    CHECK(e.find("different dtypes, int32 and int8") != std::string::npos);
  }
}

TEST_CASE("types: views (reshape codes, split, transpose, squeeze, strided_slice, take, concatenate)") {
  struct reshape_case {
    std::vector<std::int64_t> in, codes, out;
  };
  for (const auto& rc : std::vector<reshape_case>{{{2, 3, 4}, {-1, 4}, {6, 4}},
                                                  {{2, 3, 4}, {0, -1}, {2, 12}},
                                                  {{2, 3, 4}, {-3, 4}, {6, 4}},
                                                  {{2, 3, 4}, {0, -2}, {2, 3, 4}},
                                                  {{2, 12}, {0, -4, 3, -1}, {2, 3, 4}},
                                                  {{1, 128, 768}, {1, 128, 12, 64}, {1, 128, 12, 64}},
                                                  {{7}, {7, 1}, {7, 1}}}) {
    builder b;
    CAPTURE(rc.codes.size());
    CHECK(b.check(b.call("reshape", {b.var("x", tensor(rc.in))}, {{"newshape", ints(rc.codes)}})) == tensor(rc.out));
  }
  {
    builder b;
    const std::string e = error_of(b, b.call("reshape", {b.var("x", tensor({2, 3}))}, {{"newshape", ints({4, -1})}}));
    CHECK(e.find("cannot infer the -1") != std::string::npos);
  }
  {
    builder b;  // the seed's split: three [1, 10] sections of dense's [1, 30]
    auto* s = b.call("split", {b.var("x", tensor({1, 30}))},
                     {{"indices_or_sections", attr::integer(3)}, {"axis", attr::integer(1)}});
    CHECK(b.check(b.get(s, 2)) == tensor({1, 10}));
    CHECK(s->checked == type::tuple({tensor({1, 10}), tensor({1, 10}), tensor({1, 10})}));
  }
  {
    builder b;
    auto* s = b.call("split", {b.var("x", tensor({7}))}, {{"indices_or_sections", ints({2, 5})}});
    CHECK(b.check(s) == type::tuple({tensor({2}), tensor({3}), tensor({2})}));
  }
  {
    builder b;
    const std::string e = error_of(b, b.call("split", {b.var("x", tensor({1, 30}))},
                                             {{"indices_or_sections", attr::integer(4)}, {"axis", attr::integer(1)}}));
    CHECK(e.find("does not divide into 4 sections") != std::string::npos);
  }
  {
    builder b;
    auto* s = b.call("split", {b.var("x", tensor({1, 30}))},
                     {{"indices_or_sections", attr::integer(3)}, {"axis", attr::integer(1)}});
    const std::string e = error_of(b, b.get(s, 3));
    CHECK(e.find("projection .3 of a tuple of 3 fields") != std::string::npos);
  }
  {
    builder b;
    CHECK(b.check(b.call("transpose", {b.var("x", tensor({2, 3, 4}))})) == tensor({4, 3, 2}));
    builder b2;
    CHECK(b2.check(b2.call("transpose", {b2.var("x", tensor({2, 3, 4}))}, {{"axes", ints({0, 2, 1})}})) ==
          tensor({2, 4, 3}));
    builder b3;
    const std::string e =
        error_of(b3, b3.call("transpose", {b3.var("x", tensor({2, 3, 4}))}, {{"axes", ints({0, 0, 1})}}));
    CHECK(e.find("not a permutation") != std::string::npos);
  }
  {
    builder b;
    CHECK(b.check(b.call("squeeze", {b.var("x", tensor({1, 3, 1}))})) == tensor({3}));
    builder b2;
    CHECK(b2.check(b2.call("squeeze", {b2.var("x", tensor({1, 3, 1}))}, {{"axis", ints({-1})}})) == tensor({1, 3}));
    builder b3;
    CHECK(error_of(b3, b3.call("squeeze", {b3.var("x", tensor({1, 3}))}, {{"axis", ints({1})}})).find("is not 1") !=
          std::string::npos);
  }
  {
    builder b;  // begin 1, end -1, stride 2 over 10: elements 1, 3, 5, 7
    auto* s = b.call("strided_slice", {b.var("x", tensor({10, 4}))},
                     {{"begin", ints({1})}, {"end", ints({-1})}, {"strides", ints({2})}});
    CHECK(b.check(s) == tensor({4, 4}));
    builder b2;  // negative stride: from 8 down to (not including) 2: 8, 5
    auto* s2 = b2.call("strided_slice", {b2.var("x", tensor({10}))},
                       {{"begin", ints({8})}, {"end", ints({2})}, {"strides", ints({-3})}});
    CHECK(b2.check(s2) == tensor({2}));
  }
  {
    builder b;
    auto* t =
        b.call("take", {b.var("x", tensor({5, 6})), b.var("i", tensor({2, 3}, "int32"))}, {{"axis", attr::integer(1)}});
    CHECK(b.check(t) == tensor({5, 2, 3}));
  }
  {
    builder b;
    auto* c = b.call("concatenate", {b.tuple({b.var("a", tensor({2, 3})), b.var("b", tensor({2, 5}))})},
                     {{"axis", attr::integer(-1)}});
    CHECK(b.check(c) == tensor({2, 8}));
  }
}

TEST_CASE("types: reductions, softmax, norms, qnn") {
  {
    builder b;
    CHECK(b.check(b.call("mean", {b.var("x", tensor({2, 3, 4}))},
                         {{"axis", ints({-1})}, {"keepdims", attr::boolean(true)}})) == tensor({2, 3, 1}));
    builder b2;
    CHECK(b2.check(b2.call("sum", {b2.var("x", tensor({2, 3, 4}))})) == tensor({}));
    builder b3;
    CHECK(b3.check(b3.call("max", {b3.var("x", tensor({2, 3, 4}))},
                           {{"axis", ints({1})}, {"exclude", attr::boolean(true)}})) == tensor({3}));
  }
  {
    builder b;
    auto* bn = b.call("nn.batch_norm", {b.var("x", tensor({2, 6, 5})), b.var("g", tensor({6})), b.var("b", tensor({6})),
                                        b.var("m", tensor({6})), b.var("v", tensor({6}))});
    CHECK(b.check(b.get(bn, 0)) == tensor({2, 6, 5}));
  }
  {
    builder b;
    auto* q =
        b.call("qnn.quantize", {b.var("x", tensor({4, 8})), b.var("s", tensor({})), b.var("z", tensor({}, "int32"))});
    CHECK(b.check(q) == tensor({4, 8}, "int8"));
  }
  {
    builder b;
    auto* q = b.call("qnn.batch_matmul",
                     {b.var("a", tensor({12, 128, 64}, "int8")), b.var("b", tensor({12, 128, 64}, "int8")),
                      b.var("za", tensor({}, "int32")), b.var("zb", tensor({}, "int32")), b.var("sa", tensor({})),
                      b.var("sb", tensor({}))},
                     {{"transpose_b", attr::boolean(true)}});
    CHECK(b.check(q) == tensor({12, 128, 128}, "int32"));
  }
}

TEST_CASE("types: annotations are checked, unsupported ops named, arity checked") {
  {
    builder b;
    auto* d = b.call("nn.dense", {b.var("x", tensor({4, 10})), b.var("w", tensor({30, 10}))});
    d->annotated = tensor({4, 31});
    const std::string e = error_of(b, d);
    CHECK(e.find("the annotated type Tensor[(4, 31), float32] differs from the inferred type Tensor[(4, 30), float32] "
                 "of nn.dense") != std::string::npos);
  }
  {
    builder b;
    auto* d = b.call("nn.dense", {b.var("x", tensor({-1, 10})), b.var("w", tensor({30, 10}))});
    d->annotated = tensor({4, 30});  // a dynamic extent agrees with any
    CHECK(b.check(d).shape.size() == 2);
  }
  {
    builder b;
    const std::string e =
        error_of(b, b.call("nn.conv2d", {b.var("x", tensor({1, 3, 8, 8})), b.var("w", tensor({4, 3, 3, 3}))}));
    CHECK(e.find("unsupported op nn.conv2d; supported ops: ") != std::string::npos);
    CHECK(e.find("nn.dense") != std::string::npos);
  }
  {
    builder b;
    const std::string e = error_of(b, b.call("add", {b.var("x", tensor({1}))}));
    CHECK(e.find("add takes 2 arguments, not 1") != std::string::npos);
  }
}

TEST_CASE("types: a long chain of bindings is typed without deep recursion") {
  fuse::test::on_small_stack([&] {
    builder b;
    expr* e = b.var("x", tensor({3}));
    for (int i = 0; i < fuse::test::small_stack_chain; ++i) e = b.call(i % 2 ? "exp" : "negative", {e});
    CHECK(b.check(e) == tensor({3}));
  });
}

TEST_CASE("the registry's elementwise ops come from fuse's op table: arity, pattern, attribute defaults") {
  std::size_t listed = 0;
  [&]<class... Op>(fuse::ops::op_list<Op...>) {
    (
        [&] {
          const op_def* d = find_op(Op::name);
          CAPTURE(Op::name);
          if constexpr (!fuse::ops::in_relay<Op>) {
            CHECK(d == nullptr);  // fuse's own (gelu): not a Relay op
          } else {
            ++listed;
            REQUIRE(d != nullptr);
            CHECK(d->min_args == Op::arity);
            CHECK(d->max_args == Op::arity);
            CHECK(d->pattern == Op::pattern);
            CHECK((d->infer == &infer::elementwise<Op>));
          }
        }(),
        ...);
  }(fuse::ops::relay_elementwise{});
  CHECK(listed >= 40);
  CHECK(find_op("nn.leaky_relu")->defaults.size() == 1);
  CHECK(find_op("nn.leaky_relu")->defaults[0].second.number() == 0.25);  // Relay's C++ default
  CHECK(find_op("clip")->defaults.empty());                              // a_min and a_max are required
  CHECK(find_op("add")->pattern == op_pattern::broadcast);
  CHECK(find_op("exp")->pattern == op_pattern::elemwise);
  CHECK(find_op("where")->pattern == op_pattern::broadcast);
  CHECK(find_op("fast_exp") != nullptr);
  // Type relations from the dtype rules: what fuse's builders would reject at compile time.
  {
    builder b;
    CHECK(error_of(b, b.call("abs", {b.var("a", tensor({4}, "bool"))})).find("needs numeric operands, not bool") !=
          std::string::npos);
  }
  {
    builder b;
    CHECK(error_of(b, b.call("logical_and", {b.var("a", tensor({4}, "int32")), b.var("b", tensor({4}, "int32"))}))
              .find("needs bool operands, not int32") != std::string::npos);
  }
  {
    builder b;
    CHECK(error_of(b, b.call("round", {b.var("a", tensor({4}, "int32"))}))
              .find("needs a floating-point input, not int32") != std::string::npos);
  }
  {
    builder b;
    CHECK(b.check(b.call("less", {b.var("a", tensor({4, 1})), b.var("b", tensor({3}))})) == tensor({4, 3}, "bool"));
  }
}
