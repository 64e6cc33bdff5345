// Softmax along one axis (the last by default), numerically stable (max subtracted); with
// `log`, LogSoftmax (x - max - log sum exp(x - max), torch.log_softmax).
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
  Softmax(std::string name, const TensorDesc& input, int axis, bool log = false);

  std::string_view kind() const override { return kKind; }
  std::string_view label() const override { return log_ ? "LogSoftmax" : "Softmax"; }
  int axis() const { return axis_; }
  bool log() const { return log_; }
  const SoftmaxGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  int axis_;
  bool log_;
  SoftmaxGeometry geometry_;
};

}  // namespace cgr
