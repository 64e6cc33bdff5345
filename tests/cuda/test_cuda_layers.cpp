// Every layer through the CUDA executor, in all three modes, against the CPU executor: random
// inputs and seeded weights, fp32 with TF32 off, relative error <= 1e-4. Before every run the
// device output buffer is filled with NaN bytes, so an element a kernel fails to write shows
// up as a NaN the reference does not have (relative_error makes that an infinite error).
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "../test_support.hpp"
#include "cuda_check.hpp"
#include "cuda_device.hpp"
#include "models/random_weights.hpp"

using namespace cgr;

namespace {

const bool no_device = !cgr::detail::cuda_unavailable_reason().empty();

struct LayerCase {
  std::string name;
  Shape input;
  std::function<Value(Network&, Value)> build;
  bool fuse = true;
};

std::vector<LayerCase> layer_cases() {
  std::vector<LayerCase> cases;
  const Shape image{2, 8, 11, 13};  // batch 2, odd sizes: no kernel gets a friendly shape
  cases.push_back({"Conv2d 3x3 pad 1 + bias", image, [](Network& n, Value x) {
                     return n.conv2d(x, {.out_channels = 12, .kernel = 3, .padding = 1}, "conv");
                   }});
  cases.push_back(
      {"Conv2d stride 2, asymmetric padding (pad kernel + cuDNN)", image, [](Network& n, Value x) {
         return n.conv2d(
             x, {.out_channels = 6, .kernel = 3, .stride = 2, .padding = Padding2d(1, 0, 2, 1)},
             "conv");
       }});
  cases.push_back({"Conv2d dilation 2, groups 2, no bias", image, [](Network& n, Value x) {
                     return n.conv2d(x,
                                     {.out_channels = 8,
                                      .kernel = 3,
                                      .padding = 2,
                                      .dilation = 2,
                                      .groups = 2,
                                      .bias = false},
                                     "conv");
                   }});
  cases.push_back({"Conv2d depthwise 5x5", image, [](Network& n, Value x) {
                     return n.conv2d(x, {.out_channels = 8, .kernel = 5, .padding = 2, .groups = 8},
                                     "conv");
                   }});
  cases.push_back({"Conv2d + BatchNorm2d + ReLU (fused)", image, [](Network& n, Value x) {
                     Value y = n.conv2d(
                         x, {.out_channels = 16, .kernel = 3, .padding = 1, .bias = false}, "conv");
                     return n.relu(n.batch_norm2d(y, "bn"), "relu");
                   }});
  cases.push_back(
      {"Conv2d + BatchNorm2d + residual Add + ReLU (fused)", image, [](Network& n, Value x) {
         Value y =
             n.conv2d(x, {.out_channels = 8, .kernel = 3, .padding = 1, .bias = false}, "conv");
         return n.relu(n.add(n.batch_norm2d(y, "bn"), x, "add"), "relu");
       }});
  cases.push_back({"Conv2d 1x1, unfused Conv2d + BatchNorm2d + ReLU", image,
                   [](Network& n, Value x) {
                     Value y = n.conv2d(x, {.out_channels = 4, .kernel = 1}, "conv");
                     return n.relu(n.batch_norm2d(y, "bn"), "relu");
                   },
                   false});
  cases.push_back({"BatchNorm2d on its own", image,
                   [](Network& n, Value x) { return n.batch_norm2d(x, "bn"); }});
  cases.push_back({"ReLU", image, [](Network& n, Value x) { return n.relu(x, "relu"); }});
  cases.push_back({"Clip 0..6", image, [](Network& n, Value x) {
                     return n.clip(x, {0.0f, 6.0f}, "clip");
                   }});
  cases.push_back({"Clip -0.5..0.25", image, [](Network& n, Value x) {
                     return n.clip(x, {-0.5f, 0.25f}, "clip");
                   }});
  cases.push_back({"MaxPool2d 3x3/2 pad 1", image, [](Network& n, Value x) {
                     return n.max_pool2d(x, {.kernel = 3, .stride = 2, .padding = 1}, "pool");
                   }});
  cases.push_back({"MaxPool2d 2x2 ceil mode, dilation 2", image, [](Network& n, Value x) {
                     return n.max_pool2d(
                         x, {.kernel = 2, .stride = 2, .dilation = 2, .ceil_mode = true}, "pool");
                   }});
  cases.push_back({"AvgPool2d 3x3/2 pad 1 count_include_pad", image, [](Network& n, Value x) {
                     return n.avg_pool2d(x, {.kernel = 3, .stride = 2, .padding = 1}, "pool");
                   }});
  cases.push_back(
      {"AvgPool2d 3x3/2 pad 1 ceil mode, padding excluded", image, [](Network& n, Value x) {
         return n.avg_pool2d(x,
                             {.kernel = 3,
                              .stride = 2,
                              .padding = 1,
                              .ceil_mode = true,
                              .count_include_pad = false},
                             "pool");
       }});
  cases.push_back(
      {"GlobalAvgPool", image, [](Network& n, Value x) { return n.global_avg_pool(x, "gap"); }});
  cases.push_back({"Flatten", image, [](Network& n, Value x) { return n.flatten(x, "flatten"); }});
  cases.push_back({"Linear + bias (after GlobalAvgPool, Flatten)", image, [](Network& n, Value x) {
                     return n.linear(n.flatten(n.global_avg_pool(x, "gap"), "flatten"),
                                     {.out_features = 10}, "fc");
                   }});
  cases.push_back({"Linear without bias, 1144 inputs", image, [](Network& n, Value x) {
                     return n.linear(n.flatten(x, "flatten"), {.out_features = 33, .bias = false},
                                     "fc");
                   }});
  cases.push_back({"Add of two values", image,
                   [](Network& n, Value x) { return n.add(n.relu(x, "relu"), x, "add"); }});
  cases.push_back({"Add + ReLU (fused)", image, [](Network& n, Value x) {
                     return n.relu(n.add(n.clip(x, {-0.3f, 0.3f}, "clip"), x, "add"), "relu");
                   }});
  cases.push_back(
      {"Concat of three, channels", image, [](Network& n, Value x) {
         return n.concat({n.relu(x, "relu"), x, n.clip(x, {0.0f, 0.5f}, "clip")}, "cat");
       }});
  cases.push_back({"Concat along width", image, [](Network& n, Value x) {
                     return n.concat({x, n.relu(x, "relu")}, "cat", 3);
                   }});
  cases.push_back({"Softmax over the last axis", Shape{3, 1000},
                   [](Network& n, Value x) { return n.softmax(x, "softmax"); }});
  cases.push_back({"Softmax over channels", image,
                   [](Network& n, Value x) { return n.softmax(x, "softmax", 1); }});
  cases.push_back({"Pad2d", image,
                   [](Network& n, Value x) { return n.pad2d(x, Padding2d(1, 2, 0, 3), "pad"); }});
  cases.push_back({"Reshape", image, [](Network& n, Value x) {
                     return n.reshape(x, Shape{2, 8, 143}, "reshape");
                   }});
  cases.push_back({"Transpose NCHW -> NHWC", image, [](Network& n, Value x) {
                     return n.transpose(x, {0, 2, 3, 1}, "transpose");
                   }});
  cases.push_back({"AddConstant per channel", image, [](Network& n, Value x) {
                     return n.add_constant(x, Shape{1, 8, 1, 1}, "shift");
                   }});
  return cases;
}

// Fills the device bytes behind `name` with 0xFF: every float a quiet NaN.
void poison(ExecutionContext& ctx, const std::string& name, std::size_t floats) {
  CGR_CUDA_CHECK(cudaMemset(ctx.device_buffer(name), 0xFF, floats * sizeof(float)));
  CGR_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace

TEST_CASE(
    "CUDA: every layer in dag, stream-graph and eager matches the CPU executor, outputs poisoned" *
    doctest::skip(no_device)) {
  for (const LayerCase& c : layer_cases()) {
    CAPTURE(c.name);
    Network net;
    const Value x = net.input("x", c.input);
    net.output("y", c.build(net, x));
    const Weights weights = models::random_weights(net, 21);
    const auto input = test::random_vector(static_cast<std::size_t>(c.input.numel()), 22);
    const auto second = test::random_vector(static_cast<std::size_t>(c.input.numel()), 23);
    const Engine cpu = Engine::build(net, weights, {.threads = 2, .fuse = c.fuse});
    const auto reference = cpu.create_context().infer({{"x", input}}).output("y").to_vector();
    const auto reference2 = cpu.create_context().infer({{"x", second}}).output("y").to_vector();
    for (Mode mode : {Mode::dag, Mode::stream_graph, Mode::eager}) {
      CAPTURE(to_string(mode));
      const Engine gpu =
          Engine::build(net, weights, {.device = Device::cuda, .mode = mode, .fuse = c.fuse});
      ExecutionContext ctx = gpu.create_context();
      poison(ctx, "y", reference.size());
      CHECK(test::relative_error(ctx.infer({{"x", input}}).output("y").to_vector(), reference) <=
            1e-4);
      // A replay with another input, poisoned again: every element rewritten.
      poison(ctx, "y", reference.size());
      CHECK(test::relative_error(ctx.infer({{"x", second}}).output("y").to_vector(), reference2) <=
            1e-4);
      if (mode != Mode::eager) {
        const CudaGraphReport report = ctx.cuda_graph_report();
        for (const auto& m : report.mismatches)
          MESSAGE(m);
        CHECK(report.mismatches.empty());
      }
    }
  }
}
