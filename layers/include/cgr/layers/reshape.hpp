// Reshape: same data, another shape with the same number of elements (torch.reshape, ONNX
// Reshape with a constant shape; the importer resolves 0 and -1 before building it).
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Reshape final : public Layer {
 public:
  static constexpr std::string_view kKind = "Reshape";
  Reshape(std::string name, const TensorDesc& input, Shape shape);

  std::string_view kind() const override { return kKind; }
  std::string attributes() const override;
  bool output_is_input_view() const override { return true; }
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;
};

}  // namespace cgr
