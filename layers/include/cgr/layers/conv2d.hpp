// Conv2d: PyTorch's nn.Conv2d on NCHW (stride, padding, dilation, groups, optional bias), and
// nn.Conv1d on N x C x L, taken as height 1 (cgr/layers/spatial.hpp).
// Weights: "<name>.weight" [out, in/groups, kh, kw] ([out, in/groups, kw] after an N x C x L
// input), "<name>.bias" [out] when bias is on.
// The engine folds a following BatchNorm2d into the weight and bias and fuses a residual Add
// and a ReLU into the conv's epilogue: the CPU kernel applies them in its final store, the
// CUDA op (engine/cuda/ops/conv2d.cpp) through cudnnConvolutionBiasActivationForward. Before
// a depthwise conv it fuses the 1x1 expansion conv that feeds it (LayerOp::expansion).
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

struct Conv2dParams {
  std::int64_t out_channels = 0;
  Size2 kernel = 1;
  Size2 stride = 1;
  Padding2d padding{};
  Size2 dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;  // PyTorch's default; torchvision's ResNet convs pass bias=False
};

// Everything about the convolution's shape, as every backend's kernel takes it.
struct Conv2dGeometry {
  std::int64_t batch = 1, in_channels = 0, in_h = 0, in_w = 0;
  std::int64_t out_channels = 0, kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  std::int64_t dilation_h = 1, dilation_w = 1, groups = 1;
  std::int64_t out_h = 0, out_w = 0;
  // A product over channels at every point: kernel 1x1, stride 1, no padding (any groups).
  bool pointwise() const {
    return kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_top == 0 &&
           pad_left == 0 && pad_bottom == 0 && pad_right == 0;
  }
};

class Conv2d final : public Layer {
 public:
  static constexpr std::string_view kKind = "Conv2d";
  Conv2d(std::string name, const TensorDesc& input, const Conv2dParams& params);

  std::string_view kind() const override { return kKind; }
  const Conv2dParams& params() const { return params_; }
  const Conv2dGeometry& geometry() const { return geometry_; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  OpCost cost() const override;
  // A depthwise conv of one output per channel takes an expansion before it (MobileNet's).
  EpilogueSupport supported_epilogue() const override {
    return {.residual = true,
            .relu = true,
            .any_activation = true,
            .channel_gate = true,
            .expanded_input = geometry_.groups == geometry_.in_channels &&
                              geometry_.out_channels == geometry_.in_channels};
  }
  // Uses op.folded_weight / op.folded_bias (the engine's, BatchNorm folded in; bias may be
  // empty), op.epilogue and op.expansion (cpu/expanded_depthwise_cpu.hpp).
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  Conv2dParams params_;
  Conv2dGeometry geometry_;
};

}  // namespace cgr
