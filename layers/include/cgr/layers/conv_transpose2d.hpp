// ConvTranspose2d: PyTorch's nn.ConvTranspose2d on NCHW (stride, padding incl. asymmetric,
// output_padding, dilation, groups, optional bias), and nn.ConvTranspose1d on N x C x L, taken
// as height 1 (cgr/layers/spatial.hpp). The transpose of Conv2d's map: every input pixel
// scatters its channels, times the kernel, into a window of the output, and the windows of
// neighbouring pixels (stride apart) overlap and add up.
//   y[n, oc, oh, ow] = bias[oc] + sum x[n, ic, ih, iw] * weight[ic, oc % (out/groups), kh, kw]
//   over ih * stride_h + kh * dilation_h - pad_top == oh (and the same for w), with ic in
//   oc's group.
// Output size: stride * (in - 1) + output_padding + dilation * (kernel - 1) + 1 - pad_begin -
// pad_end per axis. output_padding adds rows and columns at the bottom and right that only the
// windows' ends (or the bias alone) reach.
// Weights: "<name>.weight" [in, out/groups, kh, kw] (PyTorch's and ONNX's layout; [in,
// out/groups, kw] after an N x C x L input), "<name>.bias" [out] when bias is on.
// The CPU kernel is a GEMM (weightᵀ x input columns) and a col2im scatter-add; the CUDA op is
// cuDNN's data gradient of the matching convolution (engine/cuda/ops/conv_transpose2d.cpp).
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

struct ConvTranspose2dParams {
  std::int64_t out_channels = 0;
  Size2 kernel = 1;
  Size2 stride = 1;
  Padding2d padding{};  // trimmed from the full output: (top, left, bottom, right)
  // Extra rows and columns at the bottom and right; smaller than the stride or the dilation
  // (PyTorch's and ONNX's rule), as it only resolves which output size a stride > 1 meant.
  Size2 output_padding = 0;
  Size2 dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
};

// Everything about the transposed convolution's shape, as every backend's kernel takes it.
// out_h = stride_h * (in_h - 1) + output_padding_h + dilation_h * (kernel_h - 1) + 1 -
// pad_top - pad_bottom (and so for w).
struct ConvTranspose2dGeometry {
  std::int64_t batch = 1, in_channels = 0, in_h = 0, in_w = 0;
  std::int64_t out_channels = 0, kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  std::int64_t output_padding_h = 0, output_padding_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1, groups = 1;
  std::int64_t out_h = 0, out_w = 0;
};

// out = stride * (in - 1) + output_padding + dilation * (kernel - 1) + 1 - pad_begin - pad_end
// (may be <= 0: the caller refuses that).
std::int64_t conv_transpose_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                                        std::int64_t pad_begin, std::int64_t pad_end,
                                        std::int64_t output_padding, std::int64_t dilation);

class ConvTranspose2d final : public Layer {
 public:
  static constexpr std::string_view kKind = "ConvTranspose2d";
  ConvTranspose2d(std::string name, const TensorDesc& input, const ConvTranspose2dParams& params);

  std::string_view kind() const override { return kKind; }
  const ConvTranspose2dParams& params() const { return params_; }
  const ConvTranspose2dGeometry& geometry() const { return geometry_; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  OpCost cost() const override;
  // Reads op.weights ("weight", and "bias" when params().bias); nothing is fused into it.
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  ConvTranspose2dParams params_;
  ConvTranspose2dGeometry geometry_;
};

}  // namespace cgr
