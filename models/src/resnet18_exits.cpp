#include "cgr/models/resnet18_exits.hpp"

#include <string>

#include "cgr/models/resnet18.hpp"

namespace cgr::models {

Network resnet18_exits(std::int64_t batch, std::int64_t size, std::int64_t classes) {
  Network net;
  const Value image = net.input("image", {batch, 3, size, size});
  const ResNet18Outputs backbone = add_resnet18(net, image, classes);
  net.output("final", backbone.logits);
  const Value attach[] = {backbone.layer1, backbone.layer2, backbone.layer3};
  const Value speculate[] = {backbone.layer2, backbone.layer3, backbone.layer4};
  for (int k = 0; k < 3; ++k) {
    const std::string p = "exits." + std::to_string(k);
    Value h = net.conv2d(attach[k],
                         {.out_channels = kExitHeadChannels, .kernel = 3, .padding = 1, .bias = false},
                         p + ".conv");
    h = net.batch_norm2d(h, p + ".bn");
    h = net.relu(h, p + ".relu");
    h = net.global_avg_pool(h, p + ".pool");
    h = net.flatten(h, p + ".flatten");
    h = net.linear(h, {.out_features = classes}, p + ".fc");
    net.exit("exit" + std::to_string(k), h, speculate[k]);
  }
  return net;
}

}  // namespace cgr::models
