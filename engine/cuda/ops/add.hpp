// Sums on the GPU: Add (of two values of one shape, optionally followed by the fused ReLU) and
// AddConstant (x + the constant, broadcast to x's shape once when the op is made, as on the
// CPU). One thread per element; in-place use is safe. Exact: the CPU's additions.
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
// y = x + c, c already broadcast to n elements.
KernelLaunch describe_add_expanded(const float* x, const float* c, float* y, std::int64_t n);
inline cudaError_t add_expanded(const float* x, const float* c, float* y, std::int64_t n,
                                cudaStream_t stream) {
  return launch(describe_add_expanded(x, c, y, n), stream);
}

}  // namespace cgr::cuda
