// Resize (see resize.hpp). The tables are uploaded once per engine; the kernels split the flat
// output index into plane, row and column and read two table entries.
#include <memory>

#include "device_memory.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"
#include "resize.hpp"

namespace cgr::cuda {
namespace {

template <typename Index>
__global__ void resize_nearest_kernel(const float* x, float* y, const float* tables,
                                      ResizeGeometry g, Index total) {
  const auto out_h = static_cast<Index>(g.out_h), out_w = static_cast<Index>(g.out_w);
  const auto in_h = static_cast<Index>(g.in_h), in_w = static_cast<Index>(g.in_w);
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    const Index ow = i % out_w;
    const Index oh = (i / out_w) % out_h;
    const Index plane = i / (out_w * out_h);
    const auto row = static_cast<Index>(tables[oh]);
    const auto col = static_cast<Index>(tables[out_h + ow]);
    y[i] = x[(plane * in_h + row) * in_w + col];
  }
}

template <typename Index>
__global__ void resize_linear_kernel(const float* x, float* y, const float* tables,
                                     ResizeGeometry g, Index total) {
  const auto out_h = static_cast<Index>(g.out_h), out_w = static_cast<Index>(g.out_w);
  const auto in_h = static_cast<Index>(g.in_h), in_w = static_cast<Index>(g.in_w);
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    const Index ow = i % out_w;
    const Index oh = (i / out_w) % out_h;
    const Index plane = i / (out_w * out_h);
    const math::LinearTap<Index> r = math::linear_tap(tables[oh], in_h);
    const math::LinearTap<Index> c = math::linear_tap(tables[out_h + ow], in_w);
    const float* top = x + (plane * in_h + r.first) * in_w;
    const float* bottom = x + (plane * in_h + r.second) * in_w;
    y[i] = math::bilinear(top[c.first], top[c.second], bottom[c.first], bottom[c.second], r.weight,
                          c.weight);
  }
}

std::unique_ptr<GpuOp> make_resize(const Resize& layer, const GpuOpBuild&) {
  const ResizeGeometry g = layer.geometry();
  auto tables = std::make_shared<const DeviceFloats>(layer.tables());
  return kernel_op([g, tables](const GpuBuffers& b) {
    return describe_resize(b.inputs[0], b.output, tables->get(), g);
  });
}

const GpuOpRegistration<Resize> resize_op(make_resize);

}  // namespace

KernelLaunch describe_resize(const float* x, float* y, const float* tables,
                             const ResizeGeometry& g) {
  if (detail::any_negative({g.planes, g.in_h, g.in_w, g.out_h, g.out_w}) ||
      g.in_h > Resize::kMaxSide || g.in_w > Resize::kMaxSide) {
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "resize: a negative size or a side above Resize::kMaxSide");
  }
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  if (total == 0) return KernelLaunch{};
  if (g.in_h == 0 || g.in_w == 0 || tables == nullptr) {
    return KernelLaunch::refused(cudaErrorInvalidValue, "resize: outputs from an empty input");
  }
  const unsigned blocks = detail::blocks_for(total);
  const bool narrow = detail::fits_int32({total, g.planes * g.in_h * g.in_w});
  if (g.mode == ResizeMode::nearest) {
    if (narrow) {
      return detail::describe(resize_nearest_kernel<std::int32_t>, blocks, detail::kThreads, 0, x,
                              y, tables, g, static_cast<std::int32_t>(total));
    }
    return detail::describe(resize_nearest_kernel<std::int64_t>, blocks, detail::kThreads, 0, x, y,
                            tables, g, total);
  }
  if (narrow) {
    return detail::describe(resize_linear_kernel<std::int32_t>, blocks, detail::kThreads, 0, x, y,
                            tables, g, static_cast<std::int32_t>(total));
  }
  return detail::describe(resize_linear_kernel<std::int64_t>, blocks, detail::kThreads, 0, x, y,
                          tables, g, total);
}

}  // namespace cgr::cuda
