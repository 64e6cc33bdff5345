// MaxPool2d: PyTorch's nn.MaxPool2d (kernel, stride, padding, dilation, ceil_mode) on NCHW.
// Padding never wins the max (it is -inf, as in PyTorch); NaN in a window gives NaN.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class MaxPool2d final : public Layer {
 public:
  MaxPool2d(std::string name, const TensorDesc& input, const Pool2dParams& params);

  std::string_view kind() const override { return "MaxPool2d"; }
  const Pool2dParams& params() const { return params_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  // --- GPU emission (CUDA executor): one thread per output over math::pool_window_axis. ---

 private:
  Pool2dParams params_;
};

// Shared by MaxPool2d and AvgPool2d: fills in the default stride, validates the geometry and
// returns the output shape; errors name the layer.
Shape pool2d_output_shape(std::string_view kind, const std::string& name, const TensorDesc& input,
                          Pool2dParams& params);
std::string pool2d_attributes(const Pool2dParams& params);

}  // namespace cgr
