// The trim and bias of ConvTranspose2d (see conv_transpose2d.hpp); the cuDNN part and the op's
// registration are in conv_transpose2d.cpp (fmt does not compile under nvcc).
#include "conv_transpose2d.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

template <typename Index>
__global__ void conv_transpose_trim_kernel(const float* full, const float* bias, float* y,
                                           Index total, Index channels, Index full_h, Index full_w,
                                           Index out_h, Index out_w, Index top, Index left) {
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    const Index fw = i % out_w + left;
    const Index fh = (i / out_w) % out_h + top;
    const Index plane = i / (out_w * out_h);
    // Read before the write: full may be y (the bias added in place).
    float v = fh < full_h && fw < full_w ? full[(plane * full_h + fh) * full_w + fw] : 0.0f;
    if (bias != nullptr) v += bias[plane % channels];
    y[i] = v;
  }
}

}  // namespace

KernelLaunch describe_conv_transpose_trim(const float* full, const float* bias, float* y,
                                          const ConvTransposeTrim& g) {
  if (detail::any_negative({g.planes, g.full_h, g.full_w, g.out_h, g.out_w, g.top, g.left}) ||
      g.channels <= 0) {
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "conv transpose trim: a negative size or offset, or no channels");
  }
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  if (total == 0) return KernelLaunch{};
  const unsigned blocks = detail::blocks_for(total);
  if (detail::fits_int32({total, g.planes * g.full_h * g.full_w})) {
    using I = std::int32_t;
    return detail::describe(conv_transpose_trim_kernel<I>, blocks, detail::kThreads, 0, full, bias,
                            y, static_cast<I>(total), static_cast<I>(g.channels),
                            static_cast<I>(g.full_h), static_cast<I>(g.full_w),
                            static_cast<I>(g.out_h), static_cast<I>(g.out_w), static_cast<I>(g.top),
                            static_cast<I>(g.left));
  } else {
    return detail::describe(conv_transpose_trim_kernel<std::int64_t>, blocks, detail::kThreads, 0,
                            full, bias, y, total, g.channels, g.full_h, g.full_w, g.out_h, g.out_w,
                            g.top, g.left);
  }
}

}  // namespace cgr::cuda
