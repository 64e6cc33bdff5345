// AddConstant: y = x + c with a constant c that broadcasts to x's shape by NumPy's rules
// (right-aligned, size-1 dims stretch), e.g. a per-channel [C, 1, 1] offset or a scalar.
// Weight: "<name>.constant" of the constant's own shape. ONNX Add with a constant operand.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class AddConstant final : public Layer {
 public:
  static constexpr std::string_view kKind = "AddConstant";
  AddConstant(std::string name, const TensorDesc& input, Shape constant_shape);

  std::string_view kind() const override { return kKind; }
  const Shape& constant_shape() const { return constant_shape_; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;
  // The constant broadcast to the output's shape: what every backend adds elementwise.
  std::vector<float> expanded(std::span<const float> constant) const;

 private:
  Shape constant_shape_;
};

}  // namespace cgr
