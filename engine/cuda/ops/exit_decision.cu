// Exit decision of an early-exit head, taken on the device so that a fired exit skips the
// rest of the network with no host round trip.
//
// For each sample n: confidence[n] = the largest softmax probability of its logits row,
// 1 / sum_i exp(x_i - max) (math::max_softmax_probability, NaN in a row gives NaN, which never
// fires). Then fired = math::exit_fires(confidence, batch, threshold): every sample must be
// confident. With set_condition the same thread hands the decision to the graph's IF node
// that guards the rest of the network: condition 1 (run the body) when the exit did not fire.
//
// One block does both steps: a warp per row (rows are short at batch 1, and one block is
// launched for the whole batch), then, after __syncthreads() makes the block's confidence
// stores visible to it, thread 0 reads them back and decides. A single block needs no
// second kernel and no grid-wide barrier, and cudaGraphSetConditional is called exactly once
// (racing calls are undefined). The row sums run in a different order from the CPU's, so
// confidences agree to rounding; a confidence within rounding of the threshold may decide
// differently from the CPU.
#include "exit_decision.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

using detail::kWarpSize;

constexpr int kMaxWarps = 8;

__global__ void exit_decision_kernel(const float* logits, float* confidence, int* fired,
                                     std::int64_t batch, std::int64_t classes, float threshold,
                                     bool set_condition, cudaGraphConditionalHandle handle) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  for (std::int64_t row = warp; row < batch; row += warps) {
    const detail::RowSoftmaxStats stats =
        detail::warp_row_softmax_stats(logits + row * classes, classes, 1, lane);
    if (lane == 0) confidence[row] = 1.0f / stats.sum;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const bool fires = math::exit_fires(confidence, batch, threshold);
    *fired = fires ? 1 : 0;
    if (set_condition) cudaGraphSetConditional(handle, fires ? 0u : 1u);
  }
}

}  // namespace

KernelLaunch describe_exit_decision(const float* logits, float* confidence, int* fired,
                                    std::int64_t batch, std::int64_t classes, float threshold,
                                    bool set_condition, cudaGraphConditionalHandle handle) {
  // The decision is always written (an empty batch never fires), so there is no empty launch.
  if (batch < 0 || (batch > 0 && classes <= 0)) return KernelLaunch::refused(cudaErrorInvalidValue, "exit decision: a negative batch, or no classes");
  const std::int64_t warps = batch < kMaxWarps ? (batch > 0 ? batch : 1) : kMaxWarps;
  return detail::describe(exit_decision_kernel, 1, static_cast<unsigned>(warps * kWarpSize), 0,
                          logits, confidence, fired, batch, classes, threshold, set_condition,
                          handle);
}

}  // namespace cgr::cuda
