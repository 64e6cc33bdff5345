// Shared launch shape of cgr's kernels (included by the .cu files of this folder only).
//
// Elementwise and gather kernels use grid-stride loops over a grid capped at kMaxBlocks, so
// one launch covers any size. Kernels that split a flat index into coordinates (pooling,
// padding, concat, transpose) are instantiated for 32-bit and 64-bit indices: 64-bit division
// costs tens of instructions on the GPU, and almost every activation fits 32 bits; the
// 32-bit path is taken only when the index plus one grid stride cannot overflow. Reductions
// (softmax rows, global average pooling, the exit decision) give a warp, or a block, one row
// and combine with shuffles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "cgr/layers/element_math.hpp"
#include "kernel_launch.hpp"

namespace cgr::cuda::detail {

constexpr int kThreads = 256;
constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
// 2^20 blocks of 256 threads: 2^28 threads per sweep of a grid-stride loop.
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 20;
// Below this every index, and every index plus the largest grid stride, fits an int32.
constexpr std::int64_t kInt32Limit = std::int64_t{1} << 30;

// The conversions a call (and <<<>>>) would make, and no others: no explicit constructors.
template <typename T>
T implicitly(std::type_identity_t<T> value) {
  return value;
}

// Describes kernel<<<grid, block, shared>>>(args...): each argument converted to the kernel's
// parameter type, as the launch would convert it.
template <typename... Params, typename... Args>
KernelLaunch describe(void (*kernel)(Params...), dim3 grid, dim3 block, unsigned shared,
                      Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "one argument per kernel parameter");
  KernelLaunch launch;
  launch.function = reinterpret_cast<const void*>(kernel);
  launch.grid = grid;
  launch.block = block;
  launch.shared_bytes = shared;
  (launch.push(implicitly<std::decay_t<Params>>(std::forward<Args>(args))), ...);
  return launch;
}

inline unsigned blocks_for(std::int64_t work_items, int threads_per_block = kThreads) {
  const std::int64_t blocks = (work_items + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// True when every size (element counts of the tensors a kernel indexes) suits 32-bit indices.
inline bool fits_int32(std::initializer_list<std::int64_t> sizes) {
  for (const std::int64_t size : sizes) {
    if (size >= kInt32Limit) return false;
  }
  return true;
}

inline bool any_negative(std::initializer_list<std::int64_t> sizes) {
  for (const std::int64_t size : sizes) {
    if (size < 0) return true;
  }
  return false;
}

template <typename Index>
__device__ __forceinline__ Index first_index() {
  return static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) +
         static_cast<Index>(threadIdx.x);
}

template <typename Index>
__device__ __forceinline__ Index grid_stride() {
  return static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
}

// Sums over the 32 lanes; every lane gets the same total (addition commutes bitwise).
__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(kFullMask, value, offset);
  }
  return value;
}

// NaN-propagating max over the 32 lanes (math::nan_max), broadcast from lane 0 so that every
// lane agrees even on the sign of a zero or the payload of a NaN.
__device__ __forceinline__ float warp_nan_max(float value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value = math::nan_max(value, __shfl_xor_sync(kFullMask, value, offset));
  }
  return __shfl_sync(kFullMask, value, 0);
}

// The max and the sum of exp(x - max) of one row of n values spaced `stride` apart, computed
// by a whole warp (every lane must call it, with the same row). Same arithmetic as
// math::softmax_row, in a different summation order.
struct RowSoftmaxStats {
  float max_value;
  float sum;
};

__device__ __forceinline__ RowSoftmaxStats warp_row_softmax_stats(const float* row,
                                                                   std::int64_t n,
                                                                   std::int64_t stride, int lane) {
  // Starting from -inf rather than row[0] changes nothing: nan_max(-inf, v) is v.
  float max_value = -INFINITY;
  for (std::int64_t i = lane; i < n; i += kWarpSize) {
    max_value = math::nan_max(max_value, row[i * stride]);
  }
  max_value = warp_nan_max(max_value);
  float sum = 0.0f;
  for (std::int64_t i = lane; i < n; i += kWarpSize) sum += expf(row[i * stride] - max_value);
  return RowSoftmaxStats{max_value, warp_sum(sum)};
}

}  // namespace cgr::cuda::detail
