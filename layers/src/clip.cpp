// Clip: math::clip on every element.
#include "cgr/layers/clip.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cpu/elementwise.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Clip);

Clip::Clip(std::string name, const TensorDesc& input, const ClipParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  if (params_.low != params_.low || params_.high != params_.high || params_.low > params_.high) {
    fail("Clip '{}': bounds [{}, {}] are not an interval", this->name(), params_.low, params_.high);
  }
  set_output(input.shape);
}

std::string Clip::attributes() const {
  return fmt::format("[{}, {}]", params_.low, params_.high);
}

std::unique_ptr<CpuKernel> Clip::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<cpu::UnaryCpuKernel<math::ClipFn>>(
      output().shape.numel(), math::ClipFn{params_.low, params_.high});
}

}  // namespace cgr
