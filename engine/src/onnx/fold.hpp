// Constant folding of the small integer subgraphs exporters emit to compute shapes and pads
// (ConstantOfShape, Concat, Reshape, Slice, Transpose, Cast, Unsqueeze, Squeeze, Gather):
// when every input of such a node is a constant, the importer evaluates it here.
#pragma once

#include <optional>
#include <vector>

#include "onnx/proto_util.hpp"

namespace cgr::onnx_import {

bool is_foldable(const ::onnx::NodeProto& node);

// `inputs` holds one entry per node input (nullptr for an omitted optional input).
ConstantTensor fold_node(const ::onnx::NodeProto& node, int opset,
                         const std::vector<const ConstantTensor*>& inputs,
                         const std::string& label);

}  // namespace cgr::onnx_import
