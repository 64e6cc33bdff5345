// ConvTranspose2d on the GPU, the part after cuDNN (conv_transpose2d.cpp): the trim of cuDNN's
// full result to the layer's output, plus the bias.
//   y[plane, oh, ow] = (oh + top < full_h && ow + left < full_w
//                          ? full[plane, oh + top, ow + left] : 0) + bias[plane % channels]
// with bias null for none. full may be y itself (same extent, top = left = 0): the bias is then
// added in place. Rows and columns past the full result are the output_padding that no tap
// reaches (bias only). A thread per output float. Exact: a copy and one add.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.hpp"

namespace cgr::cuda {

struct ConvTransposeTrim {
  std::int64_t planes = 0, channels = 0;  // planes = batch x channels
  std::int64_t full_h = 0, full_w = 0, out_h = 0, out_w = 0, top = 0, left = 0;
};

KernelLaunch describe_conv_transpose_trim(const float* full, const float* bias, float* y,
                                          const ConvTransposeTrim& g);
inline cudaError_t conv_transpose_trim(const float* full, const float* bias, float* y,
                                       const ConvTransposeTrim& g, cudaStream_t stream) {
  return launch(describe_conv_transpose_trim(full, bias, y, g), stream);
}

}  // namespace cgr::cuda
