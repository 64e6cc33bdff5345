// ONNX graph -> Network. Nodes are visited in file order (ONNX requires topological order);
// each ONNX tensor name maps to a cgr Value, a constant (initializer or Constant output), or
// a pending Pad that the consuming Conv absorbs. Weights are copied into the model's Weights
// under the names the created layers bind ("<layer>.weight", ...), transformed where the op
// needs it (Gemm transB/alpha/beta, MatMul's transposed weight).
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "cgr/error.hpp"
#include "cgr/onnx.hpp"
#include "onnx/fold.hpp"
#include "onnx/proto_util.hpp"

namespace cgr {
namespace onnx_import {
namespace {

constexpr int kMinOpset = 11;
constexpr int kMaxOpset = 17;
// Window sizes, strides, dilations and pads beyond this are corrupt files, not models; the
// bound keeps the window arithmetic far from int64 overflow.
constexpr std::int64_t kGeometryLimit = std::int64_t{1} << 20;

struct PendingPad {
  Value input;
  Padding2d padding;
  std::string layer_name;
  std::optional<Value> materialized;
};

class Importer {
 public:
  Importer(const ::onnx::ModelProto& model, std::string what, const OnnxImportOptions& options)
      : model_proto_(model), graph_(model.graph()), what_(std::move(what)), options_(options) {}

  OnnxModel run() {
    read_opset();
    result_.producer = fmt::format("{} {}", model_proto_.producer_name(),
                                   model_proto_.producer_version());
    for (const auto& init : graph_.initializer()) {
      constants_[init.name()] = decode_tensor(init, fmt::format("{}: initializer", what_));
    }
    count_consumers();
    declare_inputs();
    for (int i = 0; i < graph_.node_size(); ++i) import_node(graph_.node(i), i);
    declare_outputs();
    return std::move(result_);
  }

 private:
  // --- graph structure --------------------------------------------------------------------

  void read_opset() {
    for (const auto& opset : model_proto_.opset_import()) {
      if (opset.domain().empty() || opset.domain() == "ai.onnx") result_.opset = static_cast<int>(opset.version());
    }
    if (result_.opset == 0) fail("{}: the model imports no default-domain opset", what_);
    if (result_.opset < kMinOpset || result_.opset > kMaxOpset) {
      fail("{}: opset {} is not supported (supported: {}-{}); re-export with "
           "torch.onnx.export(..., opset_version=13)",
           what_, result_.opset, kMinOpset, kMaxOpset);
    }
  }

  void count_consumers() {
    for (const auto& node : graph_.node()) {
      for (const auto& input : node.input()) ++consumers_[input];
    }
    for (const auto& output : graph_.output()) ++consumers_[output.name()];
  }

  void declare_inputs() {
    for (const auto& input : graph_.input()) {
      if (constants_.contains(input.name())) continue;  // IR < 4 lists initializers as inputs
      const std::string& name = input.name();
      const auto& type = input.type();
      if (!type.has_tensor_type()) fail("{}: input '{}' is not a tensor", what_, name);
      if (type.tensor_type().elem_type() != ::onnx::TensorProto::FLOAT) {
        fail("{}: input '{}' has element type {}; only FLOAT inputs are supported", what_, name,
             ::onnx::TensorProto::DataType_Name(
                 static_cast<::onnx::TensorProto::DataType>(type.tensor_type().elem_type())));
      }
      Shape shape;
      const auto given = options_.input_shapes.find(name);
      if (given != options_.input_shapes.end()) {
        shape = given->second;
        if (type.tensor_type().has_shape() &&
            type.tensor_type().shape().dim_size() != static_cast<int>(shape.rank())) {
          fail("{}: input '{}' has rank {} but the given shape {} has rank {}", what_, name,
               type.tensor_type().shape().dim_size(), shape.to_string(), shape.rank());
        }
      } else {
        if (!type.tensor_type().has_shape()) {
          fail("{}: input '{}' has no shape; pass one in OnnxImportOptions::input_shapes", what_,
               name);
        }
        std::vector<std::int64_t> dims;
        for (const auto& dim : type.tensor_type().shape().dim()) {
          if (!dim.has_dim_value() || dim.dim_value() <= 0) {
            fail("{}: input '{}' has a dynamic dimension '{}'; pass a concrete shape in "
                 "OnnxImportOptions::input_shapes",
                 what_, name, dim.has_dim_param() ? dim.dim_param() : "?");
          }
          dims.push_back(dim.dim_value());
        }
        shape = Shape(std::move(dims));
      }
      taken_names_.insert(name);
      values_[name] = result_.network.input(name, shape);
    }
  }

  void declare_outputs() {
    for (const auto& output : graph_.output()) {
      if (constants_.contains(output.name())) {
        fail("{}: output '{}' is a constant; constant outputs are not supported", what_,
             output.name());
      }
      result_.network.output(output.name(), value(output.name(), what_));
    }
  }

