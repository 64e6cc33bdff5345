// Flatten: merges dims [start_dim, rank) into one (torch.flatten(x, start_dim)). The data is
// unchanged: in an engine it is a view of its input (no op runs) unless it is an output.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Flatten final : public Layer {
 public:
  static constexpr std::string_view kKind = "Flatten";
  Flatten(std::string name, const TensorDesc& input, int start_dim);

  std::string_view kind() const override { return kKind; }
  std::string attributes() const override;
  bool output_is_input_view() const override { return true; }
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  int start_dim_;
};

}  // namespace cgr
