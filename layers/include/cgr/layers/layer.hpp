// The layer interface. A layer is one op of a Network. When it is created it infers its output
// descriptor (rejecting impossible inputs with a message naming the layer and the shapes) and
// computes the geometry its kernels need, once: every backend reads that geometry rather than
// deriving its own. It names the weights it needs, estimates its cost, and makes its CPU
// kernel, the numerical reference every other backend is tested against.
//
// Every layer kind has a unique name (`kKind`, returned by kind()) registered once per process
// with CGR_REGISTER_LAYER_KIND in the layer's .cpp. Backends other than the CPU find their
// implementation of a layer by that name (engine/cuda/ops registers one per kind), and
// tests/test_coverage.cpp checks that every registered kind has one on every backend.
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

#include "cgr/layers/element_math.hpp"
#include "cgr/tensor.hpp"

namespace cgr {

class ThreadPool;
class Layer;

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

// What the engine fused into an op after its first layer: the add of a second input of the
// output's shape (a residual connection), then an activation (ReLU, LeakyReLU, Clip or a Unary
// function: SiLU, HardSwish, Sigmoid, ...). A layer says which parts its kernels can apply
// (Layer::supported_epilogue); the engine fuses nothing else.
//
// A squeeze-excitation gate goes one step further: when the op's result (after its activation)
// is N x C x 1 x 1 and its only reader multiplies an N x C x H x W tensor by it, that Mul is
// fused too. The op then reads that tensor as its last input, keeps the gate in its workspace,
// and writes the scaled tensor: output[n, c, p] = input[n, c, p] * gate[n, c] for p < H x W.
struct Epilogue {
  bool residual = false;
  math::Activation activation;
  std::int64_t gated_plane = 0;  // > 0: the squeeze-excitation Mul, planes of H x W elements
  bool relu() const { return activation.kind == math::ActivationKind::relu; }
  bool operator==(const Epilogue&) const = default;
};

// The parts of an epilogue a layer's kernels can apply: a residual add, a ReLU only or any
// activation, and the squeeze-excitation Mul; and the prologues, a pooled or an expanded input.
struct EpilogueSupport {
  bool residual = false;
  bool relu = false;
  bool any_activation = false;
  bool channel_gate = false;
  bool pooled_input = false;    // a GlobalAvgPool (+ Flatten) before it: LayerOp::pooled_plane
  bool expanded_input = false;  // a 1x1 conv before it: LayerOp::expansion
};

// A pointwise convolution fused before the op (MobileNet's expansion before its depthwise
// conv): the op reads the 1x1 conv's input. The CPU computes the expanded tensor (4.8 MB at
// MobileNet-v2's 112 x 112) a few rows at a time as the op consumes them, never whole; the
// CUDA op keeps it in its workspace.
// `layer` is the Conv2d (kernel 1, stride 1, no padding, one group; null: no expansion),
// weight and bias its own with a following BatchNorm2d folded in (bias may be empty), and
// activation the one fused after it.
struct ExpansionPrologue {
  const Layer* layer = nullptr;
  std::vector<float> weight, bias;
  math::Activation activation;
};

// One op as the engine lowered it, which is what every backend makes its executable from: the
// op's first layer, that layer's bound weights, the weight and bias the engine prepared for it
// (Conv2d: with a following BatchNorm2d folded in), and the epilogue fused after it. Lives
// only while the engine is built: executables keep their own copies of what they need.
//
// A pooled input is fused before the layer: GlobalAvgPool -> Flatten -> Linear, the exit and
// classifier heads of CNNs, becomes one op whose input is the pool's N x C x plane tensor,
// averaged over each plane of pooled_plane elements by the op itself (pooled_plane 0: no pool).
// An expansion (ExpansionPrologue) is the other prologue: the op's first input is then the
// expansion's input, not the layer's.
struct LayerOp {
  const Layer* layer = nullptr;
  LayerWeights weights;
  std::vector<float> folded_weight, folded_bias;
  Epilogue epilogue;
  std::int64_t pooled_plane = 0;
  ExpansionPrologue expansion;
};

// Work of one run of an op: arithmetic and memory traffic (activations and weights read,
// output written). The engine weighs ops by it for the cost-weighted critical path.
struct OpCost {
  double flops = 0;
  double bytes = 0;
  OpCost& operator+=(const OpCost& other) {
    flops += other.flops;
    bytes += other.bytes;
    return *this;
  }
};

// Everything a CPU kernel touches in one run. Buffers are dense f32 in the layout of the
// descriptors the layer was built with: NCHW for 4-D ones, unless the layout plan made a value
// channels-last (CpuKernel::use_channels_last).
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

