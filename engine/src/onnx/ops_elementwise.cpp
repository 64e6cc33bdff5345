// ONNX elementwise ops: Relu, LeakyRelu, Clip (ReLU when it is max(x, 0)), the functions of the
// Unary layer (Sigmoid, Tanh, Elu, Selu, HardSigmoid, HardSwish, Softplus, Erf, Gelu, Exp, Log,
// Sqrt, Neg, Abs, Reciprocal), and the Binary ones with NumPy broadcasting (Add, Sub, Mul, Div,
// Pow, PRelu; variadic Sum, Mean, Max, Min as chains), either operand computed or constant.
#include <limits>
#include <optional>

#include "cgr/error.hpp"
#include "onnx/importer.hpp"

namespace cgr::onnx_import {
namespace {

void import_relu(Importer& im, const ::onnx::NodeProto& node, int index, const std::string& label) {
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 1, 1);
  im.bind(node.output(0),
          im.network().relu(im.value(node.input(0), label), im.layer_name(node, index)));
}

void import_leaky_relu(Importer& im, const ::onnx::NodeProto& node, int index,
                       const std::string& label) {
  Attributes attrs(node, label, {"alpha"});
  Importer::need_inputs(node, label, 1, 1);
  const LeakyReluParams p{.negative_slope = attrs.get_float("alpha", 0.01f)};
  im.bind(node.output(0),
          im.network().leaky_relu(im.value(node.input(0), label), p, im.layer_name(node, index)));
}

void import_clip(Importer& im, const ::onnx::NodeProto& node, int index, const std::string& label) {
  ClipParams p;
  if (im.opset() < 11) {
    Attributes attrs(node, label, {"min", "max"});
    p.low = attrs.get_float("min", p.low);
    p.high = attrs.get_float("max", p.high);
  } else {
    Attributes attrs(node, label, {});
    Importer::need_inputs(node, label, 1, 3);
    auto scalar = [&](int i, float fallback) {
      const ConstantTensor* t = im.optional_constant(node, i, label, i == 1 ? "min" : "max");
      if (t == nullptr) return fallback;
      if (t->shape.numel() != 1) fail("{}: '{}' must be a scalar", label, node.input(i));
      return t->is_float ? t->floats[0] : static_cast<float>(t->ints[0]);
    };
    p.low = scalar(1, p.low);
    p.high = scalar(2, p.high);
  }
  const Value x = im.value(node.input(0), label);
  const std::string name = im.layer_name(node, index);
  if (p.low == 0.0f && p.high == std::numeric_limits<float>::infinity()) {
    return im.bind(node.output(0), im.network().relu(x, name));
  }
  im.bind(node.output(0), im.network().clip(x, p, name));
}

// f(a, b) of two operands, either of which may be a constant (both constants fold before
// the handler is reached). The same-shape sum of two computed tensors is an Add, which a
// convolution can fuse as its residual; everything else is a Binary.
Value binary_of(Importer& im, const std::string& a_name, const std::string& b_name, BinaryOp op,
                const std::string& name, const std::string& label) {
  const bool a_const = im.is_constant(a_name), b_const = im.is_constant(b_name);
  if (a_const && b_const) fail("{}: both operands are constants", label);
  if (!a_const && !b_const) {
    const Value a = im.value(a_name, label), b = im.value(b_name, label);
    if (op == BinaryOp::add && im.network().desc(a).shape == im.network().desc(b).shape) {
      return im.network().add(a, b, name);
    }
    return im.network().binary(a, b, op, name);
  }
  const ConstantTensor& c = im.constant(a_const ? a_name : b_name, label, "operand");
  std::vector<float> values =
      c.is_float ? c.floats : std::vector<float>(c.ints.begin(), c.ints.end());
  const Value y = im.network().binary(im.value(a_const ? b_name : a_name, label), op,
                                      BinaryConstant{c.shape, a_const}, name);
  im.add_weight(name, "constant", c.shape, std::move(values));
  return y;
}

// x * sigmoid(x) as SiLU and x * hard_sigmoid(x) (alpha 1/6, beta 1/2) as HardSwish, when
// the gate is read by this Mul alone: one elementwise function of x, which the engine can fuse
// into the convolution that produces x. The gate's layer is left unread and pruned. nullopt
// when the operands are not such a pair.
std::optional<UnaryParams> gated_function(const Importer& im, const std::string& x,
                                          const std::string& gate_name) {
  const Importer::Gate* gate = im.gate(gate_name);
  if (gate == nullptr || gate->input != x || im.consumers(gate_name) != 1) return std::nullopt;
  if (gate->params.op == UnaryOp::sigmoid) return UnaryParams::defaults(UnaryOp::silu);
  // HardSigmoid(alpha 1/6, beta 1/2) is exactly torch's Hardswish gate (relu6(x + 3) / 6).
  if (gate->params.op == UnaryOp::hard_sigmoid && gate->params.alpha == 1.0f / 6.0f &&
      gate->params.beta == 0.5f) {
    return UnaryParams::defaults(UnaryOp::hard_swish);
  }
  return std::nullopt;
}

template <BinaryOp Op>
void import_binary(Importer& im, const ::onnx::NodeProto& node, int index,
                   const std::string& label) {
  // Opsets before 7 had broadcast/axis attributes; 7 and later broadcast NumPy-style.
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 2, 2);
  if constexpr (Op == BinaryOp::mul) {
    for (int x = 0; x < 2; ++x) {
      if (im.is_constant(node.input(x))) continue;
      if (const auto fn = gated_function(im, node.input(x), node.input(1 - x))) {
        return im.bind(node.output(0), im.network().unary(im.value(node.input(x), label), *fn,
                                                          im.layer_name(node, index)));
      }
    }
  }
  im.bind(node.output(0),
          binary_of(im, node.input(0), node.input(1), Op, im.layer_name(node, index), label));
}

