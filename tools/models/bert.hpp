// BERT-base written as Apache TVM v0.19 prints it: the module a TVM frontend produced, type
// inferred, then `mod.astext()` (or `print(mod)` where constants went to metadata).
//
//   generated g = fuse::relay::models::bert(bert_options{});
//   g.text     the Relay text; g.weights   @main's weight parameters (or the int8 form's
//              `meta[relay.Constant][i]`), in order; g.inputs   the data inputs
//
// The forms, and the TVM v0.19 sources each follows (python/tvm/relay/frontend/pytorch.py,
// tensorflow_ops.py, python/tvm/relay/quantize/*, src/relay/quantize/realize.cc,
// src/relay/transforms/simplify_inference.cc; the printer's rules are in relay_writer.hpp):
//
// * pytorch (default): `relay.frontend.from_pytorch` of `torch.jit.trace(BertModel)` of
//   HuggingFace transformers 4.26 (eager attention, torchscript=True, inputs input_ids,
//   attention_mask, token_type_ids, int64), which returns (last_hidden_state, pooler_output).
//   - Parameters are named after their first consumer, `aten::linear_0.weight`
//     (convert_params: source_map of the consumer + the attribute name; the DefaultNodeKindNamer
//     counts each aten kind in trace order), and carry that name as their span; data inputs
//     come first in input_infos' order, the weights after them in free_vars order.
//   - aten::linear on a 3-d input is `matmul(x, transpose(W, axes=(1, 0)))`, and v0.19's matmul
//     (since PR #13927) broadcasts both operands to the batch shape: broadcast_to, reshape to
//     3-d, nn.batch_matmul(transpose_b=False, so no attribute printed), reshape back, then
//     `squeeze(axis=[])` (no 1-d operand); the bias is `nn.bias_add(axis=-1)`. A 2-d input
//     (the pooler) is `nn.dense(x, W, units=None)`.
//   - aten::embedding is take(weight, cast(indices, "int32"), axis=0); aten::gelu is
//     x * (0.5 + erf(x * 0.707107) * 0.5); aten::layer_norm is nn.layer_norm(epsilon=1e-12f);
//     aten::dropout stays as nn.dropout(rate=0.1f) and its field 0; the mask is
//     (1 - 1 * float(mask[:, None, None, :])) * finfo(float32).min (aten::rsub's alpha kept);
//     aten::select is take(x, 0, axis=1, mode="wrap").
//   - `layer_norm = unpacked`: the module after SimplifyInference (layer norms as mean,
//     variance, add epsilon, sqrt, subtract, divide, multiply gamma, add beta; dropouts gone).
// * tensorflow: `relay.frontend.from_tensorflow` of google-research/bert's modeling.py
//   (TF1 frozen graph, is_training=False so no dropout, inputs input_ids, input_mask,
//   segment_ids int32), output bert/encoder/Reshape_<L+1> (the last hidden state). Weights keep
//   their TF names (`bert/encoder/layer_0/attention/self/query/kernel`, kernels [in, out]); the
//   parameters are free_vars' order (inputs and weights interleaved, as from_tensorflow leaves
//   them). 2-d hidden states; MatMul -> nn.dense(x, transpose(kernel), units=N); BiasAdd -> add;
//   BatchMatMulV2 -> reshape to 3-d, transpose the rhs unless adj_y, nn.batch_matmul(
//   transpose_b=True), reshape back (tensorflow_ops._batch_matmul with use_nt_batch_matmul);
//   layer norm as tf.contrib.layers.layer_norm's ops (moments, SquaredDifference,
//   batchnorm/add, Rsqrt, mul, mul_1, mul_2, sub, add_1); GELU with Pow and Tanh; token types
//   through one_hot and a MatMul; `tf.ones` of the mask is a Const (a parameter) under 1000
//   elements and a Fill (`full`) above (array_ops.ones, _constant_if_small).
// * int8 (pytorch form only): `relay.quantize.quantize(mod, params)` under
//   `qconfig(skip_dense_layer=False)` (otherwise the defaults: nbit 8/8/32, int8 inputs and
//   weights, int32 activations, global_scale 8.0, weight_scale power2, rounding UPWARD),
//   printed with print(mod): the weights are bound as constants and folded
//   (prerequisite_optimize: SimplifyInference, FoldConstant, CanonicalizeOps; the final
//   FoldConstant), so every weight is a `meta[relay.Constant][i]` and print(mod) has no
//   metadata section and no version header. Annotate quantizes both operands of every
//   nn.batch_matmul and nn.dense (nothing else in BERT: add/multiply only when an operand is
//   already quantized). Realized (realize.cc): an input is
//   cast(clip(round(multiply(x, 16f)), -127, 127), int8) (scale 8/128), a weight the folded
//   int8 constant of round(w / s_w) with s_w = 2^ceil(log2 max|w|) / 128; the product is int32
//   (`out_dtype="int32"`), reshapes stay int32 and the first op without a rule (squeeze, tanh)
//   gets cast(x, float32) * (s_in * s_w). Folding makes each linear's weight the broadcast
//   [batch, in, out] int8 tensor, the position embeddings one [1, seq, hidden] constant. The
//   pooler's bias add is realized in int32 (AddRealize: the smaller scale, the other operand
//   left-shifted, the bias folded).
// Spans (`span=aten::linear_0:0:0`): both frontends name every node they make after the
// source op (set_span); nodes a later pass made (SimplifyInference, realize) have none.
// `spans = false` leaves them out.
//
// What is not reproduced: the Prelude's ADT type definitions that from_pytorch's module also
// holds, and TVM v0.18+'s boxed split sections (SplitAttrs holds runtime.Int; written here as
// the plain `indices_or_sections=[...]` of earlier versions).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuse/relay/ir.hpp"
#include "fuse/relay/params.hpp"
#include "models/bert_weights.hpp"
#include "models/relay_ops.hpp"
#include "models/relay_writer.hpp"

