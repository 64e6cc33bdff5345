// Linear's bias + activation epilogue and the small-batch Linear kernel (see linear.hpp). The
// column of an element needs a division, so the epilogue comes in 32- and 64-bit index
// flavours.
#include "launch.cuh"
#include "linear.hpp"

namespace cgr::cuda {
namespace {

template <typename Index, bool kRelu>
__global__ void bias_activation_kernel(float* y, const float* bias, Index total, Index cols) {
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    float value = y[i];
    if (bias != nullptr) value += bias[i % cols];
    y[i] = kRelu ? math::relu(value) : value;
  }
}

constexpr int kRowsThreads = 256;
constexpr int kRowsWarps = kRowsThreads / detail::kWarpSize;

// One block per (group of kRowOutputs outputs, row): the row's input (its pooled means, with
// pooled_plane > 0) goes to shared memory once, then each warp computes whole outputs, a
// lane-strided dot product reduced across the warp, plus the bias. Every index fits an int:
// the factory allows it only for small rows and shared-memory-sized inputs.
__global__ void linear_rows_kernel(const float* x, const float* weight, const float* bias, float* y,
                                   int in_features, int out_features, int pooled_plane) {
  extern __shared__ float row_input[];
  const int row = static_cast<int>(blockIdx.y);
  const int lane = static_cast<int>(threadIdx.x) % detail::kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / detail::kWarpSize;
  if (pooled_plane > 0) {
    // A warp per channel: coalesced reads of its plane, the mean as GlobalAvgPool takes it.
    const float* planes = x + static_cast<std::int64_t>(row) * in_features * pooled_plane;
    for (int c = warp; c < in_features; c += kRowsWarps) {
      const float* plane = planes + static_cast<std::int64_t>(c) * pooled_plane;
      float sum = 0.0f;
      for (int i = lane; i < pooled_plane; i += detail::kWarpSize)
        sum += plane[i];
      sum = detail::warp_sum(sum);
      if (lane == 0) row_input[c] = sum / static_cast<float>(pooled_plane);
    }
  } else {
    const float* values = x + static_cast<std::int64_t>(row) * in_features;
    for (int c = static_cast<int>(threadIdx.x); c < in_features; c += kRowsThreads) {
      row_input[c] = values[c];
    }
  }
  __syncthreads();
  const int first = static_cast<int>(blockIdx.x) * kLinearRowOutputs;
  const int last = min(out_features, first + kLinearRowOutputs);
  for (int o = first + warp; o < last; o += kRowsWarps) {
    const float* w = weight + static_cast<std::int64_t>(o) * in_features;
    float dot = 0.0f;
    for (int c = lane; c < in_features; c += detail::kWarpSize)
      dot += w[c] * row_input[c];
    dot = detail::warp_sum(dot);
    if (lane == 0) {
      y[static_cast<std::int64_t>(row) * out_features + o] = bias != nullptr ? dot + bias[o] : dot;
    }
  }
}

}  // namespace

KernelLaunch describe_linear_rows(const float* x, const float* weight, const float* bias, float* y,
                                  std::int64_t rows, std::int64_t in_features,
                                  std::int64_t out_features, std::int64_t pooled_plane) {
  if (!linear_rows_suits(rows, in_features, out_features, pooled_plane)) {
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "linear rows kernel: more rows or features than it takes");
  }
  if (rows == 0 || out_features == 0) return KernelLaunch{};
  const dim3 grid(static_cast<unsigned>((out_features + kLinearRowOutputs - 1) / kLinearRowOutputs),
                  static_cast<unsigned>(rows));
  return detail::describe(linear_rows_kernel, grid, kRowsThreads,
                          static_cast<unsigned>(in_features * sizeof(float)), x, weight, bias, y,
                          static_cast<int>(in_features), static_cast<int>(out_features),
                          static_cast<int>(pooled_plane));
}

KernelLaunch describe_bias_activation(float* y, const float* bias, std::int64_t rows,
                                      std::int64_t cols, bool relu) {
  if (detail::any_negative({rows, cols}))
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "bias epilogue: a negative row or column count");
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

}  // namespace cgr::cuda
