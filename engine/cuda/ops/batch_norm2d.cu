// BatchNorm2d's affine map (see batch_norm2d.hpp). The channel of an element needs a division,
// so the kernel comes in 32- and 64-bit index flavours (launch.cuh).
#include "batch_norm2d.hpp"

#include <memory>

#include "cgr/layers/batch_norm2d.hpp"
#include "device_memory.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

template <typename Index>
__global__ void channel_affine_kernel(const float* x, const float* scale, const float* shift,
                                      float* y, Index total, Index channels, Index plane) {
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    const Index c = (i / plane) % channels;
    y[i] = x[i] * scale[c] + shift[c];
  }
}

std::unique_ptr<GpuOp> make_batch_norm(const BatchNorm2d& layer, const GpuOpBuild& build) {
  const ChannelAffine affine = layer.affine(build.op.weights);
  auto scale = std::make_shared<const DeviceFloats>(affine.scale);
  auto shift = std::make_shared<const DeviceFloats>(affine.shift);
  const ChannelGeometry g = layer.geometry();
  return kernel_op([g, scale, shift](const GpuBuffers& b) {
    return describe_channel_affine(b.inputs[0], scale->get(), shift->get(), b.output, g.batch,
                                   g.channels, g.plane);
  });
}

const GpuOpRegistration<BatchNorm2d> batch_norm_op(make_batch_norm);

}  // namespace

KernelLaunch describe_channel_affine(const float* x, const float* scale, const float* shift,
                                     float* y, std::int64_t batch, std::int64_t channels,
                                     std::int64_t plane) {
  if (detail::any_negative({batch, channels, plane}))
    return KernelLaunch::refused(cudaErrorInvalidValue, "channel affine: a negative batch, channel or plane size");
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

}  // namespace cgr::cuda
