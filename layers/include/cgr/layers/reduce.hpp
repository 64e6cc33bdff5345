// Reduce: the sum, mean, max or min over a set of axes, the reduced dims kept as 1 or dropped
// (torch.mean/sum/amax/amin(dim, keepdim), ONNX ReduceSum/Mean/Max/Min, GlobalMaxPool). Max and
// min propagate NaN. Reducing nothing (an empty axis list) is the identity.
#pragma once

#include <vector>

#include "cgr/layers/element_math.hpp"
#include "cgr/layers/layer.hpp"

namespace cgr {

using math::ReduceOp;

struct ReduceParams {
  ReduceOp op = ReduceOp::mean;
  std::vector<int> axes;  // may be negative (counted from the end); each at most once
  bool keep_dims = true;
};

// Output element o reads input offsets base(o) + sum of r[d] * red_strides[d] over the reduced
// index r; base(o) = sum of o's index[d] * out_strides[d] over the kept dims. Kept dims and
// reduced dims that are adjacent and contiguous are merged, so a reduction over the trailing
// dims (H and W of NCHW, the last axis) has one reduced dim of stride 1. Fixed-size, so
// kernels take it by value.
struct ReduceGeometry {
  static constexpr int kMaxRank = 8;
  int out_rank = 0, red_rank = 0;
  std::int64_t out_count = 0, red_count = 0;
  std::int64_t out_dims[kMaxRank] = {}, out_strides[kMaxRank] = {};
  std::int64_t red_dims[kMaxRank] = {}, red_strides[kMaxRank] = {};
};

std::string_view reduce_op_name(ReduceOp op);  // "ReduceMean", ...

class Reduce final : public Layer {
 public:
  static constexpr std::string_view kKind = "Reduce";
  Reduce(std::string name, const TensorDesc& input, ReduceParams params);

  std::string_view kind() const override { return kKind; }
  std::string_view label() const override { return reduce_op_name(params_.op); }
  const ReduceParams& params() const { return params_; }  // axes normalised and sorted
  const ReduceGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  ReduceParams params_;
  ReduceGeometry geometry_;
};

}  // namespace cgr
