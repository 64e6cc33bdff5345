// GlobalAvgPool: mean over H x W of an NCHW tensor, giving N x C x 1 x 1
// (nn.AdaptiveAvgPool2d((1, 1)), ONNX GlobalAveragePool), or over L of N x C x L, giving
// N x C x 1 (nn.AdaptiveAvgPool1d(1)).
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

// `planes` (N * C) contiguous planes of `plane_size` (H * W) floats, one mean each.
struct PlaneGeometry {
  std::int64_t planes = 0, plane_size = 0;
};

class GlobalAvgPool final : public Layer {
 public:
  static constexpr std::string_view kKind = "GlobalAvgPool";
  GlobalAvgPool(std::string name, const TensorDesc& input);

  std::string_view kind() const override { return kKind; }
  const PlaneGeometry& geometry() const { return geometry_; }
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  PlaneGeometry geometry_;
};

}  // namespace cgr
