// torchvision's ResNet-18 described with the Network API. Layer names are the torchvision
// state_dict prefixes ("conv1", "bn1", "layer1.0.conv1", "layer2.0.downsample.0", "fc"), so a
// state_dict exported from PyTorch binds by name.
#pragma once

#include <cgr/network.hpp>

namespace cgr::models {

struct ResNet18Outputs {
  Value stem;                  // after conv1/bn1/relu/maxpool
  Value layer1, layer2, layer3, layer4;
  Value logits;                // fc output, N x classes
};

// Adds ResNet-18 on `image` (N x 3 x H x W) to `net`; does not declare outputs.
ResNet18Outputs add_resnet18(Network& net, Value image, std::int64_t classes = 1000);

// A complete network: input "image" of 1 x 3 x size x size (batch configurable), output
// "logits".
Network resnet18(std::int64_t batch = 1, std::int64_t size = 224, std::int64_t classes = 1000);

}  // namespace cgr::models
