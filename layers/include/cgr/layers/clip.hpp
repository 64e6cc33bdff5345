// Clip: min(max(x, low), high), NaN passes through (torch.clamp). ReLU6 is Clip(0, 6); ONNX
// Clip imports to it (and to ReLU when low is 0 and there is no upper bound).
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

struct ClipParams {
  float low = -std::numeric_limits<float>::infinity();
  float high = std::numeric_limits<float>::infinity();
};

class Clip final : public Layer {
 public:
  static constexpr std::string_view kKind = "Clip";
  Clip(std::string name, const TensorDesc& input, const ClipParams& params);

  std::string_view kind() const override { return kKind; }
  const ClipParams& params() const { return params_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  ClipParams params_;
};

}  // namespace cgr
