// The network users ask about first:
//   y = conv3(conv2(conv1(x)));  z = conv6(conv5(conv4(x)));  out = cat((y, z), dim=1)
// Two independent conv chains on one input: eager PyTorch runs them one after the other.
#pragma once

#include <cgr/network.hpp>

namespace cgr::models {

struct TwoBranchOptions {
  std::int64_t batch = 1;
  std::int64_t channels = 3;   // input channels
  std::int64_t size = 64;      // input height and width
  std::int64_t width = 32;     // channels of every conv
  bool relu = true;            // ReLU after each conv (conv1.relu, ...)
};

// Input "x", output "out" (N x 2*width x size x size). Convs are 3x3, padding 1, with bias.
Network two_branch(const TwoBranchOptions& options = {});

}  // namespace cgr::models
