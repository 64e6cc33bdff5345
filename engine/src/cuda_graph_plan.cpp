// The CUDA graph's construction plan, from the compiled engine alone (no CUDA here: CI tests it
// without a device, and the CUDA executor builds exactly this). It reads the facts the engine
// derived once: each op's graph level (gate_level), its copies (copied_outputs, decisions) and
// its priority (critical).
//
// dag: an op depends on its IR predecessors in the same graph, and on the input copies when
// it reads a network input; an op's output copies depend on the op. With ExitPolicy::early
// the ops exit k gates live in the body of exit k's IF node (nested: exit k's IF node sits in
// the body of exit k-1's), and that node depends on exit k's decision and on everything in its
// own graph that the body's ops read. stream-graph: the same nodes in topological order, each
// on the one before it in its graph (one stream).
#include <algorithm>

#include "cgr/backend/backend.hpp"
#include "cgr/error.hpp"

namespace cgr {

std::size_t CudaGraphPlan::edge_count() const {
  std::size_t edges = 0;
  for (const Node& node : nodes)
    edges += node.dependencies.size();
  return edges;
}

namespace {

// Per node: the nodes on the longest chain ending at it. Nodes only depend on earlier nodes of
// their graph, and an IF node precedes its body: one pass in order.
std::vector<int> chain_depths(const CudaGraphPlan& plan) {
  std::vector<int> depth(plan.nodes.size(), 0);
  std::vector<int> body_start(static_cast<std::size_t>(plan.graphs), 0);
  for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
    const CudaGraphPlan::Node& node = plan.nodes[i];
    int before = body_start[static_cast<std::size_t>(node.graph)];
    for (const int dep : node.dependencies)
      before = std::max(before, depth[static_cast<std::size_t>(dep)]);
    depth[i] = before + 1;
    if (node.kind == CudaGraphPlan::Kind::conditional && node.exit + 1 < plan.graphs) {
      body_start[static_cast<std::size_t>(node.exit + 1)] = depth[i];
    }
  }
  return depth;
}

}  // namespace

int CudaGraphPlan::path_nodes_to(int node) const {
  if (node < 0 || node >= static_cast<int>(nodes.size())) return 0;
  return chain_depths(*this)[static_cast<std::size_t>(node)];
}

int CudaGraphPlan::critical_path_nodes() const {
  const std::vector<int> depth = chain_depths(*this);
  return depth.empty() ? 0 : *std::max_element(depth.begin(), depth.end());
}

namespace detail {
namespace {

class Planner {
 public:
  Planner(const CompiledEngine& impl, Mode mode, bool copies)
      : impl_(impl), copies_(copies), serialize_(mode == Mode::stream_graph) {
    levels_.resize(impl.ops.size(), -1);
    for (std::size_t op = 0; op < impl.ops.size(); ++op) {
      levels_[op] = impl.ops[op].gate_level;
      max_level_ = std::max(max_level_, levels_[op]);
    }
    op_node_.assign(impl.ops.size(), -1);
    last_in_graph_.assign(static_cast<std::size_t>(max_level_ + 2), -1);
  }

  CudaGraphPlan build() {
    if (copies_ && !impl_.input_values.empty()) {
      copy_in_ = add({CudaGraphPlan::Kind::copy_in, "copy-in", -1, -1, 0, {}, false});
    }
    for (int level = -1; level <= max_level_; ++level) {
      if (level >= 0) add_conditional(level);
      for (int op : impl_.graph.topological_order()) {
        if (levels_[static_cast<std::size_t>(op)] == level) add_op(op, level);
      }
    }
    plan_.graphs = max_level_ + 2;
    return std::move(plan_);
  }

 private:
  int add(CudaGraphPlan::Node node) {
    if (serialize_) {
      node.dependencies.clear();
      const int last = last_in_graph_[static_cast<std::size_t>(node.graph)];
      if (last >= 0) node.dependencies.push_back(last);
    } else {
      std::sort(node.dependencies.begin(), node.dependencies.end());
      node.dependencies.erase(std::unique(node.dependencies.begin(), node.dependencies.end()),
                              node.dependencies.end());
    }
    const int index = static_cast<int>(plan_.nodes.size());
    last_in_graph_[static_cast<std::size_t>(node.graph)] = index;
    plan_.nodes.push_back(std::move(node));
    return index;
  }

