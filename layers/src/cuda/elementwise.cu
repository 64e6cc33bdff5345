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

KernelLaunch describe_relu(const float* x, float* y, std::int64_t n) {
  if (n < 0) return KernelLaunch::refused(cudaErrorInvalidValue);
  if (n == 0) return KernelLaunch{};
  return detail::describe(relu_kernel, detail::blocks_for(n), detail::kThreads, 0, x, y, n);
}

KernelLaunch describe_clip(const float* x, float* y, std::int64_t n, float low, float high) {
  if (n < 0) return KernelLaunch::refused(cudaErrorInvalidValue);
  if (n == 0) return KernelLaunch{};
  return detail::describe(clip_kernel, detail::blocks_for(n), detail::kThreads, 0, x, y, n, low,
                          high);
}

KernelLaunch describe_add(const float* a, const float* b, float* y, std::int64_t n, bool relu) {
  if (n < 0) return KernelLaunch::refused(cudaErrorInvalidValue);
  if (n == 0) return KernelLaunch{};
  if (relu) {
    return detail::describe(add_kernel<true>, detail::blocks_for(n), detail::kThreads, 0, a, b, y,
                            n);
  } else {
    return detail::describe(add_kernel<false>, detail::blocks_for(n), detail::kThreads, 0, a, b, y,
                            n);
  }
}

KernelLaunch describe_add_expanded(const float* x, const float* c, float* y, std::int64_t n) {
  return describe_add(x, c, y, n, false);
}

KernelLaunch describe_channel_affine(const float* x, const float* scale, const float* shift,
                                     float* y, std::int64_t batch, std::int64_t channels,
                                     std::int64_t plane) {
  if (detail::any_negative({batch, channels, plane}))
    return KernelLaunch::refused(cudaErrorInvalidValue);
  const std::int64_t total = batch * channels * plane;
  if (total == 0) return KernelLaunch{};
  const unsigned blocks = detail::blocks_for(total);
  if (detail::fits_int32({total})) {
    return detail::describe(channel_affine_kernel<std::int32_t>, blocks, detail::kThreads, 0, x,
                            scale, shift, y, static_cast<std::int32_t>(total),
                            static_cast<std::int32_t>(channels), static_cast<std::int32_t>(plane));
  } else {
    return detail::describe(channel_affine_kernel<std::int64_t>, blocks, detail::kThreads, 0, x,
                            scale, shift, y, total, channels, plane);
  }
}

KernelLaunch describe_bias_activation(float* y, const float* bias, std::int64_t rows,
                                      std::int64_t cols, bool relu) {
  if (detail::any_negative({rows, cols})) return KernelLaunch::refused(cudaErrorInvalidValue);
  const std::int64_t total = rows * cols;
  if (total == 0 || (bias == nullptr && !relu)) return KernelLaunch{};
  const unsigned blocks = detail::blocks_for(total);
  if (detail::fits_int32({total})) {
    const auto total32 = static_cast<std::int32_t>(total), cols32 = static_cast<std::int32_t>(cols);
    if (relu) {
      return detail::describe(bias_activation_kernel<std::int32_t, true>, blocks, detail::kThreads,
                              0, y, bias, total32, cols32);
    } else {
      return detail::describe(bias_activation_kernel<std::int32_t, false>, blocks, detail::kThreads,
                              0, y, bias, total32, cols32);
    }
  } else if (relu) {
    return detail::describe(bias_activation_kernel<std::int64_t, true>, blocks, detail::kThreads, 0,
                            y, bias, total, cols);
  } else {
    return detail::describe(bias_activation_kernel<std::int64_t, false>, blocks, detail::kThreads,
                            0, y, bias, total, cols);
  }
}

}  // namespace cgr::cuda_kernels
