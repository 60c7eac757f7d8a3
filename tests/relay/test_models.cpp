// The model generators (tools/models): BERT written as TVM v0.19 prints it, in every form, read
// by the frontend (parse + typecheck) and run by its interpreter, against an independent
// double-precision BERT forward written here with plain loops. This proves that the text
// computes the network the generator claims, with the weights it returns.
//
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fuse/relay/interpreter.hpp>
#include <fuse/relay/parser.hpp>
#include <fuse/relay/pipeline.hpp>
#include <fuse/relay/typecheck.hpp>

#include "models/bert.hpp"
#include "relay/tool.hpp"
#include "support/random.hpp"

using namespace fuse::relay;
using models::bert_options;
using models::generated;

namespace {

using form = bert_options::source;
using norm = bert_options::norm;
using qkv_form = bert_options::attention_weights;
using precision = bert_options::precision;

/// The small configuration every form is checked at: 2 layers, batch 2, seq 7, hidden 32,
/// 4 heads, ffn 37, vocab 50.
bert_options small(form f, norm n = norm::op, qkv_form q = qkv_form::separate, precision p = precision::float32,
                   bool spans = true) {
  bert_options o;
  o.layers = 2;
  o.batch = 2;
  o.seq = 7;
  o.hidden = 32;
  o.heads = 4;
  o.ffn = 37;
  o.vocab = 50;
  o.form = f;
  o.layer_norm = n;
  o.qkv = q;
  o.dtype = p;
  o.seed = 20250101;
  o.spans = spans;
  return o;
}

std::string describe(const bert_options& o) {
  std::string s = o.form == form::pytorch ? "pytorch" : "tensorflow";
  s += o.dtype == precision::int8 ? " int8" : " float32";
  if (o.form == form::pytorch && o.dtype == precision::float32)
    s += o.layer_norm == norm::op ? ", nn.layer_norm" : ", layer norm unpacked";
  s += o.qkv == qkv_form::separate ? ", separate Q/K/V" : ", fused QKV";
  if (!o.spans) s += ", no spans";
  return s;
}

bool has_meta_constants(const generated& g) {
  return !g.weights.empty() && g.weights.front().name.starts_with("meta[");
}

/// The module of g, parsed and type-checked (the int8 form's constants bound first).
module read(const generated& g) {
  module m = parse("bert.relay", g.text);
  if (has_meta_constants(g)) bind_params(m, g.weights, "bert weights");
  typecheck(m);
  return m;
}

/// Why the frontend cannot read the form yet ("" when it can).
std::string unreadable(const bert_options& o) {
  try {
    (void)read(models::bert(o));
    return "";
  } catch (const error& e) {
    return e.message().substr(0, 160);
  }
}

// ---- inputs and the interpreter -------------------------------------------------------------------

struct bert_inputs {
  std::vector<std::int64_t> ids, types, mask;  // [batch, seq] each
};

bert_inputs random_inputs(const bert_options& o, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  bert_inputs in;
  for (std::int64_t k = 0; k < o.batch * o.seq; ++k) {
    in.ids.push_back(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(o.vocab)));
    in.types.push_back(static_cast<std::int64_t>(rng() % 2));
  }
  for (std::int64_t b = 0; b < o.batch; ++b) {
    const auto length =
        1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(o.seq));  // one position at least attends
    for (std::int64_t s = 0; s < o.seq; ++s) in.mask.push_back(s < length ? 1 : 0);
  }
  return in;
}

/// Runs @main in the frontend's interpreter, its parameters in order: the data inputs, and the
/// weights as the generator returned them.
std::vector<value> run_interpreter(const module& m, const generated& g, const bert_inputs& in) {
  std::vector<value> args;
  std::size_t w = 0;
  for (const std::string& p : g.parameters) {
    const models::tensor_spec* spec = nullptr;
    for (const auto& s : g.inputs)
      if (s.name == p) spec = &s;
    if (spec) {
      value v = value::tensor(spec->type.dt, spec->type.shape);
      v.i = p == "input_ids" ? in.ids : (p == "attention_mask" || p == "input_mask") ? in.mask : in.types;
      args.push_back(std::move(v));
      continue;
    }
    REQUIRE(w < g.weights.size());
    REQUIRE(g.weights[w].name == p);
    args.push_back(interpreter::from_constant(g.weights[w++].data));
  }
  CHECK(w == (has_meta_constants(g) ? 0 : g.weights.size()));
  return interpreter::flatten(interpreter(m).run("main", args));
}

