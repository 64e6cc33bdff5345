// A depthwise convolution with its expansion fused before it (LayerOp::expansion): MobileNet's
// 1x1 conv [+ activation] -> depthwise conv, as one CPU op that reads the 1x1 conv's input.
//
// Why: the expanded tensor is the largest of such a network (MobileNet-v2's 96 channels at
// 112 x 112 are 4.8 MB). Written whole by one op and read back by the next, it passes through
// the shared L3 twice; the depthwise conv then cost 1.27x as much per point as on a map whose
// expansion stays in L2 (features.2 at 112 x 112 against 32 x 32, one thread).
//
// Banded (AVX-512, expanded channels a multiple of 16, no residual): each task walks a band of
// output rows of one image and keeps a window of the expanded input rows they read, computed
// a few rows at a time as the band advances (cgr's GEMM on the input's points, bias and
// activation in its epilogue: the bits of the 1x1 conv's own NHWC path), the rows no longer
// read dropped; the depthwise row kernel reads the window in place (DepthwiseConvCpu::nhwc_row:
// the bits of the depthwise conv's own NHWC path). Threads share an image by bands of rows
// (the kernel_h - stride_h rows at a band's edge are computed twice) or by groups of channels,
// whichever wastes less. Input and output NCHW or NHWC. Measured against the two convs run as
// two ops (eager per-op medians, alternating processes): MobileNet-v2's features.2 0.88 ->
// 0.76 ms at one thread and 0.50 -> 0.40 at two, the whole model 7.23 -> 7.12 and 3.95 -> 3.84.
//
// Otherwise the two convolutions run one after the other (ConvKernelCpu each) with the whole
// expanded tensor in the op's workspace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cgr/layers/conv2d.hpp"
#include "cgr/layers/element_math.hpp"
#include "cpu/conv_cpu.hpp"
#include "cpu/gemm.hpp"

namespace cgr {
class ThreadPool;
}

namespace cgr::cpu {

class ExpandedDepthwiseCpu {
 public:
  // expansion: a 1x1, stride-1, unpadded, one-group conv whose output is the depthwise conv's
  // input (depthwise.in_channels == groups == out_channels); its weight [expanded, in] and
  // bias (expanded values or empty) with any BatchNorm folded in, and its activation. The
  // depthwise conv's weight and bias as ConvKernelCpu takes them. residual: whether run() gets
  // one (the banded path has none).
  ExpandedDepthwiseCpu(const Conv2dGeometry& expansion, std::span<const float> expansion_weight,
                       std::span<const float> expansion_bias,
                       const math::Activation& expansion_activation,
                       const Conv2dGeometry& depthwise, std::span<const float> weight,
                       std::span<const float> bias, bool residual);

  // Whether run() takes the banded path (the top of this file says when).
  bool banded() const { return banded_; }
  // The CPU layout plan, as ConvKernelCpu's.
  bool channels_last_input() const;
  bool channels_last_output() const;
  bool channels_last_residual() const { return false; }
  void set_channels_last(bool input, bool output);
  std::size_t workspace_bytes() const;

  // output = act(depthwise(expansion_act(expansion(input))) + bias + residual); residual may
  // be null (it is, on the banded path). The same bits for every pool size.
  void run(const float* input, const float* residual, float* output, float* workspace,
           const math::Activation& activation, ThreadPool* pool) const;

 private:
  void run_banded(const float* input, float* output, const math::Activation& activation,
                  ThreadPool* pool) const;
  // Channels [c0, c0 + channels) (c0 at a column strip) of expanded rows [ih, ih + rows) of
  // image n into `out` (in_w points each of `channels` floats).
  void expand_rows(const float* input, std::int64_t n, std::int64_t ih, std::int64_t rows,
                   std::int64_t c0, std::int64_t channels, float* out) const;

  Conv2dGeometry expansion_geometry_;
  math::Activation expansion_activation_;
  ConvKernelCpu depthwise_;
  bool banded_ = false;
  bool input_nhwc_ = false, output_nhwc_ = false;  // set_channels_last
  // Banded: the expansion's W^T in column strips of rows_kernel_->nr, its bias per column.
  const gemm::MicroKernel* rows_kernel_ = nullptr;
  gemm::PackedBuffer weight_t_;
  std::vector<float> col_bias_;
  std::int64_t span_rows_ = 0;   // expanded rows one output row spans: (kernel_h - 1) * dil + 1
  std::int64_t chunk_rows_ = 0;  // expanded rows per product (the window: span + chunk rows)
  // Otherwise: the expansion on its own and where its result starts the depthwise conv's
  // workspace after it.
  std::unique_ptr<ConvKernelCpu> expansion_;
  std::size_t expanded_bytes_ = 0;
};

}  // namespace cgr::cpu
