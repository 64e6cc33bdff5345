// Tile on the GPU: a gather over the layer's geometry (output index k along dim d reads input
// index k mod in_dims[d]), one thread per output float. Exact.
#pragma once

#include <cuda_runtime.h>

#include "cgr/layers/tile.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_tile(const float* x, float* y, const TileGeometry& g);
inline cudaError_t tile(const float* x, float* y, const TileGeometry& g, cudaStream_t stream) {
  return launch(describe_tile(x, y, g), stream);
}

}  // namespace cgr::cuda
