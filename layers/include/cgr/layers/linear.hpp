// Linear: y = x Wᵀ + b over the last axis (nn.Linear). Weights: "<name>.weight"
// [out_features, in_features], "<name>.bias" [out_features] when bias is on.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

struct LinearParams {
  std::int64_t out_features = 0;
  bool bias = true;
};

class Linear final : public Layer {
 public:
  Linear(std::string name, const TensorDesc& input, const LinearParams& params);

  std::string_view kind() const override { return "Linear"; }
  const LinearParams& params() const { return params_; }
  std::int64_t in_features() const { return inputs()[0].shape.dims().back(); }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  // --- GPU emission (CUDA executor): cublasSgemm (bias broadcast by a small kernel). ---

 private:
  LinearParams params_;
};

}  // namespace cgr
