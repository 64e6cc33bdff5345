// Deterministic weights for any Network: what the samples, benchmarks and tests use when no
// trained checkpoint is given. Conv and linear weights follow PyTorch's default init scale
// (uniform in +-1/sqrt(fan_in)), so activations keep a sane range through deep networks;
// BatchNorm statistics are drawn around their identity values (var > 0).
#pragma once

#include <cstdint>
#include <vector>

#include <cgr/network.hpp>
#include <cgr/weights.hpp>

namespace cgr::models {

Weights random_weights(const Network& net, std::uint64_t seed = 0);

// `count` values uniform in [-1, 1), reproducible from the seed.
std::vector<float> random_values(std::size_t count, std::uint64_t seed);

}  // namespace cgr::models
