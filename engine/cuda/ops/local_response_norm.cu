// LocalResponseNorm (see local_response_norm.hpp). The channel of an element needs a division,
// so the kernel comes in 32- and 64-bit index flavours (launch.cuh).
#include "gpu_op.hpp"
#include "launch.cuh"
#include "local_response_norm.hpp"

namespace cgr::cuda {
namespace {

template <typename Index>
__global__ void local_response_norm_kernel(const float* x, float* y, LocalResponseNormGeometry g,
                                           Index total) {
  const auto channels = static_cast<Index>(g.channels), plane = static_cast<Index>(g.plane);
  const auto before = static_cast<Index>(g.before), after = static_cast<Index>(g.after);
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    const Index c = (i / plane) % channels;
    const float* channel0 = x + (i - c * plane);  // this element's position in channel 0
    const Index first = c > before ? c - before : 0;
    const Index last = c + after < channels - 1 ? c + after : channels - 1;
    float square_sum = 0.0f;
    for (Index k = first; k <= last; ++k) {
      const float v = channel0[k * plane];
      square_sum += v * v;
    }
    y[i] = math::local_response_norm(x[i], square_sum, g.alpha_over_size, g.beta, g.bias);
  }
}

std::unique_ptr<GpuOp> make_local_response_norm(const LocalResponseNorm& layer, const GpuOpBuild&) {
  const LocalResponseNormGeometry g = layer.geometry();
  return kernel_op(
      [g](const GpuBuffers& b) { return describe_local_response_norm(b.inputs[0], b.output, g); });
}

const GpuOpRegistration<LocalResponseNorm> local_response_norm_op(make_local_response_norm);

}  // namespace

KernelLaunch describe_local_response_norm(const float* x, float* y,
                                          const LocalResponseNormGeometry& g) {
  if (detail::any_negative({g.batch, g.channels, g.plane, g.before, g.after})) {
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "local response norm: a negative size or window");
  }
  const std::int64_t total = g.batch * g.channels * g.plane;
  if (total == 0) return KernelLaunch{};
  const unsigned blocks = detail::blocks_for(total);
  if (detail::fits_int32({total, g.channels + g.after})) {
    return detail::describe(local_response_norm_kernel<std::int32_t>, blocks, detail::kThreads, 0,
                            x, y, g, static_cast<std::int32_t>(total));
  } else {
    return detail::describe(local_response_norm_kernel<std::int64_t>, blocks, detail::kThreads, 0,
                            x, y, g, total);
  }
}

}  // namespace cgr::cuda
