// The real CUDA graph of a context checked against its plan and the IR (what
// ExecutionContext::cuda_graph_report returns), its nodes with their owning planned nodes, and
// cudaGraphDebugDotPrint's view of it.
#include <functional>
#include <map>
#include <set>

#include "cgr/error.hpp"
#include "context.hpp"

namespace cgr::cuda {

void CudaContext::dump_graph_dot(const std::string& path) {
  if (engine().options.mode == Mode::eager) fail("mode eager has no CUDA graph to dump");
  ensure_graph(true);
  CGR_CUDA_CHECK(cudaGraphDebugDotPrint(full_graph_->graph.root(), path.c_str(),
                                        cudaGraphDebugDotFlagsVerbose));
}

namespace {

std::vector<cudaGraphNode_t> nodes_of(cudaGraph_t graph) {
  std::size_t count = 0;
  CGR_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CGR_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  nodes.resize(count);
  return nodes;
}

std::vector<std::pair<cudaGraphNode_t, cudaGraphNode_t>> edges_of(cudaGraph_t graph) {
  std::size_t count = 0;
  CGR_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count), to(count);
  std::vector<cudaGraphEdgeData> data(count);  // without it, non-default edges make the query fail
  CGR_CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &count));
  std::vector<std::pair<cudaGraphNode_t, cudaGraphNode_t>> edges;
  for (std::size_t e = 0; e < count; ++e) edges.emplace_back(from[e], to[e]);
  return edges;
}

}  // namespace

