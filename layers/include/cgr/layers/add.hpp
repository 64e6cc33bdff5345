// Add: elementwise sum of two tensors of the same shape (the residual connection). The engine
// fuses it into the conv that produces one operand when it can, and a following ReLU into it.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Add final : public Layer {
 public:
  static constexpr std::string_view kKind = "Add";
  Add(std::string name, const TensorDesc& a, const TensorDesc& b);

  std::string_view kind() const override { return kKind; }
  EpilogueSupport supported_epilogue() const override {
    return {.relu = true, .any_activation = true};
  }
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;
};

}  // namespace cgr
