// BERT's weights with a trained model's magnitudes, reproducible from a seed.
//
// Each tensor has a role that does not depend on the form the model is written in
// ("layer3.query.weight"), and its values depend only on the seed and the role: the PyTorch and
// TensorFlow forms, the fused-QKV form and the int8 form of one seed compute the same network
// from the same numbers (a TensorFlow kernel is the PyTorch weight transposed, a fused QKV weight
// the three stacked). Linear weights, biases and embeddings are N(0, 0.02) (BERT's
// initializer_range), layer-norm gammas 1 + N(0, 0.02) and betas N(0, 0.02).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuse/relay/ir.hpp"

namespace fuse::relay::models {

/// The values of one role's tensor, row-major in PyTorch's layout ([out, in] for a linear).
class bert_weights {
 public:
  explicit bert_weights(std::uint64_t seed) : seed_(seed) {}

  enum class kind { normal, gamma };

  std::vector<float> values(const std::string& role, std::size_t count, kind k = kind::normal) const {
    std::uint64_t state = seed_ ^ 0x9E3779B97F4A7C15ull;
    for (unsigned char c : role) state = mix(state ^ c);
    std::vector<float> out(count);
    const double two_pi = 6.283185307179586;
    for (std::size_t i = 0; i < count; i += 2) {
      // Box-Muller on two uniforms in (0, 1].
      const double u1 = (static_cast<double>(next(state) >> 11) + 1.0) * 0x1.0p-53;
      const double u2 = static_cast<double>(next(state) >> 11) * 0x1.0p-53;
      const double r = std::sqrt(-2.0 * std::log(u1)) * 0.02;
      const double base = k == kind::gamma ? 1.0 : 0.0;
      out[i] = static_cast<float>(base + r * std::cos(two_pi * u2));
      if (i + 1 < count) out[i + 1] = static_cast<float>(base + r * std::sin(two_pi * u2));
    }
    return out;
  }

 private:
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  static std::uint64_t next(std::uint64_t& s) {  // splitmix64
    s += 0x9E3779B97F4A7C15ull;
    return mix(s);
  }
  std::uint64_t seed_;
};

/// A float32 tensor's constant_data.
inline constant_data float32_data(const std::vector<std::int64_t>& shape, const std::vector<float>& v) {
  constant_data c;
  c.dt = dtype::float32();
  c.shape = shape;
  c.bytes.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(c.bytes.data(), v.data(), v.size() * 4);
  return c;
}

/// v ([rows, cols], row-major) transposed.
inline std::vector<float> transposed(const std::vector<float>& v, std::size_t rows, std::size_t cols) {
  std::vector<float> t(v.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
  return t;
}

}  // namespace fuse::relay::models
