// Softmax over rows of `length` values spaced `inner` apart (outer x length x inner).
//
// Two shapes of row, two kernels:
// - Contiguous rows longer than a warp (inner == 1: logits, the last axis): a warp per row.
//   Lanes stride the row together (coalesced), combine the max with math::nan_max and the
//   sum of exp(x - max) with shuffles, then write exp(x - max) * (1 / sum), recomputing the
//   exponential rather than re-reading the output, so x == y (in place) is safe.
// - Strided rows (inner > 1: softmax over the channels of an NCHW tensor) and short rows: a
//   thread per row running math::softmax_row itself. Neighbouring threads take neighbouring
//   `inner` positions, so every step of the row loop is a coalesced load across the warp.
// NaN anywhere in a row makes the whole row NaN, as on the CPU. The warp kernel sums in a
// different order from the CPU, so results agree to rounding, well inside 1e-5 relative.
#include "kernels.hpp"
#include "launch.cuh"

namespace cgr::cuda_kernels {
namespace {

using detail::kThreads;
using detail::kWarpSize;

__global__ void softmax_warp_rows_kernel(const float* x, float* y, std::int64_t rows,
                                         std::int64_t length) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t warps = detail::grid_stride<std::int64_t>() / kWarpSize;
  // The row index is the same for the whole warp, so every lane reaches the shuffles.
  for (std::int64_t row = detail::first_index<std::int64_t>() / kWarpSize; row < rows;
       row += warps) {
    const float* in = x + row * length;
    float* out = y + row * length;
    const detail::RowSoftmaxStats stats = detail::warp_row_softmax_stats(in, length, lane);
    const float inverse = 1.0f / stats.sum;
    for (std::int64_t i = lane; i < length; i += kWarpSize) {
      out[i] = expf(in[i] - stats.max_value) * inverse;
    }
  }
}

__global__ void softmax_thread_rows_kernel(const float* x, float* y, std::int64_t outer,
                                           std::int64_t length, std::int64_t inner) {
  const std::int64_t rows = outer * inner;
  for (std::int64_t row = detail::first_index<std::int64_t>(); row < rows;
       row += detail::grid_stride<std::int64_t>()) {
    const std::int64_t offset = (row / inner) * length * inner + row % inner;
    math::softmax_row(x + offset, y + offset, length, inner);
  }
}

}  // namespace

cudaError_t softmax(const float* x, float* y, std::int64_t outer, std::int64_t length,
                    std::int64_t inner, cudaStream_t stream) {
  if (detail::any_negative({outer, length, inner})) return cudaErrorInvalidValue;
  if (outer == 0 || length == 0 || inner == 0) return cudaSuccess;
  if (inner == 1 && length > kWarpSize) {
    softmax_warp_rows_kernel<<<detail::blocks_for(outer, kThreads / kWarpSize), kThreads, 0,
                               stream>>>(x, y, outer, length);
  } else {
    softmax_thread_rows_kernel<<<detail::blocks_for(outer * inner), kThreads, 0, stream>>>(
        x, y, outer, length, inner);
  }
  return cudaGetLastError();
}

}  // namespace cgr::cuda_kernels
