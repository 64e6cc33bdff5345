// BatchNorm2d for inference: y = (x - running_mean) / sqrt(running_var + eps) * weight + bias
// per channel (axis 1). Weights: "<name>.weight", ".bias", ".running_mean", ".running_var",
// each [C]. When it directly follows a Conv2d whose output nothing else reads, the engine
// folds it into the conv's weight and bias (fold_into_conv) and no BN op remains.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

struct BatchNorm2dParams {
  double eps = 1e-5;
};

// The per-channel affine map a BatchNorm computes: y = x * scale + shift.
struct ChannelAffine {
  std::vector<float> scale;
  std::vector<float> shift;
};

class BatchNorm2d final : public Layer {
 public:
  BatchNorm2d(std::string name, const TensorDesc& input, const BatchNorm2dParams& params);

  std::string_view kind() const override { return "BatchNorm2d"; }
  const BatchNorm2dParams& params() const { return params_; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  ChannelAffine affine(const LayerWeights& weights) const;
  // Rewrites a conv's weight [out, ...] and bias [out] (bias may start empty: zeros) so that
  // conv'(x) == bn(conv(x)).
  void fold_into_conv(const LayerWeights& weights, std::vector<float>& conv_weight,
                      std::vector<float>& conv_bias) const;

  // --- GPU emission (CUDA executor): a per-channel scale/shift kernel for the unfused case. ---

 private:
  BatchNorm2dParams params_;
};

}  // namespace cgr
