// ReLU: max(x, 0), NaN passes through (PyTorch's behaviour). The engine fuses a ReLU into the
// conv or add before it when that op's output feeds nothing else.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Relu final : public Layer {
 public:
  static constexpr std::string_view kKind = "ReLU";
  Relu(std::string name, const TensorDesc& input);

  std::string_view kind() const override { return kKind; }
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;
};

}  // namespace cgr
