// MaxPool2d and AvgPool2d over NCHW planes: one thread per output element.
//
// Pooling windows are small (2x2, 3x3) and overlap little, so each thread reads its window
// straight from global memory (neighbouring threads share cache lines, L1/L2 serve the
// overlap); tiling through shared memory would not pay at these sizes. The window arithmetic
// is the CPU's: max pooling visits the dilated taps that land inside the input in the same
// order and combines them with math::nan_max starting from -inf (padding never wins, NaN
// always does); average pooling takes both axes from math::pool_window_axis, sums in the
// CPU's order and divides by the padded or the clipped window size (count_include_pad), so
// both give the CPU's results bit for bit. ceil_mode only changes out_h / out_w (the layer's
// geometry); the last windows are clipped by the same rules.
#include "pool2d.hpp"

#include "cgr/layers/avg_pool2d.hpp"
#include "cgr/layers/max_pool2d.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

using detail::first_index;
using detail::grid_stride;

// The geometry in the index type of the launch.
template <typename Index>
struct Window {
  Index planes, in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left,
      pad_bottom, pad_right, dilation_h, dilation_w;
  bool count_include_pad;

  explicit Window(const Pool2dGeometry& g)
      : planes(static_cast<Index>(g.planes)),
        in_h(static_cast<Index>(g.in_h)),
        in_w(static_cast<Index>(g.in_w)),
        out_h(static_cast<Index>(g.out_h)),
        out_w(static_cast<Index>(g.out_w)),
        kernel_h(static_cast<Index>(g.kernel_h)),
        kernel_w(static_cast<Index>(g.kernel_w)),
        stride_h(static_cast<Index>(g.stride_h)),
        stride_w(static_cast<Index>(g.stride_w)),
        pad_top(static_cast<Index>(g.pad_top)),
        pad_left(static_cast<Index>(g.pad_left)),
        pad_bottom(static_cast<Index>(g.pad_bottom)),
        pad_right(static_cast<Index>(g.pad_right)),
        dilation_h(static_cast<Index>(g.dilation_h)),
        dilation_w(static_cast<Index>(g.dilation_w)),
        count_include_pad(g.count_include_pad) {}
};

template <typename Index>
__global__ void max_pool2d_kernel(const float* x, float* y, Window<Index> g) {
  const Index total = g.planes * g.out_h * g.out_w;
  for (Index i = first_index<Index>(); i < total; i += grid_stride<Index>()) {
    const Index ow = i % g.out_w;
    const Index oh = (i / g.out_w) % g.out_h;
    const Index plane = i / (g.out_w * g.out_h);
    const float* in = x + plane * g.in_h * g.in_w;
    const Index h0 = oh * g.stride_h - g.pad_top;
    const Index w0 = ow * g.stride_w - g.pad_left;
    float best = -INFINITY;
    for (Index kh = 0; kh < g.kernel_h; ++kh) {
      const Index ih = h0 + kh * g.dilation_h;
      if (ih < 0 || ih >= g.in_h) continue;
      const float* row = in + ih * g.in_w;
      for (Index kw = 0; kw < g.kernel_w; ++kw) {
        const Index iw = w0 + kw * g.dilation_w;
        if (iw < 0 || iw >= g.in_w) continue;
        best = math::nan_max(best, row[iw]);
      }
    }
    y[i] = best;
  }
}

