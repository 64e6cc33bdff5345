// Launch API of cgr's own CUDA kernels, one function per kernel. Plain C++ over
// <cuda_runtime.h>, so the g++-compiled executor (which formats errors with fmt) can call it;
// the kernels themselves live in the .cu files next to this header and compute exactly what
// the CPU kernels of layers/src/*.cpp compute, through the same cgr/layers/element_math.hpp.
//
// Each kernel has a describe_<name>() that returns its launch (KernelLaunch: function, grid,
// block, arguments) without performing it, for the executor to launch or add to a graph as a
// kernel node, and a <name>(..., stream) that launches it on `stream` and returns the launch
// status; nothing synchronises. Empty work (a size of 0) describes no launch (cudaSuccess); a
// negative size is refused with cudaErrorInvalidValue. Sizes are 64-bit throughout: an
// activation may hold more than 2^31 floats.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.hpp"

namespace cgr::cuda_kernels {

KernelLaunch describe_relu(const float* x, float* y, std::int64_t n);
inline cudaError_t relu(const float* x, float* y, std::int64_t n, cudaStream_t stream) {
  return launch(describe_relu(x, y, n), stream);
}
KernelLaunch describe_clip(const float* x, float* y, std::int64_t n, float low, float high);
inline cudaError_t clip(const float* x, float* y, std::int64_t n, float low, float high,
                        cudaStream_t stream) {
  return launch(describe_clip(x, y, n, low, high), stream);
}
KernelLaunch describe_add(const float* a, const float* b, float* y, std::int64_t n, bool relu);
inline cudaError_t add(const float* a, const float* b, float* y, std::int64_t n, bool relu,
                       cudaStream_t stream) {
  return launch(describe_add(a, b, y, n, relu), stream);
}
// y = x + c, c already broadcast to n elements.
KernelLaunch describe_add_expanded(const float* x, const float* c, float* y, std::int64_t n);
inline cudaError_t add_expanded(const float* x, const float* c, float* y, std::int64_t n,
                                cudaStream_t stream) {
  return launch(describe_add_expanded(x, c, y, n), stream);
}
// BatchNorm / per-channel affine on N x C x plane: y = x * scale[c] + shift[c].
KernelLaunch describe_channel_affine(const float* x, const float* scale, const float* shift,
                                     float* y, std::int64_t batch, std::int64_t channels,
                                     std::int64_t plane);
inline cudaError_t channel_affine(const float* x, const float* scale, const float* shift, float* y,
                                  std::int64_t batch, std::int64_t channels, std::int64_t plane,
                                  cudaStream_t stream) {
  return launch(describe_channel_affine(x, scale, shift, y, batch, channels, plane), stream);
}
// Linear epilogue after cuBLAS: y[r, c] += bias[c] (bias may be null), then optional ReLU.
KernelLaunch describe_bias_activation(float* y, const float* bias, std::int64_t rows,
                                      std::int64_t cols, bool relu);
inline cudaError_t bias_activation(float* y, const float* bias, std::int64_t rows,
                                   std::int64_t cols, bool relu, cudaStream_t stream) {
  return launch(describe_bias_activation(y, bias, rows, cols, relu), stream);
}

// Window geometry of a 2-D pooling over `planes` (N * C) planes of in_h x in_w. The output
// size is the layer's (math::window_output_size); pad_bottom / pad_right clip the last
// windows. Max pooling uses the dilation, average pooling requires it to be 1.
struct Pool2dGeometry {
  std::int64_t planes, in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_top,
      pad_left, pad_bottom, pad_right, dilation_h, dilation_w;
  bool count_include_pad;
};
KernelLaunch describe_max_pool2d(const float* x, float* y, const Pool2dGeometry& g);
inline cudaError_t max_pool2d(const float* x, float* y, const Pool2dGeometry& g,
                              cudaStream_t stream) {
  return launch(describe_max_pool2d(x, y, g), stream);
}
KernelLaunch describe_avg_pool2d(const float* x, float* y, const Pool2dGeometry& g);
inline cudaError_t avg_pool2d(const float* x, float* y, const Pool2dGeometry& g,
                              cudaStream_t stream) {
  return launch(describe_avg_pool2d(x, y, g), stream);
}
KernelLaunch describe_global_avg_pool(const float* x, float* y, std::int64_t planes,
                                      std::int64_t plane_size);
inline cudaError_t global_avg_pool(const float* x, float* y, std::int64_t planes,
                                   std::int64_t plane_size, cudaStream_t stream) {
  return launch(describe_global_avg_pool(x, y, planes, plane_size), stream);
}

// Copies one concat input: `outer` blocks of `block` floats into the output, whose blocks are
// out_block floats long, at `offset` floats into each output block.
KernelLaunch describe_concat_part(const float* x, float* y, std::int64_t outer, std::int64_t block,
                                  std::int64_t out_block, std::int64_t offset);
inline cudaError_t concat_part(const float* x, float* y, std::int64_t outer, std::int64_t block,
                               std::int64_t out_block, std::int64_t offset, cudaStream_t stream) {
  return launch(describe_concat_part(x, y, outer, block, out_block, offset), stream);
}

// Softmax over rows of `length` values spaced `inner` apart (outer x length x inner layout).
// May run in place (x == y).
KernelLaunch describe_softmax(const float* x, float* y, std::int64_t outer, std::int64_t length,
                              std::int64_t inner);
inline cudaError_t softmax(const float* x, float* y, std::int64_t outer, std::int64_t length,
                           std::int64_t inner, cudaStream_t stream) {
  return launch(describe_softmax(x, y, outer, length, inner), stream);
}

// Zero padding of `planes` planes of in_h x in_w into out_h x out_w at (top, left).
KernelLaunch describe_pad2d(const float* x, float* y, std::int64_t planes, std::int64_t in_h,
                            std::int64_t in_w, std::int64_t out_h, std::int64_t out_w,
                            std::int64_t top, std::int64_t left);
inline cudaError_t pad2d(const float* x, float* y, std::int64_t planes, std::int64_t in_h,
                         std::int64_t in_w, std::int64_t out_h, std::int64_t out_w,
                         std::int64_t top, std::int64_t left, cudaStream_t stream) {
  return launch(describe_pad2d(x, y, planes, in_h, in_w, out_h, out_w, top, left), stream);
}

// y[index] = x[sum_d index[d] * source_strides[d]] over the output's dims (rank <= 8).
struct TransposeGeometry {
  int rank;
  std::int64_t out_dims[8];
  std::int64_t source_strides[8];
};
KernelLaunch describe_transpose(const float* x, float* y, const TransposeGeometry& g);
inline cudaError_t transpose(const float* x, float* y, const TransposeGeometry& g,
                             cudaStream_t stream) {
  return launch(describe_transpose(x, y, g), stream);
}

// Exit decision: confidence[n] = math::max_softmax_probability(logits row n); fired =
// math::exit_fires(confidence, batch, threshold) written to *fired (device int, 1 or 0). When
// set_condition is true the kernel also calls cudaGraphSetConditional(handle, fired ? 0 : 1)
// from one thread (the IF node's body, the rest of the network, runs only when the exit did
// not fire); that is only valid inside the graph that owns `handle`. One block does it all,
// so the decision needs no second kernel and no grid-wide synchronisation.
KernelLaunch describe_exit_decision(const float* logits, float* confidence, int* fired,
                                    std::int64_t batch, std::int64_t classes, float threshold,
                                    bool set_condition, cudaGraphConditionalHandle handle);
inline cudaError_t exit_decision(const float* logits, float* confidence, int* fired,
                                 std::int64_t batch, std::int64_t classes, float threshold,
                                 bool set_condition, cudaGraphConditionalHandle handle,
                                 cudaStream_t stream) {
  return launch(describe_exit_decision(logits, confidence, fired, batch, classes, threshold,
                                       set_condition, handle),
                stream);
}

}  // namespace cgr::cuda_kernels