  // --- names ------------------------------------------------------------------------------

  // A unique layer name: PyTorch's module path when the weight kept its state_dict name,
  // else the node name, else op type and index.
  std::string layer_name(const ::onnx::NodeProto& node, int index,
                         const std::string& weight_initializer = {}) {
    std::string base;
    const std::string suffix = ".weight";
    if (weight_initializer.size() > suffix.size() &&
        weight_initializer.ends_with(suffix)) {
      base = weight_initializer.substr(0, weight_initializer.size() - suffix.size());
    } else if (!node.name().empty()) {
      base = node.name();
      if (base.front() == '/') base.erase(0, 1);
    } else {
      base = fmt::format("{}_{}", node.op_type(), index);
    }
    std::string name = base;
    for (int k = 2; taken_names_.contains(name); ++k) name = fmt::format("{}_{}", base, k);
    taken_names_.insert(name);
    return name;
  }

  // --- operands ---------------------------------------------------------------------------

  Value value(const std::string& name, const std::string& label) {
    if (const auto pad = pads_.find(name); pad != pads_.end()) {
      PendingPad& p = pad->second;
      if (!p.materialized) p.materialized = result_.network.pad2d(p.input, p.padding, p.layer_name);
      return *p.materialized;
    }
    const auto it = values_.find(name);
    if (it != values_.end()) return it->second;
    if (constants_.contains(name)) {
      fail("{}: input '{}' is a constant, but this op needs a computed tensor there", label, name);
    }
    fail("{}: input '{}' is not produced by any earlier node (nodes must be in topological "
         "order)",
         label, name);
  }

  const ConstantTensor& constant(const std::string& name, const std::string& label,
                                 std::string_view role) {
    const auto it = constants_.find(name);
    if (it == constants_.end()) {
      fail("{}: {} '{}' must be a constant (an initializer or a Constant node)", label, role, name);
    }
    return it->second;
  }

  const ConstantTensor* optional_constant(const ::onnx::NodeProto& node, int index,
                                          const std::string& label, std::string_view role) {
    if (node.input_size() <= index || node.input(index).empty()) return nullptr;
    return &constant(node.input(index), label, role);
  }

  void add_weight(const std::string& layer, const std::string& suffix, const Shape& shape,
                  std::vector<float> values) {
    result_.weights.set(layer + "." + suffix, Tensor(shape, std::move(values)));
  }

  // Checks that outputs past the first are unused (BatchNorm stats, MaxPool indices, masks).
  void only_first_output(const ::onnx::NodeProto& node, const std::string& label) {
    for (int i = 1; i < node.output_size(); ++i) {
      if (!node.output(i).empty() && consumers_[node.output(i)] > 0) {
        fail("{}: output {} ('{}') is used, but only the first output is supported", label, i,
             node.output(i));
      }
    }
  }

  static void need_inputs(const ::onnx::NodeProto& node, const std::string& label, int low, int high) {
    if (node.input_size() < low || node.input_size() > high) {
      fail("{}: has {} inputs, expected {}{}", label, node.input_size(), low,
           low == high ? "" : fmt::format(" to {}", high));
    }
  }

  // --- windows (Conv, MaxPool, AveragePool) -----------------------------------------------

  // Pads from `pads` / `auto_pad` for a 2-D window, as (top, left, bottom, right).
  Padding2d window_padding(const Attributes& attrs, const Shape& input, Size2 kernel,
                           Size2 stride, Size2 dilation) {
    const std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
    if (auto_pad == "NOTSET") {
      const auto pads = attrs.get_ints("pads", {0, 0, 0, 0});
      if (pads.size() != 4) attrs.unsupported("pads", fmt::format("has {} values; only 2-D windows (4 values) are supported", pads.size()));
      for (auto p : pads) {
        if (p < 0) attrs.unsupported("pads", "has a negative value");
        if (p > kGeometryLimit) attrs.unsupported("pads", fmt::format("value {} is implausibly large", p));
      }
      return Padding2d(pads[0], pads[1], pads[2], pads[3]);
    }
    if (auto_pad == "VALID") return Padding2d(0);
    if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
      attrs.unsupported("auto_pad", fmt::format("value '{}' is not supported", auto_pad));
    }
    // SAME: output = ceil(in / stride); the odd pad goes at the end (UPPER) or start (LOWER).
    auto same = [&](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d) {
      const std::int64_t out = (in + s - 1) / s;
      const std::int64_t total = std::max<std::int64_t>((out - 1) * s + (k - 1) * d + 1 - in, 0);
      const std::int64_t small = total / 2, large = total - small;
      return auto_pad == "SAME_UPPER" ? std::pair{small, large} : std::pair{large, small};
    };
    const auto [top, bottom] = same(input[2], kernel.h, stride.h, dilation.h);
    const auto [left, right] = same(input[3], kernel.w, stride.w, dilation.w);
    return Padding2d(top, left, bottom, right);
  }