  bool reads_input(int op) const {
    for (int v : impl_.ops[static_cast<std::size_t>(op)].inputs) {
      for (int data : impl_.data_of(v)) {
        if (impl_.values[static_cast<std::size_t>(data)].producer < 0) return true;
      }
    }
    return false;
  }

  // The nodes of graph `level` that `op` (in that graph or a body nested in it) waits for.
  void dependencies_in(int level, int op, std::vector<int>& deps) const {
    for (int pred : impl_.graph.predecessors(op)) {
      if (levels_[static_cast<std::size_t>(pred)] == level)
        deps.push_back(op_node_[static_cast<std::size_t>(pred)]);
    }
    if (level == -1 && copy_in_ >= 0 && reads_input(op)) deps.push_back(copy_in_);
  }

  void add_op(int op, int level) {
    const auto& lowered = impl_.ops[static_cast<std::size_t>(op)];
    CudaGraphPlan::Node node{CudaGraphPlan::Kind::op, lowered.name, op, -1, level + 1, {},
                             lowered.critical};
    const int exit = lowered.decides_exit;
    // A decision sets its exit's IF node when that exit gates something.
    if (exit >= 0 && impl_.options.exits == ExitPolicy::early && exit <= max_level_) {
      if (levels_[static_cast<std::size_t>(op)] != exit - 1) {
        fail(
            "cuda graph plan: the decision of exit '{}' sits in graph level {}, not {} (its IF "
            "node's graph)",
            impl_.exits[static_cast<std::size_t>(exit)].name, levels_[static_cast<std::size_t>(op)],
            exit - 1);
      }
      node.exit = exit;
    }
    dependencies_in(level, op, node.dependencies);
    for (int pred : impl_.graph.predecessors(op)) {
      if (levels_[static_cast<std::size_t>(pred)] > level) {
        fail("cuda graph plan: op '{}' reads '{}', which an exit skips while it does not",
             lowered.name, impl_.ops[static_cast<std::size_t>(pred)].name);
      }
    }
    op_node_[static_cast<std::size_t>(op)] = add(std::move(node));
    if (copies_ && has_copies(op)) {
      add({CudaGraphPlan::Kind::copy_out,
           "copy-out:" + lowered.name,
           op,
           -1,
           level + 1,
           {op_node_[static_cast<std::size_t>(op)]},
           false});
    }
  }

  bool has_copies(int op) const {
    const CompiledOp& compiled = impl_.ops[static_cast<std::size_t>(op)];
    return compiled.decides_exit >= 0 || !compiled.copied_outputs.empty();  // flag, confidences
  }

  // Exit k's IF node, in the graph of level k - 1.
  void add_conditional(int k) {
    const int parent = k - 1;
    const auto& exit = impl_.exits[static_cast<std::size_t>(k)];
    CudaGraphPlan::Node node{
        CudaGraphPlan::Kind::conditional, "if:" + exit.name, -1, k, parent + 1, {}, false};
    node.dependencies.push_back(op_node_[static_cast<std::size_t>(exit.decision_op)]);
    for (int op = 0; op < impl_.graph.op_count(); ++op) {
      if (levels_[static_cast<std::size_t>(op)] >= k)
        dependencies_in(parent, op, node.dependencies);
    }
    add(std::move(node));
  }

  const CompiledEngine& impl_;
  const bool copies_, serialize_;
  std::vector<int> levels_;
  int max_level_ = -1;
  std::vector<int> op_node_;        // per op: its planned node
  std::vector<int> last_in_graph_;  // serialize: the last node of each graph
  int copy_in_ = -1;
  CudaGraphPlan plan_;
};

}  // namespace

CudaGraphPlan plan_cuda_graph(const CompiledEngine& impl, Mode mode, bool copies) {
  if (mode == Mode::eager)
    fail("cuda graph plan: mode eager launches ops one by one and builds no graph");
  return Planner(impl, mode, copies).build();
}

}  // namespace detail
}  // namespace cgr
