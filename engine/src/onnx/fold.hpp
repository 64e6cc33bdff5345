// Constant folding of the small integer subgraphs exporters emit to compute shapes and pads
// (ConstantOfShape, Concat, Reshape, Slice, Transpose, Cast, Unsqueeze, Squeeze, Gather):
// when every input of such a node is a constant, the importer evaluates it here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "onnx/proto_util.hpp"

namespace cgr::onnx_import {

bool is_foldable(const ::onnx::NodeProto& node);

// The elements constant folding may still build in one import. Every folded value is charged
// before it is allocated: without a bound a few hundred bytes of ONNX (a chain of Expand,
// Concat or Gather nodes) make the importer build gigabytes of constants or loop for minutes.
class FoldBudget {
 public:
  explicit FoldBudget(std::int64_t elements) : total_(elements), left_(elements) {}
  // Error naming the node (`label`) when `elements` more would pass the bound.
  void charge(std::int64_t elements, const std::string& label);

 private:
  std::int64_t total_;
  std::int64_t left_;
};

// `inputs` holds one entry per node input (nullptr for an omitted optional input).
ConstantTensor fold_node(const ::onnx::NodeProto& node, int opset,
                         const std::vector<const ConstantTensor*>& inputs, FoldBudget& budget,
                         const std::string& label);

// The dims after Squeeze / Unsqueeze `node` of a tensor with `dims` (axes from the attribute
// before opset 13, else from `axes_input`, which may be null).
std::vector<std::int64_t> squeezed_dims(const ::onnx::NodeProto& node, int opset,
                                        const std::vector<std::int64_t>& dims,
                                        const ConstantTensor* axes_input, const std::string& label);

}  // namespace cgr::onnx_import