  static Size2 pair_attribute(const Attributes& attrs, std::string_view name, std::int64_t fallback) {
    const auto values = attrs.get_ints(name, {fallback, fallback});
    if (values.size() != 2) {
      attrs.unsupported(name, fmt::format("has {} values; only 2-D windows are supported", values.size()));
    }
    for (auto v : values) {
      if (v > kGeometryLimit) attrs.unsupported(name, fmt::format("value {} is implausibly large", v));
    }
    return Size2(values[0], values[1]);
  }

  Value spatial_input(const ::onnx::NodeProto& node, const std::string& label) {
    const Value x = value(node.input(0), label);
    if (result_.network.desc(x).shape.rank() != 4) {
      fail("{}: input '{}' has shape {}; only 2-D (N x C x H x W) inputs are supported", label,
           node.input(0), result_.network.desc(x).shape.to_string());
    }
    return x;
  }

  // --- ops --------------------------------------------------------------------------------

  void import_node(const ::onnx::NodeProto& node, int index) {
    const std::string label = node_label(what_, node);
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      fail("{}: domain '{}' is not supported", label, node.domain());
    }
    const std::string& op = node.op_type();
    if (node.output_size() < 1) fail("{}: has no output", label);
    const std::string& out = node.output(0);
    if (try_fold(node, label)) return;
    if (op == "Conv") return conv(node, index, label);
    if (op == "BatchNormalization") return batch_norm(node, index, label);
    if (op == "Relu") {
      Attributes attrs(node, label, {});
      need_inputs(node, label, 1, 1);
      return bind(out, result_.network.relu(value(node.input(0), label), layer_name(node, index)));
    }
    if (op == "Clip") return clip(node, index, label);
    if (op == "MaxPool" || op == "AveragePool") return pool(node, index, label, op == "MaxPool");
    if (op == "GlobalAveragePool") {
      Attributes attrs(node, label, {});
      need_inputs(node, label, 1, 1);
      return bind(out, result_.network.global_avg_pool(spatial_input(node, label), layer_name(node, index)));
    }
    if (op == "Concat") {
      Attributes attrs(node, label, {"axis"});
      if (!attrs.has("axis")) fail("{}: attribute 'axis' is required", label);
      std::vector<Value> inputs;
      for (const auto& input : node.input()) inputs.push_back(value(input, label));
      return bind(out, result_.network.concat(inputs, layer_name(node, index),
                                              static_cast<int>(attrs.get_int("axis", 1))));
    }
    if (op == "Flatten") return flatten(node, index, label);
    if (op == "Gemm") return gemm(node, index, label);
    if (op == "MatMul") return matmul(node, index, label);
    if (op == "Add") return add(node, index, label);
    if (op == "Transpose") {
      Attributes attrs(node, label, {"perm"});
      need_inputs(node, label, 1, 1);
      const Value x = value(node.input(0), label);
      const auto rank = static_cast<std::int64_t>(result_.network.desc(x).shape.rank());
      std::vector<int> perm;
      for (auto p : attrs.get_ints("perm", {})) perm.push_back(static_cast<int>(p < 0 ? p + rank : p));
      if (perm.empty()) for (auto d = rank; d-- > 0;) perm.push_back(static_cast<int>(d));
      return bind(out, result_.network.transpose(x, perm, layer_name(node, index)));
    }
    if (op == "Unsqueeze" || op == "Squeeze") return squeeze(node, index, label, op == "Unsqueeze");
    if (op == "Identity") {
      Attributes attrs(node, label, {});
      need_inputs(node, label, 1, 1);
      return alias(out, node.input(0), label);
    }
    if (op == "Dropout") {
      Attributes attrs(node, label, {"seed", "ratio"});
      need_inputs(node, label, 1, 3);
      if (const auto* training = optional_constant(node, 2, label, "training_mode")) {
        const bool on = training->is_float ? (!training->floats.empty() && training->floats[0] != 0)
                                           : (!training->ints.empty() && training->ints[0] != 0);
        if (on) fail("{}: training_mode is true; only inference (identity) is supported", label);
      } else if (node.input_size() > 2 && !node.input(2).empty()) {
        fail("{}: training_mode must be a constant", label);
      }
      only_first_output(node, label);
      return alias(out, node.input(0), label);
    }
    if (op == "Constant") return constant_node(node, label);
    if (op == "Pad") return pad(node, index, label);
    if (op == "Reshape") return reshape(node, index, label);
    if (op == "Softmax") return softmax(node, index, label);
    fail("{}: op type '{}' is not supported (supported: {})", label, op,
         fmt::join(supported_onnx_ops(), ", "));
  }

  void bind(const std::string& name, Value v) { values_[name] = v; }