// ---- the weights by role ---------------------------------------------------------------------------

/// The generator's weights looked up by role (bert_weights.hpp), as doubles or integers.
struct weight_table {
  std::map<std::string, const constant_data*> by_role;

  explicit weight_table(const generated& g) {
    for (std::size_t k = 0; k < g.weights.size(); ++k) by_role[g.roles[k]] = &g.weights[k].data;
  }
  const constant_data& at(const std::string& role) const {
    auto it = by_role.find(role);
    REQUIRE_MESSAGE(it != by_role.end(), "no weight with role " << role);
    return *it->second;
  }
  bool has(const std::string& role) const { return by_role.count(role) != 0; }
  std::vector<double> reals(const std::string& role) const {
    const constant_data& c = at(role);
    std::vector<double> v(static_cast<std::size_t>(c.elements()));
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = c.real(k);
    return v;
  }
  std::vector<std::int64_t> integers(const std::string& role) const {
    const constant_data& c = at(role);
    std::vector<std::int64_t> v(static_cast<std::size_t>(c.elements()));
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = c.integer(k);
    return v;
  }
};

/// A matrix [rows][cols] row-major, transposed.
std::vector<double> transpose(const std::vector<double>& v, std::size_t rows, std::size_t cols) {
  std::vector<double> t(v.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
  return t;
}

/// One linear of the network: W [out][in] and b in double, and for the int8 form the
/// quantized weight [out][in] and its scale (realize.cc: s_w = 2^ceil(log2 max|w|) / 128).
struct linear_unit {
  std::size_t in = 0, out = 0;
  std::vector<double> w, b;
  std::vector<std::int64_t> wq;
  double w_scale = 0;
};

// ---- the reference forward ---------------------------------------------------------------------------

/// BERT in double precision with plain loops, from the weights by role. The constants are the
/// ones the text carries (TVM prints floats with 6 digits: 0.707107f, 2.82843f), so that the
/// reference computes what the text says, not what the frontend meant.
class reference_bert {
 public:
  reference_bert(const bert_options& o, const weight_table& floats, const weight_table* int8s)
      : o_(o), f_(floats), q_(int8s) {}

  /// The last hidden state [batch, seq, hidden], then (pytorch form) the pooler output.
  std::vector<std::vector<double>> run(const bert_inputs& in) const {
    const std::size_t B = static_cast<std::size_t>(o_.batch), S = static_cast<std::size_t>(o_.seq),
                      H = static_cast<std::size_t>(o_.hidden);
    const std::size_t A = static_cast<std::size_t>(o_.heads), D = H / A, N = B * S;

    // Embeddings: word + token type + position, then layer norm.
    const std::vector<double> word = f_.reals("embeddings.word"), type = f_.reals("embeddings.token_type"),
                              pos = f_.reals("embeddings.position");
    std::vector<double> x(N * H);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t s = 0; s < S; ++s)
        for (std::size_t h = 0; h < H; ++h) {
          const std::size_t t = b * S + s;
          x[t * H + h] = word[static_cast<std::size_t>(in.ids[t]) * H + h] +
                         type[static_cast<std::size_t>(in.types[t]) * H + h] + pos[s * H + h];
        }
    x = layer_norm(x, "embeddings.ln");

    // The additive mask: (1 - mask) * finfo(float32).min (pytorch), (1 - mask) * -10000 (TF).
    const double masked = tf() ? -10000.0 : models::as_printed(std::numeric_limits<float>::lowest());
    std::vector<double> adder(B * S);
    for (std::size_t k = 0; k < B * S; ++k) adder[k] = (1.0 - static_cast<double>(in.mask[k])) * masked;
    // Scores are divided by sqrt(head_size) (pytorch: aten::div) or multiplied by its inverse (TF).
    const double scale = tf() ? models::as_printed(1.0 / std::sqrt(static_cast<double>(D)))
                              : 1.0 / models::as_printed(std::sqrt(static_cast<double>(D)));

    for (std::int64_t l = 0; l < o_.layers; ++l) {
      const std::string p = "layer" + std::to_string(l) + ".";
      std::vector<double> q, k, v;
      if (o_.qkv == qkv_form::separate) {
        q = linear(x, unit(p + "query"));
        k = linear(x, unit(p + "key"));
        v = linear(x, unit(p + "value"));
      } else {
        const std::vector<double> qkv = linear(x, unit(p + "qkv"));
        for (std::size_t t = 0; t < N; ++t)
          for (std::size_t h = 0; h < H; ++h) {
            q.push_back(qkv[t * 3 * H + h]);
            k.push_back(qkv[t * 3 * H + H + h]);
            v.push_back(qkv[t * 3 * H + 2 * H + h]);
          }
      }
      // Attention, head by head; the int8 form quantizes Q, K^T, the probabilities and V.
      if (int8()) {
        for (auto* m : {&q, &k, &v})
          for (double& e : *m) e = quantize(e);
      }
      std::vector<double> context(N * H, 0.0);
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t a = 0; a < A; ++a)
          for (std::size_t i = 0; i < S; ++i) {
            std::vector<double> row(S);
            double max = -std::numeric_limits<double>::infinity();
            for (std::size_t j = 0; j < S; ++j) {
              double dot = 0;
              for (std::size_t d = 0; d < D; ++d)
                dot += q[(b * S + i) * H + a * D + d] * k[(b * S + j) * H + a * D + d];
              if (int8()) dot *= 1.0 / 256.0;  // the int32 product at scale (8/128)^2
              row[j] = dot * scale + adder[b * S + j];
              max = std::max(max, row[j]);
            }
            double sum = 0;
            for (double& r : row) sum += (r = std::exp(r - max));
            for (double& r : row) r /= sum;
            if (int8())
              for (double& r : row) r = quantize(r);
            for (std::size_t d = 0; d < D; ++d) {
              double acc = 0;
              for (std::size_t j = 0; j < S; ++j) acc += row[j] * v[(b * S + j) * H + a * D + d];
              context[(b * S + i) * H + a * D + d] = int8() ? acc * (1.0 / 256.0) : acc;
            }
          }
      std::vector<double> attention = linear(context, unit(p + "attention_output"));
      for (std::size_t e = 0; e < attention.size(); ++e) attention[e] += x[e];
      attention = layer_norm(attention, p + "attention_ln");
      std::vector<double> inter = linear(attention, unit(p + "intermediate"));
      for (double& u : inter) u = gelu(u);
      std::vector<double> out = linear(inter, unit(p + "output"));
      for (std::size_t e = 0; e < out.size(); ++e) out[e] += attention[e];
      x = layer_norm(out, p + "output_ln");
    }
    if (tf()) return {x};

    // The pooler: tanh(dense(hidden[:, 0])).
    std::vector<double> first(B * H);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t h = 0; h < H; ++h) first[b * H + h] = x[(b * S) * H + h];
    std::vector<double> pooled = int8() ? int8_pooler(first) : linear(first, unit("pooler"));
    for (double& e : pooled) e = std::tanh(e);
    return {x, pooled};
  }

 private:
  const bert_options& o_;
  const weight_table& f_;
  const weight_table* q_;

  bool int8() const { return q_ != nullptr; }
  bool tf() const { return o_.form == form::tensorflow; }

  /// realize.cc's input quantization: clip(round(x * 16), -127, 127), values of scale 1/16.
  static double quantize(double x) { return std::clamp(std::round(x * 16.0), -127.0, 127.0); }

  linear_unit unit(const std::string& role) const {
    linear_unit u;
    std::vector<double> w = f_.reals(role + ".weight");
    u.b = f_.reals(role + ".bias");
    u.out = u.b.size();
    u.in = w.size() / u.out;
    u.w = tf() ? transpose(w, u.in, u.out) : w;  // TF kernels are [in, out]
    if (int8()) {
      std::vector<float> wf(w.begin(), w.end());
      u.w_scale = models::bert_detail::quant::weight_scale(wf);
      const std::vector<std::int64_t> folded = q_->integers(role + ".weight (int8, transposed and broadcast)");
      // The folded constant is [batch, in, out]: every batch a copy of W^T.
      const std::size_t per_batch = u.in * u.out;
      for (std::size_t k = 0; k < folded.size(); ++k) REQUIRE(folded[k] == folded[k % per_batch]);
      u.wq = std::vector<std::int64_t>(u.out * u.in);
      for (std::size_t i = 0; i < u.in; ++i)
        for (std::size_t o = 0; o < u.out; ++o) u.wq[o * u.in + i] = folded[i * u.out + o];
    }
    return u;
  }

  /// x [rows, in] -> [rows, out]: x W^T + b; int8: the quantized product at scale
  /// (1/16) * s_w (the dequantizing constant as printed), then the float bias.
  std::vector<double> linear(const std::vector<double>& x, const linear_unit& u) const {
    const std::size_t rows = x.size() / u.in;
    std::vector<double> y(rows * u.out);
    const double product_scale = models::as_printed(static_cast<float>(1.0 / 16.0) * static_cast<float>(u.w_scale));
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t o = 0; o < u.out; ++o) {
        double acc = 0;
        if (int8()) {
          std::int64_t iacc = 0;
          for (std::size_t i = 0; i < u.in; ++i)
            iacc += static_cast<std::int64_t>(quantize(x[r * u.in + i])) * u.wq[o * u.in + i];
          acc = static_cast<double>(iacc) * product_scale;
        } else {
          for (std::size_t i = 0; i < u.in; ++i) acc += x[r * u.in + i] * u.w[o * u.in + i];
        }
        y[r * u.out + o] = acc + u.b[o];
      }
    return y;
  }

  /// The int8 pooler: DenseRealize, then the bias added in int32 at the smaller of the two scales.
  std::vector<double> int8_pooler(const std::vector<double>& x) const {
    const std::vector<double> w = f_.reals("pooler.weight"), b = f_.reals("pooler.bias");
    const std::size_t out = b.size(), in = w.size() / out, rows = x.size() / in;
    const std::vector<std::int64_t> wq = q_->integers("pooler.weight (int8)");
    const std::vector<std::int64_t> bq = q_->integers("pooler.bias (int32, at the product's scale)");
    const float s_w = models::bert_detail::quant::weight_scale(std::vector<float>(w.begin(), w.end()));
    const float s_b = models::bert_detail::quant::weight_scale(std::vector<float>(b.begin(), b.end()));
    const float s_product = static_cast<float>(1.0 / 16.0) * s_w, s = std::min(s_product, s_b);
    const std::int64_t product_shift = std::lround(std::log2(s_product / s)),
                       bias_shift = std::lround(std::log2(s_b / s));
    for (std::size_t k = 0; k < w.size(); ++k)
      REQUIRE(wq[k] == models::bert_detail::quant::quantize(static_cast<float>(w[k]), s_w));
    for (std::size_t k = 0; k < b.size(); ++k)
      REQUIRE(bq[k] == models::bert_detail::quant::quantize(static_cast<float>(b[k]), s_b) << bias_shift);
    std::vector<double> y(rows * out);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t o = 0; o < out; ++o) {
        std::int64_t acc = 0;
        for (std::size_t i = 0; i < in; ++i) acc += static_cast<std::int64_t>(quantize(x[r * in + i])) * wq[o * in + i];
        y[r * out + o] = static_cast<double>((acc << product_shift) + bq[o]) * models::as_printed(s);
      }
    return y;
  }

  /// (x - mean) / sqrt(var + eps) * gamma + beta over the last axis, eps = float32(1e-12).
  std::vector<double> layer_norm(std::vector<double> x, const std::string& role) const {
    const std::vector<double> gamma = f_.reals(role + ".gamma"), beta = f_.reals(role + ".beta");
    const std::size_t H = gamma.size();
    const double eps = static_cast<float>(1e-12);
    for (std::size_t r = 0; r < x.size() / H; ++r) {
      double mean = 0, var = 0;
      for (std::size_t h = 0; h < H; ++h) mean += x[r * H + h];
      mean /= static_cast<double>(H);
      for (std::size_t h = 0; h < H; ++h) var += (x[r * H + h] - mean) * (x[r * H + h] - mean);
      var /= static_cast<double>(H);
      const double inv = 1.0 / std::sqrt(var + eps);
      for (std::size_t h = 0; h < H; ++h) x[r * H + h] = (x[r * H + h] - mean) * inv * gamma[h] + beta[h];
    }
    return x;
  }

  /// aten::gelu's erf form (pytorch), modeling.py's tanh form (TF), with the printed constants.
  double gelu(double u) const {
    if (!tf()) return u * (0.5 + std::erf(u * models::as_printed(std::sqrt(0.5))) * 0.5);
    const double inner = u + models::as_printed(0.044715) * (u * u * u);
    return u * (0.5 * (1.0 + std::tanh(models::as_printed(std::sqrt(2.0 / 3.141592653589793)) * inner)));
  }
};