namespace fuse::relay::models {

struct bert_options {
  enum class source { pytorch, tensorflow };
  enum class norm { op, unpacked };
  enum class attention_weights { separate, fused };
  enum class precision { float32, int8 };

  std::int64_t layers = 12, batch = 8, seq = 384, hidden = 768, heads = 12, ffn = 3072, vocab = 30522;
  std::int64_t max_position = 512, type_vocab = 2;
  source form = source::pytorch;
  norm layer_norm = norm::op;  ///< pytorch form only
  attention_weights qkv = attention_weights::separate;
  precision dtype = precision::float32;  ///< int8: pytorch form only
  std::uint64_t seed = 1;
  bool spans = true;
};

/// A data input of @main.
struct tensor_spec {
  std::string name;
  relay::type type;
};

struct generated {
  std::string text;
  /// @main's weight parameters in signature order; for the int8 form the constants, entry i
  /// being `meta[relay.Constant][i]` (and so named).
  std::vector<params::entry> weights;
  std::vector<tensor_spec> inputs;      ///< @main's data inputs
  std::vector<std::string> parameters;  ///< every @main parameter, in order
  std::vector<std::string> roles;       ///< per weight: what it holds ("layer0.query.weight", ...)
};

namespace bert_detail {

using op::shape_t;

/// Quantization of the int8 form (python/tvm/relay/quantize/_calibrate.py, realize.cc).
namespace quant {
inline constexpr double input_scale = 8.0 / 128.0;  // global_scale / 2^(nbit_input - 1)
/// _power2_scale: 2^ceil(log2 max|w|), computed as Python does (math.log(val, 2)).
inline double power2(float max_abs) {
  return max_abs > 0 ? std::pow(2.0, std::ceil(std::log(static_cast<double>(max_abs)) / std::log(2.0))) : 1.0;
}
inline float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}
/// The weight's dom_scale, a float32 const: power2(max|w|) / 128.
inline float weight_scale(const std::vector<float>& v) { return static_cast<float>(power2(max_abs(v)) / 128.0); }
/// clip(round(w * (1 / s)), -127, 127) in float32, as FoldConstant evaluates the realized weight.
inline std::int64_t quantize(float w, float scale) {
  const float inv = 1.0f / scale;
  const float r = std::round(w * inv);
  return static_cast<std::int64_t>(std::clamp(r, -127.0f, 127.0f));
}
}  // namespace quant

class builder {
 public:
  explicit builder(const bert_options& o) : o_(o), values_(o.seed) {}

 protected:
  using type = relay::type;

  /// A weight: @main's parameter `name`, or (name empty) a folded constant.
  struct entry {
    std::string name, role;
    constant_data data;
    int node = -1;
  };

  const bert_options& o_;
  bert_weights values_;
  graph g_;
  std::vector<entry> entries_;

  std::int64_t head_size() const { return o_.hidden / o_.heads; }
  void at(const std::string& source) { g_.span = o_.spans ? source : ""; }
  void no_span() { g_.span.clear(); }

  /// A weight as @main's parameter.
  int parameter(const std::string& name, const std::string& role, constant_data data, const std::string& span) {
    const int v = g_.var(name, type::tensor(data.shape, data.dt), o_.spans ? span : "");
    entries_.push_back({name, role, std::move(data), v});
    return v;
  }
  /// A weight bound and folded into a constant.
  int constant(const std::string& role, constant_data data) {
    const int c = g_.constant(type::tensor(data.shape, data.dt), static_cast<int>(entries_.size()));
    entries_.push_back({"", role, std::move(data), c});
    return c;
  }

  /// The generated module: @main(inputs, then the weights in free_vars order), or for the
  /// int8 form @main(inputs) with the constants in meta order.
  generated finish(const std::vector<int>& inputs, int body, bool weights_follow_inputs) {
    generated out;
    std::vector<int> params;
    std::vector<char> is_input(g_.size(), 0);
    for (int i : inputs) is_input[static_cast<std::size_t>(i)] = 1;
    std::vector<int> weight_order;  // entries in @main order
    std::map<int, int> entry_of_node;
    for (std::size_t k = 0; k < entries_.size(); ++k) entry_of_node[entries_[k].node] = static_cast<int>(k);
    const std::vector<int> vars = free_vars(g_, body);
    if (weights_follow_inputs) {
      params = inputs;
      for (int v : vars)
        if (!is_input[static_cast<std::size_t>(v)]) params.push_back(v);
    } else {
      params = vars;
    }
    for (int p : params)
      if (!is_input[static_cast<std::size_t>(p)]) weight_order.push_back(entry_of_node.at(p));
    const bool any_constant =
        std::any_of(entries_.begin(), entries_.end(), [](const entry& e) { return e.name.empty(); });
    printed p = print_main(g_, params, body, !any_constant);
    out.text = std::move(p.text);
    if (any_constant) weight_order = p.meta_entries;
    for (int k : weight_order) {
      entry& e = entries_[static_cast<std::size_t>(k)];
      if (e.name.empty()) e.name = "meta[relay.Constant][" + std::to_string(out.weights.size()) + "]";
      out.weights.push_back({e.name, std::move(e.data)});
      out.roles.push_back(e.role);
    }
    for (int prm : params) {
      const node& n = g_.at(prm);
      out.parameters.push_back(n.name);
      if (is_input[static_cast<std::size_t>(prm)]) out.inputs.push_back({n.name, n.ty});
    }
    return out;
  }
};

// ---- the PyTorch form --------------------------------------------------------------------------

class pytorch_bert : builder {
 public:
  explicit pytorch_bert(const bert_options& o)
      : builder(o),
        int8_(o.dtype == bert_options::precision::int8),
        unpacked_(int8_ || o.layer_norm == bert_options::norm::unpacked) {}

