// Pad2d: each NCHW plane padded by the layer's geometry (constant fill, reflect, edge or wrap;
// negative pads crop).
//
// A thread per output float, so fills and copied values are written in one coalesced pass
// (the CPU fills or copies row by row; the result is the same). Exact: a copy. The border
// mapping is math::pad_source, the CPU's.
#include "pad2d.hpp"

#include "cgr/layers/pad2d.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

template <typename Index>
__global__ void pad2d_kernel(const float* x, float* y, Pad2dGeometry g, Index total) {
  const auto out_h = static_cast<Index>(g.out_h), out_w = static_cast<Index>(g.out_w);
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    const Index ow = i % out_w;
    const Index oh = (i / out_w) % out_h;
    const Index plane = i / (out_w * out_h);
    const Index row = math::pad_source<Index>(oh - static_cast<Index>(g.top),
                                              static_cast<Index>(g.kept_h), g.mode);
    const Index col = math::pad_source<Index>(ow - static_cast<Index>(g.left),
                                              static_cast<Index>(g.kept_w), g.mode);
    y[i] = row < 0 || col < 0
               ? g.value
               : x[(plane * static_cast<Index>(g.in_h) + static_cast<Index>(g.crop_top) + row) *
                       static_cast<Index>(g.in_w) +
                   static_cast<Index>(g.crop_left) + col];
  }
}

std::unique_ptr<GpuOp> make_pad2d(const Pad2d& layer, const GpuOpBuild&) {
  const Pad2dGeometry g = layer.geometry();
  return kernel_op([g](const GpuBuffers& b) { return describe_pad2d(b.inputs[0], b.output, g); });
}

const GpuOpRegistration<Pad2d> pad2d_op(make_pad2d);

}  // namespace

KernelLaunch describe_pad2d(const float* x, float* y, const Pad2dGeometry& g) {
  if (detail::any_negative(
          {g.planes, g.in_h, g.in_w, g.out_h, g.out_w, g.top, g.left, g.crop_top, g.crop_left}) ||
      g.kept_h < 1 || g.kept_w < 1 || g.crop_top + g.kept_h > g.in_h ||
      g.crop_left + g.kept_w > g.in_w) {
    return KernelLaunch::refused(
        cudaErrorInvalidValue, "pad2d: a negative size or padding, or a window outside the input");
  }
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  if (total == 0) return KernelLaunch{};
  const unsigned blocks = detail::blocks_for(total);
  if (detail::fits_int32({total, g.planes * g.in_h * g.in_w})) {
    return detail::describe(pad2d_kernel<std::int32_t>, blocks, detail::kThreads, 0, x, y, g,
                            static_cast<std::int32_t>(total));
  } else {
    return detail::describe(pad2d_kernel<std::int64_t>, blocks, detail::kThreads, 0, x, y, g,
                            total);
  }
}

}  // namespace cgr::cuda
