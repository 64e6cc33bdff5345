// Elementwise kernels: ReLU, Clip, Add (+ fused ReLU), AddConstant (the constant is expanded
// to the full shape when the op is built, as on the CPU), the BatchNorm affine map and the
// bias + activation epilogue of Linear (cuBLAS computes x Wᵀ, this adds b and maybe ReLU).
//
// All are memory bound: one thread per element in a grid-stride loop, the element math from
// cgr/layers/element_math.hpp so NaN behaves exactly as on the CPU (ReLU and Clip pass NaN
// through). Each thread reads and writes only its own index, so in-place use is safe. The two
// kernels that need a coordinate (the channel of an element, the column of a matrix entry)
// divide, so they come in 32- and 64-bit index flavours (launch.cuh). The affine map may be
// contracted to one FMA by nvcc: one rounding fewer than the CPU, well inside 1e-5.
#include "kernels.hpp"
#include "launch.cuh"

namespace cgr::cuda_kernels {
namespace {

using detail::first_index;
using detail::grid_stride;

__global__ void relu_kernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = first_index<std::int64_t>(); i < n; i += grid_stride<std::int64_t>()) {
    y[i] = math::relu(x[i]);
  }
}

__global__ void clip_kernel(const float* x, float* y, std::int64_t n, float low, float high) {
  for (std::int64_t i = first_index<std::int64_t>(); i < n; i += grid_stride<std::int64_t>()) {
    y[i] = math::clip(x[i], low, high);
  }
}

template <bool kRelu>
__global__ void add_kernel(const float* a, const float* b, float* y, std::int64_t n) {
  for (std::int64_t i = first_index<std::int64_t>(); i < n; i += grid_stride<std::int64_t>()) {
    const float sum = a[i] + b[i];
    y[i] = kRelu ? math::relu(sum) : sum;
  }
}

template <typename Index>
__global__ void channel_affine_kernel(const float* x, const float* scale, const float* shift,
                                      float* y, Index total, Index channels, Index plane) {
  for (Index i = first_index<Index>(); i < total; i += grid_stride<Index>()) {
    const Index c = (i / plane) % channels;
    y[i] = x[i] * scale[c] + shift[c];
  }
}

template <typename Index, bool kRelu>
__global__ void bias_activation_kernel(float* y, const float* bias, Index total, Index cols) {
  for (Index i = first_index<Index>(); i < total; i += grid_stride<Index>()) {
    float value = y[i];
    if (bias != nullptr) value += bias[i % cols];
    y[i] = kRelu ? math::relu(value) : value;
  }
}

}  // namespace

cudaError_t relu(const float* x, float* y, std::int64_t n, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  relu_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

cudaError_t clip(const float* x, float* y, std::int64_t n, float low, float high,
                 cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  clip_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(x, y, n, low, high);
  return cudaGetLastError();
}

cudaError_t add(const float* a, const float* b, float* y, std::int64_t n, bool relu,
                cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (relu) {
    add_kernel<true><<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(a, b, y, n);
  } else {
    add_kernel<false><<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(a, b, y, n);
  }
  return cudaGetLastError();
}

cudaError_t add_expanded(const float* x, const float* c, float* y, std::int64_t n,
                         cudaStream_t stream) {
  return add(x, c, y, n, false, stream);
}

cudaError_t channel_affine(const float* x, const float* scale, const float* shift, float* y,
                           std::int64_t batch, std::int64_t channels, std::int64_t plane,
                           cudaStream_t stream) {
  if (detail::any_negative({batch, channels, plane})) return cudaErrorInvalidValue;
  const std::int64_t total = batch * channels * plane;
  if (total == 0) return cudaSuccess;
  const unsigned blocks = detail::blocks_for(total);
  if (detail::fits_int32({total})) {
    channel_affine_kernel<std::int32_t><<<blocks, detail::kThreads, 0, stream>>>(
        x, scale, shift, y, static_cast<std::int32_t>(total), static_cast<std::int32_t>(channels),
        static_cast<std::int32_t>(plane));
  } else {
    channel_affine_kernel<std::int64_t><<<blocks, detail::kThreads, 0, stream>>>(
        x, scale, shift, y, total, channels, plane);
  }
  return cudaGetLastError();
}

cudaError_t bias_activation(float* y, const float* bias, std::int64_t rows, std::int64_t cols,
                            bool relu, cudaStream_t stream) {
  if (detail::any_negative({rows, cols})) return cudaErrorInvalidValue;
  const std::int64_t total = rows * cols;
  if (total == 0 || (bias == nullptr && !relu)) return cudaSuccess;
  const unsigned blocks = detail::blocks_for(total);
  if (detail::fits_int32({total})) {
    const auto total32 = static_cast<std::int32_t>(total), cols32 = static_cast<std::int32_t>(cols);
    if (relu) {
      bias_activation_kernel<std::int32_t, true>
          <<<blocks, detail::kThreads, 0, stream>>>(y, bias, total32, cols32);
    } else {
      bias_activation_kernel<std::int32_t, false>
          <<<blocks, detail::kThreads, 0, stream>>>(y, bias, total32, cols32);
    }
  } else if (relu) {
    bias_activation_kernel<std::int64_t, true>
        <<<blocks, detail::kThreads, 0, stream>>>(y, bias, total, cols);
  } else {
    bias_activation_kernel<std::int64_t, false>
        <<<blocks, detail::kThreads, 0, stream>>>(y, bias, total, cols);
  }
  return cudaGetLastError();
}

}  // namespace cgr::cuda_kernels
