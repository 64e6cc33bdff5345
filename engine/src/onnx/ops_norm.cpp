// ONNX normalisations: LRN (opset 1 and 13, the same semantics), InstanceNormalization (6) and
// LayerNormalization (17; earlier exporters write it as ReduceMean, Sub, Pow, Sqrt and Div,
// which import as those layers).
#include <optional>

#include "cgr/error.hpp"
#include "onnx/importer.hpp"

namespace cgr::onnx_import {
namespace {

void import_lrn(Importer& im, const ::onnx::NodeProto& node, int index, const std::string& label) {
  Attributes attrs(node, label, {"alpha", "beta", "bias", "size"});
  Importer::need_inputs(node, label, 1, 1);
  if (!attrs.has("size")) fail("{}: attribute 'size' is required", label);
  LocalResponseNormParams p;
  p.size = attrs.get_int("size", 0);
  if (p.size <= 0) attrs.unsupported("size", fmt::format("{} must be positive", p.size));
  p.alpha = attrs.get_float("alpha", 1e-4f);
  p.beta = attrs.get_float("beta", 0.75f);
  p.bias = attrs.get_float("bias", 1.0f);
  const Value x = im.value(node.input(0), label);
  const Shape& s = im.network().desc(x).shape;
  if (s.rank() < 2) {
    fail("{}: input '{}' has shape {}, expected N x C x spatial dims", label, node.input(0),
         s.to_string());
  }
  im.bind(node.output(0), im.network().local_response_norm(x, p, im.layer_name(node, index)));
}

// A per-channel or per-element constant operand of a normalisation, checked against the
// number of values it must hold.
const ConstantTensor& affine_constant(Importer& im, const ::onnx::NodeProto& node, int input,
                                      const std::string& label, std::string_view role) {
  const ConstantTensor& t = im.constant(node.input(input), label, role);
  if (!t.is_float) fail("{}: {} '{}' must be a float tensor", label, role, node.input(input));
  return t;
}

void import_instance_norm(Importer& im, const ::onnx::NodeProto& node, int index,
                          const std::string& label) {
  Attributes attrs(node, label, {"epsilon"});
  Importer::need_inputs(node, label, 3, 3);
  const Value x = im.value(node.input(0), label);
  const Shape& s = im.network().desc(x).shape;
  if (s.rank() < 3) {
    fail("{}: input '{}' has shape {}, expected N x C x one or more spatial dims", label,
         node.input(0), s.to_string());
  }
  const std::int64_t channels = s[1];
  const ConstantTensor& scale = affine_constant(im, node, 1, label, "scale");
  const ConstantTensor& bias = affine_constant(im, node, 2, label, "B");
  for (const ConstantTensor* t : {&scale, &bias}) {
    if (t->shape != Shape{channels}) {
      fail("{}: '{}' has shape {}, expected [{}] (one value per channel)", label,
           node.input(t == &scale ? 1 : 2), t->shape.to_string(), channels);
    }
  }
  const std::string name = im.layer_name(node, index, node.input(1));
  const Value y = im.network().instance_norm(x, {.eps = attrs.get_float("epsilon", 1e-5f)}, name);
  im.add_weight(name, "weight", Shape{channels}, scale.floats);
  im.add_weight(name, "bias", Shape{channels}, bias.floats);
  im.bind(node.output(0), y);
}

// `t` broadcast (NumPy's rule, towards `target` only) to `target`'s shape, or nullopt when it
// does not broadcast to it. Leading dims of size 1 beyond target's rank are dropped first.
std::optional<std::vector<float>> expand_to(const ConstantTensor& t, const Shape& target) {
  std::vector<std::int64_t> dims = t.shape.dims();
  while (dims.size() > target.rank() && dims.front() == 1)
    dims.erase(dims.begin());
  const Shape shape(std::move(dims));
  if (broadcast_shapes(shape, target) != target) return std::nullopt;
  if (shape == target) return t.floats;
  const BroadcastGeometry g = broadcast_geometry(target, target, shape);
  std::vector<float> values(static_cast<std::size_t>(target.numel()));
  for (std::int64_t i = 0; i < g.count; ++i) {
    std::int64_t rest = i, offset = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      offset += (rest % g.out_dims[d]) * g.b_strides[d];
      rest /= g.out_dims[d];
    }
    values[static_cast<std::size_t>(i)] = t.floats[static_cast<std::size_t>(offset)];
  }
  return values;
}

void import_layer_norm(Importer& im, const ::onnx::NodeProto& node, int index,
                       const std::string& label) {
  // stash_type is the precision of the statistics; cgr computes them in fp32 or better.
  Attributes attrs(node, label, {"axis", "epsilon", "stash_type"});
  Importer::need_inputs(node, label, 2, 3);
  im.only_first_output(node, label);  // Mean and InvStdDev are training outputs
  const Value x = im.value(node.input(0), label);
  const Shape& s = im.network().desc(x).shape;
  const auto rank = static_cast<std::int64_t>(s.rank());
  std::int64_t axis = attrs.get_int("axis", -1);
  if (axis < -rank || axis >= rank) {
    attrs.unsupported("axis", fmt::format("{} is out of range for shape {}", axis, s.to_string()));
  }
  if (axis < 0) axis += rank;
  const Shape normalized(std::vector<std::int64_t>(s.dims().begin() + axis, s.dims().end()));
  const ConstantTensor& scale = affine_constant(im, node, 1, label, "Scale");
  const ConstantTensor* bias = node.input_size() > 2 && !node.input(2).empty()
                                   ? &affine_constant(im, node, 2, label, "B")
                                   : nullptr;
  std::vector<std::vector<float>> expanded;
  for (const ConstantTensor* t : {&scale, bias}) {
    if (t == nullptr) continue;
    std::optional<std::vector<float>> values = expand_to(*t, normalized);
    if (!values) {
      fail("{}: '{}' has shape {}, which does not broadcast to the normalised shape {}", label,
           node.input(t == &scale ? 1 : 2), t->shape.to_string(), normalized.to_string());
    }
    expanded.push_back(std::move(*values));
  }
  const std::string name = im.layer_name(node, index, node.input(1));
  const LayerNormParams p{.axis = static_cast<int>(axis),
                          .eps = attrs.get_float("epsilon", 1e-5f),
                          .bias = bias != nullptr};
  const Value y = im.network().layer_norm(x, p, name);
  im.add_weight(name, "weight", normalized, std::move(expanded[0]));
  if (bias != nullptr) im.add_weight(name, "bias", normalized, std::move(expanded[1]));
  im.bind(node.output(0), y);
}

CGR_ONNX_OP("LRN", import_lrn);
CGR_ONNX_OP("InstanceNormalization", import_instance_norm);
CGR_ONNX_OP("LayerNormalization", import_layer_norm);

}  // namespace
}  // namespace cgr::onnx_import