  // Shape arithmetic on constants (and Shape of a tensor, known statically) folds away.
  bool try_fold(const ::onnx::NodeProto& node, const std::string& label) {
    if (node.op_type() == "Shape") {
      Attributes attrs(node, label, {"start", "end"});
      need_inputs(node, label, 1, 1);
      const auto c = constants_.find(node.input(0));
      const Shape shape = c != constants_.end() ? c->second.shape : result_.network.desc(value(node.input(0), label)).shape;
      const auto rank = static_cast<std::int64_t>(shape.rank());
      auto clamp = [&](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + rank : v, 0, rank); };
      const std::int64_t begin = clamp(attrs.get_int("start", 0)), end = clamp(attrs.get_int("end", rank));
      ConstantTensor t;
      t.is_float = false;
      for (auto d = begin; d < end; ++d) t.ints.push_back(shape[static_cast<std::size_t>(d)]);
      t.shape = Shape{static_cast<std::int64_t>(t.ints.size())};
      constants_[node.output(0)] = std::move(t);
      return true;
    }
    if (!is_foldable(node)) return false;
    std::vector<const ConstantTensor*> inputs;
    for (const auto& name : node.input()) {
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      const auto c = constants_.find(name);
      if (c == constants_.end()) return false;  // a computed tensor: imported as a layer
      inputs.push_back(&c->second);
    }
    if (inputs.empty() && node.op_type() != "Concat") return false;
    constants_[node.output(0)] = fold_node(node, result_.opset, inputs, label);
    return true;
  }

  void add(const ::onnx::NodeProto& node, int index, const std::string& label) {
    Attributes attrs(node, label, {});
    need_inputs(node, label, 2, 2);
    const bool a_const = constants_.contains(node.input(0)), b_const = constants_.contains(node.input(1));
    if (a_const && b_const) fail("{}: adding two constants is not supported", label);
    if (!a_const && !b_const) {
      const Value a = value(node.input(0), label), b = value(node.input(1), label);
      return bind(node.output(0), result_.network.add(a, b, layer_name(node, index)));
    }
    // x + c with a constant c broadcast to x.
    const std::string& computed = a_const ? node.input(1) : node.input(0);
    const ConstantTensor& c = constants_.at(a_const ? node.input(0) : node.input(1));
    std::vector<float> values = c.is_float ? c.floats : std::vector<float>(c.ints.begin(), c.ints.end());
    const std::string name = layer_name(node, index);
    const Value y = result_.network.add_constant(value(computed, label), c.shape, name);
    add_weight(name, "constant", c.shape, std::move(values));
    bind(node.output(0), y);
  }

  // Unsqueeze / Squeeze of a computed tensor: a Reshape to the new dims.
  void squeeze(const ::onnx::NodeProto& node, int index, const std::string& label, bool unsqueeze) {
    Attributes attrs(node, label, {"axes"});
    need_inputs(node, label, 1, 2);
    std::vector<const ConstantTensor*> inputs{nullptr};
    ConstantTensor probe;
    const Value x = value(node.input(0), label);
    probe.shape = result_.network.desc(x).shape;
    probe.floats.assign(static_cast<std::size_t>(probe.shape.numel()), 0.0f);
    inputs[0] = &probe;
    if (node.input_size() > 1 && !node.input(1).empty()) inputs.push_back(&constant(node.input(1), label, "axes"));
    (void)unsqueeze;
    // Fold on a zero tensor of the same shape to learn the resulting dims.
    const ConstantTensor shaped = fold_node(node, result_.opset, inputs, label);
    bind(node.output(0), result_.network.reshape(x, shaped.shape, layer_name(node, index)));
  }

  void alias(const std::string& out, const std::string& in, const std::string& label) {
    if (const auto c = constants_.find(in); c != constants_.end()) {
      constants_[out] = c->second;
      return;
    }
    bind(out, value(in, label));
  }

