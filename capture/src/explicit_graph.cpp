// The explicit graph's steps. A capture learns which nodes it added by comparing the graph's
// nodes with those already known (the capture API reports only its tails), and learns its
// tails from cudaStreamGetCaptureInfo before the capture ends (asked with the edge data: without
// it the query fails as lossy when edges are not default; the data is not passed on, see
// Dependencies::after).
#include "cgr/capture/explicit_graph.hpp"

#include <set>
#include <string>
#include <utility>

#include "cgr/capture/cuda_check.hpp"
#include "cgr/capture/cuda_names.hpp"
#include "cgr/error.hpp"

namespace cgr::capture {

Dependencies Dependencies::after(std::span<const Segment* const> segments) {
  // Each tail once, and every edge a default (full completion) edge: a capture's tails may
  // carry the data of programmatic edges (a library kernel that lets its successor start
  // early), which is only valid between kernels that wait for it in device code
  // (cudaGridDependencySynchronize). cgr's kernels, copies and IF nodes do not: they must start
  // after their inputs are complete.
  std::set<cudaGraphNode_t> unique;
  for (const Segment* segment : segments) {
    unique.insert(segment->tails.begin(), segment->tails.end());
  }
  Dependencies deps;
  deps.nodes.assign(unique.begin(), unique.end());
  deps.edges.assign(deps.nodes.size(), cudaGraphEdgeData{});
  return deps;
}

ExplicitGraph::ExplicitGraph() {
  cudaGraph_t root = nullptr;
  CGR_CUDA_CHECK(cudaGraphCreate(&root, 0));
  graphs_.push_back(root);
  known_.emplace_back();
}

ExplicitGraph::~ExplicitGraph() {
  release();
}

ExplicitGraph::ExplicitGraph(ExplicitGraph&& other) noexcept
    : graphs_(std::exchange(other.graphs_, {})), known_(std::exchange(other.known_, {})) {}

ExplicitGraph& ExplicitGraph::operator=(ExplicitGraph&& other) noexcept {
  if (this != &other) {
    release();
    graphs_ = std::exchange(other.graphs_, {});
    known_ = std::exchange(other.known_, {});
  }
  return *this;
}

void ExplicitGraph::abandon() noexcept {
  graphs_.clear();
  known_.clear();
}

void ExplicitGraph::release() noexcept {
  // The bodies of conditional nodes belong to the root and go with it.
  if (!graphs_.empty()) CGR_CUDA_CHECK_NOTHROW(cudaGraphDestroy(graphs_.front()));
  graphs_.clear();
  known_.clear();
}

Segment ExplicitGraph::add_node(int index, const Dependencies& deps,
                                const cudaGraphNodeParams& params) {
  cudaGraphNodeParams copy = params;  // cudaGraphAddNode may write outputs into it
  cudaGraphNode_t node = nullptr;
  CGR_CUDA_CHECK(cudaGraphAddNode(&node, graph(index), deps.nodes.data(), deps.edges.data(),
                                  deps.nodes.size(), &copy));
  known_[static_cast<std::size_t>(index)].insert(node);
  return {{node}, {node}, {cudaGraphEdgeData{}}};
}

cudaGraphConditionalHandle ExplicitGraph::create_condition(int index) {
  cudaGraphConditionalHandle handle = 0;
  CGR_CUDA_CHECK(
      cudaGraphConditionalHandleCreate(&handle, graph(index), 0, cudaGraphCondAssignDefault));
  return handle;
}

Segment ExplicitGraph::add_if(int index, const Dependencies& deps,
                              cudaGraphConditionalHandle condition) {
  cudaGraphNodeParams params{};  // unused bytes must be zero
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = condition;
  params.conditional.type = cudaGraphCondTypeIf;
  params.conditional.size = 1;
  cudaGraphNode_t node = nullptr;
  CGR_CUDA_CHECK(cudaGraphAddNode(&node, graph(index), deps.nodes.data(), deps.edges.data(),
                                  deps.nodes.size(), &params));
  known_[static_cast<std::size_t>(index)].insert(node);
  graphs_.push_back(params.conditional.phGraph_out[0]);
  known_.emplace_back();
  return {{node}, {node}, {cudaGraphEdgeData{}}};
}

Segment ExplicitGraph::capture(int index, const Dependencies& deps, cudaStream_t stream,
                               std::string_view what,
                               const std::function<void(cudaStream_t)>& work) {
  cudaGraph_t g = graph(index);
  CGR_CUDA_CHECK(cudaStreamBeginCaptureToGraph(stream, g, deps.nodes.data(), deps.edges.data(),
                                               deps.nodes.size(),
                                               cudaStreamCaptureModeThreadLocal));
  Segment segment;
  try {
    try {
      work(stream);
    } catch (const std::exception& e) {
      // What failed inside the work (a library call, the user's check) names the op here.
      fail("cuda graph: the capture of '{}' failed: {}", what, e.what());
    }
    cudaStreamCaptureStatus status{};
    const cudaGraphNode_t* tail = nullptr;
    const cudaGraphEdgeData* tail_edges = nullptr;
    std::size_t count = 0;
    const cudaError_t info =
        cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &tail, &tail_edges, &count);
    if (info != cudaSuccess) {
      fail("cuda graph: the capture of '{}' failed: cudaStreamGetCaptureInfo returned {} ({}); "
           "the work must not synchronise, allocate or use other streams without events",
           what, cudaGetErrorName(info), cudaGetErrorString(info));
    }
    if (status != cudaStreamCaptureStatusActive) {
      fail("cuda graph: the capture of '{}' ended in capture status {}", what,
           capture_status_name(status));
    }
    segment.tails.assign(tail, tail + count);
    segment.tail_edges.resize(count);  // zero: default edges
    if (tail_edges != nullptr) segment.tail_edges.assign(tail_edges, tail_edges + count);
  } catch (...) {
    cudaGraph_t ignored = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &ignored);
    // An invalidated capture into an existing graph takes that graph with it (CUDA 13.0:
    // destroying it afterwards fails with cudaErrorInvalidValue), and a body graph lost that
    // way leaves its root unsafe to destroy: leave them all to the runtime.
    if (ended == cudaErrorStreamCaptureInvalidated) abandon();
    (void)cudaGetLastError();  // the capture's error is reported by the exception
    throw;
  }
  cudaGraph_t captured = nullptr;
  CGR_CUDA_CHECK(cudaStreamEndCapture(stream, &captured));
  std::size_t total = 0;
  CGR_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &total));
  std::vector<cudaGraphNode_t> nodes(total);
  CGR_CUDA_CHECK(cudaGraphGetNodes(g, nodes.data(), &total));
  auto& seen = known_[static_cast<std::size_t>(index)];
  for (cudaGraphNode_t node : nodes) {
    if (seen.insert(node).second) segment.nodes.push_back(node);
  }
  // Work that captured nothing (e.g. an op with no elements) leaves its dependencies as what
  // comes after it waits for.
  if (segment.nodes.empty()) {
    segment.tails = deps.nodes;
    segment.tail_edges = deps.edges;
    return segment;
  }
  // A library that records an event at the start of its work and waits for it at the end
  // (cuDNN does, for some grouped convolutions) leaves the capture's starting dependencies
  // among its tails. Every captured node already follows them, so an edge from them to what
  // comes next is redundant: drop them, keeping the segment's own nodes as its tails.
  const std::set<cudaGraphNode_t> own(segment.nodes.begin(), segment.nodes.end());
  std::vector<cudaGraphNode_t> tails;
  std::vector<cudaGraphEdgeData> tail_edges;
  for (std::size_t i = 0; i < segment.tails.size(); ++i) {
    if (!own.contains(segment.tails[i])) continue;
    tails.push_back(segment.tails[i]);
    tail_edges.push_back(segment.tail_edges[i]);
  }
  if (!tails.empty()) {
    segment.tails = std::move(tails);
    segment.tail_edges = std::move(tail_edges);
  }
  return segment;
}

}  // namespace cgr::capture
