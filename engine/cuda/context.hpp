// The CUDA executor of one execution context: its device arena, page-locked staging buffers,
// library handles, stream, and the instantiated graphs it replays. Its jobs, one file each:
//   context.cpp        resources, buffers, copies, run() and the device-resident launch
//   eager.cpp          eager mode: the ops launched one by one on the stream
//   graph_builder.cpp  dag and stream-graph: the plan (cgr::CudaGraphPlan) built into a real
//                      cudaGraph_t through cgr::capture::ExplicitGraph, then instantiated
//   graph_report.cpp   the real graph checked against its plan, its nodes, its DOT
//
// Modes (EngineOptions::mode):
//   dag           an explicitly built cudaGraph_t following the plan: cgr's kernels are kernel
//                 nodes, library and user work is captured against exactly its dependency
//                 nodes, so the edges are the IR's reduced edges. With ExitPolicy::early, what
//                 exit k gates sits in the body of a conditional IF node that exit k's decision
//                 kernel sets (nested per exit): no host synchronisation before the copy-out.
//   stream-graph  the same nodes, each after the one before it in its graph: the topology a
//                 capture of the whole network on one stream records (torch.cuda.graph).
//   eager         the ops launched one by one on one stream, no graph; early exits are decided
//                 on the host after each decision (a synchronisation each, as in PyTorch).
// A graph replays one inference at a time: contexts (each with its own arena and graphs) run
// in parallel.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cgr/backend/backend.hpp"
#include "cgr/capture/explicit_graph.hpp"
#include "cuda_backend.hpp"
#include "resources.hpp"

namespace cgr::cuda {

class CudaContext final : public detail::BackendContext {
 public:
  explicit CudaContext(std::shared_ptr<const detail::CompiledEngine> engine);
  ~CudaContext() override;

  float* host_value(int value) const override;
  void run(detail::RunRecord& record) override;
  void* device_value(int value) const override;
  void launch_on_device(void* cuda_stream) override;
  double last_gpu_time_ms() const override { return gpu_ms_; }
  double last_enqueue_time_ms() const override { return enqueue_ms_; }
  void dump_graph_dot(const std::string& path) override;
  CudaGraphReport graph_report() override;
  CudaGraphNodes graph_nodes() override;

 private:
  friend class GraphBuilder;

  // A built graph: the real graph, the plan it follows, and the real nodes of each planned node.
  struct BuiltGraph {
    capture::ExplicitGraph graph;
    CudaGraphPlan plan;
    std::vector<capture::Segment> segments;  // per planned node
  };

  const detail::CompiledEngine& engine() const { return *engine_; }
  const CudaProgram& program() const { return static_cast<const CudaProgram&>(*engine_->program); }
  LibraryHandles handles() const { return {cudnn_.get(), cublas_.get()}; }
  GpuBuffers buffers_of(int op) const;
  int* fired_flag(std::size_t exit) const { return static_cast<int*>(fired_device_.get()) + exit; }
  int* fired_host_flags() const { return static_cast<int*>(fired_host_.get()); }

  // The launches of exit k's decision, setting `handle` when set_condition.
  KernelLaunch decision_launch(int op, bool set_condition, cudaGraphConditionalHandle handle) const;
  // Enqueues one op on `stream` (eager, or under a capture).
  void enqueue_op(int op, cudaStream_t stream, bool set_condition,
                  cudaGraphConditionalHandle handle) const;
  void copy_inputs(cudaStream_t stream) const;
  void copy_exit(std::size_t exit, cudaStream_t stream) const;
  // The copies out that follow op `op`: the outputs it produces, its decision's flag.
  void copies_after(int op, cudaStream_t stream) const;
  void reset_host_flags() const;
  // What the last graph launch ran and fired, from the device flags it copied back.
  std::vector<char> fired_exits() const;
  std::vector<char> executed_from_flags() const;

  // eager.cpp. `warm_up`: every op once, gates ignored, so each library op initialises (lazy
  // kernel loading, plans) outside any capture, whatever an exit decides on uninitialised data.
  void run_eager(bool copies, bool warm_up, std::vector<char>& executed);
  // graph_builder.cpp: builds (once) and instantiates the graph, with or without the copies.
  void ensure_graph(bool copies);

  std::shared_ptr<const detail::CompiledEngine> engine_;
  DeviceMemory arena_;
  DeviceMemory fired_device_;                        // int per exit
  PageLockedMemory input_staging_, output_staging_;  // engine input/output order, packed
  PageLockedMemory fired_host_, confidence_host_;    // int per exit; batch floats per exit
  std::vector<float*> device_values_;                // per engine value, in the arena
  std::vector<float*> host_values_;                  // per engine value: its staging, or null
  std::vector<std::size_t> input_offsets_, output_offsets_;
  std::vector<std::vector<const float*>> op_inputs_;
  // Per op, described once (its buffers never move): the kernel launches eager mode and the
  // captures replay; decisions without a condition to set; nullopt for library work.
  std::vector<std::optional<std::vector<KernelLaunch>>> described_launches_;
  Stream stream_;
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  int greatest_priority_ = 0;

  // The templates of full_exec_ (copies in and out inside) and compute_exec_ (without).
  std::optional<BuiltGraph> full_graph_, compute_graph_;
  GraphExec full_exec_, compute_exec_;
  int launches_ = 0, synchronizations_ = 0;  // of the last run
  std::vector<char> eager_executed_;         // eager: what the last run executed
  Event start_event_, end_event_;
  // Recorded after each device-resident launch: the next launch of this context, on any
  // stream, waits for it (one inference at a time per arena), and so does the destructor.
  Event device_launch_done_;
  bool device_launched_ = false;
  double gpu_ms_ = 0, enqueue_ms_ = 0;
};

}  // namespace cgr::cuda
