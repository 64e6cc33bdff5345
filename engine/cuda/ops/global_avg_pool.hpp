// GlobalAvgPool on the GPU: the mean of each of `planes` contiguous planes of `plane_size`
// floats (the layer's geometry); a warp or a block per plane (see global_avg_pool.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_global_avg_pool(const float* x, float* y, std::int64_t planes,
                                      std::int64_t plane_size);
inline cudaError_t global_avg_pool(const float* x, float* y, std::int64_t planes,
                                   std::int64_t plane_size, cudaStream_t stream) {
  return launch(describe_global_avg_pool(x, y, planes, plane_size), stream);
}

}  // namespace cgr::cuda