  generated build() {
    const std::int64_t B = o_.batch, S = o_.seq, H = o_.hidden;
    const type ids_type = type::tensor({B, S}, dtype::int64());
    // Each input's span names its first consumer in the trace (_set_parameter_source_name).
    const int input_ids = g_.var("input_ids", ids_type, o_.spans ? "aten::size_0.input_ids" : "");
    const int attention_mask = g_.var("attention_mask", ids_type, o_.spans ? "aten::slice_0.attention_mask" : "");
    const int token_type_ids = g_.var("token_type_ids", ids_type, o_.spans ? "aten::embedding_1.token_type_ids" : "");
    next("aten::size");  // input_ids.size() in BertModel.forward

    // get_extended_attention_mask: mask[:, None, None, :], .to(float32), (1.0 - m) * finfo.min
    next("aten::slice");  // [:, ...] of the whole axis: the converter's no-op fast path
    at(next("aten::unsqueeze"));
    int mask = op::expand_dims(g_, attention_mask, 1);
    at(next("aten::unsqueeze"));
    mask = op::expand_dims(g_, mask, 2);
    next("aten::slice");
    at(next("aten::to"));
    mask = op::cast(g_, mask, dtype::float32());
    at(next("aten::rsub"));  // rsub(x, 1.0, alpha=1): subtract(1, alpha * x)
    mask = op::subtract(g_, g_.scalar(1.0), op::multiply(g_, g_.scalar(1.0), mask));
    at(next("aten::mul"));
    mask = op::multiply(g_, mask, g_.scalar(std::numeric_limits<float>::lowest()));

    // BertEmbeddings
    next("aten::size");
    next("aten::slice");  // position_ids[:, ...]: no-op; its consumer names the buffer
    const std::string position_source = "aten::slice_" + std::to_string(counters_["aten::slice"] - 1);
    const std::string slice_source = next("aten::slice");
    int x = embedding(input_ids, "embeddings.word", o_.vocab);
    x = add_named("aten::add", x, embedding(token_type_ids, "embeddings.token_type", o_.type_vocab));
    x = add_named("aten::add_", x, position_embedding(position_source, slice_source));
    x = layer_norm(x, "embeddings.ln");
    x = dropout(x);

    for (std::int64_t l = 0; l < o_.layers; ++l) x = layer(x, mask, "layer" + std::to_string(l) + ".");

    // BertPooler: hidden_states[:, 0] -> dense -> tanh
    next("aten::slice");
    at(next("aten::select"));
    int pooled = op::take(g_, x, g_.scalar_int32(0), 1, "wrap");
    pooled = linear(pooled, "pooler", H);
    at(next("aten::tanh"));
    pooled = op::unary(g_, "tanh", pooled);
    no_span();
    const int body = g_.tuple({x, pooled});
    return finish({input_ids, attention_mask, token_type_ids}, body, true);
  }

 private:
  bool int8_, unpacked_;
  std::map<std::string, int> counters_;

  /// The DefaultNodeKindNamer's source name of the next node of `kind`: aten::linear_3.
  std::string next(const std::string& kind) { return kind + "_" + std::to_string(counters_[kind]++); }

  int add_named(const std::string& kind, int a, int b) {
    at(next(kind));
    return op::add(g_, a, b);
  }

  /// A weight of the float forms: @main's parameter `SOURCE.ATTR` (span: the same name).
  int weight(const std::string& source, const std::string& attr, const std::string& role, const shape_t& shape,
             const std::vector<float>& v) {
    const std::string name = source + "." + attr;
    return parameter(name, role, float32_data(shape, v), name);
  }

  int embedding(int indices, const std::string& role, std::int64_t rows) {
    const std::string source = next("aten::embedding");
    at(source);
    const shape_t shape = {rows, o_.hidden};
    const std::vector<float> v = values_.values(role, static_cast<std::size_t>(rows * o_.hidden));
    const int table = int8_ ? constant(role, float32_data(shape, v)) : weight(source, "weight", role, shape, v);
    return op::take(g_, table, op::cast(g_, indices, dtype::int32()), 0);
  }

