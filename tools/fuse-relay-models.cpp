// fuse-relay-models: writes real models as TVM v0.19 prints them, with their weights, so that
// the frontend can be run on real-model text (tools/models/*.hpp say what each form follows).
//
//   fuse-relay-models bert [--layers N] [--batch B] [--seq S] [--hidden H] [--heads A] [--ffn F]
//       [--vocab V] [--form pytorch|tensorflow] [--layer-norm op|unpacked] [--qkv separate|fused]
//       [--dtype float32|int8] [--spans on|off] [--seed S] -o MODEL.relay [--params MODEL.params]
//       [--npz MODEL.npz]
//
// Defaults: BERT-base (12 layers, hidden 768, 12 heads, ffn 3072, vocab 30522) at batch 8 and
// sequence 384 (the shapes of seed 002), the PyTorch form in float32. --params writes the weights
// as TVM's save_param_dict does (named as @main's parameters, or `meta[relay.Constant][i]` for
// the int8 form's constants: `fuse-relay ... --params` binds either); --npz as np.savez.
//
// Exit status: 0 success, 1 an option the forms do not have or a file that cannot be written,
// 2 bad usage.
#include <charconv>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <fuse/relay/params.hpp>

#include "models/bert.hpp"

namespace {

constexpr const char* usage_text =
    "usage:\n"
    "  fuse-relay-models bert [--layers N] [--batch B] [--seq S] [--hidden H] [--heads A] [--ffn F] [--vocab V]\n"
    "      [--form pytorch|tensorflow] [--layer-norm op|unpacked] [--qkv separate|fused] [--dtype float32|int8]\n"
    "      [--spans on|off] [--seed S] -o MODEL.relay [--params MODEL.params] [--npz MODEL.npz]\n";

struct usage_error {
  std::string message;
};

std::int64_t number(const std::string& option, const std::string& text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < 0)
    throw usage_error{option + " " + text + " is not a non-negative integer"};
  return v;
}

template <typename E>
E choice(const std::string& option, const std::string& text,
         std::initializer_list<std::pair<std::string_view, E>> options) {
  std::string names;
  for (const auto& [name, value] : options) {
    if (text == name) return value;
    names += (names.empty() ? "" : " or ") + std::string(name);
  }
  throw usage_error{option + " " + text + ": " + names};
}

int bert_command(int argc, char** argv) {
  using fuse::relay::models::bert_options;
  bert_options o;
  std::string out, params, npz;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc)
      throw usage_error{a.rfind("-", 0) == 0 ? "option " + a + " needs a value" : "unexpected argument " + a};
    const std::string v = argv[++i];
    if (a == "-o") out = v;
    else if (a == "--params") params = v;
    else if (a == "--npz") npz = v;
    else if (a == "--layers") o.layers = number(a, v);
    else if (a == "--batch") o.batch = number(a, v);
    else if (a == "--seq") o.seq = number(a, v);
    else if (a == "--hidden") o.hidden = number(a, v);
    else if (a == "--heads") o.heads = number(a, v);
    else if (a == "--ffn") o.ffn = number(a, v);
    else if (a == "--vocab") o.vocab = number(a, v);
    else if (a == "--seed") o.seed = static_cast<std::uint64_t>(number(a, v));
    else if (a == "--form")
      o.form = choice<bert_options::source>(
          a, v, {{"pytorch", bert_options::source::pytorch}, {"tensorflow", bert_options::source::tensorflow}});
    else if (a == "--layer-norm")
      o.layer_norm = choice<bert_options::norm>(
          a, v, {{"op", bert_options::norm::op}, {"unpacked", bert_options::norm::unpacked}});
    else if (a == "--qkv")
      o.qkv = choice<bert_options::attention_weights>(
          a, v,
          {{"separate", bert_options::attention_weights::separate}, {"fused", bert_options::attention_weights::fused}});
    else if (a == "--dtype")
      o.dtype = choice<bert_options::precision>(
          a, v, {{"float32", bert_options::precision::float32}, {"int8", bert_options::precision::int8}});
    else if (a == "--spans") o.spans = choice<bool>(a, v, {{"on", true}, {"off", false}});
    else throw usage_error{"unknown option " + a};
  }
  if (out.empty()) throw usage_error{"missing -o MODEL.relay"};

  const fuse::relay::models::generated g = fuse::relay::models::bert(o);
  {
    std::ofstream f(out, std::ios::binary);
    f << g.text;
    if (!f.good()) throw fuse::relay::error("cannot write " + out);
  }
  if (!params.empty()) fuse::relay::params::save_param_dict(params, g.weights);
  if (!npz.empty()) fuse::relay::params::save_npz(npz, g.weights);
  std::size_t elements = 0;
  for (const auto& w : g.weights) elements += static_cast<std::size_t>(w.data.elements());
  std::fprintf(stderr, "fuse-relay-models: %s: %zu bytes of text, %zu weights (%zu elements)\n", out.c_str(),
               g.text.size(), g.weights.size(), elements);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) throw usage_error{"missing model"};
    const std::string model = argv[1];
    if (model == "-h" || model == "--help") {
      std::fputs(usage_text, stdout);
      return 0;
    }
    if (model == "bert") return bert_command(argc, argv);
    throw usage_error{"unknown model " + model + " (bert)"};
  } catch (const usage_error& e) {
    std::fprintf(stderr, "fuse-relay-models: %s\n%s", e.message.c_str(), usage_text);
    return 2;
  } catch (const fuse::relay::error& e) {
    std::fprintf(stderr, "fuse-relay-models: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuse-relay-models: %s\n", e.what());
    return 1;
  }
}
