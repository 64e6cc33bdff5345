// dag and stream-graph: the construction plan (cgr::CudaGraphPlan, built from the compiled
// engine without a device) turned into a real graph, node by node, each after exactly the tail
// nodes of its planned dependencies (cgr::capture::ExplicitGraph). dag adds cgr's kernels as
// kernel nodes and captures library work; stream-graph captures everything, as a capture of
// the whole network on one stream would, along the plan's one chain per graph. Kernel nodes of
// critical ops get the highest priority (instantiated with
// cudaGraphInstantiateFlagUseNodePriority).
#include <algorithm>
#include <string>
#include <vector>

#include "cgr/capture/cuda_names.hpp"
#include "cgr/error.hpp"
#include "context.hpp"

namespace cgr::cuda {

class GraphBuilder {
 public:
  GraphBuilder(CudaContext& context, bool copies)
      : context_(context),
        copies_(copies),
        serialize_(context.engine().options.mode == Mode::stream_graph) {}

  CudaContext::BuiltGraph build() {
    const detail::CompiledEngine& engine = context_.engine();
    CudaContext::BuiltGraph built{capture::ExplicitGraph(),
                                  detail::plan_cuda_graph(engine, engine.options.mode, copies_),
                                  {}};
    capture::ExplicitGraph& graph = built.graph;
    std::vector<cudaGraphConditionalHandle> conditions(engine.exits.size(), 0);
    built.segments.reserve(built.plan.nodes.size());
    cudaStream_t stream = context_.stream_.get();
    for (const CudaGraphPlan::Node& node : built.plan.nodes) {
      std::vector<const capture::Segment*> predecessors;
      for (int d : node.dependencies)
        predecessors.push_back(&built.segments[static_cast<std::size_t>(d)]);
      const capture::Dependencies deps = capture::Dependencies::after(predecessors);
      capture::Segment segment;
      switch (node.kind) {
        case CudaGraphPlan::Kind::copy_in:
          segment = graph.capture(node.graph, deps, stream, node.name,
                                  [&](cudaStream_t s) { context_.copy_inputs(s); });
          break;
        case CudaGraphPlan::Kind::copy_out:
          segment = graph.capture(node.graph, deps, stream, node.name,
                                  [&](cudaStream_t s) { context_.copies_after(node.op, s); });
          break;
        case CudaGraphPlan::Kind::conditional:
          // Exit k's IF node opens graph k + 1: the nested bodies are built in exit order.
          if (graph.graph_count() != node.exit + 1) {
            fail("cuda graph: IF node of exit {} built out of order", node.exit);
          }
          segment = graph.add_if(node.graph, deps, conditions[static_cast<std::size_t>(node.exit)]);
          break;
        case CudaGraphPlan::Kind::op:
          segment = add_op(graph, node, deps, conditions);
          break;
      }
      built.segments.push_back(std::move(segment));
    }
    return built;
  }

 private:
  capture::Segment add_op(capture::ExplicitGraph& graph, const CudaGraphPlan::Node& node,
                          const capture::Dependencies& deps,
                          std::vector<cudaGraphConditionalHandle>& conditions) {
    const bool sets_condition = node.exit >= 0;
    cudaGraphConditionalHandle condition = 0;
    if (sets_condition) {
      // The condition belongs to the graph that holds the IF node (the decision's graph); 0 at
      // every launch: the body runs only when the decision sets 1.
      condition = graph.create_condition(node.graph);
      conditions[static_cast<std::size_t>(node.exit)] = condition;
    }
    const auto& described = context_.described_launches_[static_cast<std::size_t>(node.op)];
    capture::Segment segment;
    if (described && !serialize_) {
      const std::vector<KernelLaunch> launches =
          sets_condition
              ? std::vector<KernelLaunch>{context_.decision_launch(node.op, true, condition)}
              : *described;
      segment = add_kernels(graph, node, deps, launches);
    } else {
      segment = graph.capture(
          node.graph, deps, context_.stream_.get(), node.name,
          [&](cudaStream_t s) { context_.enqueue_op(node.op, s, sets_condition, condition); });
    }
    if (node.critical) prioritize(segment);
    return segment;
  }

