// Op costs and the cost-weighted critical path. An op's cost is its layers' work
// (Layer::cost: arithmetic and bytes moved); its estimated time is that work on a nominal
// device, a roofline plus a fixed price per op (a kernel launch, a graph node, a task handed
// to a thread):
//   t = max(flops / 10 TFLOP/s, bytes / 1 TB/s) + 2 us.
// The figures only weigh ops against each other, on any backend: the critical ops, those on
// a longest chain by estimated time, are what the CUDA backend gives the highest priority, and
// the chain's length is what EngineInfo::critical_path_us reports. The CPU DAG scheduler runs
// ready ops longest remaining chain first (CompiledOp::remaining_us).
#include <algorithm>

#include "build_steps.hpp"

namespace cgr::detail {
namespace {

constexpr double kFlopsPerUs = 1e7;  // 10 TFLOP/s
constexpr double kBytesPerUs = 1e6;  // 1 TB/s
constexpr double kOpOverheadUs = 2.0;

double estimated_us(const OpCost& cost) {
  return std::max(cost.flops / kFlopsPerUs, cost.bytes / kBytesPerUs) + kOpOverheadUs;
}

}  // namespace

void estimate_costs(const Network& net, CompiledEngine& engine) {
  for (auto& op : engine.ops) {
    op.cost = {};
    for (int layer : op.layers) {
      // A view inside a fused op moves nothing (aliasing.cpp); alone it is a copy.
      if (op.layers.size() == 1 || !net.layer(layer).output_is_input_view())
        op.cost += net.layer(layer).cost();
    }
    if (op.decides_exit >= 0) {
      const ExitPlan& exit = engine.exits[static_cast<std::size_t>(op.decides_exit)];
      const double logits = static_cast<double>(exit.batch * exit.classes);
      op.cost = {3 * logits, sizeof(float) * (logits + static_cast<double>(exit.batch))};
    }
    op.estimated_us = estimated_us(op.cost);
  }
  // Longest chains ending at (top) and starting from (bottom) each op, both including it.
  const Graph& graph = engine.graph;
  const auto n = static_cast<std::size_t>(graph.op_count());
  std::vector<double> top(n, 0.0), bottom(n, 0.0);
  const auto& order = graph.topological_order();
  for (int op : order) {
    double before = 0;
    for (int pred : graph.predecessors(op))
      before = std::max(before, top[static_cast<std::size_t>(pred)]);
    top[static_cast<std::size_t>(op)] =
        before + engine.ops[static_cast<std::size_t>(op)].estimated_us;
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    double after = 0;
    for (int succ : graph.successors(*it))
      after = std::max(after, bottom[static_cast<std::size_t>(succ)]);
    bottom[static_cast<std::size_t>(*it)] =
        after + engine.ops[static_cast<std::size_t>(*it)].estimated_us;
  }
  double longest = 0;
  for (double t : top)
    longest = std::max(longest, t);
  engine.critical_path_us = longest;
  for (std::size_t op = 0; op < n; ++op) {
    const double through = top[op] + bottom[op] - engine.ops[op].estimated_us;
    // Sums of the same terms in another order may differ in the last bits.
    engine.ops[op].critical = through >= longest * (1 - 1e-12);
    engine.ops[op].remaining_us = bottom[op];
  }
}

}  // namespace cgr::detail