/// Largest |a - b| / max(1, |b|) over two lists of tensors.
double max_relative_error(const std::vector<value>& got, const std::vector<std::vector<double>>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (std::size_t t = 0; t < got.size(); ++t) {
    REQUIRE(got[t].f.size() == want[t].size());
    for (std::size_t k = 0; k < want[t].size(); ++k)
      worst = std::max(worst, std::fabs(got[t].f[k] - want[t][k]) / std::max(1.0, std::fabs(want[t][k])));
  }
  return worst;
}

/// The form o, read by the frontend, run by its interpreter and by the reference on two sets of
/// random inputs.
void check_against_reference(const bert_options& o) {
  const generated g = models::bert(o);
  const module m = read(g);
  const weight_table weights(g);
  // The int8 form's float weights (biases, layer norms, scales) are those of the float32 form.
  bert_options float_options = o;
  float_options.dtype = precision::float32;
  const generated floats = o.dtype == precision::int8 ? models::bert(float_options) : generated{};
  const weight_table float_weights(o.dtype == precision::int8 ? floats : g);
  const reference_bert reference(o, float_weights, o.dtype == precision::int8 ? &weights : nullptr);
  for (std::uint64_t seed : {1u, 2u}) {
    const bert_inputs in = random_inputs(o, seed);
    const std::vector<value> got = run_interpreter(m, g, in);
    const double err = max_relative_error(got, reference.run(in));
    MESSAGE(describe(o) << ", inputs " << seed << ": max relative error " << err);
    CHECK(err < 1e-9);
  }
}

}  // namespace

