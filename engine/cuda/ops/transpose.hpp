// Transpose on the GPU: a gather over the layer's geometry (y[index] = x[sum_d index[d] *
// source_strides[d]], up to TransposeGeometry::kMaxRank dims), one thread per output float.
#pragma once

#include <cuda_runtime.h>

#include "cgr/layers/transpose.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_transpose(const float* x, float* y, const TransposeGeometry& g);
inline cudaError_t transpose(const float* x, float* y, const TransposeGeometry& g,
                             cudaStream_t stream) {
  return launch(describe_transpose(x, y, g), stream);
}

}  // namespace cgr::cuda
