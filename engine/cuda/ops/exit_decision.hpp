// The exit decision of an early-exit head on the GPU: the engine's own op, which the CUDA
// executor launches with its context's flags and conditional handles (see exit_decision.cu).
//
// confidence[n] = math::max_softmax_probability(logits row n); fired = math::exit_fires(
// confidence, batch, threshold) written to *fired (device int, 1 or 0). With set_condition the
// kernel also calls cudaGraphSetConditional(handle, fired ? 0 : 1) from one thread (the IF
// node's body, the rest of the network, runs only when the exit did not fire); that is only
// valid inside the graph that owns `handle`. One block does it all, so the decision needs no
// second kernel and no grid-wide synchronisation.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernel_launch.hpp"

namespace cgr::cuda {

KernelLaunch describe_exit_decision(const float* logits, float* confidence, int* fired,
                                    std::int64_t batch, std::int64_t classes, float threshold,
                                    bool set_condition, cudaGraphConditionalHandle handle);
inline cudaError_t exit_decision(const float* logits, float* confidence, int* fired,
                                 std::int64_t batch, std::int64_t classes, float threshold,
                                 bool set_condition, cudaGraphConditionalHandle handle,
                                 cudaStream_t stream) {
  return launch(describe_exit_decision(logits, confidence, fired, batch, classes, threshold,
                                       set_condition, handle),
                stream);
}

}  // namespace cgr::cuda
