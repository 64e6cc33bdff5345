// CPU depthwise convolution (each output channel reads one input channel: groups ==
// in_channels, any channel multiplier), computed directly. Used by ConvKernelCpu, the Conv2d
// CPU kernel, when a group has one input channel.
//
// Why not im2col + GEMM: with K = kernel_h x kernel_w (9) and M = the multiplier (1), the GEMM
// pads M to the micro-kernel's 8 rows and spends its time on im2col; MobileNet's depthwise
// layers ran at ~2 GFLOP/s that way. Two direct paths, the same fma chain per output (so the
// same bits):
// - channels in lanes (AVX-512, multiplier 1): 16 channels of an image are transposed into a
//   zero-padded channels-last copy, each output is one fma per tap on full vectors whatever
//   the plane's width or stride, and strips of the result are transposed back with the
//   epilogue. MobileNet's 7x7 to 28x28 planes filled a fraction of each vector by rows.
//   Between NHWC values of the CPU layout plan the taps read the input in place instead
//   (run_nhwc), no copy either way.
// - planes (otherwise): the output accumulates kernel_h x kernel_w shifted, zero-padded copies
//   of one input plane (the vectorised axis is the output column), then the epilogue (bias,
//   residual, activation) runs over the finished plane.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cgr/layers/conv2d.hpp"
#include "cgr/layers/element_math.hpp"
#include "cpu/phases.hpp"

namespace cgr {
class ThreadPool;
}

namespace cgr::cpu {

class DepthwiseConvCpu {
 public:
  // The most taps (kernel_h x kernel_w) the NHWC path without copies takes.
  static constexpr std::int64_t kMaxNhwcTaps = 64;

  // geometry.in_channels == geometry.groups; weight [out_channels, 1, kernel_h, kernel_w];
  // bias out_channels values or empty. The caller (ConvKernelCpu) has validated the geometry.
  DepthwiseConvCpu(const Conv2dGeometry& geometry, std::span<const float> weight,
                   std::span<const float> bias);

  // output = act(conv + bias + residual); residual may be null; pool may be null. Each output
  // element is one chain over (kh, kw) in order, so the bits do not depend on the pool size.
  void run(const float* input, const float* residual, float* output,
           const math::Activation& activation, ThreadPool* pool) const;

  // Whether run() takes the channel-lane path (the .cpp says when and why). That path can
  // also read an NHWC input and write an NHWC output (no residual then), the CPU layout plan's
  // channels-last values, and skip the transposes from and to NCHW.
  bool channel_lanes() const { return channel_lanes_; }
  // Called before the first run, only where channel_lanes().
  void set_channels_last(bool input, bool output);

  // Whether NHWC input rows can be read in place (run_nhwc and nhwc_row): channel lanes, whole
  // blocks of 16 channels and a bounded tap count.
  bool nhwc_rows() const { return nhwc_direct_; }
  // Channels [c0, c0 + channels) (multiples of 16) of one output row, bias added (no
  // activation), from NHWC input rows of in_w points `point_stride` floats apart (`rows`:
  // kernel_h entries, each at channel c0 of its first point, null for a row in the padding; as
  // input_rows gives them, or the expanded rows of cpu/expanded_depthwise_cpu.hpp) into
  // `result` in 16-channel blocks, result[(b * out_w + ow) * 16 + lane]. The same fma chains
  // as run(), so the same bits. Only where nhwc_rows().
  void nhwc_row(const float* const* rows, std::int64_t point_stride, std::int64_t c0,
                std::int64_t channels, float* result) const;

 private:
  void run_channel_lanes(const float* input, const float* residual, float* output,
                         const math::Activation& activation, ThreadPool* pool) const;
  // An NHWC input and output (the layout plan's): the taps read the input in place, a zero
  // vector for a tap in the padding, each output row of a block goes out through a row buffer
  // (no residual here). The same arithmetic as the lanes path, so the same bits.
  void run_nhwc(const float* input, float* output, const math::Activation& activation,
                ThreadPool* pool) const;
  // Per kernel row of output row `oh`, the row of the NHWC image `image` it reads (its first
  // point), or null for a row in the padding: kernel_h entries, as nhwc_row takes them.
  void input_rows(const float* image, std::int64_t oh, const float** rows) const;

  Conv2dGeometry geometry_;
  std::vector<float> weight_;  // out_channels x kernel_h x kernel_w
  std::vector<float> bias_;    // out_channels, or empty
  // The padded plane split into stride phases, computed as one flat run (the .cpp says how).
  PhaseLayout phases_;
  std::int64_t flat_count_ = 0;            // (out_h - 1) * phase_w + out_w
  std::int64_t phases_floats_ = 0;         // the phases and their slack
  std::int64_t scratch_floats_ = 0;        // per task: phases_floats_ + the flat result
  std::vector<std::int64_t> tap_offsets_;  // kernel_h x kernel_w, into the phases
  bool avx512_ = false;
  bool avx2_ = false;  // AVX2 + FMA

  // The channel-lane path: 16 channels in the lanes of a vector.
  bool channel_lanes_ = false;
  std::int64_t padded_h_ = 0, padded_w_ = 0;       // the zero-padded input, channels last
  std::vector<float> lane_weight_;                 // [channel block][tap][16 lanes]
  std::vector<float> lane_bias_;                   // [channel block][16 lanes], or empty
  std::vector<std::int64_t> lane_tap_offsets_;     // per tap, floats into the padded input
  bool input_nhwc_ = false, output_nhwc_ = false;  // set_channels_last
  bool nhwc_direct_ = false;                       // run_nhwc can take an NHWC input and output
  // Output columns whose taps all lie inside the image: [ow_lo_, ow_hi_).
  std::int64_t ow_lo_ = 0, ow_hi_ = 0;
};

}  // namespace cgr::cpu