  void conv(const ::onnx::NodeProto& node, int index, const std::string& label) {
    Attributes attrs(node, label, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
    need_inputs(node, label, 2, 3);
    // A Pad feeding only convs is folded into their padding.
    std::optional<Padding2d> extra;
    Value x;
    if (const auto pad = pads_.find(node.input(0)); pad != pads_.end() && !pad->second.materialized) {
      x = pad->second.input;
      extra = pad->second.padding;
      if (result_.network.desc(x).shape.rank() != 4) fail("{}: only 2-D convolutions are supported", label);
    } else {
      x = spatial_input(node, label);
    }
    const ConstantTensor& w = constant(node.input(1), label, "weight");
    if (w.shape.rank() != 4 || !w.is_float) {
      fail("{}: weight '{}' has shape {}; only 2-D convolutions (4-D float weights) are supported",
           label, node.input(1), w.shape.to_string());
    }
    const Shape in_shape = result_.network.desc(x).shape;
    const Size2 kernel = pair_attribute(attrs, "kernel_shape", 0);
    if (attrs.has("kernel_shape") && (kernel.h != w.shape[2] || kernel.w != w.shape[3])) {
      attrs.unsupported("kernel_shape", fmt::format("{} disagrees with the weight shape {}",
                                                    to_string(kernel), w.shape.to_string()));
    }
    Conv2dParams p;
    p.out_channels = w.shape[0];
    p.kernel = Size2(w.shape[2], w.shape[3]);
    p.stride = pair_attribute(attrs, "strides", 1);
    p.dilation = pair_attribute(attrs, "dilations", 1);
    p.groups = attrs.get_int("group", 1);
    if (p.groups <= 0 || p.groups > in_shape[1]) {
      attrs.unsupported("group", fmt::format("{} does not fit {} input channels", p.groups, in_shape[1]));
    }
    Shape padded = in_shape;
    if (extra) {
      padded[2] += extra->top + extra->bottom;
      padded[3] += extra->left + extra->right;
    }
    p.padding = window_padding(attrs, padded, p.kernel, p.stride, p.dilation);
    if (extra) {
      p.padding.top += extra->top;
      p.padding.left += extra->left;
      p.padding.bottom += extra->bottom;
      p.padding.right += extra->right;
    }
    const ConstantTensor* b = optional_constant(node, 2, label, "bias");
    p.bias = b != nullptr;
    std::int64_t fitted_channels = 0;
    if (__builtin_mul_overflow(w.shape[1], p.groups, &fitted_channels) || fitted_channels != in_shape[1]) {
      fail("{}: weight '{}' of shape {} with group={} does not fit input channels {}", label,
           node.input(1), w.shape.to_string(), p.groups, in_shape[1]);
    }
    const std::string name = layer_name(node, index, node.input(1));
    const Value y = result_.network.conv2d(x, p, name);
    add_weight(name, "weight", w.shape, w.floats);
    if (b != nullptr) {
      if (!b->is_float || b->floats.size() != static_cast<std::size_t>(p.out_channels)) {
        fail("{}: bias '{}' has shape {}, expected [{}]", label, node.input(2), b->shape.to_string(), p.out_channels);
      }
      add_weight(name, "bias", Shape{p.out_channels}, b->floats);
    }
    bind(node.output(0), y);
  }

  void batch_norm(const ::onnx::NodeProto& node, int index, const std::string& label) {
    Attributes attrs(node, label, {"epsilon", "momentum", "spatial", "training_mode"});
    need_inputs(node, label, 5, 5);
    if (attrs.get_int("training_mode", 0) != 0) attrs.unsupported("training_mode", "must be 0 (inference)");
    if (attrs.get_int("spatial", 1) != 1) attrs.unsupported("spatial", "must be 1");
    only_first_output(node, label);
    const Value x = value(node.input(0), label);
    const std::int64_t channels = result_.network.desc(x).shape.rank() >= 2 ? result_.network.desc(x).shape[1] : 0;
    const std::string name = layer_name(node, index, node.input(1));
    const Value y = result_.network.batch_norm2d(x, {.eps = attrs.get_float("epsilon", 1e-5f)}, name);
    const char* suffixes[] = {"weight", "bias", "running_mean", "running_var"};
    for (int i = 0; i < 4; ++i) {
      const ConstantTensor& t = constant(node.input(i + 1), label, suffixes[i]);
      if (!t.is_float || t.floats.size() != static_cast<std::size_t>(channels)) {
        fail("{}: '{}' has shape {}, expected [{}]", label, node.input(i + 1), t.shape.to_string(), channels);
      }
      add_weight(name, suffixes[i], Shape{channels}, t.floats);
    }
    bind(node.output(0), y);
  }

  void clip(const ::onnx::NodeProto& node, int index, const std::string& label) {
    ClipParams p;
    if (result_.opset < 11) {
      Attributes attrs(node, label, {"min", "max"});
      p.low = attrs.get_float("min", p.low);
      p.high = attrs.get_float("max", p.high);
    } else {
      Attributes attrs(node, label, {});
      need_inputs(node, label, 1, 3);
      auto scalar = [&](int i, float fallback) {
        const ConstantTensor* t = optional_constant(node, i, label, i == 1 ? "min" : "max");
        if (t == nullptr) return fallback;
        if (t->shape.numel() != 1) fail("{}: '{}' must be a scalar", label, node.input(i));
        return t->is_float ? t->floats[0] : static_cast<float>(t->ints[0]);
      };
      p.low = scalar(1, p.low);
      p.high = scalar(2, p.high);
    }
    const Value x = value(node.input(0), label);
    const std::string name = layer_name(node, index);
    if (p.low == 0.0f && p.high == std::numeric_limits<float>::infinity()) {
      return bind(node.output(0), result_.network.relu(x, name));
    }
    bind(node.output(0), result_.network.clip(x, p, name));
  }

  void pool(const ::onnx::NodeProto& node, int index, const std::string& label, bool max) {
    Attributes attrs(node, label,
                     max ? std::initializer_list<std::string_view>{"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}
                         : std::initializer_list<std::string_view>{"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"});
    need_inputs(node, label, 1, 1);
    only_first_output(node, label);
    if (!attrs.has("kernel_shape")) fail("{}: attribute 'kernel_shape' is required", label);
    if (max && attrs.get_int("storage_order", 0) != 0) attrs.unsupported("storage_order", "must be 0");
    const Value x = spatial_input(node, label);
    Pool2dParams p;
    p.kernel = pair_attribute(attrs, "kernel_shape", 1);
    p.stride = pair_attribute(attrs, "strides", 1);  // ONNX's default stride is 1, not the kernel
    p.dilation = max ? pair_attribute(attrs, "dilations", 1) : Size2(1);
    p.ceil_mode = attrs.get_int("ceil_mode", 0) != 0;
    p.count_include_pad = attrs.get_int("count_include_pad", 0) != 0;
    p.padding = window_padding(attrs, result_.network.desc(x).shape, p.kernel, p.stride, p.dilation);
    const std::string name = layer_name(node, index);
    bind(node.output(0), max ? result_.network.max_pool2d(x, p, name) : result_.network.avg_pool2d(x, p, name));
  }

  void flatten(const ::onnx::NodeProto& node, int index, const std::string& label) {
    Attributes attrs(node, label, {"axis"});
    need_inputs(node, label, 1, 1);
    const Value x = value(node.input(0), label);
    const Shape& s = result_.network.desc(x).shape;
    auto axis = attrs.get_int("axis", 1);
    if (axis < 0) axis += static_cast<std::int64_t>(s.rank());
    if (axis < 0 || axis > static_cast<std::int64_t>(s.rank())) attrs.unsupported("axis", fmt::format("{} is out of range for shape {}", attrs.get_int("axis", 1), s.to_string()));
    // ONNX Flatten always gives 2-D: [prod(dims < axis), prod(dims >= axis)].
    std::int64_t outer = 1;
    for (std::int64_t d = 0; d < axis; ++d) outer *= s[static_cast<std::size_t>(d)];
    const std::string name = layer_name(node, index);
    if (axis == 1 && s.rank() >= 2) return bind(node.output(0), result_.network.flatten(x, name, 1));
    bind(node.output(0), result_.network.reshape(x, Shape{outer, s.numel() / outer}, name));
  }

  // Linear from a constant weight: y = x Wᵀ + b with W [out, in].
  void linear(const ::onnx::NodeProto& node, int index, Value x, std::vector<float> weight,
              std::int64_t out, std::int64_t in, const std::vector<float>* bias,
              const std::string& weight_name) {
    const std::string name = layer_name(node, index, weight_name);
    const Value y = result_.network.linear(x, {.out_features = out, .bias = bias != nullptr}, name);
    add_weight(name, "weight", Shape{out, in}, std::move(weight));
    if (bias != nullptr) add_weight(name, "bias", Shape{out}, *bias);
    bind(node.output(0), y);
  }

  void gemm(const ::onnx::NodeProto& node, int index, const std::string& label) {
    Attributes attrs(node, label, {"alpha", "beta", "transA", "transB"});
    need_inputs(node, label, 2, 3);
    Value a = value(node.input(0), label);
    if (attrs.get_int("transA", 0) != 0) {
      if (result_.network.desc(a).shape.rank() != 2) fail("{}: transA needs a 2-D input", label);
      a = result_.network.transpose(a, {1, 0}, layer_name(node, index) + ".transA");
    }
    const Shape& as = result_.network.desc(a).shape;
    if (as.rank() != 2) fail("{}: input A '{}' has shape {}, expected 2 dims", label, node.input(0), as.to_string());
    const ConstantTensor& b = constant(node.input(1), label, "B");
    if (b.shape.rank() != 2 || !b.is_float) fail("{}: B '{}' must be a 2-D float constant", label, node.input(1));
    const bool trans_b = attrs.get_int("transB", 0) != 0;
    const std::int64_t in = as[1];
    const std::int64_t out = trans_b ? b.shape[0] : b.shape[1];
    if ((trans_b ? b.shape[1] : b.shape[0]) != in) {
      fail("{}: B '{}' of shape {} (transB={}) does not fit A of shape {}", label, node.input(1),
           b.shape.to_string(), trans_b ? 1 : 0, as.to_string());
    }
    const float alpha = attrs.get_float("alpha", 1.0f), beta = attrs.get_float("beta", 1.0f);
    std::vector<float> weight(static_cast<std::size_t>(out * in));
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t k = 0; k < in; ++k)
        weight[static_cast<std::size_t>(o * in + k)] =
            alpha * b.floats[static_cast<std::size_t>(trans_b ? o * in + k : k * out + o)];
    std::vector<float> bias;
    const ConstantTensor* c = optional_constant(node, 2, label, "C");
    if (c != nullptr) {
      // C broadcasts over rows: only a per-column vector ([N], [1, N] or a scalar) is a bias.
      if (!c->is_float || !(c->shape.numel() == out || c->shape.numel() == 1) ||
          (c->shape.rank() == 2 && c->shape[0] != 1)) {
        fail("{}: C '{}' has shape {}; only a bias of shape [{}] or [1, {}] is supported", label,
             node.input(2), c->shape.to_string(), out, out);
      }
      bias.resize(static_cast<std::size_t>(out));
      for (std::int64_t o = 0; o < out; ++o)
        bias[static_cast<std::size_t>(o)] = beta * c->floats[c->floats.size() == 1 ? 0 : static_cast<std::size_t>(o)];
    }
    linear(node, index, a, std::move(weight), out, in, c != nullptr ? &bias : nullptr, node.input(1));
  }

  void matmul(const ::onnx::NodeProto& node, int index, const std::string& label) {
    Attributes attrs(node, label, {});
    need_inputs(node, label, 2, 2);
    const Value a = value(node.input(0), label);
    const ConstantTensor& b = constant(node.input(1), label, "B (the weight)");
    if (b.shape.rank() != 2 || !b.is_float) fail("{}: B '{}' must be a 2-D float constant", label, node.input(1));
    const Shape& as = result_.network.desc(a).shape;
    const std::int64_t in = b.shape[0], out = b.shape[1];
    if (as.rank() < 1 || as.dims().back() != in) {
      fail("{}: A of shape {} does not fit B of shape {}", label, as.to_string(), b.shape.to_string());
    }
    std::vector<float> weight(static_cast<std::size_t>(out * in));
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t k = 0; k < in; ++k)
        weight[static_cast<std::size_t>(o * in + k)] = b.floats[static_cast<std::size_t>(k * out + o)];
    linear(node, index, a, std::move(weight), out, in, nullptr, node.input(1));
  }

