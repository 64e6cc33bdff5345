// Linear on the GPU (linear.cpp chooses). At small batch, the latency case, one kernel node does
// all of it: the rows kernel (pooling a fused GlobalAvgPool's input first, then the dot
// products and the bias). Otherwise cuBLAS computes x Wᵀ, after the pooling kernel when a pool
// is fused, and the epilogue kernel here adds the bias (and a ReLU when asked):
// y[r, c] += bias[c], one thread per element.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.hpp"

namespace cgr::cuda {

// Outputs per block of the rows kernel; rows up to kLinearMaxRows and an input row (its means)
// that fits 48 KiB of shared memory.
constexpr int kLinearRowOutputs = 64;
constexpr std::int64_t kLinearMaxRows = 8;
constexpr std::int64_t kLinearMaxRowInputs = 12 * 1024;
constexpr bool linear_rows_suits(std::int64_t rows, std::int64_t in_features,
                                 std::int64_t out_features, std::int64_t pooled_plane) {
  return rows >= 0 && rows <= kLinearMaxRows && in_features > 0 &&
         in_features <= kLinearMaxRowInputs && out_features >= 0 &&
         out_features < (std::int64_t{1} << 30) && pooled_plane >= 0 &&
         pooled_plane < (std::int64_t{1} << 31);
}

// y[r, o] = bias[o] + sum_c W[o, c] x[r, c], where with pooled_plane > 0 x[r, c] is the mean of
// the pooled_plane values at input + (r * in_features + c) * pooled_plane. bias may be null.
KernelLaunch describe_linear_rows(const float* x, const float* weight, const float* bias, float* y,
                                  std::int64_t rows, std::int64_t in_features,
                                  std::int64_t out_features, std::int64_t pooled_plane);

// bias may be null; with neither bias nor ReLU nothing is launched.
KernelLaunch describe_bias_activation(float* y, const float* bias, std::int64_t rows,
                                      std::int64_t cols, bool relu);
inline cudaError_t bias_activation(float* y, const float* bias, std::int64_t rows,
                                   std::int64_t cols, bool relu, cudaStream_t stream) {
  return launch(describe_bias_activation(y, bias, rows, cols, relu), stream);
}

}  // namespace cgr::cuda