  /// position_embeddings(position_ids[:, 0:seq]): in the int8 form folded into [1, seq, hidden].
  int position_embedding(const std::string& buffer_source, const std::string& slice_source) {
    const std::int64_t S = o_.seq, H = o_.hidden, P = o_.max_position;
    const std::vector<float> table = values_.values("embeddings.position", static_cast<std::size_t>(P * H));
    if (int8_) {
      next("aten::embedding");
      const std::vector<float> rows(table.begin(), table.begin() + S * H);
      return constant("embeddings.position[0:seq]", float32_data({1, S, H}, rows));
    }
    constant_data ids;
    ids.dt = dtype::int64();
    ids.shape = {1, P};
    ids.bytes.resize(static_cast<std::size_t>(P) * 8);
    for (std::int64_t i = 0; i < P; ++i) ids.set_integer(static_cast<std::size_t>(i), i);
    const std::string ids_name = buffer_source + ".position_ids";
    const int buffer = parameter(ids_name, "embeddings.position_ids", std::move(ids), ids_name);
    at(slice_source);
    const int sliced = op::strided_slice(g_, buffer, {0, 0}, {1, S}, {1, 1});
    const std::string source = next("aten::embedding");
    at(source);
    const int w = weight(source, "weight", "embeddings.position", {P, H}, table);
    return op::take(g_, w, op::cast(g_, sliced, dtype::int32()), 0);
  }

  int layer_norm(int x, const std::string& role) {
    const std::string source = next("aten::layer_norm");
    at(source);
    const std::size_t H = static_cast<std::size_t>(o_.hidden);
    const std::vector<float> gv = values_.values(role + ".gamma", H, bert_weights::kind::gamma);
    const std::vector<float> bv = values_.values(role + ".beta", H);
    const int gamma = int8_ ? constant(role + ".gamma", float32_data({o_.hidden}, gv))
                            : weight(source, "weight", role + ".gamma", {o_.hidden}, gv);
    const int beta = int8_ ? constant(role + ".beta", float32_data({o_.hidden}, bv))
                           : weight(source, "bias", role + ".beta", {o_.hidden}, bv);
    if (!unpacked_) return op::layer_norm(g_, x, gamma, beta, 1e-12);
    // SimplifyInference's LayerNormToInferUnpack; the nodes it makes have no span.
    no_span();
    const int mean = op::mean(g_, x, -1, true);
    const int var = op::variance(g_, x, mean, -1, true);
    const int denom = op::unary(g_, "sqrt", op::add(g_, var, g_.scalar(1e-12)));
    const int out = op::divide(g_, op::subtract(g_, x, mean), denom);
    return op::add(g_, op::multiply(g_, out, gamma), beta);
  }

  int dropout(int x) {
    at(next("aten::dropout"));
    if (unpacked_) return x;  // SimplifyInference: dropout(x).0 -> x
    return g_.get(op::dropout(g_, x, 0.1), 0);
  }

  // -- linear and matmul, float and realized int8 ------------------------------------------------

  /// cast(clip(round(x * 16), -127, 127), int8): a simulated_quantize of kind INPUT realized
  /// from float (QuantizeRealize), then the cast BatchMatmulRealize/DenseRealize add.
  int quantize_input(int x) {
    no_span();
    const int scaled = op::multiply(g_, x, g_.scalar(1.0 / quant::input_scale));
    const int clipped = op::clip(g_, op::unary(g_, "round", scaled), -127, 127);
    return op::cast(g_, clipped, dtype{dtype::int_code, 8, 1});
  }
  /// QRealizeIntExpr::Realize: cast(x, float32) * scale.
  int dequantize(int x, double scale) {
    no_span();
    return op::multiply(g_, op::cast(g_, x, dtype::float32()), g_.scalar(scale));
  }

  /// The int8 constant of weight w ([rows, cols], PyTorch layout) folded as
  /// broadcast_to(transpose(w), [batch, cols, rows]).
  int folded_weight(const std::string& role, const std::vector<float>& w, std::int64_t rows, std::int64_t cols,
                    std::int64_t batch, float scale) {
    constant_data c;
    c.dt = dtype{dtype::int_code, 8, 1};
    c.shape = {batch, cols, rows};
    const std::size_t one = static_cast<std::size_t>(cols * rows);
    c.bytes.resize(static_cast<std::size_t>(batch) * one);
    for (std::int64_t i = 0; i < cols; ++i)
      for (std::int64_t j = 0; j < rows; ++j)
        c.bytes[static_cast<std::size_t>(i * rows + j)] = static_cast<unsigned char>(
            static_cast<std::int8_t>(quant::quantize(w[static_cast<std::size_t>(j * cols + i)], scale)));
    for (std::int64_t b = 1; b < batch; ++b)
      std::copy_n(c.bytes.begin(), one,
                  c.bytes.begin() + static_cast<std::ptrdiff_t>(b * static_cast<std::int64_t>(one)));
    return constant(role + " (int8, transposed and broadcast)", std::move(c));
  }