  void constant_node(const ::onnx::NodeProto& node, const std::string& label) {
    Attributes attrs(node, label, {"value", "value_float", "value_floats", "value_int", "value_ints"});
    ConstantTensor t;
    if (const auto* tensor = attrs.get_tensor("value")) {
      t = decode_tensor(*tensor, label);
    } else if (attrs.has("value_float")) {
      t.floats = {attrs.get_float("value_float", 0.0f)};
    } else if (attrs.has("value_int")) {
      t.is_float = false;
      t.ints = {attrs.get_int("value_int", 0)};
    } else if (attrs.has("value_ints")) {
      t.is_float = false;
      t.ints = attrs.get_ints("value_ints", {});
      t.shape = Shape{static_cast<std::int64_t>(t.ints.size())};
    } else {
      fail("{}: needs one of the attributes value, value_float, value_int, value_ints "
           "(value_floats, sparse_value and strings are not supported)", label);
    }
    constants_[node.output(0)] = std::move(t);
  }

  void pad(const ::onnx::NodeProto& node, int index, const std::string& label) {
    Attributes attrs(node, label, {"mode", "pads", "value"});
    const std::string mode = attrs.get_string("mode", "constant");
    if (mode != "constant") attrs.unsupported("mode", fmt::format("'{}' is not supported (only constant)", mode));
    need_inputs(node, label, 1, 4);
    if (node.input_size() > 3 && !node.input(3).empty()) fail("{}: the 'axes' input is not supported", label);
    const ConstantTensor& pads = constant(node.input_size() > 1 ? node.input(1) : std::string(), label, "pads");
    if (pads.is_float || pads.ints.size() != 8) {
      fail("{}: pads '{}' must hold 8 integers (a 4-D input)", label, node.input(1));
    }
    if (const ConstantTensor* v = optional_constant(node, 2, label, "constant_value")) {
      const double fill = v->is_float ? double{v->floats.at(0)} : static_cast<double>(v->ints.at(0));
      if (fill != 0.0) fail("{}: constant_value {} is not supported (only 0)", label, fill);
    }
    const auto& p = pads.ints;  // [n0, c0, h0, w0, n1, c1, h1, w1]
    if (p[0] != 0 || p[1] != 0 || p[4] != 0 || p[5] != 0) {
      fail("{}: padding the batch or channel dims is not supported (pads {})", label, fmt::join(p, ","));
    }
    for (auto v : p) {
      if (v < 0) fail("{}: negative pads (cropping) are not supported", label);
      if (v > kGeometryLimit) fail("{}: pad {} is implausibly large", label, v);
    }
    const Value x = spatial_input(node, label);
    // Deferred: a consuming Conv absorbs it; anything else materialises a Pad2d layer.
    pads_[node.output(0)] = PendingPad{x, Padding2d(p[2], p[3], p[6], p[7]), layer_name(node, index), std::nullopt};
  }

