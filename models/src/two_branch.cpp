#include "cgr/models/two_branch.hpp"

#include <string>

namespace cgr::models {

Network two_branch(const TwoBranchOptions& o) {
  Network net;
  const Value x = net.input("x", {o.batch, o.channels, o.size, o.size});
  auto chain = [&](int first) {
    Value v = x;
    for (int i = first; i < first + 3; ++i) {
      const std::string name = "conv" + std::to_string(i);
      v = net.conv2d(v, {.out_channels = o.width, .kernel = 3, .padding = 1}, name);
      if (o.relu) v = net.relu(v, name + ".relu");
    }
    return v;
  };
  const Value y = chain(1);
  const Value z = chain(4);
  net.output("out", net.concat({y, z}, "cat"));
  return net;
}

}  // namespace cgr::models