// Sum, Mean, Max, Min of 1 or more operands: a chain of Binary ops (Mean divides the sum).
template <BinaryOp Op, bool kMean = false>
void import_variadic(Importer& im, const ::onnx::NodeProto& node, int index,
                     const std::string& label) {
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 1, 1 << 16);
  const std::string name = im.layer_name(node, index);
  if (node.input_size() == 1 && !kMean) return im.alias(node.output(0), node.input(0), label);
  std::string acc = node.input(0);
  for (int i = 1; i < node.input_size(); ++i) {
    const std::string step =
        node.input_size() == 2 && !kMean ? name : fmt::format("{}.{}", name, i);
    const std::string tensor = fmt::format("{}#{}", node.output(0), i);
    im.bind(tensor, binary_of(im, acc, node.input(i), Op, step, label));
    acc = tensor;
  }
  if (kMean) {
    const Value sum = im.value(acc, label);
    const Value mean =
        im.network().binary(sum, BinaryOp::div, BinaryConstant{Shape{}}, name + ".mean");
    im.add_weight(name + ".mean", "constant", Shape{}, {static_cast<float>(node.input_size())});
    return im.bind(node.output(0), mean);
  }
  im.alias(node.output(0), acc, label);
}

void import_prelu(Importer& im, const ::onnx::NodeProto& node, int index,
                  const std::string& label) {
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 2, 2);
  if (im.is_constant(node.input(0))) fail("{}: X must be a computed tensor", label);
  im.bind(node.output(0), binary_of(im, node.input(0), node.input(1), BinaryOp::prelu,
                                    im.layer_name(node, index, node.input(1)), label));
}