template <typename Index>
__global__ void avg_pool2d_kernel(const float* x, float* y, Window<Index> g) {
  const Index total = g.planes * g.out_h * g.out_w;
  for (Index i = first_index<Index>(); i < total; i += grid_stride<Index>()) {
    const Index ow = i % g.out_w;
    const Index oh = (i / g.out_w) % g.out_h;
    const Index plane = i / (g.out_w * g.out_h);
    const float* in = x + plane * g.in_h * g.in_w;
    const math::WindowAxis wh =
        math::pool_window_axis(oh, g.in_h, g.kernel_h, g.stride_h, g.pad_top, g.pad_bottom);
    const math::WindowAxis ww =
        math::pool_window_axis(ow, g.in_w, g.kernel_w, g.stride_w, g.pad_left, g.pad_right);
    float sum = 0.0f;
    for (auto ih = static_cast<Index>(wh.begin); ih < static_cast<Index>(wh.end); ++ih) {
      const float* row = in + ih * g.in_w;
      for (auto iw = static_cast<Index>(ww.begin); iw < static_cast<Index>(ww.end); ++iw) {
        sum += row[iw];
      }
    }
    const std::int64_t divisor = g.count_include_pad ? wh.padded_length * ww.padded_length
                                                     : (wh.end - wh.begin) * (ww.end - ww.begin);
    y[i] = sum / static_cast<float>(divisor);
  }
}

bool invalid(const Pool2dGeometry& g) {
  return detail::any_negative({g.planes, g.in_h, g.in_w, g.out_h, g.out_w, g.pad_top, g.pad_left,
                               g.pad_bottom, g.pad_right}) ||
         g.kernel_h <= 0 || g.kernel_w <= 0 || g.stride_h <= 0 || g.stride_w <= 0 ||
         g.dilation_h <= 0 || g.dilation_w <= 0;
}

KernelLaunch describe_pool(bool max, const float* x, float* y, const Pool2dGeometry& g) {
  if (invalid(g)) {
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "pool: a negative size or padding, or a window, stride or "
                                 "dilation below 1");
  }
  const std::int64_t total = g.planes * g.out_h * g.out_w;
  if (total == 0) return KernelLaunch{};
  const unsigned blocks = detail::blocks_for(total);
  if (detail::fits_int32({total, g.planes * g.in_h * g.in_w})) {
    const Window<std::int32_t> w(g);
    if (max) {
      return detail::describe(max_pool2d_kernel<std::int32_t>, blocks, detail::kThreads, 0, x, y,
                              w);
    } else {
      return detail::describe(avg_pool2d_kernel<std::int32_t>, blocks, detail::kThreads, 0, x, y,
                              w);
    }
  } else {
    const Window<std::int64_t> w(g);
    if (max) {
      return detail::describe(max_pool2d_kernel<std::int64_t>, blocks, detail::kThreads, 0, x, y,
                              w);
    } else {
      return detail::describe(avg_pool2d_kernel<std::int64_t>, blocks, detail::kThreads, 0, x, y,
                              w);
    }
  }
}

std::unique_ptr<GpuOp> make_max_pool(const MaxPool2d& layer, const GpuOpBuild&) {
  const Pool2dGeometry g = layer.geometry();
  return kernel_op([g](const GpuBuffers& b) { return describe_max_pool2d(b.inputs[0], b.output, g); });
}

std::unique_ptr<GpuOp> make_avg_pool(const AvgPool2d& layer, const GpuOpBuild&) {
  const Pool2dGeometry g = layer.geometry();
  return kernel_op([g](const GpuBuffers& b) { return describe_avg_pool2d(b.inputs[0], b.output, g); });
}

const GpuOpRegistration<MaxPool2d> max_pool_op(make_max_pool);
const GpuOpRegistration<AvgPool2d> avg_pool_op(make_avg_pool);

}  // namespace

KernelLaunch describe_max_pool2d(const float* x, float* y, const Pool2dGeometry& g) {
  return describe_pool(true, x, y, g);
}

KernelLaunch describe_avg_pool2d(const float* x, float* y, const Pool2dGeometry& g) {
  // Average pooling has no dilation (AvgPool2d rejects it too).
  if (g.dilation_h != 1 || g.dilation_w != 1)
    return KernelLaunch::refused(cudaErrorInvalidValue, "average pool: a dilation other than 1");
  return describe_pool(false, x, y, g);
}

}  // namespace cgr::cuda