  /// pytorch.py matmul for operands of rank >= 3 and 2 (or both >= 3): broadcast both to the
  /// batch shape, batch_matmul in 3-d, reshape back, squeeze nothing. `rhs_constant` >= 0: the
  /// int8 form's folded weight (rhs is then ignored) with its scale.
  int matmul(const std::string& source, int a, int b, const shape_t b_shape, int rhs_constant = -1,
             float rhs_scale = 0) {
    const shape_t a_shape = g_.shape_of(a);
    shape_t batch(a_shape.begin(), a_shape.end() - 2);
    if (b_shape.size() > 2)
      for (std::size_t i = 0; i < batch.size(); ++i)
        batch[i] = std::max(batch[i], b_shape[i + b_shape.size() - 2 - batch.size()]);
    const auto with = [&](const shape_t& tail) {
      shape_t s = batch;
      s.insert(s.end(), tail.end() - 2, tail.end());
      return s;
    };
    at(source);
    int lhs =
        op::reshape(g_, op::broadcast_to(g_, a, with(a_shape)), {-1, a_shape[a_shape.size() - 2], a_shape.back()});
    int rhs = rhs_constant;
    if (rhs < 0) {
      at(source);
      rhs = op::reshape(g_, op::broadcast_to(g_, b, with(b_shape)), {-1, b_shape[b_shape.size() - 2], b_shape.back()});
    }
    shape_t out_shape = batch;
    out_shape.push_back(a_shape[a_shape.size() - 2]);
    out_shape.push_back(b_shape.back());
    if (!int8_) {
      const int product = op::batch_matmul(g_, lhs, rhs, false);
      return op::squeeze(g_, op::reshape(g_, product, out_shape), {});
    }
    lhs = quantize_input(lhs);
    float scale = rhs_scale;
    if (rhs_constant < 0) {
      rhs = quantize_input(rhs);
      scale = static_cast<float>(quant::input_scale);
    }
    const float product_scale = static_cast<float>(quant::input_scale) * scale;  // FoldConstantExpr(Multiply)
    no_span();  // realize.cc's ForwardOp drops the span of the calls it rebuilds
    const int product = op::reshape(g_, op::batch_matmul(g_, lhs, rhs, false, "int32"), out_shape);
    const int real = dequantize(product, product_scale);
    at(source);
    return op::squeeze(g_, real, {});
  }

  /// aten::linear(x, W [out, in], b [out]).
  int linear(int x, const std::string& role, std::int64_t out_features) {
    const std::int64_t in_features = g_.shape_of(x).back();
    return linear(x, role, values_.values(role + ".weight", static_cast<std::size_t>(out_features * in_features)),
                  values_.values(role + ".bias", static_cast<std::size_t>(out_features)), out_features);
  }
  int linear(int x, const std::string& role, const std::vector<float>& w, const std::vector<float>& b,
             std::int64_t out_features) {
    const std::string source = next("aten::linear");
    at(source);
    const shape_t x_shape = g_.shape_of(x);
    const std::int64_t in_features = x_shape.back();
    if (!int8_) {
      const int weight_var = weight(source, "weight", role + ".weight", {out_features, in_features}, w);
      const int bias = weight(source, "bias", role + ".bias", {out_features}, b);
      at(source);
      int product;
      if (x_shape.size() == 2) {
        product = op::dense(g_, x, weight_var, "None");
      } else {
        const int wt = op::transpose(g_, weight_var, {1, 0});
        product = matmul(source, x, wt, {in_features, out_features});
      }
      at(source);
      return op::bias_add(g_, product, bias, -1);
    }
    const float ws = quant::weight_scale(w);
    if (x_shape.size() == 2) return int8_dense(role, x, w, b, out_features, ws);
    const int folded = folded_weight(role + ".weight", w, out_features, in_features, x_shape[0], ws);
    const int product = matmul(source, x, -1, {in_features, out_features}, folded, ws);
    no_span();  // CanonicalizeOps: bias_add -> add
    return op::add(g_, product, constant(role + ".bias", float32_data({out_features}, b)));
  }

  /// The pooler's 2-d linear in the int8 form: DenseRealize, then AddRealize of the bias
  /// (UnifyDTypeScale: both to int32 at the smaller scale, the larger one left-shifted; the bias
  /// chain folded into an int32 constant), then Realize before tanh.
  int int8_dense(const std::string& role, int x, const std::vector<float>& w, const std::vector<float>& b,
                 std::int64_t out_features, float ws) {
    const std::int64_t in_features = g_.shape_of(x).back();
    const int qx = quantize_input(x);
    constant_data wq;
    wq.dt = dtype{dtype::int_code, 8, 1};
    wq.shape = {out_features, in_features};
    wq.bytes.resize(static_cast<std::size_t>(out_features * in_features));
    for (std::size_t k = 0; k < w.size(); ++k) wq.set_integer(k, quant::quantize(w[k], ws));
    const int wc = constant(role + ".weight (int8)", std::move(wq));
    no_span();
    int product = op::dense(g_, qx, wc, "None", "int32");
    const float s_product = static_cast<float>(quant::input_scale) * ws;
    const float s_bias = quant::weight_scale(b);
    const float s = std::min(s_product, s_bias);  // ChooseDomScale
    if (s_product > s) product = op::left_shift(g_, product, g_.scalar_int32(std::lround(std::log2(s_product / s))));
    const int bias_shift = s_bias > s ? static_cast<int>(std::lround(std::log2(s_bias / s))) : 0;
    constant_data bq;
    bq.dt = dtype::int32();
    bq.shape = {out_features};
    bq.bytes.resize(static_cast<std::size_t>(out_features) * 4);
    for (std::size_t k = 0; k < b.size(); ++k)
      bq.set_integer(k, quant::quantize(b[k], s_bias) * (std::int64_t{1} << bias_shift));
    const int sum = op::add(g_, product, constant(role + ".bias (int32, at the product's scale)", std::move(bq)));
    return dequantize(sum, s);
  }

  // -- the encoder layer -------------------------------------------------------------------------

