// AvgPool2d: PyTorch's nn.AvgPool2d (kernel, stride, padding, ceil_mode, count_include_pad).
// The divisor follows PyTorch exactly: with count_include_pad the window counts padding but
// not the part a ceil_mode window hangs past the padded input.
#pragma once

#include "cgr/layers/pool2d.hpp"

namespace cgr {

class AvgPool2d final : public Layer {
 public:
  static constexpr std::string_view kKind = "AvgPool2d";
  AvgPool2d(std::string name, const TensorDesc& input, const Pool2dParams& params);

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
