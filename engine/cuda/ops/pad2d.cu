// Pad2d: zero padding of each NCHW plane, the input placed at (top, left).
//
// A thread per output float, so zeros and copied values are written in one coalesced pass
// (the CPU fills with zeros, then copies rows in; the result is the same). Exact: a copy.
#include "pad2d.hpp"

#include "cgr/layers/pad2d.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

template <typename Index>
__global__ void pad2d_kernel(const float* x, float* y, Index total, Index in_h, Index in_w,
                             Index out_h, Index out_w, Index top, Index left) {
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    const Index iw = i % out_w - left;
    const Index ih = (i / out_w) % out_h - top;
    const Index plane = i / (out_w * out_h);
    const bool inside = ih >= 0 && ih < in_h && iw >= 0 && iw < in_w;
    y[i] = inside ? x[(plane * in_h + ih) * in_w + iw] : 0.0f;
  }
}

std::unique_ptr<GpuOp> make_pad2d(const Pad2d& layer, const GpuOpBuild&) {
  const Pad2dGeometry g = layer.geometry();
  return kernel_op([g](const GpuBuffers& b) { return describe_pad2d(b.inputs[0], b.output, g); });
}

const GpuOpRegistration<Pad2d> pad2d_op(make_pad2d);

}  // namespace

KernelLaunch describe_pad2d(const float* x, float* y, const Pad2dGeometry& g) {
  const std::int64_t planes = g.planes, in_h = g.in_h, in_w = g.in_w, out_h = g.out_h,
                     out_w = g.out_w, top = g.top, left = g.left;
  if (detail::any_negative({planes, in_h, in_w, out_h, out_w, top, left})) {
    return KernelLaunch::refused(cudaErrorInvalidValue, "pad2d: a negative size or padding");
  }
  const std::int64_t total = planes * out_h * out_w;
  if (total == 0) return KernelLaunch{};
  const unsigned blocks = detail::blocks_for(total);
  if (detail::fits_int32({total, planes * in_h * in_w})) {
    using I = std::int32_t;
    return detail::describe(pad2d_kernel<I>, blocks, detail::kThreads, 0, x, y,
                            static_cast<I>(total), static_cast<I>(in_h), static_cast<I>(in_w),
                            static_cast<I>(out_h), static_cast<I>(out_w), static_cast<I>(top),
                            static_cast<I>(left));
  } else {
    return detail::describe(pad2d_kernel<std::int64_t>, blocks, detail::kThreads, 0, x, y, total,
                            in_h, in_w, out_h, out_w, top, left);
  }
}

}  // namespace cgr::cuda
