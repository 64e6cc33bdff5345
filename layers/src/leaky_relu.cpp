// LeakyReLU: math::leaky_relu on every element.
#include "cgr/layers/leaky_relu.hpp"

#include <cmath>

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cpu/elementwise.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(LeakyRelu);

LeakyRelu::LeakyRelu(std::string name, const TensorDesc& input, const LeakyReluParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  if (!std::isfinite(params_.negative_slope)) {
    fail("LeakyReLU '{}': negative_slope {} is not a finite number", this->name(),
         params_.negative_slope);
  }
  set_output(input.shape);
}

std::string LeakyRelu::attributes() const {
  return fmt::format("slope {}", params_.negative_slope);
}

std::unique_ptr<CpuKernel> LeakyRelu::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<cpu::UnaryCpuKernel<math::LeakyReluFn>>(
      output().shape.numel(), math::LeakyReluFn{params_.negative_slope});
}

}  // namespace cgr
