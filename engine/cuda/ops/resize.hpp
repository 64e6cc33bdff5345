// Resize on the GPU: each output float samples the input at the layer's table entries (one
// per output row, then one per output column): nearest reads the entry's index, linear
// interpolates between floor(entry) and the next index (math::linear_tap, math::bilinear, as
// the CPU does). One thread per output float. Nearest is exact; linear may differ from the
// CPU by the contraction of its multiply-adds.
#pragma once

#include <cuda_runtime.h>

#include "cgr/layers/resize.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

// `tables`: device floats, g.out_h row entries then g.out_w column entries.
KernelLaunch describe_resize(const float* x, float* y, const float* tables,
                             const ResizeGeometry& g);
inline cudaError_t resize(const float* x, float* y, const float* tables, const ResizeGeometry& g,
                          cudaStream_t stream) {
  return launch(describe_resize(x, y, tables, g), stream);
}

}  // namespace cgr::cuda
