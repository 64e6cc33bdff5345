// ReLU: math::relu on every element.
#include "cgr/layers/relu.hpp"

#include "cgr/layers/element_math.hpp"
#include "cpu/elementwise.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Relu);

Relu::Relu(std::string name, const TensorDesc& input) : Layer(std::move(name), {input}) {
  set_output(input.shape);
}

std::unique_ptr<CpuKernel> Relu::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<cpu::UnaryCpuKernel<math::ReluFn>>(output().shape.numel(),
                                                             math::ReluFn{});
}

}  // namespace cgr
