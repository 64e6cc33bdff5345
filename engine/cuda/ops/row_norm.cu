// LayerNorm and InstanceNorm (see row_norm.hpp).
#include <memory>

#include "cgr/layers/instance_norm.hpp"
#include "cgr/layers/layer_norm.hpp"
#include "device_memory.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"
#include "row_norm.hpp"

namespace cgr::cuda {
namespace {

using detail::kThreads;
using detail::kWarpSize;

// The sum of `value` over the block; every thread gets the same total, added in the same
// order. Every thread of the block must call it.
__device__ __forceinline__ float block_sum(float value, float* warp_sums) {
  value = detail::warp_sum(value);
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  __syncthreads();  // the previous call's readers are done with warp_sums
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  float total = 0.0f;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  for (int w = 0; w < warps; ++w)
    total += warp_sums[w];
  return total;
}

__global__ void row_norm_kernel(const float* x, const float* scale, const float* shift, float* y,
                                RowNormGeometry g) {
  __shared__ float warp_sums[kThreads / kWarpSize];
  const auto cols = g.cols;
  const auto step = static_cast<std::int64_t>(blockDim.x);
  // The row is the same for the whole block, so every thread reaches the barriers.
  for (std::int64_t row = blockIdx.x; row < g.rows; row += gridDim.x) {
    const float* in = x + row * cols;
    float* out = y + row * cols;
    float sum = 0.0f;
    for (std::int64_t j = threadIdx.x; j < cols; j += step)
      sum += in[j];
    const float mean = block_sum(sum, warp_sums) / static_cast<float>(cols);
    float squares = 0.0f;
    for (std::int64_t j = threadIdx.x; j < cols; j += step) {
      const float d = in[j] - mean;
      squares += d * d;
    }
    const float variance = block_sum(squares, warp_sums) / static_cast<float>(cols);
    const float inv_std = 1.0f / sqrtf(variance + g.eps);
    if (g.affine_per_row) {
      const std::int64_t c = row % g.channels;
      const float s = scale[c], b = shift[c];
      for (std::int64_t j = threadIdx.x; j < cols; j += step)
        out[j] = (in[j] - mean) * inv_std * s + b;
    } else {
      for (std::int64_t j = threadIdx.x; j < cols; j += step)
        out[j] = (in[j] - mean) * inv_std * scale[j] + shift[j];
    }
  }
}

// Scale and shift on the device, shared by every context; a LayerNorm without bias shifts by
// zeros.
struct Affine {
  std::shared_ptr<const DeviceFloats> scale, shift;
};

std::unique_ptr<GpuOp> row_norm_op(const RowNormGeometry& g, Affine affine) {
  return kernel_op([g, affine](const GpuBuffers& b) {
    return describe_row_norm(b.inputs[0], affine.scale->get(), affine.shift->get(), b.output, g);
  });
}

std::unique_ptr<GpuOp> make_layer_norm(const LayerNorm& layer, const GpuOpBuild& build) {
  const auto weight = build.op.weights.at("weight")->f32();
  Affine affine{std::make_shared<const DeviceFloats>(weight), nullptr};
  affine.shift = layer.params().bias
                     ? std::make_shared<const DeviceFloats>(build.op.weights.at("bias")->f32())
                     : std::make_shared<const DeviceFloats>(weight.size());
  return row_norm_op(layer.geometry(), std::move(affine));
}

std::unique_ptr<GpuOp> make_instance_norm(const InstanceNorm& layer, const GpuOpBuild& build) {
  return row_norm_op(
      layer.geometry(),
      Affine{std::make_shared<const DeviceFloats>(build.op.weights.at("weight")->f32()),
             std::make_shared<const DeviceFloats>(build.op.weights.at("bias")->f32())});
}

const GpuOpRegistration<LayerNorm> layer_norm_op(make_layer_norm);
const GpuOpRegistration<InstanceNorm> instance_norm_op(make_instance_norm);

}  // namespace

KernelLaunch describe_row_norm(const float* x, const float* scale, const float* shift, float* y,
                               const RowNormGeometry& g) {
  if (detail::any_negative({g.rows, g.cols}) ||
      (g.affine_per_row && g.rows > 0 && g.channels < 1)) {
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "row norm: a negative size or no channels for per-row scales");
  }
  if (g.rows == 0 || g.cols == 0) return KernelLaunch{};
  // A block as wide as the row, in whole warps, up to kThreads: short LayerNorm rows (the
  // channels of a channels-last tensor) leave no threads idle.
  const std::int64_t warps = (g.cols + kWarpSize - 1) / kWarpSize;
  const int threads =
      static_cast<int>(warps >= kThreads / kWarpSize ? kThreads : warps * kWarpSize);
  const auto blocks =
      static_cast<unsigned>(g.rows < detail::kMaxBlocks ? g.rows : detail::kMaxBlocks);
  return detail::describe(row_norm_kernel, blocks, threads, 0, x, scale, shift, y, g);
}

}  // namespace cgr::cuda
