#include "cgr/models/inception.hpp"

#include <string>

namespace cgr::models {
namespace {

Value basic_conv(Network& net, Value x, std::int64_t out, std::int64_t kernel, const std::string& name) {
  Value v = net.conv2d(x, {.out_channels = out, .kernel = kernel, .padding = kernel / 2, .bias = false},
                       name + ".conv");
  v = net.batch_norm2d(v, {.eps = 1e-3}, name + ".bn");
  return net.relu(v, name + ".relu");
}

}  // namespace

Value add_inception(Network& net, Value x, const InceptionChannels& c, const std::string& name) {
  const Value b1 = basic_conv(net, x, c.ch1x1, 1, name + ".branch1");
  Value b2 = basic_conv(net, x, c.ch3x3red, 1, name + ".branch2.0");
  b2 = basic_conv(net, b2, c.ch3x3, 3, name + ".branch2.1");
  Value b3 = basic_conv(net, x, c.ch5x5red, 1, name + ".branch3.0");
  b3 = basic_conv(net, b3, c.ch5x5, 3, name + ".branch3.1");
  Value b4 = net.max_pool2d(x, {.kernel = 3, .stride = 1, .padding = 1, .ceil_mode = true},
                            name + ".branch4.0");
  b4 = basic_conv(net, b4, c.pool_proj, 1, name + ".branch4.1");
  return net.concat({b1, b2, b3, b4}, name + ".cat");
}

Network inception_module(std::int64_t in_channels, std::int64_t size, const InceptionChannels& channels) {
  Network net;
  const Value x = net.input("x", {1, in_channels, size, size});
  net.output("out", add_inception(net, x, channels, "inception3a"));
  return net;
}

}  // namespace cgr::models
