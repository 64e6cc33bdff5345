// Add on the GPU: two values of one shape, optionally followed by the fused ReLU (a broadcast
// or constant operand is a Binary, binary.hpp). One thread per element; in-place use is safe.
// Exact: the CPU's additions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_add(const float* a, const float* b, float* y, std::int64_t n, bool relu);
inline cudaError_t add(const float* a, const float* b, float* y, std::int64_t n, bool relu,
                       cudaStream_t stream) {
  return launch(describe_add(a, b, y, n, relu), stream);
}

}  // namespace cgr::cuda
