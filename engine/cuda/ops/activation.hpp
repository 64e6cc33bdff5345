// Elementwise activations on the GPU: y[i] = fn(x[i]) with the function objects of
// cgr/layers/element_math.hpp, the very arithmetic the CPU kernels run, so results match the
// CPU bit for bit (NaN included). Each thread reads and writes only its own index, so in-place
// use is safe. The ops of the activation layers are registered in activation.cu (where a new
// activation adds its function object and registration), with these two launch functions
// kept for the kernel tests.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cgr/layers/element_math.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_relu(const float* x, float* y, std::int64_t n);
inline cudaError_t relu(const float* x, float* y, std::int64_t n, cudaStream_t stream) {
  return launch(describe_relu(x, y, n), stream);
}
KernelLaunch describe_clip(const float* x, float* y, std::int64_t n, float low, float high);
inline cudaError_t clip(const float* x, float* y, std::int64_t n, float low, float high,
                        cudaStream_t stream) {
  return launch(describe_clip(x, y, n, low, high), stream);
}

// A fused activation of another op (math::Activation: ReLU, LeakyReLU, Clip or a Unary
// function), e.g. over a cuDNN convolution's output in place, when cuDNN cannot fuse it.
KernelLaunch describe_activation(const float* x, float* y, std::int64_t n,
                                 const math::Activation& activation);
inline cudaError_t activation(const float* x, float* y, std::int64_t n, const math::Activation& fn,
                              cudaStream_t stream) {
  return launch(describe_activation(x, y, n, fn), stream);
}

}  // namespace cgr::cuda
