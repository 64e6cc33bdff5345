// Conv2d (with BatchNorm folded in, an optional residual and an optional ReLU) as one cuDNN
// call: cudnnConvolutionBiasActivationForward computes act(conv(x) + z + bias). The legacy
// API is deprecated in cuDNN 9 but works and is captured by the major frameworks; it stays
// behind this one function so the backend API can replace it.
#pragma once

#if defined(CGR_HAVE_CUDA)

#include <memory>
#include <span>

#include "cgr/layers/conv2d.hpp"
#include "cuda/gpu_ops.hpp"

namespace cgr::cuda {

std::shared_ptr<GpuOp> make_cudnn_conv(const Conv2d& conv, std::span<const float> weight,
                                       std::span<const float> bias, const ConvEpilogue& epilogue,
                                       const GpuBuildOptions& options);

}  // namespace cgr::cuda

#endif  // CGR_HAVE_CUDA
