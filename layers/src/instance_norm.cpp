// InstanceNorm: the shape rule and the CPU kernel (cpu/row_norm_cpu.cpp).
#include "cgr/layers/instance_norm.hpp"

#include <cmath>

#include "cgr/error.hpp"
#include "cpu/row_norm_cpu.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(InstanceNorm);

InstanceNorm::InstanceNorm(std::string name, const TensorDesc& input,
                           const InstanceNormParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  const Shape& s = input.shape;
  if (s.rank() < 3) {
    fail("InstanceNorm '{}': input '{}' has shape {}, expected N x C x one or more spatial dims",
         this->name(), input.name, s.to_string());
  }
  if (!std::isfinite(params_.eps) || params_.eps < 0.0f) {
    fail("InstanceNorm '{}': eps {} must be a finite number >= 0", this->name(), params_.eps);
  }
  geometry_.channels = s[1];
  geometry_.rows = s[0] * s[1];
  geometry_.cols = s[0] * s[1] == 0 ? 0 : s.numel() / (s[0] * s[1]);
  geometry_.affine_per_row = true;
  geometry_.eps = params_.eps;
  set_output(s);
}

std::vector<WeightSpec> InstanceNorm::weight_specs() const {
  return {{"weight", Shape{geometry_.channels}}, {"bias", Shape{geometry_.channels}}};
}

std::string InstanceNorm::attributes() const {
  return fmt::format("{} channels, eps {}", geometry_.channels, params_.eps);
}

OpCost InstanceNorm::cost() const {
  // Two passes for the statistics, one for the output: about 6 operations per element.
  return {6.0 * static_cast<double>(output().shape.numel()),
          activation_bytes() + 2.0 * static_cast<double>(geometry_.channels) * sizeof(float)};
}

std::unique_ptr<CpuKernel> InstanceNorm::make_cpu_kernel(const LayerOp& op) const {
  const auto weight = op.weights.at("weight")->f32();
  const auto bias = op.weights.at("bias")->f32();
  return cpu::make_row_norm_kernel(geometry_, {weight.begin(), weight.end()},
                                   {bias.begin(), bias.end()});
}

}  // namespace cgr
