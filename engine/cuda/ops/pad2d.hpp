// Pad2d on the GPU: each NCHW plane padded by the layer's geometry (constant, reflect, edge,
// wrap; negative pads crop). Also the explicit zero padding of the cuDNN convolution (conv2d.cpp).
#pragma once

#include <cuda_runtime.h>

#include "cgr/layers/pad2d.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_pad2d(const float* x, float* y, const Pad2dGeometry& g);
inline cudaError_t pad2d(const float* x, float* y, const Pad2dGeometry& g, cudaStream_t stream) {
  return launch(describe_pad2d(x, y, g), stream);
}

}  // namespace cgr::cuda
