// ONNX reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin (axes an attribute before opset
// 13 for ReduceSum and 18 for the others, an input after; no axes reduce everything unless
// noop_with_empty_axes), and GlobalMaxPool (the max over every spatial dim). A ReduceMean over
// H and W of an NCHW tensor, keeping dims, is a GlobalAvgPool.
#include <algorithm>

#include "cgr/error.hpp"
#include "onnx/importer.hpp"

namespace cgr::onnx_import {
namespace {

template <ReduceOp Op>
void import_reduce(Importer& im, const ::onnx::NodeProto& node, int index,
                   const std::string& label) {
  const int axes_input_from = Op == ReduceOp::sum ? 13 : 18;
  const bool axes_input = im.opset() >= axes_input_from;
  Attributes attrs(node, label,
                   axes_input
                       ? std::initializer_list<std::string_view>{"keepdims", "noop_with_empty_axes"}
                       : std::initializer_list<std::string_view>{"axes", "keepdims"});
  Importer::need_inputs(node, label, 1, axes_input ? 2 : 1);
  const Value x = im.value(node.input(0), label);
  const Shape& shape = im.network().desc(x).shape;
  std::vector<std::int64_t> axes;
  if (axes_input) {
    if (const ConstantTensor* a = im.optional_constant(node, 1, label, "axes")) {
      if (a->is_float) fail("{}: axes '{}' must be an integer tensor", label, node.input(1));
      axes = a->ints;
    }
  } else {
    axes = attrs.get_ints("axes", {});
  }
  const bool keep = attrs.get_int("keepdims", 1) != 0;
  if (axes.empty()) {
    if (attrs.get_int("noop_with_empty_axes", 0) != 0)
      return im.alias(node.output(0), node.input(0), label);
    for (std::size_t d = 0; d < shape.rank(); ++d)
      axes.push_back(static_cast<std::int64_t>(d));
  }
  ReduceParams p{.op = Op, .axes = {}, .keep_dims = keep};
  for (auto a : axes)
    p.axes.push_back(static_cast<int>(a));
  const std::string name = im.layer_name(node, index);
  std::vector<int> normalized;
  for (auto a : axes)
    normalized.push_back(static_cast<int>(a < 0 ? a + static_cast<std::int64_t>(shape.rank()) : a));
  std::sort(normalized.begin(), normalized.end());
  if (Op == ReduceOp::mean && keep && shape.rank() == 4 && normalized == std::vector<int>{2, 3} &&
      shape[2] * shape[3] > 0) {
    return im.bind(node.output(0), im.network().global_avg_pool(x, name));
  }
  im.bind(node.output(0), im.network().reduce(x, std::move(p), name));
}

void import_global_max_pool(Importer& im, const ::onnx::NodeProto& node, int index,
                            const std::string& label) {
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 1, 1);
  const Value x = im.value(node.input(0), label);
  const std::size_t rank = im.network().desc(x).shape.rank();
  if (rank < 3) fail("{}: input '{}' needs spatial dims (N x C x ...)", label, node.input(0));
  ReduceParams p{.op = ReduceOp::max, .axes = {}, .keep_dims = true};
  for (std::size_t d = 2; d < rank; ++d)
    p.axes.push_back(static_cast<int>(d));
  im.bind(node.output(0), im.network().reduce(x, std::move(p), im.layer_name(node, index)));
}

CGR_ONNX_OP("ReduceSum", import_reduce<ReduceOp::sum>);
CGR_ONNX_OP("ReduceMean", import_reduce<ReduceOp::mean>);
CGR_ONNX_OP("ReduceMax", import_reduce<ReduceOp::max>);
CGR_ONNX_OP("ReduceMin", import_reduce<ReduceOp::min>);
CGR_ONNX_OP("GlobalMaxPool", import_global_max_pool);

}  // namespace
}  // namespace cgr::onnx_import
