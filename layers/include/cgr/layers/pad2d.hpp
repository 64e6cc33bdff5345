// Pad2d: padding of the H and W dims of an NCHW tensor (F.pad(x, (l, r, t, b), mode, value),
// nn.ReflectionPad2d / ReplicationPad2d / ConstantPad2d, ONNX Pad), or of L in N x C x L (left
// and right only): a constant fill, the reflection about the border, the border itself repeated
// (edge) or the opposite border (wrap). Negative pads crop. The ONNX importer folds a zero Pad
// into the Conv it feeds.
#pragma once

#include "cgr/layers/element_math.hpp"
#include "cgr/layers/layer.hpp"

namespace cgr {

// ONNX Pad's modes; PyTorch's 'replicate' is edge and 'circular' is wrap.
enum class PadMode : std::int32_t { constant, reflect, edge, wrap };

std::string_view pad_mode_name(PadMode mode);

struct Pad2dParams {
  Padding2d padding{};  // a negative side crops that many rows or columns
  PadMode mode = PadMode::constant;
  float value = 0.0f;  // the fill of constant mode
};

// Each of the `planes` (N * C) output planes of out_h x out_w: the input window that cropping
// keeps (kept_h x kept_w at (crop_top, crop_left) of the in_h x in_w plane) placed at (top,
// left), the rest filled by the mode. Fixed-size, so kernels take it by value.
struct Pad2dGeometry {
  std::int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0, top = 0, left = 0;
  std::int64_t crop_top = 0, crop_left = 0, kept_h = 0, kept_w = 0;
  PadMode mode = PadMode::constant;
  float value = 0.0f;
};

// The geometry of padding planes of in_h x in_w by `params`, unchecked: the layer checks it
// (Conv2d's GPU op pads its input with it, zeros only).
Pad2dGeometry make_pad2d_geometry(std::int64_t planes, std::int64_t in_h, std::int64_t in_w,
                                  const Pad2dParams& params);

namespace math {

// The row (or column) of the kept window that output position `k` (relative to the window's
// origin, so negative before it) reads, or -1 where constant mode fills. `kept` is at least 1,
// and reflect's pads are below it (the layer checks both), so one reflection is enough. Index
// is the kernel's index type (32-bit divisions where they fit).
template <typename Index>
CGR_HD Index pad_source(Index k, Index kept, PadMode mode) {
  if (k >= 0 && k < kept) return k;
  switch (mode) {
    case PadMode::constant:
      return -1;
    case PadMode::reflect:
      return k < 0 ? -k : 2 * (kept - 1) - k;
    case PadMode::edge:
      return k < 0 ? 0 : kept - 1;
    case PadMode::wrap:
      return ((k % kept) + kept) % kept;
  }
  return -1;
}

}  // namespace math

class Pad2d final : public Layer {
 public:
  static constexpr std::string_view kKind = "Pad2d";
  Pad2d(std::string name, const TensorDesc& input, const Pad2dParams& params);
  // Zero padding.
  Pad2d(std::string name, const TensorDesc& input, const Padding2d& padding)
      : Pad2d(std::move(name), input, Pad2dParams{padding}) {}

  std::string_view kind() const override { return kKind; }
  const Pad2dParams& params() const { return params_; }
  const Padding2d& padding() const { return params_.padding; }
  const Pad2dGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  Pad2dParams params_;
  Pad2dGeometry geometry_;
};

}  // namespace cgr
