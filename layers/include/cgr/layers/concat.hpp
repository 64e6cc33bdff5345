// Concat: joins tensors along one axis (channels of NCHW by default), torch.cat.
// Every other dimension must match.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Concat final : public Layer {
 public:
  Concat(std::string name, std::vector<TensorDesc> inputs, int axis);

  std::string_view kind() const override { return "Concat"; }
  int axis() const { return axis_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  // --- GPU emission (CUDA executor): one strided copy kernel per input (or memcpy2D nodes). ---

 private:
  int axis_;
};

}  // namespace cgr
