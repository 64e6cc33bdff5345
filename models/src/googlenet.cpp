#include "cgr/models/googlenet.hpp"

#include <string>

#include "cgr/models/inception.hpp"

namespace cgr::models {
namespace {

// torchvision's BasicConv2d: conv without bias -> BatchNorm (eps 1e-3) -> ReLU.
Value basic_conv(Network& net, Value x, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                 std::int64_t padding, const std::string& name) {
  Value v = net.conv2d(
      x,
      {.out_channels = out, .kernel = kernel, .stride = stride, .padding = padding, .bias = false},
      name + ".conv");
  v = net.batch_norm2d(v, {.eps = 1e-3}, name + ".bn");
  return net.relu(v, name + ".relu");
}

Value max_pool(Network& net, Value x, std::int64_t kernel, const std::string& name) {
  return net.max_pool2d(x, {.kernel = kernel, .stride = 2, .ceil_mode = true}, name);
}

}  // namespace

Network googlenet(std::int64_t batch, std::int64_t size, std::int64_t classes) {
  Network net;
  const Value image = net.input("image", {batch, 3, size, size});
  Value x = basic_conv(net, image, 64, 7, 2, 3, "conv1");
  x = max_pool(net, x, 3, "maxpool1");
  x = basic_conv(net, x, 64, 1, 1, 0, "conv2");
  x = basic_conv(net, x, 192, 3, 1, 1, "conv3");
  x = max_pool(net, x, 3, "maxpool2");
  // Channels as in torchvision's GoogLeNet.__init__: ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5,
  // pool_proj (the "5x5" branch is a 3x3 conv there, and add_inception follows it).
  x = add_inception(net, x, {64, 96, 128, 16, 32, 32}, "inception3a");
  x = add_inception(net, x, {128, 128, 192, 32, 96, 64}, "inception3b");
  x = max_pool(net, x, 3, "maxpool3");
  x = add_inception(net, x, {192, 96, 208, 16, 48, 64}, "inception4a");
  x = add_inception(net, x, {160, 112, 224, 24, 64, 64}, "inception4b");
  x = add_inception(net, x, {128, 128, 256, 24, 64, 64}, "inception4c");
  x = add_inception(net, x, {112, 144, 288, 32, 64, 64}, "inception4d");
  x = add_inception(net, x, {256, 160, 320, 32, 128, 128}, "inception4e");
  x = max_pool(net, x, 2, "maxpool4");  // kernel 2 here, 3 elsewhere
  x = add_inception(net, x, {256, 160, 320, 32, 128, 128}, "inception5a");
  x = add_inception(net, x, {384, 192, 384, 48, 128, 128}, "inception5b");
  x = net.global_avg_pool(x, "avgpool");
  x = net.flatten(x, "flatten");
  net.output("logits", net.linear(x, {.out_features = classes}, "fc"));
  return net;
}

}  // namespace cgr::models
