// LayerNorm: the shape rule and the CPU kernel (cpu/row_norm_cpu.cpp).
#include "cgr/layers/layer_norm.hpp"

#include <cmath>

#include "cgr/error.hpp"
#include "cpu/row_norm_cpu.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(LayerNorm);

LayerNorm::LayerNorm(std::string name, const TensorDesc& input, const LayerNormParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  const Shape& s = input.shape;
  const auto rank = static_cast<int>(s.rank());
  if (rank == 0) {
    fail("LayerNorm '{}': input '{}' is a scalar; there are no dims to normalise", this->name(),
         input.name);
  }
  if (params_.axis < -rank || params_.axis >= rank) {
    fail("LayerNorm '{}': axis {} is out of range for '{}' of shape {}", this->name(), params_.axis,
         input.name, s.to_string());
  }
  if (params_.axis < 0) params_.axis += rank;
  if (!std::isfinite(params_.eps) || params_.eps < 0.0f) {
    fail("LayerNorm '{}': eps {} must be a finite number >= 0", this->name(), params_.eps);
  }
  const auto axis = static_cast<std::size_t>(params_.axis);
  normalized_shape_ =
      Shape(std::vector<std::int64_t>(s.dims().begin() + params_.axis, s.dims().end()));
  geometry_.cols = normalized_shape_.numel();
  geometry_.rows = 1;
  for (std::size_t d = 0; d < axis; ++d)
    geometry_.rows *= s[d];
  geometry_.channels = 1;
  geometry_.affine_per_row = false;
  geometry_.eps = params_.eps;
  set_output(s);
}

std::vector<WeightSpec> LayerNorm::weight_specs() const {
  std::vector<WeightSpec> specs{{"weight", normalized_shape_}};
  if (params_.bias) specs.push_back({"bias", normalized_shape_});
  return specs;
}

std::string LayerNorm::attributes() const {
  return fmt::format("over {} from axis {}, eps {}{}", normalized_shape_.to_string(), params_.axis,
                     params_.eps, params_.bias ? "" : ", no bias");
}

OpCost LayerNorm::cost() const {
  // Two passes for the statistics, one for the output: about 6 operations per element.
  const double weights =
      static_cast<double>(normalized_shape_.numel()) * sizeof(float) * (params_.bias ? 2.0 : 1.0);
  return {6.0 * static_cast<double>(output().shape.numel()), activation_bytes() + weights};
}

std::unique_ptr<CpuKernel> LayerNorm::make_cpu_kernel(const LayerOp& op) const {
  const auto weight = op.weights.at("weight")->f32();
  std::vector<float> shift(weight.size(), 0.0f);
  if (params_.bias) {
    const auto bias = op.weights.at("bias")->f32();
    shift.assign(bias.begin(), bias.end());
  }
  return cpu::make_row_norm_kernel(geometry_, {weight.begin(), weight.end()}, std::move(shift));
}

}  // namespace cgr
