// LeakyReLU: x for x > 0, negative_slope * x otherwise (nn.LeakyReLU, ONNX LeakyRelu with
// alpha); NaN passes through and -0 stays -0, as in PyTorch.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

struct LeakyReluParams {
  float negative_slope = 0.01f;  // PyTorch's and ONNX's default
};

class LeakyRelu final : public Layer {
 public:
  static constexpr std::string_view kKind = "LeakyReLU";
  LeakyRelu(std::string name, const TensorDesc& input, const LeakyReluParams& params);

  std::string_view kind() const override { return kKind; }
  const LeakyReluParams& params() const { return params_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  LeakyReluParams params_;
};

}  // namespace cgr
