// torchvision's GoogLeNet (Inception v1) described with the Network API, so the benchmark and
// the GPU check need no ONNX file for a nine-module, four-branch network. Layer names are the
// torchvision state_dict prefixes ("conv1.conv", "conv1.bn", "inception3a.branch2.1.conv",
// "fc"), so a state_dict exported from PyTorch binds by name. Left out on purpose: the auxiliary
// heads (torchvision drops them in eval), dropout (identity at inference) and transform_input
// (torchvision applies it only with its pretrained weights; normalise the input instead).
#pragma once

#include <cgr/network.hpp>

namespace cgr::models {

// A complete network: input "image" of batch x 3 x size x size, output "logits"
// (batch x classes). Every max pool uses ceil_mode, as torchvision's does.
Network googlenet(std::int64_t batch = 1, std::int64_t size = 224, std::int64_t classes = 1000);

}  // namespace cgr::models
