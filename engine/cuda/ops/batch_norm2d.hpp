// BatchNorm2d on the GPU where it is not folded into a conv: the per-channel affine map
// y = x * scale[c] + shift[c] over batch x channels x plane (the layer's geometry), one thread
// per element. nvcc may contract it to one FMA: one rounding fewer than the CPU, well inside
// 1e-5 relative.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_channel_affine(const float* x, const float* scale, const float* shift,
                                     float* y, std::int64_t batch, std::int64_t channels,
                                     std::int64_t plane);
inline cudaError_t channel_affine(const float* x, const float* scale, const float* shift, float* y,
                                  std::int64_t batch, std::int64_t channels, std::int64_t plane,
                                  cudaStream_t stream) {
  return launch(describe_channel_affine(x, scale, shift, y, batch, channels, plane), stream);
}

}  // namespace cgr::cuda
