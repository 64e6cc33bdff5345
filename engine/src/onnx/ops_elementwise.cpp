// ONNX elementwise ops: Relu, LeakyRelu, Clip (ReLU when it is max(x, 0)), the functions of the
// Unary layer (Sigmoid, Tanh, Elu, Selu, HardSigmoid, HardSwish, Softplus, Erf, Gelu, Exp, Log,
// Sqrt, Neg, Abs, Reciprocal), Add (of two computed tensors, or of a constant broadcast to the
// other operand).
#include <limits>

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

void import_add(Importer& im, const ::onnx::NodeProto& node, int index, const std::string& label) {
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 2, 2);
  const bool a_const = im.is_constant(node.input(0)), b_const = im.is_constant(node.input(1));
  if (a_const && b_const) fail("{}: adding two constants is not supported", label);
  if (!a_const && !b_const) {
    const Value a = im.value(node.input(0), label), b = im.value(node.input(1), label);
    return im.bind(node.output(0), im.network().add(a, b, im.layer_name(node, index)));
  }
  // x + c with a constant c broadcast to x.
  const std::string& computed = a_const ? node.input(1) : node.input(0);
  const ConstantTensor& c = im.constant(a_const ? node.input(0) : node.input(1), label, "addend");
  std::vector<float> values =
      c.is_float ? c.floats : std::vector<float>(c.ints.begin(), c.ints.end());
  const std::string name = im.layer_name(node, index);
  const Value y = im.network().add_constant(im.value(computed, label), c.shape, name);
  im.add_weight(name, "constant", c.shape, std::move(values));
  im.bind(node.output(0), y);
}

// One ONNX op of the Unary layer; its attributes are the function's alpha and beta.
template <UnaryOp Op>
void import_unary(Importer& im, const ::onnx::NodeProto& node, int index, const std::string& label) {
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
CGR_ONNX_OP("Add", import_add);

}  // namespace
}  // namespace cgr::onnx_import
