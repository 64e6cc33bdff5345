// LayerNorm and InstanceNorm on the GPU: one block per row of the layer's RowNormGeometry (the
// block's threads stride over the row; its width follows the row length, 32 to 256 threads).
// Two passes over the row, the mean and then the squared deviations, each summed per thread
// and combined over the block, then the normalised, scaled and shifted output. Sums run in a
// different order from the CPU's double loops: the two agree to rounding.
#pragma once

#include <cuda_runtime.h>

#include "cgr/layers/row_norm.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

// scale and shift: g.channels values (affine_per_row) or g.cols values.
KernelLaunch describe_row_norm(const float* x, const float* scale, const float* shift, float* y,
                               const RowNormGeometry& g);
inline cudaError_t row_norm(const float* x, const float* scale, const float* shift, float* y,
                            const RowNormGeometry& g, cudaStream_t stream) {
  return launch(describe_row_norm(x, scale, shift, y, g), stream);
}

}  // namespace cgr::cuda
