// ResNet-18 with three auxiliary early-exit heads, after layer1, layer2 and layer3.
// Head k: Conv2d(C_k -> 128, 3x3, pad 1, no bias) -> BatchNorm2d(128) -> ReLU -> global
// average pool -> Linear(128 -> classes). Weight names: torchvision's for the backbone,
// "exits.{k}.conv.weight", "exits.{k}.bn.{weight,bias,running_mean,running_var}",
// "exits.{k}.fc.{weight,bias}" for the heads (what export_weights.py writes).
// Exits "exit0".."exit2"; the backbone's logits are the output "final". Head k speculates
// over stage k+2 (it runs beside it); with ExitPolicy::early what follows waits for it.
#pragma once

#include <cgr/network.hpp>

namespace cgr::models {

inline constexpr std::int64_t kExitHeadChannels = 128;

Network resnet18_exits(std::int64_t batch = 1, std::int64_t size = 224, std::int64_t classes = 1000);

}  // namespace cgr::models
