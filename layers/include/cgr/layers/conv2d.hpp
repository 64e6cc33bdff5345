// Conv2d: PyTorch's nn.Conv2d on NCHW (stride, padding, dilation, groups, optional bias).
// Weights: "<name>.weight" [out, in/groups, kh, kw], "<name>.bias" [out] when bias is on.
// The engine fuses a following BatchNorm2d (folded into weight and bias), a residual Add and
// a ReLU into one conv op: the CPU kernel applies them in its epilogue, and the GPU emission
// maps the same fusion onto cudnnConvolutionBiasActivationForward (conv + bias + z + ReLU).
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

// What the engine fused into a conv op after the convolution itself.
struct ConvEpilogue {
  bool residual = false;  // adds a second input of the output's shape
  bool relu = false;
};

class Conv2d final : public Layer {
 public:
  Conv2d(std::string name, const TensorDesc& input, const Conv2dParams& params);

  std::string_view kind() const override { return "Conv2d"; }
  const Conv2dParams& params() const { return params_; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;
  // weight/bias already transformed (e.g. BatchNorm folded in); bias may be empty.
  std::unique_ptr<CpuKernel> make_fused_cpu_kernel(std::span<const float> weight,
                                                   std::span<const float> bias,
                                                   const ConvEpilogue& epilogue) const;

  // --- GPU emission (CUDA executor): cuDNN conv + bias + residual + ReLU, one library op. ---

 private:
  Conv2dParams params_;
};

}  // namespace cgr
