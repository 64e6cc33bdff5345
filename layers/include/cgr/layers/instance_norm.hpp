// InstanceNorm: each channel of each sample (N x C x spatial...) normalised over its spatial
// dims, then scaled and shifted per channel (nn.InstanceNorm2d with affine, ONNX
// InstanceNormalization; without affine PyTorch exports ones and zeros). Weights:
// "<name>.weight" and "<name>.bias", C values each.
#pragma once

#include "cgr/layers/layer.hpp"
#include "cgr/layers/row_norm.hpp"

namespace cgr {

struct InstanceNormParams {
  float eps = 1e-5f;
};

class InstanceNorm final : public Layer {
 public:
  static constexpr std::string_view kKind = "InstanceNorm";
  InstanceNorm(std::string name, const TensorDesc& input, const InstanceNormParams& params);

  std::string_view kind() const override { return kKind; }
  const InstanceNormParams& params() const { return params_; }
  const RowNormGeometry& geometry() const { return geometry_; }
  std::int64_t channels() const { return geometry_.channels; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  InstanceNormParams params_;
  RowNormGeometry geometry_;
};

}  // namespace cgr
