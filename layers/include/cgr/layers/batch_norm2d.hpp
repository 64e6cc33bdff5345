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

// The input seen as batch x channels x plane (plane: the product of the dims after C).
struct ChannelGeometry {
  std::int64_t batch = 0, channels = 0, plane = 0;
};

class BatchNorm2d final : public Layer {
 public:
  static constexpr std::string_view kKind = "BatchNorm2d";
  BatchNorm2d(std::string name, const TensorDesc& input, const BatchNorm2dParams& params);

  std::string_view kind() const override { return kKind; }
  const BatchNorm2dParams& params() const { return params_; }
  const ChannelGeometry& geometry() const { return geometry_; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

  ChannelAffine affine(const LayerWeights& weights) const;
  // Rewrites a conv's weight [out, ...] and bias [out] (bias may start empty: zeros) so that
  // conv'(x) == bn(conv(x)).
  void fold_into_conv(const LayerWeights& weights, std::vector<float>& conv_weight,
                      std::vector<float>& conv_bias) const;

 private:
  BatchNorm2dParams params_;
  ChannelGeometry geometry_;
};

}  // namespace cgr