  /// transpose_for_scores: view [B, S, heads, head_size], permute (0, 2, 1, 3).
  int heads(int x) {
    at(next("aten::view"));
    x = op::reshape(g_, x, {o_.batch, o_.seq, o_.heads, head_size()});
    at(next("aten::permute"));
    return op::transpose(g_, x, {0, 2, 1, 3});
  }

  int layer(int h, int mask, const std::string& p) {
    const std::int64_t H = o_.hidden;
    int q, k, v;
    if (o_.qkv == bert_options::attention_weights::separate) {
      q = linear(h, p + "query", H);
      k = heads(linear(h, p + "key", H));
      v = heads(linear(h, p + "value", H));
      q = heads(q);
    } else {
      // One [3H, H] linear (the three weights stacked), split(H, dim=-1), ListUnpack.
      std::vector<float> w, b;
      for (const char* part : {"query", "key", "value"}) {
        const auto pw = values_.values(p + part + ".weight", static_cast<std::size_t>(H * H));
        const auto pb = values_.values(p + part + ".bias", static_cast<std::size_t>(H));
        w.insert(w.end(), pw.begin(), pw.end());
        b.insert(b.end(), pb.begin(), pb.end());
      }
      const int qkv = linear(h, p + "qkv", w, b, 3 * H);
      at(next("aten::split"));
      const int parts = op::split(g_, qkv, {H, 2 * H}, 0, -1);
      at(next("prim::ListUnpack"));
      q = g_.get(parts, 0);
      k = heads(g_.get(parts, 1));
      v = heads(g_.get(parts, 2));
      q = heads(q);
    }
    at(next("aten::transpose"));
    const int kt = op::transpose(g_, k, {0, 1, 3, 2});
    int scores = matmul(next("aten::matmul"), q, kt, g_.shape_of(kt));
    at(next("aten::div"));
    scores = op::divide(g_, scores, g_.scalar(std::sqrt(static_cast<double>(head_size()))));
    at(next("aten::add"));
    scores = op::add(g_, scores, mask);
    at(next("aten::softmax"));
    int probs = op::softmax(g_, scores);
    probs = dropout(probs);
    int context = matmul(next("aten::matmul"), probs, v, g_.shape_of(v));
    at(next("aten::permute"));
    context = op::transpose(g_, context, {0, 2, 1, 3});
    next("aten::contiguous");
    at(next("aten::view"));
    context = op::reshape(g_, context, {o_.batch, o_.seq, H});

    int a = dropout(linear(context, p + "attention_output", H));
    a = layer_norm(add_named("aten::add", a, h), p + "attention_ln");
    int i = linear(a, p + "intermediate", o_.ffn);
    at(next("aten::gelu"));  // x * (0.5 + erf(x * 0.5**0.5) * 0.5)
    const int erf = op::unary(g_, "erf", op::multiply(g_, i, g_.scalar(std::sqrt(0.5))));
    i = op::multiply(g_, i, op::add(g_, g_.scalar(0.5), op::multiply(g_, erf, g_.scalar(0.5))));
    int out = dropout(linear(i, p + "output", H));
    return layer_norm(add_named("aten::add", out, a), p + "output_ln");
  }
};

// ---- the TensorFlow form -----------------------------------------------------------------------

class tensorflow_bert : builder {
 public:
  using builder::builder;

  generated build() {
    const std::int64_t B = o_.batch, S = o_.seq, H = o_.hidden;
    const type ids_type = type::tensor({B, S}, dtype::int32());
    const int input_ids = g_.var("input_ids", ids_type);
    const int input_mask = g_.var("input_mask", ids_type);
    const int segment_ids = g_.var("segment_ids", ids_type);

    // embedding_lookup
    at("bert/embeddings/ExpandDims");
    int x = op::expand_dims(g_, input_ids, -1);
    at("bert/embeddings/Reshape");
    x = op::reshape(g_, x, {-1});
    at("bert/embeddings/GatherV2");
    x = op::take(g_, weight("bert/embeddings/word_embeddings", "embeddings.word", {o_.vocab, H}), x, 0);
    at("bert/embeddings/Reshape_1");
    x = op::reshape(g_, x, {B, S, H});
    // embedding_postprocessor: token types through one_hot and a MatMul, then positions
    at("bert/embeddings/Reshape_2");
    int tt = op::reshape(g_, segment_ids, {-1});
    at("bert/embeddings/one_hot");
    tt = op::one_hot(g_, tt, g_.scalar(1.0), g_.scalar(0.0), o_.type_vocab, dtype::float32());
    at("bert/embeddings/MatMul");
    const int table = weight("bert/embeddings/token_type_embeddings", "embeddings.token_type", {o_.type_vocab, H});
    tt = op::dense(g_, tt, op::transpose(g_, table, {1, 0}), std::to_string(H));
    at("bert/embeddings/Reshape_3");
    tt = op::reshape(g_, tt, {B, S, H});
    at("bert/embeddings/add");
    x = op::add(g_, x, tt);
    at("bert/embeddings/Slice");
    int pos = op::strided_slice(
        g_, weight("bert/embeddings/position_embeddings", "embeddings.position", {o_.max_position, H}), {0, 0}, {S, H},
        {1});
    at("bert/embeddings/Reshape_4");
    pos = op::reshape(g_, pos, {1, S, H});
    at("bert/embeddings/add_1");
    x = op::add(g_, x, pos);
    x = layer_norm(x, "bert/embeddings/LayerNorm", "embeddings.ln", 2);

    // create_attention_mask_from_input_mask
    at("bert/encoder/Reshape");
    int mask = op::reshape(g_, input_mask, {B, 1, S});
    at("bert/encoder/Cast");
    mask = op::cast(g_, mask, dtype::float32());
    at("bert/encoder/ones");
    int ones;
    if (B * S < 1000) {  // array_ops.ones -> _constant_if_small: a Const, so a parameter
      ones = parameter("bert/encoder/ones", "ones",
                       float32_data({B, S, 1}, std::vector<float>(static_cast<std::size_t>(B * S), 1.0f)), "");
    } else {
      ones = op::full(g_, g_.scalar(1.0), {B, S, 1}, dtype::float32());
    }
    at("bert/encoder/mul");
    mask = op::multiply(g_, ones, mask);

    at("bert/encoder/Reshape_1");
    int h = op::reshape(g_, x, {-1, H});
    for (std::int64_t l = 0; l < o_.layers; ++l) h = layer(h, mask, l);
    at("bert/encoder/Reshape_" + std::to_string(o_.layers + 1));
    const int body = op::reshape(g_, h, {B, S, H});
    return finish({input_ids, input_mask, segment_ids}, body, false);
  }

