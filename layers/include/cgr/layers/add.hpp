// Add: elementwise sum of two tensors of the same shape (the residual connection). The engine
// fuses it into the conv that produces one operand when it can, and a following ReLU into it.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Add final : public Layer {
 public:
  Add(std::string name, const TensorDesc& a, const TensorDesc& b);

  std::string_view kind() const override { return "Add"; }
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;
  std::unique_ptr<CpuKernel> make_fused_cpu_kernel(bool relu) const;

  // --- GPU emission (CUDA executor): an elementwise kernel (optionally + math::relu). ---
};

}  // namespace cgr