// One ONNX op of the Unary layer; its attributes are the function's alpha and beta.
template <UnaryOp Op>
void import_unary(Importer& im, const ::onnx::NodeProto& node, int index,
                  const std::string& label) {
  UnaryParams p = UnaryParams::defaults(Op);
  if constexpr (Op == UnaryOp::elu) {
    Attributes attrs(node, label, {"alpha"});
    p.alpha = attrs.get_float("alpha", p.alpha);
  } else if constexpr (Op == UnaryOp::selu) {
    Attributes attrs(node, label, {"alpha", "gamma"});
    p.alpha = attrs.get_float("alpha", p.alpha);
    p.beta = attrs.get_float("gamma", p.beta);
  } else if constexpr (Op == UnaryOp::hard_sigmoid) {
    Attributes attrs(node, label, {"alpha", "beta"});
    p.alpha = attrs.get_float("alpha", p.alpha);
    p.beta = attrs.get_float("beta", p.beta);
  } else if constexpr (Op == UnaryOp::gelu) {
    Attributes attrs(node, label, {"approximate"});
    const std::string approximate = attrs.get_string("approximate", "none");
    if (approximate == "tanh") {
      p.op = UnaryOp::gelu_tanh;
    } else if (approximate != "none") {
      attrs.unsupported("approximate", fmt::format("'{}' is not none or tanh", approximate));
    }
  } else {
    Attributes attrs(node, label, {});
  }
  Importer::need_inputs(node, label, 1, 1);
  if constexpr (Op == UnaryOp::sigmoid || Op == UnaryOp::hard_sigmoid) {
    im.note_gate(node.output(0), {node.input(0), p});
  }
  im.bind(node.output(0),
          im.network().unary(im.value(node.input(0), label), p, im.layer_name(node, index)));
}

CGR_ONNX_OP("Relu", import_relu);
CGR_ONNX_OP("Sigmoid", import_unary<UnaryOp::sigmoid>);
CGR_ONNX_OP("Tanh", import_unary<UnaryOp::tanh>);
CGR_ONNX_OP("Elu", import_unary<UnaryOp::elu>);
CGR_ONNX_OP("Selu", import_unary<UnaryOp::selu>);
CGR_ONNX_OP("HardSigmoid", import_unary<UnaryOp::hard_sigmoid>);
CGR_ONNX_OP("HardSwish", import_unary<UnaryOp::hard_swish>);
CGR_ONNX_OP("Softplus", import_unary<UnaryOp::softplus>);
CGR_ONNX_OP("Erf", import_unary<UnaryOp::erf>);
CGR_ONNX_OP("Gelu", import_unary<UnaryOp::gelu>);
CGR_ONNX_OP("Exp", import_unary<UnaryOp::exp>);
CGR_ONNX_OP("Log", import_unary<UnaryOp::log>);
CGR_ONNX_OP("Sqrt", import_unary<UnaryOp::sqrt>);
CGR_ONNX_OP("Neg", import_unary<UnaryOp::neg>);
CGR_ONNX_OP("Abs", import_unary<UnaryOp::abs>);
CGR_ONNX_OP("Reciprocal", import_unary<UnaryOp::reciprocal>);
CGR_ONNX_OP("LeakyRelu", import_leaky_relu);
CGR_ONNX_OP("Clip", import_clip);
CGR_ONNX_OP("Add", import_binary<BinaryOp::add>);
CGR_ONNX_OP("Sub", import_binary<BinaryOp::sub>);
CGR_ONNX_OP("Mul", import_binary<BinaryOp::mul>);
CGR_ONNX_OP("Div", import_binary<BinaryOp::div>);
CGR_ONNX_OP("Pow", import_binary<BinaryOp::pow>);
CGR_ONNX_OP("Max", import_variadic<BinaryOp::max>);
CGR_ONNX_OP("Min", import_variadic<BinaryOp::min>);
CGR_ONNX_OP("Sum", import_variadic<BinaryOp::add>);
CGR_ONNX_OP("Mean", (import_variadic<BinaryOp::add, true>));
CGR_ONNX_OP("PRelu", import_prelu);

}  // namespace
}  // namespace cgr::onnx_import
