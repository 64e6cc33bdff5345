// The ONNX importer: the graph walk (import.cpp) and the table of op handlers it dispatches to,
// one per ONNX op type, each registered in the file of its op family:
//   ops_nn.cpp           Conv, ConvTranspose, BatchNormalization, MaxPool, AveragePool,
//                        GlobalAveragePool (2-D and 1-D windows), Gemm, MatMul
//   ops_elementwise.cpp  Relu, LeakyRelu, Clip, the Unary functions, the Binary ones (Add, Sub,
//                        Mul, Div, Pow, PRelu; Sum, Mean, Max, Min)
//   ops_reduce.cpp       ReduceSum, ReduceMean, ReduceMax, ReduceMin, GlobalMaxPool
//   ops_norm.cpp         LRN, InstanceNormalization, LayerNormalization
//   ops_tensor.cpp       Concat, Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Identity,
//                        Dropout, Constant, Pad, Tile, Expand, DepthToSpace, SpaceToDepth,
//                        Softmax, Slice, Split, and the shape arithmetic (Shape, Gather, Cast,
//                        ConstantOfShape, Range, Where, the comparisons; and any
//                        elementwise op) folded on constants (fold.cpp)
//   ops_resize.cpp       Resize, Upsample
// supported_onnx_ops() is the table's keys, so the published list cannot drift from what the
// importer dispatches.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cgr/onnx.hpp"
#include "onnx/fold.hpp"
#include "onnx/proto_util.hpp"

namespace cgr::onnx_import {

// Window sizes, strides, dilations and pads beyond this are corrupt files, not models; the
// bound keeps the window arithmetic far from int64 overflow.
constexpr std::int64_t kGeometryLimit = std::int64_t{1} << 20;

// A zero Pad whose consumer decides what it becomes: a Conv absorbs it into its padding;
// anything else materialises it as a Pad2d layer. (Other modes, fills and crops are a Pad2d
// layer at once.)
struct PendingPad {
  Value input;
  Padding2d padding;
  std::string layer_name;
  std::optional<Value> materialized;
};

class Importer;

// Imports `node` (the index-th of the graph; `label` names it in messages) into the importer's
// network, or fails with a message that names the node, the op type and the attribute.
using OpHandler = void (*)(Importer& importer, const ::onnx::NodeProto& node, int index,
                           const std::string& label);

// Registers the handler of one ONNX op type (once per type; a second one aborts).
bool register_op(std::string_view op_type, OpHandler handler);

class Importer {
 public:
  Importer(const ::onnx::ModelProto& model, std::string what, const OnnxImportOptions& options);
  OnnxModel run();

  // --- what the op handlers use ---------------------------------------------------------
  Network& network() { return result_.network; }
  int opset() const { return result_.opset; }

  // The computed tensor `name` (a pending Pad is materialised). Error when it is a constant
  // or nothing produced it.
  Value value(const std::string& name, const std::string& label);
  bool is_constant(const std::string& name) const { return constants_.contains(name); }
  // The constant `name`; Error naming `role` when it is not one.
  const ConstantTensor& constant(const std::string& name, const std::string& label,
                                 std::string_view role);
  // Input `index` of `node` as a constant, or null when the optional input is absent.
  const ConstantTensor* optional_constant(const ::onnx::NodeProto& node, int index,
                                          const std::string& label, std::string_view role);
  void set_constant(const std::string& name, ConstantTensor tensor);
  // The unmaterialised Pad that produced `name`, or null.
  const PendingPad* pending_pad(const std::string& name) const;
  void defer_pad(const std::string& name, PendingPad pad) { pads_[name] = std::move(pad); }

  // ONNX tensor `name` is the cgr value `v` / the same as `in` (constant or computed).
  void bind(const std::string& name, Value v) { values_[name] = v; }
  void alias(const std::string& out, const std::string& in, const std::string& label);

  // A unique layer name: PyTorch's module path when the weight kept its state_dict name,
  // else the node name, else op type and index.
  std::string layer_name(const ::onnx::NodeProto& node, int index,
                         const std::string& weight_initializer = {});
  void add_weight(const std::string& layer, const std::string& suffix, const Shape& shape,
                  std::vector<float> values);

  // Consumers of tensor `name` in the graph (graph outputs count as one each).
  int consumers(const std::string& name) const {
    const auto it = consumers_.find(name);
    return it == consumers_.end() ? 0 : it->second;
  }
  // The Sigmoid / HardSigmoid nodes seen so far, by output: x * sigmoid(x) (SiLU as exporters
  // write it) and x * hard_sigmoid(x) (HardSwish before opset 14) import as one function of x,
  // which a convolution can then fuse as its activation.
  struct Gate {
    std::string input;
    UnaryParams params;
  };
  void note_gate(const std::string& output, Gate gate) { gates_[output] = std::move(gate); }
  const Gate* gate(const std::string& name) const {
    const auto it = gates_.find(name);
    return it == gates_.end() ? nullptr : &it->second;
  }

  // Checks that outputs past the first are unused (BatchNorm stats, MaxPool indices, masks).
  void only_first_output(const ::onnx::NodeProto& node, const std::string& label);
  static void need_inputs(const ::onnx::NodeProto& node, const std::string& label, int low,
                          int high);
  // Input 0 of `node`: N x C x H x W, or N x C x L (a 1-D window, which cgr's 2-D layers
  // take as height 1: cgr/layers/spatial.hpp).
  Value spatial_input(const ::onnx::NodeProto& node, const std::string& label);
  // Pads from `pads` / `auto_pad` for the window over `input` (N x C x H x W: 4 pads; N x C x
  // L: 2, the height unpadded), as (top, left, bottom, right).
  static Padding2d window_padding(const Attributes& attrs, const Shape& input, Size2 kernel,
                                  Size2 stride, Size2 dilation);
  // A per-axis window attribute (kernel_shape, strides, dilations, output_padding) as (h, w):
  // 2 values, or 1 for a 1-D window (`spatial_dims` 1; h is then `height_1d`).
  static Size2 pair_attribute(const Attributes& attrs, std::string_view name, std::int64_t fallback,
                              std::size_t spatial_dims = 2, std::int64_t height_1d = 1);

 private:
  void read_opset();
  void count_consumers();
  void check_supported() const;
  void declare_inputs();
  void declare_outputs();
  void import_node(const ::onnx::NodeProto& node, int index);
  // Shape arithmetic on constants folds away at import.
  bool try_fold(const ::onnx::NodeProto& node, const std::string& label);

  const ::onnx::ModelProto& model_proto_;
  const ::onnx::GraphProto& graph_;
  std::string what_;
  const OnnxImportOptions& options_;
  FoldBudget fold_budget_;
  OnnxModel result_;
  std::map<std::string, Value> values_;
  std::map<std::string, ConstantTensor> constants_;
  std::map<std::string, PendingPad> pads_;
  std::map<std::string, int> consumers_;
  std::map<std::string, std::string> producers_;  // tensor -> the node that wrote it
  std::map<std::string, Gate> gates_;
  std::set<std::string> taken_names_;
};

}  // namespace cgr::onnx_import

// In an ops file, inside namespace cgr::onnx_import: CGR_ONNX_OP("Relu", import_relu);
#define CGR_ONNX_OP_NAME_(line) cgr_onnx_op_##line
#define CGR_ONNX_OP_NAME(line) CGR_ONNX_OP_NAME_(line)
#define CGR_ONNX_OP(op_type, handler) \
  [[maybe_unused]] static const bool CGR_ONNX_OP_NAME(__LINE__) = register_op(op_type, handler)
