// Flatten: merges dims [start_dim, rank) into one (torch.flatten(x, start_dim)). The data is
// unchanged; the CPU kernel copies it, the GPU emission will alias it (a view).
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Flatten final : public Layer {
 public:
  Flatten(std::string name, const TensorDesc& input, int start_dim);

  std::string_view kind() const override { return "Flatten"; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  // --- GPU emission (CUDA executor): none; the output aliases the input's bytes. ---

 private:
  int start_dim_;
};

}  // namespace cgr