  void reshape(const ::onnx::NodeProto& node, int index, const std::string& label) {
    Attributes attrs(node, label, {"allowzero"});
    need_inputs(node, label, 2, 2);
    const bool allow_zero = attrs.get_int("allowzero", 0) != 0;
    const Value x = value(node.input(0), label);
    const Shape& in = result_.network.desc(x).shape;
    const ConstantTensor& shape = constant(node.input(1), label, "shape");
    if (shape.is_float) fail("{}: shape '{}' must be an integer tensor", label, node.input(1));
    std::vector<std::int64_t> dims = shape.ints;
    int infer = -1;
    std::int64_t known = 1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == 0 && !allow_zero) {
        if (i >= in.rank()) fail("{}: shape {} copies dim {} of a rank-{} input", label, fmt::join(shape.ints, ","), i, in.rank());
        dims[i] = in[i];
      }
      if (dims[i] == -1) {
        if (infer >= 0) fail("{}: shape {} has more than one -1", label, fmt::join(shape.ints, ","));
        infer = static_cast<int>(i);
      } else if (dims[i] <= 0 || __builtin_mul_overflow(known, dims[i], &known)) {
        fail("{}: shape {} is not supported", label, fmt::join(shape.ints, ","));
      }
    }
    if (infer >= 0) {
      if (known == 0 || in.numel() % known != 0) {
        fail("{}: cannot reshape {} to {}", label, in.to_string(), fmt::join(shape.ints, ","));
      }
      dims[static_cast<std::size_t>(infer)] = in.numel() / known;
    }
    bind(node.output(0), result_.network.reshape(x, Shape(std::move(dims)), layer_name(node, index)));
  }

  void softmax(const ::onnx::NodeProto& node, int index, const std::string& label) {
    Attributes attrs(node, label, {"axis"});
    need_inputs(node, label, 1, 1);
    const Value x = value(node.input(0), label);
    const Shape s = result_.network.desc(x).shape;
    const auto rank = static_cast<std::int64_t>(s.rank());
    std::int64_t axis = attrs.get_int("axis", result_.opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) attrs.unsupported("axis", fmt::format("is out of range for shape {}", s.to_string()));
    const std::string name = layer_name(node, index);
    if (result_.opset >= 13 || axis == rank - 1) {
      return bind(node.output(0), result_.network.softmax(x, name, static_cast<int>(axis)));
    }
    // Before opset 13, Softmax normalises over all dims from `axis` on, flattened together.
    std::int64_t outer = 1;
    for (std::int64_t d = 0; d < axis; ++d) outer *= s[static_cast<std::size_t>(d)];
    const Value flat = result_.network.reshape(x, Shape{outer, s.numel() / outer}, name + ".flatten");
    const Value soft = result_.network.softmax(flat, name, -1);
    bind(node.output(0), result_.network.reshape(soft, s, name + ".unflatten"));
  }

  const ::onnx::ModelProto& model_proto_;
  const ::onnx::GraphProto& graph_;
  std::string what_;
  const OnnxImportOptions& options_;
  OnnxModel result_;
  std::map<std::string, Value> values_;
  std::map<std::string, ConstantTensor> constants_;
  std::map<std::string, PendingPad> pads_;
  std::map<std::string, int> consumers_;
  std::set<std::string> taken_names_;
};

}  // namespace
}  // namespace onnx_import