  // cgr's own kernels: one kernel node per launch (cudaGraphAddNode with the launch's
  // function, grid, block and arguments), each after exactly `deps`: siblings of one op.
  capture::Segment add_kernels(capture::ExplicitGraph& graph, const CudaGraphPlan::Node& node,
                               const capture::Dependencies& deps,
                               const std::vector<KernelLaunch>& launches) {
    capture::Segment segment;
    for (const KernelLaunch& launch : launches) {
      check_description(launch, node.name);
      if (launch.empty()) continue;
      auto arguments = launch.argument_pointers();
      cudaGraphNodeParams params{};  // unused bytes must be zero
      params.type = cudaGraphNodeTypeKernel;
      params.kernel.func = const_cast<void*>(launch.function);
      params.kernel.gridDim = launch.grid;
      params.kernel.blockDim = launch.block;
      params.kernel.sharedMemBytes = launch.shared_bytes;
      params.kernel.kernelParams = arguments.data();
      params.kernel.extra = nullptr;
      const capture::Segment added = graph.add_node(node.graph, deps, params);
      segment.nodes.insert(segment.nodes.end(), added.nodes.begin(), added.nodes.end());
      segment.tails.insert(segment.tails.end(), added.tails.begin(), added.tails.end());
      segment.tail_edges.insert(segment.tail_edges.end(), added.tail_edges.begin(),
                                added.tail_edges.end());
    }
    if (segment.nodes.empty()) {  // nothing to launch: what follows waits for `deps`
      segment.tails = deps.nodes;
      segment.tail_edges = deps.edges;
    }
    return segment;
  }

  void prioritize(const capture::Segment& segment) const {
    for (cudaGraphNode_t node : segment.nodes) {
      cudaGraphNodeType type{};
      CGR_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type != cudaGraphNodeTypeKernel) continue;
      cudaLaunchAttributeValue value{};
      value.priority = context_.greatest_priority_;
      CGR_CUDA_CHECK(cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributePriority, &value));
    }
  }

  CudaContext& context_;
  const bool copies_, serialize_;
};

namespace {

// "node 3 (kernel) of planned node 17 'layer2.0.conv1+relu' (op, in the body of exit 0's IF
// node)": which op's work a failing node is, from the segments the build recorded.
std::string describe_graph_node(const CudaGraphPlan& plan,
                                const std::vector<capture::Segment>& segments,
                                cudaGraphNode_t node) {
  if (node == nullptr) return "no failing node named";
  cudaGraphNodeType type{};
  const std::string_view type_name =
      cudaGraphNodeGetType(node, &type) == cudaSuccess ? capture::node_type_name(type) : "?";
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const auto& nodes = segments[i].nodes;
    const auto at = std::find(nodes.begin(), nodes.end(), node);
    if (at == nodes.end()) continue;
    const CudaGraphPlan::Node& planned = plan.nodes[i];
    static constexpr const char* kKinds[] = {"copy in", "op", "copy out", "IF node"};
    return fmt::format("failing node: {} of {} ({}) of planned node {} '{}' ({}, {})",
                       at - nodes.begin() + 1, nodes.size(), type_name, i, planned.name,
                       kKinds[static_cast<int>(planned.kind)],
                       planned.graph == 0 ? std::string("top-level graph")
                                          : fmt::format("in the body of exit {}'s IF node",
                                                        planned.graph - 1));
  }
  return fmt::format("failing node: a {} node of no planned node", type_name);
}

}  // namespace

void CudaContext::ensure_graph(bool copies) {
  GraphExec& exec = copies ? full_exec_ : compute_exec_;
  if (exec) return;
  BuiltGraph built = GraphBuilder(*this, copies).build();
  cudaGraphExec_t instance = nullptr;
  cudaGraphInstantiateParams params{};
  params.flags = cudaGraphInstantiateFlagUseNodePriority;
  const cudaError_t status = cudaGraphInstantiateWithParams(&instance, built.graph.root(), &params);
  if (status != cudaSuccess || params.result_out != cudaGraphInstantiateSuccess) {
    if (instance != nullptr) CGR_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(instance));
    fail("cuda graph ({}, {}): cudaGraphInstantiateWithParams failed with {} ({}), result {}; "
         "{}. Export the graph (cgr-bench --export-dot) and report it with the model",
         to_string(engine().options.mode), copies ? "with copies" : "device-resident",
         cudaGetErrorName(status), cudaGetErrorString(status),
         capture::instantiate_result_name(params.result_out),
         describe_graph_node(built.plan, built.segments, params.errNode_out));
  }
  exec = GraphExec(instance);
  (copies ? full_graph_ : compute_graph_) = std::move(built);
}

}  // namespace cgr::cuda
