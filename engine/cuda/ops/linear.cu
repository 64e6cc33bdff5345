// Linear's bias + activation epilogue (see linear.hpp). The column of an element needs a
// division, so the kernel comes in 32- and 64-bit index flavours.
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

}  // namespace

KernelLaunch describe_bias_activation(float* y, const float* bias, std::int64_t rows,
                                      std::int64_t cols, bool relu) {
  if (detail::any_negative({rows, cols})) return KernelLaunch::refused(cudaErrorInvalidValue, "bias epilogue: a negative row or column count");
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
