// The GPU timeline of one inference, from CUPTI activity records: a span per kernel, memcpy
// and memset the device executed, with its device timestamps. Graph nodes are named after the
// op that owns them: CUPTI reports the node of the *instantiated* graph, whose IDs map back to
// the template nodes through the GRAPHNODE_CLONED resource callback, and the template nodes
// to their ops through ExecutionContext::cuda_graph_nodes(). eager mode has no graph: its
// spans carry the kernel's name.
#pragma once

#include <vector>

#include <cgr/engine.hpp>

#include "measure.hpp"

namespace cgr::bench {

// Whether this build has CUPTI (CUDA builds with libcupti from the toolkit).
bool have_cupti();

// Runs one warm-up and one recorded inference on a fresh context of `engine` (a CUDA engine)
// and returns the device activity of the recorded one, in start order, times since its first
// start. Error when CUPTI fails (the message names the call), or in a build without CUPTI.
std::vector<OpSpan> profile_one_inference_cuda(const Engine& engine, const InputTensors& inputs);

// The same for `recorded` inferences in a row on one fresh context (after its warm-up): each
// run's device activity, times since that run's first start. The GPU tests observe with it
// which ops ran and which overlapped.
std::vector<std::vector<OpSpan>> profile_inferences_cuda(const Engine& engine,
                                                         const InputTensors& inputs, int recorded);

}  // namespace cgr::bench