  // The CPU layout plan (engine/cpu/cpu_backend.cpp): a value is channels-last (NHWC per
  // image: N x H x W x C) instead of NCHW where its producer can write it so and every op
  // reading it can read it so. The backend asks once the kernel is made, then calls
  // use_channels_last once, before the first run and before workspace_bytes, with the layout
  // of each input and of the output (true: channels-last) where any of them is channels-last.
  virtual bool can_read_channels_last(std::size_t input) const {
    (void)input;
    return false;
  }
  virtual bool can_write_channels_last() const { return false; }
  // Whether input `input` must have the output's layout (a residual added in place): the plan
  // keeps both NCHW where they would differ.
  virtual bool channels_last_tied_to_output(std::size_t input) const {
    (void)input;
    return false;
  }
  virtual void use_channels_last(std::span<const bool> inputs, bool output) {
    (void)inputs, (void)output;
  }
};

class Layer {
 public:
  Layer(std::string name, std::vector<TensorDesc> inputs)
      : name_(std::move(name)), inputs_(std::move(inputs)) {}
  virtual ~Layer() = default;

  // The registered kind (the class's kKind, e.g. "Conv2d"): what backends dispatch on.
  virtual std::string_view kind() const = 0;
  // The name reports and the DOT export show: the kind, unless a layer has a better one
  // (a CustomOp shows the name its user gave the work).
  virtual std::string_view label() const { return kind(); }
  const std::string& name() const { return name_; }
  const std::vector<TensorDesc>& inputs() const { return inputs_; }
  const TensorDesc& output() const { return output_; }

  virtual std::vector<WeightSpec> weight_specs() const { return {}; }
  // Attributes for the DOT export and --info ("64, k3 s1 p1").
  virtual std::string attributes() const { return {}; }
  // Default: one operation per output element over dense inputs and output.
  virtual OpCost cost() const;
  // The epilogue this layer's kernels can fuse (on every backend).
  virtual EpilogueSupport supported_epilogue() const { return {}; }
  // True when the output is the input's dense data under another shape (Flatten, Reshape):
  // the engine then runs no op for it and lets readers read the input's bytes.
  virtual bool output_is_input_view() const { return false; }
  // The CPU kernel of `op` (op.layer == this). Weights are already checked against
  // weight_specs(); the epilogue is within supported_epilogue().
  virtual std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const = 0;

 protected:
  // Called by each layer's constructor once the output shape is known.
  void set_output(Shape shape) { output_ = TensorDesc{name_, std::move(shape), DType::f32}; }
  // Bytes of the inputs and the output (the traffic of an elementwise op).
  double activation_bytes() const;

 private:
  std::string name_;
  std::vector<TensorDesc> inputs_;
  TensorDesc output_;
};

// `layer` as the layer class L when it is of L's kind, else null. Kinds are unique, so this is
// a checked downcast keyed by kind (the engine's fusion rules use it).
template <typename L>
const L* layer_cast(const Layer& layer) {
  return layer.kind() == L::kKind ? static_cast<const L*>(&layer) : nullptr;
}

// --- layer kinds -------------------------------------------------------------------------------

// Registers a layer kind's name; called once per kind at load time through
// CGR_REGISTER_LAYER_KIND. A second registration of the same name is a bug and aborts.
bool register_layer_kind(std::string_view kind);
bool is_registered_layer_kind(std::string_view kind);
// Every registered kind, sorted.
std::vector<std::string> registered_layer_kinds();

}  // namespace cgr

// In the layer's .cpp, inside namespace cgr: CGR_REGISTER_LAYER_KIND(Conv2d);
#define CGR_REGISTER_LAYER_KIND(Type) \
  [[maybe_unused]] static const bool cgr_layer_kind_##Type = ::cgr::register_layer_kind(Type::kKind)
