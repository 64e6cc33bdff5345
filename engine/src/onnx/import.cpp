// ONNX graph -> Network. Nodes are visited in file order (ONNX requires topological order);
// each ONNX tensor name maps to a cgr Value, a constant (initializer or Constant output), or
// a pending Pad that the consuming Conv absorbs. A node whose inputs are all constants and
// whose op is shape arithmetic is folded; every other node goes to its op type's handler
// (importer.hpp lists the files). Weights are copied into the model's Weights under the names
// the created layers bind ("<layer>.weight", ...), transformed where the op needs it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "cgr/error.hpp"
#include "cgr/files.hpp"
#include "onnx/fold.hpp"
#include "onnx/importer.hpp"

namespace cgr {
namespace onnx_import {
namespace {

// Each handler honours the version semantics of its op across this range (attributes that
// became inputs, changed defaults, coerced axes); tests/conformance/make_ort_models.py checks
// every op at each version where it changed against ONNX Runtime.
constexpr int kMinOpset = 7;
constexpr int kMaxOpset = 21;

struct OpTable {
  std::mutex mutex;
  std::map<std::string, OpHandler, std::less<>> handlers;
};

// Function-local: registrations run during static initialisation, in any order.
OpTable& op_table() {
  static OpTable table;
  return table;
}

const OpHandler* find_op(std::string_view op_type) {
  OpTable& table = op_table();
  std::lock_guard lock(table.mutex);
  const auto it = table.handlers.find(op_type);
  return it == table.handlers.end() ? nullptr : &it->second;
}

}  // namespace

bool register_op(std::string_view op_type, OpHandler handler) {
  OpTable& table = op_table();
  std::lock_guard lock(table.mutex);
  if (!table.handlers.emplace(std::string(op_type), handler).second) {
    std::fprintf(stderr, "cgr: two ONNX importers are registered for op type '%.*s'\n",
                 static_cast<int>(op_type.size()), op_type.data());
    std::abort();
  }
  return true;
}

Importer::Importer(const ::onnx::ModelProto& model, std::string what,
                   const OnnxImportOptions& options)
    : model_proto_(model),
      graph_(model.graph()),
      what_(std::move(what)),
      options_(options),
      fold_budget_(options.max_folded_elements) {}

OnnxModel Importer::run() {
  read_opset();
  result_.producer =
      fmt::format("{} {}", model_proto_.producer_name(), model_proto_.producer_version());
  for (const auto& init : graph_.initializer()) {
    constants_[init.name()] = decode_tensor(init, fmt::format("{}: initializer", what_));
  }
  count_consumers();
  check_supported();
  declare_inputs();
  for (int i = 0; i < graph_.node_size(); ++i)
    import_node(graph_.node(i), i);
  declare_outputs();
  return std::move(result_);
}

// --- graph structure ------------------------------------------------------------------------

void Importer::read_opset() {
  for (const auto& opset : model_proto_.opset_import()) {
    if (!opset.domain().empty() && opset.domain() != "ai.onnx") continue;
    if (result_.opset != 0) {
      fail("{}: the model imports the default-domain opset twice (versions {} and {})", what_,
           result_.opset, opset.version());
    }
    result_.opset = static_cast<int>(opset.version());
  }
  if (result_.opset == 0) fail("{}: the model imports no default-domain opset", what_);
  if (result_.opset < kMinOpset || result_.opset > kMaxOpset) {
    fail(
        "{}: opset {} is not supported (supported: {}-{}); re-export with "
        "torch.onnx.export(..., opset_version=13)",
        what_, result_.opset, kMinOpset, kMaxOpset);
  }
}

// Every op type the importer has no handler for, each with the nodes that use it, in one
// error: a user converting a model learns all that is missing at once.
void Importer::check_supported() const {
  std::map<std::string, std::vector<std::string>> missing;
  for (int i = 0; i < graph_.node_size(); ++i) {
    const auto& node = graph_.node(i);
    if (!node.domain().empty() && node.domain() != "ai.onnx") continue;  // said per node
    if (find_op(node.op_type()) == nullptr && !is_foldable(node)) {
      missing[node.op_type()].push_back(node.name().empty() ? fmt::format("#{}", i)
                                                            : fmt::format("'{}'", node.name()));
    }
  }
  if (missing.empty()) return;
  std::vector<std::string> lines;
  for (const auto& [op, nodes] : missing) {
    const std::size_t shown = std::min<std::size_t>(nodes.size(), 4);
    lines.push_back(fmt::format(
        "  {} ({} node{}: {}{})", op, nodes.size(), nodes.size() == 1 ? "" : "s",
        fmt::join(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
        nodes.size() > shown ? fmt::format(" and {} more", nodes.size() - shown) : ""));
  }
  fail("{}: {} op type{} not supported:\n{}\nsupported: {}", what_, missing.size(),
       missing.size() == 1 ? " is" : "s are", fmt::join(lines, "\n"),
       fmt::join(supported_onnx_ops(), ", "));
}

void Importer::count_consumers() {
  for (const auto& node : graph_.node()) {
    for (const auto& input : node.input())
      ++consumers_[input];
  }
  for (const auto& output : graph_.output())
    ++consumers_[output.name()];
}

void Importer::declare_inputs() {
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
          fail(
              "{}: input '{}' has a dynamic dimension '{}'; pass a concrete shape in "
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

void Importer::declare_outputs() {
  std::vector<std::string> graph_outputs;
  for (const auto& output : graph_.output())
    graph_outputs.push_back(output.name());
  std::map<std::string, const OnnxExit*, std::less<>> exits;
  for (const OnnxExit& exit : options_.exits) {
    if (std::find(graph_outputs.begin(), graph_outputs.end(), exit.output) == graph_outputs.end()) {
      fail("{}: exit '{}' is not a graph output (outputs: {})", what_, exit.output,
           fmt::join(graph_outputs, ", "));
    }
    if (!exits.emplace(exit.output, &exit).second) {
      fail("{}: exit '{}' is declared twice", what_, exit.output);
    }
    if (!exit.speculate_until.empty() && !values_.contains(exit.speculate_until) &&
        !pads_.contains(exit.speculate_until)) {
      fail("{}: exit '{}': speculate_until '{}' is not a tensor of the graph{}", what_, exit.output,
           exit.speculate_until,
           constants_.contains(exit.speculate_until) ? " (it is a constant)" : "");
    }
  }
  if (!exits.empty() && exits.size() == graph_outputs.size()) {
    fail("{}: every graph output ({}) is declared an exit; the final answer must stay an output",
         what_, fmt::join(graph_outputs, ", "));
  }
  for (const auto& name : graph_outputs) {
    if (constants_.contains(name)) {
      fail("{}: output '{}' is a constant; constant outputs are not supported", what_, name);
    }
    if (!values_.contains(name) && !pads_.contains(name)) {
      fail("{}: graph output '{}' is not produced by any node, nor is it a graph input", what_,
           name);
    }
    if (!exits.contains(name)) result_.network.output(name, value(name, what_));
  }
  // Exits in the order given (the order Result::exits reports them).
  for (const OnnxExit& exit : options_.exits) {
    const std::string label = fmt::format("{}: exit '{}'", what_, exit.output);
    const Value speculate =
        exit.speculate_until.empty() ? Value{} : value(exit.speculate_until, label);
    const Value logits = value(exit.output, label);
    const Shape& shape = result_.network.desc(logits).shape;
    if (shape.rank() != 2) {
      fail("{} has shape {}; an exit head's logits must be N x classes", label, shape.to_string());
    }
    result_.network.exit(exit.output, logits, speculate);
  }
}

void Importer::import_node(const ::onnx::NodeProto& node, int index) {
  const std::string label = node_label(what_, node);
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    fail("{}: domain '{}' is not supported", label, node.domain());
  }
  if (node.output_size() < 1) fail("{}: has no output", label);
  // Each tensor is written once (ONNX graphs are SSA): a second writer would silently replace
  // the first.
  for (const auto& output : node.output()) {
    if (output.empty()) continue;
    if (const auto it = producers_.find(output); it != producers_.end()) {
      fail("{}: output '{}' is already produced by {}", label, output, it->second);
    }
    if (constants_.contains(output))
      fail("{}: output '{}' is an initializer's name", label, output);
    if (values_.contains(output)) fail("{}: output '{}' is a graph input's name", label, output);
    producers_.emplace(output, fmt::format("node '{}' ({})", node.name(), node.op_type()));
  }
  if (try_fold(node, label)) return;
  const OpHandler* handler = find_op(node.op_type());
  if (handler == nullptr) {
    fail("{}: op type '{}' is not supported (supported: {})", label, node.op_type(),
         fmt::join(supported_onnx_ops(), ", "));
  }
  (*handler)(*this, node, index, label);
}

bool Importer::try_fold(const ::onnx::NodeProto& node, const std::string& label) {
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
  constants_[node.output(0)] = fold_node(node, result_.opset, inputs, fold_budget_, label);
  return true;
}

// --- names, operands and weights ------------------------------------------------------------

std::string Importer::layer_name(const ::onnx::NodeProto& node, int index,
                                 const std::string& weight_initializer) {
  std::string base;
  const std::string suffix = ".weight";
  if (weight_initializer.size() > suffix.size() && weight_initializer.ends_with(suffix)) {
    base = weight_initializer.substr(0, weight_initializer.size() - suffix.size());
  } else if (!node.name().empty()) {
    base = node.name();
    if (base.front() == '/') base.erase(0, 1);
  } else {
    base = fmt::format("{}_{}", node.op_type(), index);
  }
  std::string name = base;
  for (int k = 2; taken_names_.contains(name); ++k)
    name = fmt::format("{}_{}", base, k);
  taken_names_.insert(name);
  return name;
}

Value Importer::value(const std::string& name, const std::string& label) {
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
  fail(
      "{}: input '{}' is not produced by any earlier node (nodes must be in topological "
      "order)",
      label, name);
}

const ConstantTensor& Importer::constant(const std::string& name, const std::string& label,
                                         std::string_view role) {
  const auto it = constants_.find(name);
  if (it == constants_.end()) {
    fail("{}: {} '{}' must be a constant (an initializer or a Constant node)", label, role, name);
  }
  return it->second;
}

const ConstantTensor* Importer::optional_constant(const ::onnx::NodeProto& node, int index,
                                                  const std::string& label, std::string_view role) {
  if (node.input_size() <= index || node.input(index).empty()) return nullptr;
  return &constant(node.input(index), label, role);
}

void Importer::set_constant(const std::string& name, ConstantTensor tensor) {
  constants_[name] = std::move(tensor);
}

const PendingPad* Importer::pending_pad(const std::string& name) const {
  const auto it = pads_.find(name);
  return it == pads_.end() || it->second.materialized ? nullptr : &it->second;
}

void Importer::alias(const std::string& out, const std::string& in, const std::string& label) {
  if (const auto c = constants_.find(in); c != constants_.end()) {
    constants_[out] = c->second;
    return;
  }
  bind(out, value(in, label));
}

void Importer::add_weight(const std::string& layer, const std::string& suffix, const Shape& shape,
                          std::vector<float> values) {
  result_.weights.set(layer + "." + suffix, Tensor(shape, std::move(values)));
}

void Importer::only_first_output(const ::onnx::NodeProto& node, const std::string& label) {
  for (int i = 1; i < node.output_size(); ++i) {
    if (!node.output(i).empty() && consumers_[node.output(i)] > 0) {
      fail("{}: output {} ('{}') is used, but only the first output is supported", label, i,
           node.output(i));
    }
  }
}

void Importer::need_inputs(const ::onnx::NodeProto& node, const std::string& label, int low,
                           int high) {
  if (node.input_size() < low || node.input_size() > high) {
    fail("{}: has {} inputs, expected {}{}", label, node.input_size(), low,
         low == high ? "" : fmt::format(" to {}", high));
  }
}

// --- windows (Conv, MaxPool, AveragePool) ---------------------------------------------------

Padding2d Importer::window_padding(const Attributes& attrs, const Shape& input, Size2 kernel,
                                   Size2 stride, Size2 dilation) {
  const bool one_d = input.rank() == 3;
  const std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const std::size_t count = one_d ? 2 : 4;
    const auto pads = attrs.get_ints("pads", std::vector<std::int64_t>(count, 0));
    if (pads.size() != count)
      attrs.unsupported("pads",
                        fmt::format("has {} values; a {} window over {} takes {}", pads.size(),
                                    one_d ? "1-D" : "2-D", input.to_string(), count));
    for (auto p : pads) {
      if (p < 0) attrs.unsupported("pads", "has a negative value");
      if (p > kGeometryLimit)
        attrs.unsupported("pads", fmt::format("value {} is implausibly large", p));
    }
    return one_d ? Padding2d(0, pads[0], 0, pads[1])
                 : Padding2d(pads[0], pads[1], pads[2], pads[3]);
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
  const auto [top, bottom] = one_d ? std::pair<std::int64_t, std::int64_t>{0, 0}
                                   : same(input[2], kernel.h, stride.h, dilation.h);
  const auto [left, right] = same(input[input.rank() - 1], kernel.w, stride.w, dilation.w);
  return Padding2d(top, left, bottom, right);
}

Size2 Importer::pair_attribute(const Attributes& attrs, std::string_view name,
                               std::int64_t fallback, std::size_t spatial_dims,
                               std::int64_t height_1d) {
  const auto values = attrs.get_ints(name, std::vector<std::int64_t>(spatial_dims, fallback));
  if (values.size() != spatial_dims) {
    attrs.unsupported(name, fmt::format("has {} values; a {}-D window takes {}", values.size(),
                                        spatial_dims, spatial_dims));
  }
  for (auto v : values) {
    if (v > kGeometryLimit)
      attrs.unsupported(name, fmt::format("value {} is implausibly large", v));
  }
  return spatial_dims == 1 ? Size2(height_1d, values[0]) : Size2(values[0], values[1]);
}

Value Importer::spatial_input(const ::onnx::NodeProto& node, const std::string& label) {
  const Value x = value(node.input(0), label);
  const std::size_t rank = result_.network.desc(x).shape.rank();
  if (rank != 4 && rank != 3) {
    fail(
        "{}: input '{}' has shape {}; only 2-D (N x C x H x W) and 1-D (N x C x L) inputs are "
        "supported",
        label, node.input(0), result_.network.desc(x).shape.to_string());
  }
  return x;
}

}  // namespace onnx_import

std::vector<std::string> supported_onnx_ops() {
  onnx_import::OpTable& table = onnx_import::op_table();
  std::lock_guard lock(table.mutex);
  std::vector<std::string> ops;
  for (const auto& [op, handler] : table.handlers)
    ops.push_back(op);
  return ops;
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
  // Protobuf parses at most 2 GiB: a larger file is refused before it is read.
  const std::vector<std::byte> data =
      read_file(path, static_cast<std::uint64_t>(std::numeric_limits<int>::max()),
                "an ONNX model (protobuf parses at most 2 GiB)");
  return import_onnx(data, path.string(), options);
}

BucketedEngine build_onnx_buckets(const std::filesystem::path& path,
                                  std::vector<std::int64_t> buckets,
                                  const EngineOptions& engine_options, OnnxImportOptions options) {
  const std::vector<std::byte> data =
      read_file(path, static_cast<std::uint64_t>(std::numeric_limits<int>::max()),
                "an ONNX model (protobuf parses at most 2 GiB)");
  ::onnx::ModelProto model;
  if (!model.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    fail("{}: not a valid ONNX model (protobuf parse failed)", path.string());
  }
  // The graph inputs that are not initializers, with their declared dims (-1: symbolic).
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer())
    initializers.insert(init.name());
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> declared;
  for (const auto& input : model.graph().input()) {
    if (initializers.contains(input.name())) continue;
    std::vector<std::int64_t> dims;
    if (input.type().has_tensor_type() && input.type().tensor_type().has_shape()) {
      for (const auto& dim : input.type().tensor_type().shape().dim())
        dims.push_back(dim.has_dim_value() && dim.dim_value() > 0 ? dim.dim_value() : -1);
    }
    declared.emplace_back(input.name(), std::move(dims));
  }
  buckets = BucketedEngine::sorted_buckets(std::move(buckets));
  std::vector<Engine> engines;
  for (std::int64_t bucket : buckets) {
    OnnxImportOptions per_bucket = options;
    for (const auto& [name, file_dims] : declared) {
      const auto given = options.input_shapes.find(name);
      std::vector<std::int64_t> dims =
          given != options.input_shapes.end() ? given->second.dims() : file_dims;
      if (dims.empty()) {
        fail("{}: input '{}' has no shape; give it in OnnxImportOptions::input_shapes (any batch)",
             path.string(), name);
      }
      dims[0] = bucket;
      for (std::size_t d = 1; d < dims.size(); ++d) {
        if (dims[d] < 0) {
          fail(
              "{}: input '{}' has a dynamic dimension {} besides the batch; give its shape in "
              "OnnxImportOptions::input_shapes",
              path.string(), name, d);
        }
      }
      per_bucket.input_shapes[name] = Shape(std::move(dims));
    }
    const OnnxModel imported = import_onnx(data, path.string(), per_bucket);
    engines.push_back(Engine::build(imported.network, imported.weights, engine_options));
  }
  return BucketedEngine::from_engines(std::move(buckets), std::move(engines));
}

}  // namespace cgr
