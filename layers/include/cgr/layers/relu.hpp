// ReLU: max(x, 0), NaN passes through (PyTorch's behaviour). The engine fuses a ReLU into the
// conv or add before it when that op's output feeds nothing else.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Relu final : public Layer {
 public:
  Relu(std::string name, const TensorDesc& input);

  std::string_view kind() const override { return "ReLU"; }
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  // --- GPU emission (CUDA executor): an elementwise kernel over math::relu. ---
};

}  // namespace cgr
