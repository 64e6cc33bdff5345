// Concat on the GPU, one launch per input (see concat.cu): `outer` blocks of `block` floats land
// `offset` floats into the output's blocks of `out_block` floats (the layer's geometry).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_concat_part(const float* x, float* y, std::int64_t outer, std::int64_t block,
                                  std::int64_t out_block, std::int64_t offset);
inline cudaError_t concat_part(const float* x, float* y, std::int64_t outer, std::int64_t block,
                               std::int64_t out_block, std::int64_t offset, cudaStream_t stream) {
  return launch(describe_concat_part(x, y, outer, block, out_block, offset), stream);
}

}  // namespace cgr::cuda
