// Reduce on the GPU over the layer's merged geometry (cgr::ReduceGeometry): a thread per output
// when each reduces few elements, a warp per output (lanes read consecutive elements of the
// innermost reduced dim, then shuffle) when each reduces many. Sums are accumulated in another
// order than the CPU's sequential loop: they agree to rounding; max and min bit for bit.
#pragma once

#include <cuda_runtime.h>

#include "cgr/layers/reduce.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_reduce(ReduceOp op, const float* x, float* y, const ReduceGeometry& g);
inline cudaError_t reduce(ReduceOp op, const float* x, float* y, const ReduceGeometry& g,
                          cudaStream_t stream) {
  return launch(describe_reduce(op, x, y, g), stream);
}

}  // namespace cgr::cuda
