// LocalResponseNorm on the GPU: one thread per output element sums the squares of its channel
// window in channel order (as the CPU kernel does) and applies math::local_response_norm.
#pragma once

#include <cuda_runtime.h>

#include "cgr/layers/local_response_norm.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_local_response_norm(const float* x, float* y,
                                          const LocalResponseNormGeometry& g);
inline cudaError_t local_response_norm(const float* x, float* y, const LocalResponseNormGeometry& g,
                                       cudaStream_t stream) {
  return launch(describe_local_response_norm(x, y, g), stream);
}

}  // namespace cgr::cuda
