// MaxPool2d: PyTorch's nn.MaxPool2d (kernel, stride, padding, dilation, ceil_mode) on NCHW.
// Padding never wins the max (it is -inf, as in PyTorch); NaN in a window gives NaN.
#pragma once

#include "cgr/layers/pool2d.hpp"

namespace cgr {

class MaxPool2d final : public Layer {
 public:
  static constexpr std::string_view kKind = "MaxPool2d";
  MaxPool2d(std::string name, const TensorDesc& input, const Pool2dParams& params);

  std::string_view kind() const override { return kKind; }
  const Pool2dParams& params() const { return params_; }  // stride resolved
  const Pool2dGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  Pool2dParams params_;
  Pool2dGeometry geometry_;
};

}  // namespace cgr
