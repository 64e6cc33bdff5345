// Unary: math::unary on every element (see unary.hpp).
#include "cgr/layers/unary.hpp"

#include <cmath>

#include "cgr/error.hpp"
#include "cpu/elementwise.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Unary);

UnaryParams UnaryParams::defaults(UnaryOp op) {
  switch (op) {
    case UnaryOp::elu:
      return {op, 1.0f, 0.0f};
    case UnaryOp::selu:  // ONNX's (and PyTorch's) constants
      return {op, 1.67326319217681884765625f, 1.05070102214813232421875f};
    case UnaryOp::hard_sigmoid:
      return {op, 0.2f, 0.5f};
    default:
      return {op, 0.0f, 0.0f};
  }
}

std::string_view unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::sigmoid:
      return "Sigmoid";
    case UnaryOp::tanh:
      return "Tanh";
    case UnaryOp::elu:
      return "Elu";
    case UnaryOp::selu:
      return "Selu";
    case UnaryOp::hard_sigmoid:
      return "HardSigmoid";
    case UnaryOp::hard_swish:
      return "HardSwish";
    case UnaryOp::softplus:
      return "Softplus";
    case UnaryOp::erf:
      return "Erf";
    case UnaryOp::gelu:
      return "Gelu";
    case UnaryOp::gelu_tanh:
      return "GeluTanh";
    case UnaryOp::silu:
      return "SiLU";
    case UnaryOp::exp:
      return "Exp";
    case UnaryOp::log:
      return "Log";
    case UnaryOp::sqrt:
      return "Sqrt";
    case UnaryOp::neg:
      return "Neg";
    case UnaryOp::abs:
      return "Abs";
    case UnaryOp::reciprocal:
      return "Reciprocal";
  }
  return "Unary";
}

Unary::Unary(std::string name, const TensorDesc& input, const UnaryParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  if (static_cast<std::int32_t>(params_.op) < 0 ||
      static_cast<std::int32_t>(params_.op) > static_cast<std::int32_t>(UnaryOp::reciprocal)) {
    fail("Unary '{}': unknown function {}", this->name(), static_cast<int>(params_.op));
  }
  if (!std::isfinite(params_.alpha) || !std::isfinite(params_.beta)) {
    fail("{} '{}': alpha {} and beta {} must be finite numbers", unary_op_name(params_.op),
         this->name(), params_.alpha, params_.beta);
  }
  set_output(input.shape);
}

std::string Unary::attributes() const {
  switch (params_.op) {
    case UnaryOp::elu:
      return fmt::format("alpha {}", params_.alpha);
    case UnaryOp::selu:
    case UnaryOp::hard_sigmoid:
      return fmt::format("alpha {} beta {}", params_.alpha, params_.beta);
    default:
      return {};
  }
}

OpCost Unary::cost() const {
  // Transcendentals cost tens of flops each; the traffic is that of any elementwise op.
  const double n = static_cast<double>(output().shape.numel());
  const bool cheap = params_.op == UnaryOp::neg || params_.op == UnaryOp::abs;
  return {n * (cheap ? 1.0 : 20.0), activation_bytes()};
}

std::unique_ptr<CpuKernel> Unary::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<cpu::UnaryCpuKernel<math::UnaryFn>>(
      output().shape.numel(), math::UnaryFn{params_.op, params_.alpha, params_.beta});
}

}  // namespace cgr
