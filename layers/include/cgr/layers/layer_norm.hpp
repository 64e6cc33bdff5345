// LayerNorm: each sample normalised over the dims from `axis` to the last (nn.LayerNorm over
// its normalized_shape, ONNX LayerNormalization), then y * weight + bias elementwise over those
// dims. Weights: "<name>.weight" and, when bias is on, "<name>.bias", both of the normalised
// dims' shape (PyTorch's names and shapes).
#pragma once

#include "cgr/layers/layer.hpp"
#include "cgr/layers/row_norm.hpp"

namespace cgr {

struct LayerNormParams {
  int axis = -1;  // the first normalised dim; negative counts from the end
  float eps = 1e-5f;
  bool bias = true;
};

class LayerNorm final : public Layer {
 public:
  static constexpr std::string_view kKind = "LayerNorm";
  LayerNorm(std::string name, const TensorDesc& input, const LayerNormParams& params);

  std::string_view kind() const override { return kKind; }
  const LayerNormParams& params() const { return params_; }  // axis normalised
  const RowNormGeometry& geometry() const { return geometry_; }
  // The normalised dims: the shape of weight and bias.
  const Shape& normalized_shape() const { return normalized_shape_; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  LayerNormParams params_;
  Shape normalized_shape_;
  RowNormGeometry geometry_;
};

}  // namespace cgr
