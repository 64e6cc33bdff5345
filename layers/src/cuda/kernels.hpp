// Launch API of cgr's own CUDA kernels, one function per kernel. Plain C++ over
// <cuda_runtime.h>, so the g++-compiled executor (which formats errors with fmt) can call it;
// the kernels themselves live in the .cu files next to this header and compute exactly what
// the CPU kernels of layers/src/*.cpp compute, through the same cgr/layers/element_math.hpp.
//
// Every function launches on `stream` (so it can be captured into a graph) and returns
// cudaGetLastError(); nothing synchronises. Empty work (a size of 0) launches nothing and
// returns cudaSuccess; a negative size is cudaErrorInvalidValue. Sizes are 64-bit
// throughout: an activation may hold more than 2^31 floats.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cgr::cuda_kernels {

cudaError_t relu(const float* x, float* y, std::int64_t n, cudaStream_t stream);
cudaError_t clip(const float* x, float* y, std::int64_t n, float low, float high,
                 cudaStream_t stream);
cudaError_t add(const float* a, const float* b, float* y, std::int64_t n, bool relu,
                cudaStream_t stream);
// y = x + c, c already broadcast to n elements.
cudaError_t add_expanded(const float* x, const float* c, float* y, std::int64_t n,
                         cudaStream_t stream);
// BatchNorm / per-channel affine on N x C x plane: y = x * scale[c] + shift[c].
cudaError_t channel_affine(const float* x, const float* scale, const float* shift, float* y,
                           std::int64_t batch, std::int64_t channels, std::int64_t plane,
                           cudaStream_t stream);
// Linear epilogue after cuBLAS: y[r, c] += bias[c] (bias may be null), then optional ReLU.
cudaError_t bias_activation(float* y, const float* bias, std::int64_t rows, std::int64_t cols,
                            bool relu, cudaStream_t stream);

// Window geometry of a 2-D pooling over `planes` (N * C) planes of in_h x in_w. The output
// size is the layer's (math::window_output_size); pad_bottom / pad_right clip the last
// windows. Max pooling uses the dilation, average pooling requires it to be 1.
struct Pool2dGeometry {
  std::int64_t planes, in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_top,
      pad_left, pad_bottom, pad_right, dilation_h, dilation_w;
  bool count_include_pad;
};
cudaError_t max_pool2d(const float* x, float* y, const Pool2dGeometry& g, cudaStream_t stream);
cudaError_t avg_pool2d(const float* x, float* y, const Pool2dGeometry& g, cudaStream_t stream);
cudaError_t global_avg_pool(const float* x, float* y, std::int64_t planes,
                            std::int64_t plane_size, cudaStream_t stream);

// Copies one concat input: `outer` blocks of `block` floats into the output, whose blocks are
// out_block floats long, at `offset` floats into each output block.
cudaError_t concat_part(const float* x, float* y, std::int64_t outer, std::int64_t block,
                        std::int64_t out_block, std::int64_t offset, cudaStream_t stream);

// Softmax over rows of `length` values spaced `inner` apart (outer x length x inner layout).
// May run in place (x == y).
cudaError_t softmax(const float* x, float* y, std::int64_t outer, std::int64_t length,
                    std::int64_t inner, cudaStream_t stream);

// Zero padding of `planes` planes of in_h x in_w into out_h x out_w at (top, left).
cudaError_t pad2d(const float* x, float* y, std::int64_t planes, std::int64_t in_h,
                  std::int64_t in_w, std::int64_t out_h, std::int64_t out_w, std::int64_t top,
                  std::int64_t left, cudaStream_t stream);

// y[index] = x[sum_d index[d] * source_strides[d]] over the output's dims (rank <= 8).
struct TransposeGeometry {
  int rank;
  std::int64_t out_dims[8];
  std::int64_t source_strides[8];
};
cudaError_t transpose(const float* x, float* y, const TransposeGeometry& g, cudaStream_t stream);

// Exit decision: confidence[n] = math::max_softmax_probability(logits row n); fired =
// math::exit_fires(confidence, batch, threshold) written to *fired (device int, 1 or 0). When
// set_condition is true the kernel also calls cudaGraphSetConditional(handle, fired ? 0 : 1)
// from one thread (the IF node's body, the rest of the network, runs only when the exit did
// not fire); that is only valid inside the graph that owns `handle`. One block does it all,
// so the decision needs no second kernel and no grid-wide synchronisation.
cudaError_t exit_decision(const float* logits, float* confidence, int* fired, std::int64_t batch,
                          std::int64_t classes, float threshold, bool set_condition,
                          cudaGraphConditionalHandle handle, cudaStream_t stream);

}  // namespace cgr::cuda_kernels
