// Slice on the GPU: a gather over the layer's geometry (y[index] = x[base + sum_d index[d] *
// strides[d]], strides negative along reversed axes), one thread per output float. Exact.
#pragma once

#include <cuda_runtime.h>

#include "cgr/layers/slice.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_slice(const float* x, float* y, const SliceGeometry& g);
inline cudaError_t slice(const float* x, float* y, const SliceGeometry& g, cudaStream_t stream) {
  return launch(describe_slice(x, y, g), stream);
}

}  // namespace cgr::cuda
