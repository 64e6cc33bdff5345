// Transpose: permutes dims (torch.permute, ONNX Transpose): output dim i is input dim perm[i].
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Transpose final : public Layer {
 public:
  Transpose(std::string name, const TensorDesc& input, std::vector<int> perm);

  std::string_view kind() const override { return "Transpose"; }
  const std::vector<int>& perm() const { return perm_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  // --- GPU emission (CUDA executor): one thread per output element. ---

 private:
  std::vector<int> perm_;
};

}  // namespace cgr
