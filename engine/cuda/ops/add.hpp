// Add on the GPU: two values of one shape, optionally followed by a fused activation (a
// broadcast or constant operand is a Binary, binary.hpp). One thread per element; in-place use
// is safe. Exact: the CPU's additions and the same activation function object.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cgr/layers/element_math.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_add(const float* a, const float* b, float* y, std::int64_t n,
                          const math::Activation& activation);
inline cudaError_t add(const float* a, const float* b, float* y, std::int64_t n,
                       const math::Activation& activation, cudaStream_t stream) {
  return launch(describe_add(a, b, y, n, activation), stream);
}

}  // namespace cgr::cuda
