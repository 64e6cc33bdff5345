// Reduce (see reduce.hpp).
#include "gpu_op.hpp"
#include "launch.cuh"
#include "reduce.hpp"

namespace cgr::cuda {
namespace {

constexpr int kMaxRank = ReduceGeometry::kMaxRank;
// Outputs reducing at least this many elements get a warp each.
constexpr std::int64_t kWarpPerOutputFrom = 64;

__device__ __forceinline__ std::int64_t offset_of(std::int64_t index, int rank,
                                                  const std::int64_t* dims,
                                                  const std::int64_t* strides) {
  std::int64_t offset = 0;
#pragma unroll
  for (int d = kMaxRank - 1; d >= 0; --d) {
    if (d < rank) {
      offset += (index % dims[d]) * strides[d];
      index /= dims[d];
    }
  }
  return offset;
}

template <ReduceOp Op>
__global__ void reduce_thread_kernel(const float* x, float* y, ReduceGeometry g) {
  for (std::int64_t o = detail::first_index<std::int64_t>(); o < g.out_count;
       o += detail::grid_stride<std::int64_t>()) {
    const std::int64_t base = offset_of(o, g.out_rank, g.out_dims, g.out_strides);
    float acc = math::reduce_start(Op);
    for (std::int64_t r = 0; r < g.red_count; ++r)
      acc =
          math::reduce_step(Op, acc, x[base + offset_of(r, g.red_rank, g.red_dims, g.red_strides)]);
    y[o] = math::reduce_finish(Op, acc, g.red_count);
  }
}

template <ReduceOp Op>
__device__ __forceinline__ float warp_combine(float value) {
  if constexpr (Op == ReduceOp::sum || Op == ReduceOp::mean) {
    return detail::warp_sum(value);
  } else {
    for (int offset = detail::kWarpSize / 2; offset > 0; offset /= 2)
      value = math::reduce_step(Op, value, __shfl_xor_sync(detail::kFullMask, value, offset));
    return __shfl_sync(detail::kFullMask, value, 0);
  }
}

template <ReduceOp Op>
__global__ void reduce_warp_kernel(const float* x, float* y, ReduceGeometry g) {
  const int lane = static_cast<int>(threadIdx.x) % detail::kWarpSize;
  const std::int64_t warps = detail::grid_stride<std::int64_t>() / detail::kWarpSize;
  // The output index is the same for the whole warp, so every lane reaches the shuffles.
  for (std::int64_t o = detail::first_index<std::int64_t>() / detail::kWarpSize; o < g.out_count;
       o += warps) {
    const std::int64_t base = offset_of(o, g.out_rank, g.out_dims, g.out_strides);
    float acc = math::reduce_start(Op);
    for (std::int64_t r = lane; r < g.red_count; r += detail::kWarpSize)
      acc =
          math::reduce_step(Op, acc, x[base + offset_of(r, g.red_rank, g.red_dims, g.red_strides)]);
    acc = warp_combine<Op>(acc);
    if (lane == 0) y[o] = math::reduce_finish(Op, acc, g.red_count);
  }
}

template <ReduceOp Op>
KernelLaunch describe_for(const float* x, float* y, const ReduceGeometry& g) {
  if (g.red_count >= kWarpPerOutputFrom) {
    return detail::describe(reduce_warp_kernel<Op>,
                            detail::blocks_for(g.out_count * detail::kWarpSize), detail::kThreads,
                            0, x, y, g);
  }
  return detail::describe(reduce_thread_kernel<Op>, detail::blocks_for(g.out_count),
                          detail::kThreads, 0, x, y, g);
}

std::unique_ptr<GpuOp> make_reduce(const Reduce& layer, const GpuOpBuild&) {
  const ReduceGeometry g = layer.geometry();
  const ReduceOp op = layer.params().op;
  return kernel_op(
      [op, g](const GpuBuffers& b) { return describe_reduce(op, b.inputs[0], b.output, g); });
}

const GpuOpRegistration<Reduce> reduce_op(make_reduce);

}  // namespace

KernelLaunch describe_reduce(ReduceOp op, const float* x, float* y, const ReduceGeometry& g) {
  if (g.out_rank < 1 || g.out_rank > kMaxRank || g.red_rank < 1 || g.red_rank > kMaxRank ||
      g.out_count < 0 || g.red_count < 1) {
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "reduce: a rank outside [1, kMaxRank] or an empty reduction");
  }
  if (g.out_count == 0) return KernelLaunch{};
  switch (op) {
    case ReduceOp::sum:
      return describe_for<ReduceOp::sum>(x, y, g);
    case ReduceOp::mean:
      return describe_for<ReduceOp::mean>(x, y, g);
    case ReduceOp::max:
      return describe_for<ReduceOp::max>(x, y, g);
    case ReduceOp::min:
      return describe_for<ReduceOp::min>(x, y, g);
  }
  return KernelLaunch::refused(cudaErrorInvalidValue, "reduce: unknown reduction");
}

}  // namespace cgr::cuda