 private:
  /// A TF variable (a Const of the frozen graph): @main's parameter named after it; the
  /// values of `role` (PyTorch layout) transposed for a kernel ([in, out]).
  int weight(const std::string& name, const std::string& role, const shape_t& shape, bool kernel = false) {
    std::size_t n = 1;
    for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
    const auto kind = name.ends_with("/gamma") ? bert_weights::kind::gamma : bert_weights::kind::normal;
    std::vector<float> v = values_.values(role, n, kind);
    if (kernel) v = transposed(v, static_cast<std::size_t>(shape[1]), static_cast<std::size_t>(shape[0]));
    return parameter(name, role, float32_data(shape, v), "");
  }

  /// tf.layers.dense: MatMul (nn.dense of the transposed kernel), BiasAdd (add).
  int dense(int x, const std::string& scope, const std::string& role, std::int64_t out) {
    const std::int64_t in = g_.shape_of(x).back();
    at(scope + "/MatMul");
    const int kernel = weight(scope + "/kernel", role + ".weight", {in, out}, true);
    const int mm = op::dense(g_, x, op::transpose(g_, kernel, {1, 0}), std::to_string(out));
    at(scope + "/BiasAdd");
    return op::add(g_, mm, weight(scope + "/bias", role + ".bias", {out}));
  }

  /// tf.contrib.layers.layer_norm: nn.moments and nn.batch_normalization's ops.
  int layer_norm(int x, const std::string& scope, const std::string& role, std::int64_t axis) {
    const int gamma = weight(scope + "/gamma", role + ".gamma", {o_.hidden});
    const int beta = weight(scope + "/beta", role + ".beta", {o_.hidden});
    at(scope + "/moments/mean");
    const int mean = op::mean(g_, x, axis, true);
    at(scope + "/moments/SquaredDifference");
    const int diff = op::subtract(g_, x, mean);
    const int squared = op::multiply(g_, diff, diff);
    at(scope + "/moments/variance");
    const int var = op::mean(g_, squared, axis, true);
    at(scope + "/batchnorm/add");
    const int var_eps = op::add(g_, var, g_.scalar(1e-12));
    at(scope + "/batchnorm/Rsqrt");
    const int rs = op::unary(g_, "rsqrt", var_eps);
    at(scope + "/batchnorm/mul");
    const int inv = op::multiply(g_, rs, gamma);
    at(scope + "/batchnorm/mul_1");
    const int scaled = op::multiply(g_, x, inv);
    at(scope + "/batchnorm/mul_2");
    const int mean_scaled = op::multiply(g_, mean, inv);
    at(scope + "/batchnorm/sub");
    const int shift = op::subtract(g_, beta, mean_scaled);
    at(scope + "/batchnorm/add_1");
    return op::add(g_, scaled, shift);
  }

  /// BatchMatMulV2 of two rank-4 operands (tensorflow_ops._batch_matmul, NT form).
  int batch_matmul(const std::string& name, int x, int y, bool adj_y) {
    at(name);
    const shape_t xs = g_.shape_of(x), ys = g_.shape_of(y);
    const std::int64_t outer = xs[0] * xs[1];
    const int rx = op::reshape(g_, x, {outer, xs[2], xs[3]});
    int ry = op::reshape(g_, y, {outer, ys[2], ys[3]});
    if (!adj_y) ry = op::transpose(g_, ry, {0, 2, 1});
    const int product = op::batch_matmul(g_, rx, ry, true);
    return op::reshape(g_, product, {xs[0], xs[1], xs[2], adj_y ? ys[2] : ys[3]});
  }

  /// transpose_for_scores: reshape [B, S, heads, head_size], transpose [0, 2, 1, 3].
  int heads(int x, const std::string& scope, const std::string& suffix) {
    at(scope + "/Reshape" + suffix);
    x = op::reshape(g_, x, {o_.batch, o_.seq, o_.heads, head_size()});
    at(scope + "/transpose" + suffix);
    return op::transpose(g_, x, {0, 2, 1, 3});
  }

