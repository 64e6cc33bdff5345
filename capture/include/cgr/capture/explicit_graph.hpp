// An explicitly built CUDA graph that grows one step at a time, each step after exactly the
// nodes it depends on. Nodes with known parameters (cgr's kernels, conditional IF nodes) are
// added with cudaGraphAddNode; anything launched on a stream (cuDNN, cuBLAS, copies, a
// CustomOp's callable) is captured into the graph with cudaStreamBeginCaptureToGraph against
// those nodes, and the tail nodes the capture ends on are what later steps depend on. An IF
// node opens a body, a graph of its own that grows the same way. CUDA builds only.
//
// This is how the CUDA backend turns its construction plan (cgr::CudaGraphPlan) into a real
// cudaGraph_t whose edges are the IR's data dependencies and nothing else.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <set>
#include <span>
#include <string_view>
#include <vector>

namespace cgr::capture {

// The real nodes one step added, and what a node added after it waits for: the added nodes
// the step ended on (with the data of the edges the capture would give a successor, kept for
// inspection), or the step's own dependencies when it added nothing.
struct Segment {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaGraphNode_t> tails;
  std::vector<cudaGraphEdgeData> tail_edges;
};

// What a step about to be added depends on: nodes and the data of the edges from them.
struct Dependencies {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaGraphEdgeData> edges;
  // The tails of the given segments, each node once, each edge a default edge (the successor
  // starts when the tail has completed), whatever edge data the capture reported.
  static Dependencies after(std::span<const Segment* const> segments);
};

class ExplicitGraph {
 public:
  ExplicitGraph();  // an empty root graph (graph 0)
  ~ExplicitGraph();
  ExplicitGraph(ExplicitGraph&& other) noexcept;
  ExplicitGraph& operator=(ExplicitGraph&& other) noexcept;
  ExplicitGraph(const ExplicitGraph&) = delete;
  ExplicitGraph& operator=(const ExplicitGraph&) = delete;

  // Graph 0 is the root (owned; the bodies belong to it); graph k > 0 is the body of the k-th
  // IF node added.
  cudaGraph_t root() const { return graphs_.empty() ? nullptr : graphs_.front(); }
  cudaGraph_t graph(int index) const { return graphs_[static_cast<std::size_t>(index)]; }
  int graph_count() const { return static_cast<int>(graphs_.size()); }

  // One node of `params` in graph `index` after `deps` (a kernel node for cgr's kernels).
  Segment add_node(int index, const Dependencies& deps, const cudaGraphNodeParams& params);
  // A condition for IF nodes of graph `index`, 0 at every launch of the graph unless a kernel
  // of it sets 1 (cudaGraphSetConditional).
  cudaGraphConditionalHandle create_condition(int index);
  // An IF node on `condition` in graph `index` after `deps`; its body is graph graph_count()
  // as it was before the call.
  Segment add_if(int index, const Dependencies& deps, cudaGraphConditionalHandle condition);
  // Captures work(stream) into graph `index` after `deps`. `stream` is a non-default stream
  // nothing else uses meanwhile; the work must not synchronise or allocate. `what` names the
  // work in errors (a capture the work invalidated).
  Segment capture(int index, const Dependencies& deps, cudaStream_t stream, std::string_view what,
                  const std::function<void(cudaStream_t)>& work);

 private:
  void release() noexcept;
  // Forgets the graphs without destroying them (after the runtime took them back).
  void abandon() noexcept;
  std::vector<cudaGraph_t> graphs_;
  std::vector<std::set<cudaGraphNode_t>> known_;  // per graph: nodes already in a segment
};

}  // namespace cgr::capture
