// Pad2d: zero padding of the H and W dims of an NCHW tensor (F.pad(x, (l, r, t, b)), ONNX Pad
// in constant mode with value 0), or of L in N x C x L (left and right only). The ONNX
// importer folds a Pad into the Conv it feeds.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

// `planes` (N * C) planes of in_h x in_w placed at (top, left) in zero planes of out_h x out_w.
struct Pad2dGeometry {
  std::int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0, top = 0, left = 0;
};

class Pad2d final : public Layer {
 public:
  static constexpr std::string_view kKind = "Pad2d";
  Pad2d(std::string name, const TensorDesc& input, const Padding2d& padding);

  std::string_view kind() const override { return kKind; }
  const Padding2d& padding() const { return padding_; }
  const Pad2dGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  Padding2d padding_;
  Pad2dGeometry geometry_;
};

}  // namespace cgr
