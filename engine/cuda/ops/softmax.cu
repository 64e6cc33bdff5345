// Softmax and LogSoftmax over rows of `length` values spaced `inner` apart (outer x length x
// inner). LogSoftmax writes x - max - log(sum), the same row statistics.
//
// Two shapes of row, two kernels:
// - Long rows (length > 32) with a small stride (inner < 32: logits on the last axis, or
//   channel softmax over a tiny map): a warp per row. Lanes stride the row together
//   (coalesced when inner == 1), combine the max with math::nan_max and the sum of
//   exp(x - max) with shuffles, then write exp(x - max) * (1 / sum), recomputing the
//   exponential rather than re-reading the output, so x == y (in place) is safe.
// - Everything else, short rows or wide strides (softmax over the channels of an NCHW map):
//   a thread per row running math::softmax_row itself. With inner >= 32 neighbouring threads
//   take neighbouring positions of the map, so every step of the row loop is a coalesced
//   load across the warp, and there are inner * outer threads to fill the GPU.
// NaN anywhere in a row makes the whole row NaN, as on the CPU. The warp kernel sums in a
// different order from the CPU, so results agree to rounding, well inside 1e-5 relative.
#include "softmax.hpp"

#include "cgr/layers/softmax.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

using detail::kThreads;
using detail::kWarpSize;

template <bool kLog>
__global__ void softmax_warp_rows_kernel(const float* x, float* y, std::int64_t outer,
                                         std::int64_t length, std::int64_t inner) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t warps = detail::grid_stride<std::int64_t>() / kWarpSize;
  const std::int64_t rows = outer * inner;
  // The row index is the same for the whole warp, so every lane reaches the shuffles.
  for (std::int64_t row = detail::first_index<std::int64_t>() / kWarpSize; row < rows;
       row += warps) {
    const std::int64_t offset = (row / inner) * length * inner + row % inner;
    const float* in = x + offset;
    float* out = y + offset;
    const detail::RowSoftmaxStats stats = detail::warp_row_softmax_stats(in, length, inner, lane);
    if (kLog) {
      const float shift = stats.max_value + logf(stats.sum);
      for (std::int64_t i = lane; i < length; i += kWarpSize)
        out[i * inner] = in[i * inner] - shift;
    } else {
      const float inverse = 1.0f / stats.sum;
      for (std::int64_t i = lane; i < length; i += kWarpSize) {
        out[i * inner] = expf(in[i * inner] - stats.max_value) * inverse;
      }
    }
  }
}

template <bool kLog>
__global__ void softmax_thread_rows_kernel(const float* x, float* y, std::int64_t outer,
                                           std::int64_t length, std::int64_t inner) {
  const std::int64_t rows = outer * inner;
  for (std::int64_t row = detail::first_index<std::int64_t>(); row < rows;
       row += detail::grid_stride<std::int64_t>()) {
    const std::int64_t offset = (row / inner) * length * inner + row % inner;
    if (kLog) {
      math::log_softmax_row(x + offset, y + offset, length, inner);
    } else {
      math::softmax_row(x + offset, y + offset, length, inner);
    }
  }
}

template <bool kLog>
KernelLaunch describe_rows(const float* x, float* y, std::int64_t outer, std::int64_t length,
                           std::int64_t inner) {
  const std::int64_t rows = outer * inner;
  if (length > kWarpSize && inner < kWarpSize) {
    return detail::describe(softmax_warp_rows_kernel<kLog>,
                            detail::blocks_for(rows, kThreads / kWarpSize), kThreads, 0, x, y,
                            outer, length, inner);
  }
  return detail::describe(softmax_thread_rows_kernel<kLog>, detail::blocks_for(rows), kThreads, 0,
                          x, y, outer, length, inner);
}

std::unique_ptr<GpuOp> make_softmax(const Softmax& layer, const GpuOpBuild&) {
  const SoftmaxGeometry g = layer.geometry();
  const bool log = layer.log();
  return kernel_op([g, log](const GpuBuffers& b) {
    return describe_softmax(b.inputs[0], b.output, g.outer, g.length, g.inner, log);
  });
}

const GpuOpRegistration<Softmax> softmax_op(make_softmax);

}  // namespace

KernelLaunch describe_softmax(const float* x, float* y, std::int64_t outer, std::int64_t length,
                              std::int64_t inner, bool log) {
  if (detail::any_negative({outer, length, inner}))
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "softmax: a negative outer, axis or inner size");
  if (outer * inner == 0 || length == 0) return KernelLaunch{};
  return log ? describe_rows<true>(x, y, outer, length, inner)
             : describe_rows<false>(x, y, outer, length, inner);
}

}  // namespace cgr::cuda
