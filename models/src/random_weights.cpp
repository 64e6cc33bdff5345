#include "cgr/models/random_weights.hpp"

#include <cmath>
#include <random>
#include <string>

namespace cgr::models {

namespace {

// FNV-1a: a name hash that is the same with every standard library.
std::uint64_t name_hash(const std::string& name) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : name) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

}  // namespace

std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (auto& v : values) v = uniform(rng);
  return values;
}

Weights random_weights(const Network& net, std::uint64_t seed) {
  Weights weights;
  for (int i = 0; i < net.layer_count(); ++i) {
    const Layer& layer = net.layer(i);
    const bool is_norm = layer.kind() == BatchNorm2d::kKind;
    for (const WeightSpec& spec : layer.weight_specs()) {
      const std::string name = layer.name() + "." + spec.suffix;
      // Seed per tensor name: weights do not change when unrelated layers are added.
      const std::uint64_t tensor_seed = seed * 0x9E3779B97F4A7C15ull + name_hash(name);
      std::vector<float> values =
          random_values(static_cast<std::size_t>(spec.shape.numel()), tensor_seed);
      if (is_norm) {
        for (auto& v : values) {
          if (spec.suffix == "weight") v = 1.0f + 0.25f * v;
          else if (spec.suffix == "bias") v = 0.1f * v;
          else if (spec.suffix == "running_mean") v = 0.1f * v;
          else v = 1.0f + 0.5f * v;  // running_var in [0.5, 1.5)
        }
      } else {
        // fan_in: all dims of the weight but the first; the bias shares its layer's scale.
        std::int64_t fan_in = 1;
        for (const WeightSpec& other : layer.weight_specs()) {
          if (other.suffix == "weight") {
            for (std::size_t d = 1; d < other.shape.rank(); ++d) fan_in *= other.shape[d];
          }
        }
        const float scale = 1.0f / std::sqrt(static_cast<float>(fan_in));
        for (auto& v : values) v *= scale;
      }
      weights.add(name, Tensor(spec.shape, std::move(values)));
    }
  }
  return weights;
}

}  // namespace cgr::models