// ---- the printer's walk --------------------------------------------------------------------------

TEST_CASE("bert: the printer binds a node when its first user is visited (TVM's RelayTextPrinter)") {
  // f(g(h(x)), k(h(x))) where h is shared: post-order visits h, g, k, f; g's line is written
  // when f prints it, after k's subtree. This is seed 002's order (`%40 = cast(%31)` after `%39`).
  models::graph gr;
  const auto t = type::tensor({2}, dtype::float32());
  const int x = gr.var("x", t);
  const int h = gr.call("exp", {x}, "", t);
  const int gnode = gr.call("negative", {gr.call("sqrt", {h}, "", t)}, "", t);
  const int k = gr.call("tanh", {gr.call("abs", {h}, "", t)}, "", t);
  const int f = gr.call("add", {gnode, k}, "", t);
  const std::string text = models::print_main(gr, {x}, f, true).text;
  CHECK(text ==
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(2), float32] /* ty=Tensor[(2), float32] */) -> Tensor[(2), float32] {\n"
        "  %0 = exp(%x) /* ty=Tensor[(2), float32] */;\n"
        "  %1 = sqrt(%0) /* ty=Tensor[(2), float32] */;\n"
        "  %2 = abs(%0) /* ty=Tensor[(2), float32] */;\n"
        "  %3 = negative(%1) /* ty=Tensor[(2), float32] */;\n"
        "  %4 = tanh(%2) /* ty=Tensor[(2), float32] */;\n"
        "  add(%3, %4) /* ty=Tensor[(2), float32] */\n"
        "}\n");
  CHECK(models::six_digits(std::sqrt(0.5)) == "0.707107");
  CHECK(models::six_digits(1e-12) == "1e-12");
  CHECK(models::six_digits(std::numeric_limits<float>::lowest()) == "-3.40282e+38");
}

