// The CUDA executor of one execution context: its device arena, pinned staging buffers,
// library handles, stream, and the instantiated graphs it replays.
//
// Modes (EngineOptions::mode):
//   dag           an explicitly built cudaGraph_t following cgr::CudaGraphPlan: cgr's kernels
//                 are added as kernel nodes (cudaGraphAddNode), library and user work is
//                 captured into the graph with cudaStreamBeginCaptureToGraph, each against
//                 exactly its dependency nodes, so the edges are the IR's reduced edges. With ExitPolicy::early, what exit k gates
//                 sits in the body of a conditional IF node that exit k's decision kernel sets
//                 (nested per exit): no host synchronisation before the final copy-out.
//   stream-graph  the ops in topological order, each node after the one before it: the
//                 topology a capture of the whole network on one stream records (what
//                 torch.cuda.graph gives); with early exits the same conditional structure,
//                 serialised. Built from the same plan (cgr::CudaGraphPlan) as dag.
//   eager         the ops launched one by one on one stream, no graph; early exits are decided
//                 on the host after each decision (a synchronisation each, as in PyTorch).
// A graph replays one inference at a time: contexts (each with its own arena and graph) run
// in parallel.
#pragma once

#if defined(CGR_HAVE_CUDA)

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "engine_impl.hpp"

namespace cgr::cuda {

// See cgr::CudaGraphReport.
struct GraphReport {
  std::size_t nodes = 0, edges = 0, conditional_nodes = 0;
  std::size_t planned_nodes = 0, planned_edges = 0, segment_edges_found = 0;
  std::size_t predicted_nodes = 0, predicted_edges = 0;
  std::size_t op_edges_expected = 0, op_edges_found = 0;
  std::vector<std::string> mismatches;
  int last_run_launches = 0;
  int last_run_synchronizations = 0;
};

// The template graph of the full (copying) graph and the planned node owning each real node.
struct GraphNodes {
  cudaGraph_t graph = nullptr;
  std::vector<std::pair<cudaGraphNode_t, std::string>> owners;
};

class CudaContext {
 public:
  explicit CudaContext(std::shared_ptr<const detail::EngineImpl> engine);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  float* host_input(std::size_t input) const;    // pinned staging, engine input order
  float* host_output(std::size_t output) const;  // pinned staging, engine output order
  void* device_value(int value) const;           // inside the device arena

  // Copies the staged inputs in, runs, copies the outputs back; one graph launch in the graph
  // modes, then one stream synchronisation.
  void run();
  // Device-resident path: launches the compute-only graph (no copies) on `stream`; the inputs
  // must be in device_value(...) already. Does not synchronise.
  void launch_device(cudaStream_t stream);

  // After run(): per op whether it ran, per exit whether it fired (from the device flags).
  std::vector<char> executed_ops() const;
  std::vector<char> fired_exits() const;
  const float* exit_confidence(std::size_t exit) const;  // pinned copy, batch values
  // Of the last run(): device time between events recorded around the work, and host time
  // spent enqueuing it (launch calls, before the synchronisation).
  double last_gpu_ms() const;
  double last_enqueue_ms() const;

  void dump_graph_dot(const std::string& path);
  GraphReport graph_report();
  GraphNodes graph_nodes();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cgr::cuda

#endif  // CGR_HAVE_CUDA