std::vector<std::string> supported_onnx_ops() {
  // Cast, ConstantOfShape, Gather, Shape and Slice only on constants (shape arithmetic).
  return {"Add",      "AveragePool", "BatchNormalization", "Cast",      "Clip",
          "Concat",   "Constant",    "ConstantOfShape",    "Conv",      "Dropout",
          "Flatten",  "Gather",      "Gemm",               "GlobalAveragePool",
          "Identity", "MatMul",      "MaxPool",            "Pad",       "Relu",
          "Reshape",  "Shape",       "Slice",              "Softmax",   "Squeeze",
          "Transpose", "Unsqueeze"};
}

OnnxModel import_onnx(std::span<const std::byte> bytes, std::string_view what,
                      const OnnxImportOptions& options) {
  ::onnx::ModelProto model;
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    fail("{}: {} bytes is larger than protobuf can parse (2 GiB)", what, bytes.size());
  }
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    fail("{}: not a valid ONNX model (protobuf parsing failed; truncated or not an .onnx file)",
         what);
  }
  if (!model.has_graph()) fail("{}: the model has no graph", what);
  return onnx_import::Importer(model, std::string(what), options).run();
}

OnnxModel import_onnx(const std::filesystem::path& path, const OnnxImportOptions& options) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) fail("{}: cannot open the file", path.string());
  const auto size = static_cast<std::size_t>(file.tellg());
  std::vector<char> data(size);
  file.seekg(0);
  if (!file.read(data.data(), static_cast<std::streamsize>(size))) {
    fail("{}: reading {} bytes failed", path.string(), size);
  }
  return import_onnx(std::as_bytes(std::span(data)), path.string(), options);
}

}  // namespace cgr
