// Unary: one elementwise function of math::UnaryOp (sigmoid, tanh, elu, selu, hard_sigmoid,
// hard_swish, softplus, erf, gelu, gelu_tanh, silu, exp, log, sqrt, neg, abs, reciprocal),
// the same arithmetic on every backend (cgr/layers/element_math.hpp). ReLU, LeakyReLU and Clip
// keep their own kinds: convolutions fuse them.
#pragma once

#include <string_view>

#include "cgr/layers/element_math.hpp"
#include "cgr/layers/layer.hpp"

namespace cgr {

using math::UnaryOp;

struct UnaryParams {
  UnaryOp op = UnaryOp::sigmoid;
  // elu: alpha; selu: alpha and beta (ONNX's gamma); hard_sigmoid: alpha and beta. Ignored
  // by the others. UnaryParams::defaults(op) gives ONNX's defaults.
  float alpha = 0.0f, beta = 0.0f;
  static UnaryParams defaults(UnaryOp op);
};

// "Sigmoid", "HardSwish", ...: the function's name in reports (ONNX's op name, or "GeluTanh").
std::string_view unary_op_name(UnaryOp op);

class Unary final : public Layer {
 public:
  static constexpr std::string_view kKind = "Unary";
  Unary(std::string name, const TensorDesc& input, const UnaryParams& params);

  std::string_view kind() const override { return kKind; }
  std::string_view label() const override { return unary_op_name(params_.op); }
  const UnaryParams& params() const { return params_; }
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  UnaryParams params_;
};

}  // namespace cgr
