// Softmax (or LogSoftmax, `log`) on the GPU over rows of `length` values spaced `inner` apart
// (outer x length x inner, the layer's geometry); a warp or a thread per row (see softmax.cu).
// May run in place.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_softmax(const float* x, float* y, std::int64_t outer, std::int64_t length,
                              std::int64_t inner, bool log = false);
inline cudaError_t softmax(const float* x, float* y, std::int64_t outer, std::int64_t length,
                           std::int64_t inner, cudaStream_t stream, bool log = false) {
  return launch(describe_softmax(x, y, outer, length, inner, log), stream);
}

}  // namespace cgr::cuda
