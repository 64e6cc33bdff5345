// GlobalAvgPool: the mean of each of `planes` contiguous planes of `plane_size` floats.
//
// A reduction per plane, so the plane is shared out: a warp per plane for the small planes
// at the end of a backbone (7x7: lanes read consecutive floats, coalesced, then shuffle),
// a block of 256 threads per plane for the large planes an early-exit head pools (56x56),
// where a warp alone would leave most SMs idle at batch 1. The sum is accumulated in a
// different order from the CPU's sequential loop, so results agree to rounding (well inside
// 1e-5 relative), not bit for bit; the division is the CPU's (sum / plane_size in float).
#include "global_avg_pool.hpp"

#include "cgr/layers/global_avg_pool.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

using detail::kThreads;
using detail::kWarpSize;

// Planes at least this large get a block each.
constexpr std::int64_t kBlockPerPlaneFrom = 1024;

__global__ void global_avg_pool_warp_kernel(const float* x, float* y, std::int64_t planes,
                                            std::int64_t plane_size) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const std::int64_t warps = detail::grid_stride<std::int64_t>() / kWarpSize;
  // The plane index is the same for the whole warp, so every lane reaches the shuffles.
  for (std::int64_t plane = detail::first_index<std::int64_t>() / kWarpSize; plane < planes;
       plane += warps) {
    const float* in = x + plane * plane_size;
    float sum = 0.0f;
    for (std::int64_t i = lane; i < plane_size; i += kWarpSize)
      sum += in[i];
    sum = detail::warp_sum(sum);
    if (lane == 0) y[plane] = sum / static_cast<float>(plane_size);
  }
}

__global__ void global_avg_pool_block_kernel(const float* x, float* y, std::int64_t planes,
                                             std::int64_t plane_size) {
  __shared__ float warp_sums[kThreads / kWarpSize];
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  // The plane index is the same for the whole block, so every thread reaches the barriers.
  for (std::int64_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    const float* in = x + plane * plane_size;
    float sum = 0.0f;
    for (std::int64_t i = threadIdx.x; i < plane_size; i += kThreads)
      sum += in[i];
    sum = detail::warp_sum(sum);
    if (lane == 0) warp_sums[warp] = sum;
    __syncthreads();
    if (warp == 0) {
      sum = lane < kThreads / kWarpSize ? warp_sums[lane] : 0.0f;
      sum = detail::warp_sum(sum);
      if (lane == 0) y[plane] = sum / static_cast<float>(plane_size);
    }
    __syncthreads();  // warp_sums is reused by the next plane
  }
}

std::unique_ptr<GpuOp> make_global_avg_pool(const GlobalAvgPool& layer, const GpuOpBuild&) {
  const PlaneGeometry g = layer.geometry();
  return kernel_op([g](const GpuBuffers& b) {
    return describe_global_avg_pool(b.inputs[0], b.output, g.planes, g.plane_size);
  });
}

const GpuOpRegistration<GlobalAvgPool> global_avg_pool_op(make_global_avg_pool);

}  // namespace

KernelLaunch describe_global_avg_pool(const float* x, float* y, std::int64_t planes,
                                      std::int64_t plane_size) {
  if (planes < 0 || plane_size < 0) return KernelLaunch::refused(cudaErrorInvalidValue, "global average pool: a negative plane count or size");
  if (planes == 0) return KernelLaunch{};
  if (plane_size >= kBlockPerPlaneFrom) {
    return detail::describe(global_avg_pool_block_kernel, detail::blocks_for(planes, 1), kThreads,
                            0, x, y, planes, plane_size);
  } else {
    return detail::describe(global_avg_pool_warp_kernel,
                            detail::blocks_for(planes, kThreads / kWarpSize), kThreads, 0, x, y,
                            planes, plane_size);
  }
}

}  // namespace cgr::cuda