CudaGraphReport CudaContext::graph_report() {
  CudaGraphReport report;
  report.last_run_launches = launches_;
  report.last_run_synchronizations = synchronizations_;
  if (engine().options.mode == Mode::eager) return report;
  ensure_graph(true);
  const BuiltGraph& built = *full_graph_;
  const CudaGraphPlan& plan = built.plan;
  report.planned_nodes = plan.nodes.size();
  report.planned_edges = plan.edge_count();

  std::map<cudaGraphNode_t, int> owner;  // real node -> planned node
  for (std::size_t i = 0; i < built.segments.size(); ++i) {
    for (cudaGraphNode_t node : built.segments[i].nodes) owner[node] = static_cast<int>(i);
    report.predicted_nodes += built.segments[i].nodes.size();
  }
  std::set<std::pair<int, int>> found_segment_edges;
  std::set<cudaGraphNode_t> entered_from_own_segment;
  for (int g = 0; g < built.graph.graph_count(); ++g) {
    cudaGraph_t graph = built.graph.graph(g);
    for (cudaGraphNode_t node : nodes_of(graph)) {
      ++report.nodes;
      cudaGraphNodeType type{};
      CGR_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type == cudaGraphNodeTypeConditional) ++report.conditional_nodes;
      // A conditional body may hold kernel, empty, child graph, memset, memcpy and
      // conditional nodes only (what a library captured there must keep to).
      const bool allowed_in_body = type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeEmpty ||
                                   type == cudaGraphNodeTypeGraph || type == cudaGraphNodeTypeMemset ||
                                   type == cudaGraphNodeTypeMemcpy || type == cudaGraphNodeTypeConditional;
      if (g > 0 && !allowed_in_body) {
        const auto it = owner.find(node);
        report.mismatches.push_back(fmt::format("node of type {} ({}) in the body of {}: not allowed in a conditional body",
                                                static_cast<int>(type), it == owner.end() ? std::string("unowned") : plan.nodes[static_cast<std::size_t>(it->second)].name,
                                                "if:" + engine().exits[static_cast<std::size_t>(g - 1)].name));
      }
      if (!owner.contains(node)) report.mismatches.push_back(fmt::format("a node of type {} that no planned node owns", static_cast<int>(type)));
    }
    for (const auto& [from, to] : edges_of(graph)) {
      ++report.edges;
      const auto a = owner.find(from), b = owner.find(to);
      if (a == owner.end() || b == owner.end()) continue;
      if (a->second == b->second) {
        ++report.predicted_edges;  // inside a segment: what its capture recorded
        entered_from_own_segment.insert(to);
      } else {
        found_segment_edges.insert({a->second, b->second});
      }
    }
  }
  // A planned node whose work was empty (no real node) passes its dependencies through: its
  // dependents wait for those instead.
  std::function<void(int, std::set<int>&)> real_dependencies = [&](int a, std::set<int>& out) {
    if (!built.segments[static_cast<std::size_t>(a)].nodes.empty()) {
      out.insert(a);
      return;
    }
    for (int d : plan.nodes[static_cast<std::size_t>(a)].dependencies) real_dependencies(d, out);
  };
  std::set<std::pair<int, int>> expected_segment_edges;
  for (std::size_t b = 0; b < plan.nodes.size(); ++b) {
    if (built.segments[b].nodes.empty()) continue;
    std::set<cudaGraphNode_t> tails;
    std::set<int> deps;
    for (int a : plan.nodes[b].dependencies) real_dependencies(a, deps);
    for (int a : deps) {
      expected_segment_edges.insert({a, static_cast<int>(b)});
      tails.insert(built.segments[static_cast<std::size_t>(a)].tails.begin(), built.segments[static_cast<std::size_t>(a)].tails.end());
    }
    std::size_t roots = 0;
    for (cudaGraphNode_t node : built.segments[b].nodes) roots += entered_from_own_segment.contains(node) ? 0 : 1;
    report.predicted_edges += tails.size() * roots;
  }
  report.segment_edges_found = found_segment_edges.size();
  const auto name = [&](int node) { return plan.nodes[static_cast<std::size_t>(node)].name; };
  for (const auto& [a, b] : expected_segment_edges) {
    if (!found_segment_edges.contains({a, b})) report.mismatches.push_back(fmt::format("{} -> {} planned, not in the graph", name(a), name(b)));
  }
  for (const auto& [a, b] : found_segment_edges) {
    if (!expected_segment_edges.contains({a, b})) report.mismatches.push_back(fmt::format("{} -> {} in the graph, not planned", name(a), name(b)));
  }
  if (report.nodes != report.predicted_nodes) report.mismatches.push_back(fmt::format("{} nodes, {} predicted", report.nodes, report.predicted_nodes));
  if (report.edges != report.predicted_edges) report.mismatches.push_back(fmt::format("{} edges, {} predicted", report.edges, report.predicted_edges));

  // dag: the op-to-op edges are the IR's reduced edges between ops of the same graph.
  if (engine().options.mode == Mode::dag) {
    const auto level = [&](int op) { return engine().ops[static_cast<std::size_t>(op)].gate_level; };
    std::set<std::pair<int, int>> expected, found;
    for (const Edge& edge : engine().graph.edges()) {
      if (level(edge.from) == level(edge.to)) expected.insert({edge.from, edge.to});
    }
    for (const auto& [a, b] : found_segment_edges) {
      const auto& na = plan.nodes[static_cast<std::size_t>(a)];
      const auto& nb = plan.nodes[static_cast<std::size_t>(b)];
      if (na.kind == CudaGraphPlan::Kind::op && nb.kind == CudaGraphPlan::Kind::op) found.insert({na.op, nb.op});
    }
    report.op_edges_expected = expected.size();
    report.op_edges_found = found.size();
    const auto& ops = engine().ops;
    for (const auto& [a, b] : expected) {
      if (!found.contains({a, b})) report.mismatches.push_back(fmt::format("IR edge {} -> {} missing", ops[static_cast<std::size_t>(a)].name, ops[static_cast<std::size_t>(b)].name));
    }
    for (const auto& [a, b] : found) {
      if (!expected.contains({a, b})) report.mismatches.push_back(fmt::format("{} -> {} is not an IR edge", ops[static_cast<std::size_t>(a)].name, ops[static_cast<std::size_t>(b)].name));
    }
  }
  return report;
}

CudaGraphNodes CudaContext::graph_nodes() {
  if (engine().options.mode == Mode::eager) fail("mode eager has no CUDA graph");
  ensure_graph(true);
  CudaGraphNodes result;
  result.graph = full_graph_->graph.root();
  for (std::size_t i = 0; i < full_graph_->segments.size(); ++i) {
    for (cudaGraphNode_t node : full_graph_->segments[i].nodes) {
      result.owners.emplace_back(node, full_graph_->plan.nodes[i].name);
    }
  }
  return result;
}

}  // namespace cgr::cuda