TEST_CASE("bert: the frontend reads every form") {
  for (const bert_options& o :
       {small(form::pytorch), small(form::pytorch, norm::unpacked), small(form::pytorch, norm::op, qkv_form::fused),
        small(form::tensorflow), small(form::tensorflow, norm::op, qkv_form::fused),
        small(form::pytorch, norm::op, qkv_form::separate, precision::int8)}) {
    CAPTURE(describe(o));
    CHECK(unreadable(o).empty());
  }
}

TEST_CASE("bert: the text's form (header, parameters, bindings, weights)") {
  const generated g = models::bert(small(form::pytorch));
  CHECK(
      g.text.starts_with("#[version = \"0.0.5\"]\ndef @main(%input_ids: Tensor[(2, 7), int64] /* ty=Tensor[(2, 7), "
                         "int64] span=aten::size_0.input_ids:0:0 */"));
  CHECK(g.text.find(
            "  %0 = cast(%input_ids, dtype=\"int32\") /* ty=Tensor[(2, 7), int32] span=aten::embedding_0:0:0 */;\n") !=
        std::string::npos);
  CHECK(g.text.find("nn.layer_norm(%8, %aten::layer_norm_0.weight, %aten::layer_norm_0.bias, epsilon=1e-12f)") !=
        std::string::npos);
  CHECK(g.text.find("nn.dropout(%9, rate=0.1f)") != std::string::npos);
  CHECK(g.text.find("nn.batch_matmul(%15, %16) /* ty=Tensor[(2, 7, 32), float32] span=aten::linear_0:0:0 */") !=
        std::string::npos);
  CHECK(g.text.find("squeeze(%18, axis=[])") != std::string::npos);
  CHECK(g.text.ends_with(" /* ty=(Tensor[(2, 7, 32), float32], Tensor[(2, 32), float32]) */\n}\n"));
  // The parameters: three data inputs, then one weight per entry, named as from_pytorch names them.
  REQUIRE(g.inputs.size() == 3);
  CHECK(g.parameters.size() == 3 + g.weights.size());
  CHECK(g.parameters[3] == "aten::embedding_0.weight");
  CHECK(std::count(g.parameters.begin(), g.parameters.end(), "aten::linear_12.weight") ==
        1);  // 2 layers x 6 linears, then the pooler
  std::size_t elements = 0;
  for (const auto& w : g.weights) elements += static_cast<std::size_t>(w.data.elements());
  // word + type + position embeddings, position ids, embedding layer norm, per layer 4 HxH + 2 HxF
  // linears with biases and 2 layer norms, the pooler.
  const std::size_t H = 32, F = 37;
  CHECK(elements ==
        50 * H + 2 * H + 512 * H + 512 + 2 * H + 2 * (4 * (H * H + H) + (F * H + F) + (H * F + H) + 4 * H) + H * H + H);

  // Without spans, and deterministic for a seed.
  bert_options o = small(form::pytorch);
  o.spans = false;
  const generated plain = models::bert(o);
  CHECK(plain.text.find("span=") == std::string::npos);
  CHECK(models::bert(o).text == plain.text);

  // The int8 form: print(mod) (no header), every weight a meta constant in index order.
  const generated q = models::bert(small(form::pytorch, norm::op, qkv_form::separate, precision::int8));
  CHECK(q.text.starts_with("def @main(%input_ids"));
  CHECK(q.parameters.size() == 3);
  for (std::size_t k = 0; k < q.weights.size(); ++k) {
    CHECK(q.weights[k].name == "meta[relay.Constant][" + std::to_string(k) + "]");
    CHECK(q.text.find(q.weights[k].name + " /* ty=" +
                      type::tensor(q.weights[k].data.shape, q.weights[k].data.dt).str() + " */") != std::string::npos);
  }
  CHECK(q.text.find(
            "nn.batch_matmul(%19, meta[relay.Constant][5] /* ty=Tensor[(2, 32, 32), int8] */, out_dtype=\"int32\")") !=
        std::string::npos);

  // The TF form: TF's names, parameters in free_vars order (a weight first: take's data).
  const generated t = models::bert(small(form::tensorflow));
  CHECK(t.parameters.front() == "bert/embeddings/word_embeddings");
  CHECK(t.text.find("nn.batch_matmul(") != std::string::npos);
  CHECK(t.text.find(", transpose_b=True) /* ty=Tensor[(8, 7, 7), float32] "
                    "span=bert/encoder/layer_0/attention/self/MatMul:0:0 */") != std::string::npos);
  CHECK(t.text.find("%bert/encoder/ones: Tensor[(2, 7, 1), float32]") !=
        std::string::npos);  // under 1000 elements: a Const

  // Options the forms do not have.
  bert_options bad = small(form::tensorflow);
  bad.dtype = precision::int8;
  CHECK_THROWS_AS(models::bert(bad), std::invalid_argument);
  bad = small(form::pytorch);
  bad.heads = 5;
  CHECK_THROWS_AS(models::bert(bad), std::invalid_argument);
}

