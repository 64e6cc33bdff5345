// Softmax along one axis (the last by default), numerically stable (max subtracted).
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

// The tensor seen as outer x length x inner: each (outer, inner) pair is one row of `length`
// values spaced `inner` apart.
struct SoftmaxGeometry {
  std::int64_t outer = 1, length = 0, inner = 1;
};

class Softmax final : public Layer {
 public:
  static constexpr std::string_view kKind = "Softmax";
  Softmax(std::string name, const TensorDesc& input, int axis);

  std::string_view kind() const override { return kKind; }
  int axis() const { return axis_; }
  const SoftmaxGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  int axis_;
  SoftmaxGeometry geometry_;
};

}  // namespace cgr
