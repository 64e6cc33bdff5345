// The layer interface. A layer is one op of a Network: it infers its output descriptor when
// it is created (rejecting impossible inputs with a message naming the layer and the
// shapes), names the weights it needs, and makes the kernel that executes it.
//
// GPU emission: each layer's file pair has a "GPU emission" section where the CUDA executor
// describes its kernel launch or library call; the CPU kernel is the numerical reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cgr/tensor.hpp"

namespace cgr {

class ThreadPool;

// A height/width pair; a single number means both (PyTorch's `kernel_size=3`).
struct Size2 {
  std::int64_t h = 1;
  std::int64_t w = 1;
  Size2() = default;
  Size2(std::int64_t both) : h(both), w(both) {}  // NOLINT: implicit like PyTorch's int args
  Size2(std::int64_t height, std::int64_t width) : h(height), w(width) {}
  bool operator==(const Size2&) const = default;
};

// Zero padding around an image. One number pads every side; two numbers pad (top and bottom,
// left and right) as PyTorch does; four give (top, left, bottom, right) as ONNX can.
struct Padding2d {
  std::int64_t top = 0, left = 0, bottom = 0, right = 0;
  Padding2d() = default;
  Padding2d(std::int64_t all) : top(all), left(all), bottom(all), right(all) {}  // NOLINT
  Padding2d(std::int64_t height, std::int64_t width)
      : top(height), left(width), bottom(height), right(width) {}
  Padding2d(std::int64_t t, std::int64_t l, std::int64_t b, std::int64_t r)
      : top(t), left(l), bottom(b), right(r) {}
  bool symmetric() const { return top == bottom && left == right; }
  bool operator==(const Padding2d&) const = default;
};

// Window geometry shared by MaxPool2d and AvgPool2d (PyTorch's arguments).
struct Pool2dParams {
  Size2 kernel{};
  Size2 stride = 0;  // 0: same as kernel, PyTorch's default
  Padding2d padding{};
  Size2 dilation = 1;              // MaxPool2d only
  bool ceil_mode = false;
  bool count_include_pad = true;   // AvgPool2d only
};

std::string to_string(const Size2& size);
std::string to_string(const Padding2d& padding);

// A weight a layer needs, bound by the name "<layer name>.<suffix>" (PyTorch state_dict names).
struct WeightSpec {
  std::string suffix;
  Shape shape;
  bool required = true;
};

// Bound weights of one layer by suffix ("weight", "bias", "running_mean", ...).
using LayerWeights = std::map<std::string, const Tensor*, std::less<>>;

// Everything a CPU kernel touches in one run. Buffers are dense f32 in the layout of the
// descriptors the layer was built with.
struct KernelIo {
  std::span<const float* const> inputs;
  float* output = nullptr;
  float* workspace = nullptr;  // workspace_bytes() bytes, private to this run of this op
  ThreadPool* pool = nullptr;  // never null when an executor runs the kernel
};

class CpuKernel {
 public:
  virtual ~CpuKernel() = default;
  virtual void run(const KernelIo& io) const = 0;
  virtual std::size_t workspace_bytes() const { return 0; }
};

class Layer {
 public:
  Layer(std::string name, std::vector<TensorDesc> inputs)
      : name_(std::move(name)), inputs_(std::move(inputs)) {}
  virtual ~Layer() = default;

  virtual std::string_view kind() const = 0;
  const std::string& name() const { return name_; }
  const std::vector<TensorDesc>& inputs() const { return inputs_; }
  const TensorDesc& output() const { return output_; }

  virtual std::vector<WeightSpec> weight_specs() const { return {}; }
  // Attributes for the DOT export and --info ("64, k3 s1 p1").
  virtual std::string attributes() const { return {}; }
  // Weights are already checked against weight_specs().
  virtual std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const = 0;

 protected:
  // Called by each layer's constructor once the output shape is known.
  void set_output(Shape shape) { output_ = TensorDesc{name_, std::move(shape), DType::f32}; }

 private:
  std::string name_;
  std::vector<TensorDesc> inputs_;
  TensorDesc output_;
};

}  // namespace cgr