TEST_CASE("bert: the int8 form's constants are the float weights quantized as realize.cc does") {
  const bert_options o = small(form::pytorch, norm::op, qkv_form::separate, precision::int8);
  bert_options fo = o;
  fo.dtype = precision::float32;
  const generated q = models::bert(o), f = models::bert(fo);
  const weight_table qt(q), ft(f);
  for (std::string role : {"layer0.query", "layer1.intermediate", "layer1.output"}) {
    const std::vector<double> w = ft.reals(role + ".weight");
    const std::vector<float> wf(w.begin(), w.end());
    const float s = models::bert_detail::quant::weight_scale(wf);
    // A power of two over 128 (weight_scale power2), and max|w| / s in (63.5, 127].
    CHECK(std::exp2(std::round(std::log2(s))) == s);
    const double ratio = models::bert_detail::quant::max_abs(wf) / s;
    CHECK(ratio > 63.5);
    CHECK(ratio <= 127.0);
    const std::vector<std::int64_t> folded = qt.integers(role + ".weight (int8, transposed and broadcast)");
    const std::size_t out = ft.reals(role + ".bias").size(), in = w.size() / out;
    REQUIRE(folded.size() == static_cast<std::size_t>(o.batch) * in * out);
    for (std::size_t k = 0; k < folded.size(); ++k) {
      const std::size_t i = (k / out) % in, j = k % out;
      CHECK(folded[k] == std::clamp<std::int64_t>(std::llround(wf[j * in + i] / s), -127, 127));
    }
    // The biases stay float32 (added after the dequantizing multiply), the same values.
    CHECK(qt.reals(role + ".bias") == ft.reals(role + ".bias"));
  }
  // The folded position embeddings: the first seq rows of the table.
  const std::vector<double> table = ft.reals("embeddings.position"), folded = qt.reals("embeddings.position[0:seq]");
  CHECK(std::equal(folded.begin(), folded.end(), table.begin()));
}

