// CPU kernels of MaxPool2d and AvgPool2d: one home for both, since they differ only in the
// combining step, the padding's value and the final division.
//
// Each output sees its window's taps in (kh, kw) order, and the result is the same, bit for
// bit, as visiting only the taps inside the image: max pooling pads with -inf (nan_max(a,
// -inf) == a), average pooling with +0 (a sum that starts at +0 is never -0, so adding +0
// leaves it unchanged), and the divisor counts what count_include_pad says.
// Stride 1 (Inception's 3x3 average pools, GoogLeNet's 3x3 max pools): the plane is copied into
// a padded plane of row width Wp and pooled as one flat run, output t = oh * Wp + ow reading
// t + kh * Wp + kw, the Wp - out_w columns between rows computed and dropped; the loops are
// long and contiguous, so they vectorise even on 7x7 or 14x14 planes. Other strides: row by
// row, tap-major (each tap's valid output range hoisted out of the inner loop).
#pragma once

#include <cstdint>
#include <vector>

#include "cgr/layers/pool2d.hpp"

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

 private:
  void plane_flat(const float* x, float* y, float* scratch) const;
  void plane_rows(const float* x, float* y) const;

  Pool2dGeometry g_;
  PoolKind kind_;
  bool flat_ = false;
  std::int64_t padded_w_ = 0, padded_h_ = 0;
  // Average: per output row and column, the window's length that the divisor counts.
  std::vector<std::int64_t> divisor_h_, divisor_w_;
};

}  // namespace cgr::cpu
