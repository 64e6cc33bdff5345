// Linear: y = x Wᵀ + b over the last axis (nn.Linear). Weights: "<name>.weight"
// [out_features, in_features], "<name>.bias" [out_features] when bias is on.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

struct LinearParams {
  std::int64_t out_features = 0;
  bool bias = true;
};

// The input seen as `rows` rows of in_features values (every dim before the last is a row).
struct LinearGeometry {
  std::int64_t rows = 0, in_features = 0, out_features = 0;
};

class Linear final : public Layer {
 public:
  static constexpr std::string_view kKind = "Linear";
  Linear(std::string name, const TensorDesc& input, const LinearParams& params);

  std::string_view kind() const override { return kKind; }
  const LinearParams& params() const { return params_; }
  const LinearGeometry& geometry() const { return geometry_; }
  std::int64_t in_features() const { return geometry_.in_features; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  OpCost cost() const override;
  EpilogueSupport supported_epilogue() const override { return {.pooled_input = true}; }
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  LinearParams params_;
  LinearGeometry geometry_;
};

}  // namespace cgr
