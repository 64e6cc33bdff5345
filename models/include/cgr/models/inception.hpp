// One Inception module as in torchvision's GoogLeNet (inception3a by default): four branches
// on the same input, concatenated on channels:
//   branch1: 1x1;  branch2: 1x1 -> 3x3;  branch3: 1x1 -> 3x3 (torchvision uses 3x3 here);
//   branch4: 3x3 max pool (stride 1, ceil_mode) -> 1x1.
// Each conv is torchvision's BasicConv2d: conv (no bias) -> BatchNorm (eps 1e-3) -> ReLU,
// named "<name>.branchK[.I].conv" / ".bn" like GoogLeNet's state_dict.
#pragma once

#include <cgr/network.hpp>

namespace cgr::models {

struct InceptionChannels {
  std::int64_t ch1x1 = 64, ch3x3red = 96, ch3x3 = 128, ch5x5red = 16, ch5x5 = 32, pool_proj = 32;
};

Value add_inception(Network& net, Value x, const InceptionChannels& c, const std::string& name);

// Input "x" of 1 x in_channels x size x size (inception3a: 192 x 28 x 28), output "out".
Network inception_module(std::int64_t in_channels = 192, std::int64_t size = 28,
                         const InceptionChannels& channels = {});

}  // namespace cgr::models