TEST_CASE("bert pytorch float32 (nn.layer_norm, separate Q/K/V) agrees with a double forward") {
  check_against_reference(small(form::pytorch));
}

TEST_CASE("bert pytorch float32 without spans agrees with a double forward") {
  check_against_reference(small(form::pytorch, norm::op, qkv_form::separate, precision::float32, false));
}

TEST_CASE("bert pytorch float32 (SimplifyInference's layer norm) agrees with a double forward") {
  check_against_reference(small(form::pytorch, norm::unpacked));
}

TEST_CASE("bert pytorch float32 (fused QKV) agrees with a double forward") {
  check_against_reference(small(form::pytorch, norm::op, qkv_form::fused));
}

TEST_CASE("bert tensorflow float32 (separate Q/K/V) agrees with a double forward") {
  check_against_reference(small(form::tensorflow));
}

TEST_CASE("bert tensorflow float32 (fused QKV) agrees with a double forward") {
  check_against_reference(small(form::tensorflow, norm::op, qkv_form::fused));
}

// The int8 form against the same quantized arithmetic in loops: every int8 operand and int32
// product agree exactly (both sides compute the float parts in double; they differ by summation
// order only, ~1e-16, which moves a value across a rounding threshold of x * 16 with
// probability ~1e-13 per element), so the outputs agree to double rounding.
TEST_CASE("bert pytorch int8 (relay.quantize) agrees with the quantized arithmetic in loops") {
  check_against_reference(small(form::pytorch, norm::op, qkv_form::separate, precision::int8));
}

TEST_CASE("bert pytorch int8 (fused QKV) agrees with the quantized arithmetic in loops") {
  check_against_reference(small(form::pytorch, norm::op, qkv_form::fused, precision::int8));
}

