// CPU kernels of MaxPool2d and AvgPool2d: one home for both, since they differ only in the
// combining step, the padding's value and the final division.
//
// Each output sees its window's taps in (kh, kw) order, and the result is the same, bit for
// bit, as visiting only the taps inside the image: max pooling pads with -inf (nan_max(a,
// -inf) == a), average pooling with +0 (a sum that starts at +0 is never -0, so adding +0
// leaves it unchanged), and the divisor counts what count_include_pad says.
//
// The plane is copied once into a padded plane split into stride_h x stride_w phases (phase
// (py, px) holds padded rows py, py + stride_h, ... and columns px, px + stride_w, ...; at
// stride 1 the one phase is the padded plane), of row width Wq. Tap (kh, kw) of output
// t = oh * Wq + ow then reads phase ((kh * dh) % sh, (kw * dw) % sw) at t plus a fixed shift,
// so the whole plane is pooled as one flat run of contiguous loads (the Wq - out_w columns
// between rows are computed and dropped): GoogLeNet's 14x14 and 7x7 planes fill whole
// vectors, and with AVX-512 four registers hold 64 outputs over all taps.
//
// With AVX-512 the planes go 16 at a time into the lanes of a vector instead (cpu/lanes.hpp):
// a padded channels-last copy, each tap of eight outputs of a row one vector operation each,
// whatever the plane's width or stride, then 16 x 16 transposes back. The same taps in the
// same order per output, so the same bits. Measured on GoogLeNet's and Inception-v3's pools
// (cgr-bench, one thread, alternating runs): see the constructor.
//
// An input the engine's layout plan keeps channels-last (NHWC: a oneDNN conv's output) is
// pooled in place, tasks of whole output rows over every channel, four 16-channel blocks at a
// time, then written out to the NCHW planes. Against the lane path on the NCHW value, per-op
// medians, one thread: GoogLeNet's maxpool2 (192 x 56x56) 0.21 -> 0.16 ms, Inception-v3's
// maxpool1 (64 x 147x147) 0.61 -> 0.52; its maxpool2 (192 x 71x71) 0.40 -> 0.46, paid back by
// its conv writing NHWC (13.4 -> 12.6 ms).
#pragma once

#include <cstdint>
#include <vector>

#include "cgr/layers/pool2d.hpp"
#include "cpu/phases.hpp"

namespace cgr {
class ThreadPool;
}

namespace cgr::cpu {

enum class PoolKind { max, average };

class PoolKernelCpu {
 public:
  PoolKernelCpu(const Pool2dGeometry& geometry, PoolKind kind);
  // x: planes x in_h x in_w; y: planes x out_h x out_w. One or more planes per task.
  void run(const float* x, float* y, ThreadPool& pool) const;
  // Whether run() takes the lane path (see above).
  bool channel_lanes() const { return lanes_; }
  // Where the lane path runs, a channels-last (NHWC) input is pooled in place instead: each
  // tap of an output point one load per 16 channels, no copy in (the engine's layout plan,
  // layer.hpp). x is then batch x in_h x in_w x channels, planes = batch * channels; the
  // output NCHW. The same taps in the same order, so the same bits.
  bool can_read_channels_last() const { return lanes_; }
  void set_channels_last_input(std::int64_t channels);
  // The lane path can write an NHWC output too: from an NHWC input its strips of output rows
  // land in place; from an NCHW one each point's lanes are stored at their channels, where a
  // block of 16 planes lies in one image (one image, or channels a multiple of 16).
  bool can_write_channels_last(std::int64_t channels) const;
  void set_channels_last_output(std::int64_t channels);

 private:
  void plane(const float* x, float* y, float* scratch) const;
  void run_lanes(const float* x, float* y, ThreadPool& pool) const;
  void run_nhwc(const float* x, float* y, ThreadPool& pool) const;

  Pool2dGeometry g_;
  PoolKind kind_;
  PhaseLayout phases_;
  std::int64_t flat_count_ = 0;            // (out_h - 1) * phase_w_ + out_w
  std::int64_t scratch_floats_ = 0;        // phases, slack, then the flat result
  std::vector<std::int64_t> tap_offsets_;  // kernel_h x kernel_w, into the phases
  // Average: per output row and column, the window's length that the divisor counts.
  std::vector<std::int64_t> divisor_h_, divisor_w_;
  bool avx512_ = false;

  // The lane path: planes in lanes (see above).
  bool lanes_ = false;
  std::int64_t padded_h_ = 0, padded_w_ = 0;
  std::vector<std::int64_t> lane_offsets_;  // per tap, floats into the padded copy
  std::vector<float> divisor_;              // average: per output point, out_h x out_w
  std::int64_t nhwc_channels_ = 0;          // set_channels_last_input (0: NCHW input)
  std::int64_t nhwc_output_channels_ = 0;   // set_channels_last_output (0: NCHW output)
};

}  // namespace cgr::cpu