  int layer(int h, int mask, std::int64_t l) {
    const std::int64_t H = o_.hidden;
    const std::string p = "bert/encoder/layer_" + std::to_string(l) + "/";
    const std::string role = "layer" + std::to_string(l) + ".";
    const std::string self = p + "attention/self";
    int q, k, v;
    if (o_.qkv == bert_options::attention_weights::separate) {
      q = dense(h, self + "/query", role + "query", H);
      k = dense(h, self + "/key", role + "key", H);
      v = dense(h, self + "/value", role + "value", H);
    } else {
      // One dense of the stacked kernel, tf.split(x, 3, axis=-1).
      at(self + "/query_key_value/MatMul");
      std::vector<float> w, b;
      for (const char* part : {"query", "key", "value"}) {
        const auto pw = values_.values(role + part + ".weight", static_cast<std::size_t>(H * H));
        const auto pb = values_.values(role + part + ".bias", static_cast<std::size_t>(H));
        w.insert(w.end(), pw.begin(), pw.end());
        b.insert(b.end(), pb.begin(), pb.end());
      }
      const int kernel = parameter(
          self + "/query_key_value/kernel", role + "qkv.weight",
          float32_data({H, 3 * H}, transposed(w, static_cast<std::size_t>(3 * H), static_cast<std::size_t>(H))), "");
      const int mm = op::dense(g_, h, op::transpose(g_, kernel, {1, 0}), std::to_string(3 * H));
      at(self + "/query_key_value/BiasAdd");
      const int qkv =
          op::add(g_, mm, parameter(self + "/query_key_value/bias", role + "qkv.bias", float32_data({3 * H}, b), ""));
      at(self + "/split");
      const int parts = op::split(g_, qkv, {}, 3, -1);
      q = g_.get(parts, 0);
      k = g_.get(parts, 1);
      v = g_.get(parts, 2);
    }
    q = heads(q, self, "");
    k = heads(k, self, "_1");
    int scores = batch_matmul(self + "/MatMul", q, k, true);
    at(self + "/Mul");
    scores = op::multiply(g_, scores, g_.scalar(1.0 / std::sqrt(static_cast<double>(head_size()))));
    at(self + "/ExpandDims");
    int adder = op::expand_dims(g_, mask, 1);
    at(self + "/sub");
    adder = op::subtract(g_, g_.scalar(1.0), adder);
    at(self + "/mul_1");
    adder = op::multiply(g_, adder, g_.scalar(-10000.0));
    at(self + "/add");
    scores = op::add(g_, scores, adder);
    at(self + "/Softmax");
    const int probs = op::softmax(g_, scores);
    v = heads(v, self, "_2");
    int context = batch_matmul(self + "/MatMul_1", probs, v, false);
    at(self + "/transpose_3");
    context = op::transpose(g_, context, {0, 2, 1, 3});
    at(self + "/Reshape_3");
    context = op::reshape(g_, context, {o_.batch * o_.seq, H});

    int a = dense(context, p + "attention/output/dense", role + "attention_output", H);
    at(p + "attention/output/add");
    a = layer_norm(op::add(g_, a, h), p + "attention/output/LayerNorm", role + "attention_ln", 1);
    int i = dense(a, p + "intermediate/dense", role + "intermediate", o_.ffn);
    i = gelu(i, p + "intermediate/dense/");
    int out = dense(i, p + "output/dense", role + "output", H);
    at(p + "output/add");
    return layer_norm(op::add(g_, out, a), p + "output/LayerNorm", role + "output_ln", 1);
  }

  /// modeling.py gelu: 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) * x, op by op.
  int gelu(int x, const std::string& scope) {
    at(scope + "Pow");
    const int cube = op::power(g_, x, g_.scalar(3.0));
    at(scope + "mul");
    const int m = op::multiply(g_, g_.scalar(0.044715), cube);
    at(scope + "add");
    const int inner = op::add(g_, x, m);
    at(scope + "mul_1");
    const int scaled = op::multiply(g_, g_.scalar(std::sqrt(2.0 / 3.141592653589793)), inner);
    at(scope + "Tanh");
    const int t = op::unary(g_, "tanh", scaled);
    at(scope + "add_1");
    const int one_plus = op::add(g_, g_.scalar(1.0), t);
    at(scope + "mul_2");
    const int cdf = op::multiply(g_, g_.scalar(0.5), one_plus);
    at(scope + "mul_3");
    return op::multiply(g_, x, cdf);
  }
};

}  // namespace bert_detail

/// BERT as TVM v0.19 prints it (see the file comment); throws std::invalid_argument for an
/// option the forms do not have.
inline generated bert(const bert_options& o) {
  if (o.layers < 1 || o.batch < 1 || o.seq < 1 || o.hidden < 1 || o.heads < 1 || o.ffn < 1 || o.vocab < 1 ||
      o.type_vocab < 1)
    throw std::invalid_argument("bert: every size must be positive");
  if (o.hidden % o.heads) throw std::invalid_argument("bert: hidden must be a multiple of heads");
  if (o.seq > o.max_position) throw std::invalid_argument("bert: seq exceeds max_position");
  if (o.form == bert_options::source::tensorflow) {
    if (o.dtype == bert_options::precision::int8)
      throw std::invalid_argument("bert: the int8 form is generated from the pytorch form");
    if (o.layer_norm == bert_options::norm::unpacked)
      throw std::invalid_argument(
          "bert: the tensorflow form's layer norms are already TF's ops (--layer-norm applies to the pytorch form)");
    return bert_detail::tensorflow_bert(o).build();
  }
  return bert_detail::pytorch_bert(o).build();
}

}  // namespace fuse::relay::models