// The report names a model's layer: the repeating block is as many kernels as one more layer
// adds, repeated once per layer (float32) or per layer but the first (int8), and the kernels
// before and after it add up to the total.
TEST_CASE("bert: compile --report finds the layer as the repeating block of kernels") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fuse_relay_report_" + std::to_string(fuse::test::base_seed()));
  std::filesystem::create_directories(dir);
  const auto number_after = [](const std::string& out, const std::string& key) {
    const std::size_t at = out.find(key);
    REQUIRE(at != std::string::npos);
    return std::stoul(out.substr(at + key.size()));
  };
  for (const bert_options& base :
       {small(form::pytorch), small(form::tensorflow), small(form::pytorch, norm::unpacked, qkv_form::fused),
        small(form::pytorch, norm::op, qkv_form::fused, precision::int8)}) {
    CAPTURE(describe(base));
    std::size_t total[2] = {};
    std::string out;
    for (int layers : {3, 4}) {
      bert_options o = base;
      o.layers = layers;
      const std::filesystem::path model = dir / "bert.relay";
      std::ofstream(model) << models::bert(o).text;
      const fuse::test::tool_run r =
          fuse::test::run_tool("compile " + model.string() + " -o " + (dir / "bert.hpp").string() + " --report");
      INFO(r.out << r.err);
      REQUIRE(r.status == 0);
      total[layers - 3] = number_after(r.out, "\nkernels: ");
      out = r.out;
    }
    INFO(out);
    const std::size_t per_layer = total[1] - total[0];
    CHECK(number_after(out, "repeating block: ") == per_layer);
    const std::size_t block = out.find("repeating block: ");
    REQUIRE(block != std::string::npos);
    const std::string line = out.substr(block, out.find('\n', block) - block);
    // Every layer, or all but the first where the embedding's layer norm is planned into the
    // first layer's kernels differently (int8: its quantized operand is stored once).
    const std::size_t repeats = number_after(line, "), "), before = number_after(line, "times; "),
                      after = number_after(line, " before, ");
    CHECK(repeats >= 3);
    CHECK(before + repeats * per_layer + after == total[1]);
    if (base.dtype == precision::float32) CHECK(repeats == 4);
    MESSAGE(describe(base) << ": " << line << " of " << total[1] << " kernels");
  }
  std::filesystem::remove_all(dir);
}

#ifdef FUSE_RELAY_TOOL
// The real-export workflow on every form: the model's text and its weights file (TVM's
// save_param_dict format, as users save relay.frontend's params), through `fuse-relay check
// MODEL --params FILE`: the weights bound as constants, the header compiled, run and compared
// with the interpreter.
TEST_CASE("bert: fuse-relay check --params passes on every form (small configurations)") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fuse_relay_bert_" + std::to_string(fuse::test::base_seed()));
  std::filesystem::create_directories(dir);
  const std::vector<bert_options> forms = {small(form::pytorch),
                                           small(form::pytorch, norm::unpacked),
                                           small(form::pytorch, norm::op, qkv_form::fused),
                                           small(form::tensorflow),
                                           small(form::tensorflow, norm::op, qkv_form::fused),
                                           small(form::pytorch, norm::op, qkv_form::separate, precision::int8),
                                           small(form::pytorch, norm::op, qkv_form::fused, precision::int8)};
  // All in one call (one driver, one compile: the GEMM kernels the forms share compiled once),
  // each with its own weights.
  std::string models, weights;
  for (std::size_t k = 0; k < forms.size(); ++k) {
    const generated g = models::bert(forms[k]);
    const std::filesystem::path model = dir / ("bert" + std::to_string(k) + ".relay"),
                                params = dir / ("bert" + std::to_string(k) + ".params");
    std::ofstream(model) << g.text;
    params::save_param_dict(params.string(), g.weights);
    models += " " + model.string();
    weights += " --params " + params.string();
  }
  const auto start = std::chrono::steady_clock::now();
  const fuse::test::tool_run r =
      fuse::test::run_tool("check" + models + weights + " --seed " + std::to_string(fuse::test::base_seed() % 1000000));
  INFO(r.out << r.err);
  CHECK(r.status == 0);
  for (std::size_t k = 0; k < forms.size(); ++k) {
    const std::string name = describe(forms[k]);
    CAPTURE(name);
    const std::string path = (dir / ("bert" + std::to_string(k) + ".relay")).string();
    const std::size_t at = r.out.find(path + ": ");
    REQUIRE(at != std::string::npos);
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    CHECK(line.find(": passed kernels=") != std::string::npos);
    MESSAGE(name << ": " << line);
  }
  MESSAGE(forms.size() << " forms checked in "
                       << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
  std::filesystem::remove_all(dir);
}
#endif
