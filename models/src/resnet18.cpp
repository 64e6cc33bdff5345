#include "cgr/models/resnet18.hpp"

#include <string>

namespace cgr::models {
namespace {

// torchvision BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + identity), where identity is
// x or downsample(x) (1x1 conv stride s + bn) when the shape changes.
Value basic_block(Network& net, Value x, std::int64_t channels, std::int64_t stride,
                  const std::string& prefix) {
  const std::int64_t in_channels = net.desc(x).shape[1];
  Value out = net.conv2d(x,
                         {.out_channels = channels, .kernel = 3, .stride = stride, .padding = 1,
                          .bias = false},
                         prefix + ".conv1");
  out = net.batch_norm2d(out, prefix + ".bn1");
  out = net.relu(out, prefix + ".relu1");
  out = net.conv2d(out, {.out_channels = channels, .kernel = 3, .padding = 1, .bias = false},
                   prefix + ".conv2");
  out = net.batch_norm2d(out, prefix + ".bn2");
  Value identity = x;
  if (stride != 1 || in_channels != channels) {
    identity = net.conv2d(x, {.out_channels = channels, .kernel = 1, .stride = stride, .bias = false},
                          prefix + ".downsample.0");
    identity = net.batch_norm2d(identity, prefix + ".downsample.1");
  }
  out = net.add(out, identity, prefix + ".add");
  return net.relu(out, prefix + ".relu2");
}

Value stage(Network& net, Value x, std::int64_t channels, std::int64_t stride,
            const std::string& name) {
  x = basic_block(net, x, channels, stride, name + ".0");
  return basic_block(net, x, channels, 1, name + ".1");
}

}  // namespace

ResNet18Outputs add_resnet18(Network& net, Value image, std::int64_t classes) {
  ResNet18Outputs out;
  Value x = net.conv2d(image,
                       {.out_channels = 64, .kernel = 7, .stride = 2, .padding = 3, .bias = false},
                       "conv1");
  x = net.batch_norm2d(x, "bn1");
  x = net.relu(x, "relu");
  out.stem = net.max_pool2d(x, {.kernel = 3, .stride = 2, .padding = 1}, "maxpool");
  out.layer1 = stage(net, out.stem, 64, 1, "layer1");
  out.layer2 = stage(net, out.layer1, 128, 2, "layer2");
  out.layer3 = stage(net, out.layer2, 256, 2, "layer3");
  out.layer4 = stage(net, out.layer3, 512, 2, "layer4");
  x = net.global_avg_pool(out.layer4, "avgpool");
  x = net.flatten(x, "flatten");
  out.logits = net.linear(x, {.out_features = classes}, "fc");
  return out;
}

Network resnet18(std::int64_t batch, std::int64_t size, std::int64_t classes) {
  Network net;
  const Value image = net.input("image", {batch, 3, size, size});
  net.output("logits", add_resnet18(net, image, classes).logits);
  return net;
}

}  // namespace cgr::models
