// Softmax along one axis (the last by default), numerically stable (max subtracted).
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Softmax final : public Layer {
 public:
  Softmax(std::string name, const TensorDesc& input, int axis);

  std::string_view kind() const override { return "Softmax"; }
  int axis() const { return axis_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  // --- GPU emission (CUDA executor): one warp per row over math::softmax_row. ---

 private:
  int axis_;
};

}  // namespace cgr
