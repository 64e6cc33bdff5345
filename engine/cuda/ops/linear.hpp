// Linear on the GPU: cuBLAS computes x Wᵀ (linear.cpp), then the epilogue kernel here adds the
// bias (and a ReLU when asked): y[r, c] += bias[c]. One thread per element.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.hpp"

namespace cgr::cuda {

// bias may be null; with neither bias nor ReLU nothing is launched.
KernelLaunch describe_bias_activation(float* y, const float* bias, std::int64_t rows,
                                      std::int64_t cols, bool relu);
inline cudaError_t bias_activation(float* y, const float* bias, std::int64_t rows,
                                   std::int64_t cols, bool relu, cudaStream_t stream) {
  return launch(describe_bias_activation(y, bias, rows, cols, relu), stream);
}

}  // namespace cgr::cuda
