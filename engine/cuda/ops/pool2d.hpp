// MaxPool2d and AvgPool2d on the GPU over the layers' window geometry (cgr::Pool2dGeometry),
// one thread per output element, bit for bit the CPU's results (see pool2d.cu).
#pragma once

#include <cuda_runtime.h>

#include "cgr/layers/pool2d.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_max_pool2d(const float* x, float* y, const Pool2dGeometry& g);
inline cudaError_t max_pool2d(const float* x, float* y, const Pool2dGeometry& g,
                              cudaStream_t stream) {
  return launch(describe_max_pool2d(x, y, g), stream);
}
// Average pooling has no dilation: a geometry with one is refused.
KernelLaunch describe_avg_pool2d(const float* x, float* y, const Pool2dGeometry& g);
inline cudaError_t avg_pool2d(const float* x, float* y, const Pool2dGeometry& g,
                              cudaStream_t stream) {
  return launch(describe_avg_pool2d(x, y, g), stream);
}

}  // namespace cgr::cuda
