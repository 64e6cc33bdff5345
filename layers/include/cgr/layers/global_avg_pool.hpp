// GlobalAvgPool: mean over H x W of an NCHW tensor, giving N x C x 1 x 1
// (nn.AdaptiveAvgPool2d((1, 1)), ONNX GlobalAveragePool).
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class GlobalAvgPool final : public Layer {
 public:
  GlobalAvgPool(std::string name, const TensorDesc& input);

  std::string_view kind() const override { return "GlobalAvgPool"; }
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  // --- GPU emission (CUDA executor): one warp per (n, c) plane, tree-reduced sum. ---
};

}  // namespace cgr
