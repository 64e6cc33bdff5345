// Binary on the GPU: y = f(a, b) with NumPy broadcasting over the layer's merged geometry
// (cgr::BroadcastGeometry), one thread per output float; a constant operand is uploaded once
// when the op is made. f is math::binary, the CPU's function.
#pragma once

#include <cuda_runtime.h>

#include "cgr/layers/binary.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_binary(BinaryOp op, const float* a, const float* b, float* y,
                             const BroadcastGeometry& g);
inline cudaError_t binary(BinaryOp op, const float* a, const float* b, float* y,
                          const BroadcastGeometry& g, cudaStream_t stream) {
  return launch(describe_binary(op, a, b, y, g), stream);
}

}  // namespace cgr::cuda
