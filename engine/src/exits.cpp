// Exit heads in the engine. Each exit gets a decision op (confidence = largest softmax
// probability per sample; each backend implements it as its own op). With ExitPolicy::early,
// exit k gates every op that is not needed by an earlier-or-equal decision and not needed for
// its speculation value: those ops wait for decision k (a control edge, expressed as a
// pseudo-resource the decision writes and the gated ops read) and are skipped when it fires.
// The gated sets are closed under successors, so a skipped op's consumers are skipped too and
// nothing reads unwritten data; they are nested (exit k's set holds exit k+1's), so the
// innermost exit that gates an op (its gate_level) is the body of the CUDA graph it sits in.
#include <algorithm>
#include <queue>

#include "build_steps.hpp"
#include "cgr/error.hpp"

namespace cgr::detail {
namespace {

// The engine op that computes `value`, or -1 (a graph input).
int producing_op(const CompiledEngine& engine, const Network& net, Value value) {
  const int layer = net.producer(value);
  if (layer < 0) return -1;
  for (std::size_t op = 0; op < engine.ops.size(); ++op) {
    const auto& layers = engine.ops[op].layers;
    if (std::find(layers.begin(), layers.end(), layer) != layers.end()) return static_cast<int>(op);
  }
  return -1;
}

// The innermost exit in a mask of nested gated sets: the highest bit; -1 for none.
int innermost_exit(std::uint32_t gated_by) {
  int level = -1;
  for (int k = 0; k < 32; ++k) {
    if (gated_by & (1u << k)) level = k;
  }
  return level;
}

}  // namespace

void plan_exits(const Network& net, CompiledEngine& engine, std::vector<LayerOp>& layer_ops) {
  if (engine.options.exits == ExitPolicy::off || net.exits().empty()) return;

  for (const auto& e : net.exits()) {
    const Shape& shape = net.desc(e.logits).shape;
    ExitPlan plan;
    plan.name = e.name;
    plan.logits_value = e.logits.id;
    plan.batch = shape[0];
    plan.classes = shape[1];
    EngineValue confidence;
    confidence.desc = TensorDesc{e.name + ".confidence", Shape{shape[0]}, DType::f32};
    confidence.bytes = confidence.desc.bytes();
    confidence.persistent = true;
    plan.confidence_value = static_cast<int>(engine.values.size());
    plan.decision_op = static_cast<int>(engine.ops.size());
    confidence.producer = plan.decision_op;
    engine.values.push_back(std::move(confidence));
    CompiledOp op;
    op.name = e.name + ".decide";
    op.kind = "ExitDecision";
    op.inputs = {e.logits.id};
    op.output = plan.confidence_value;
    op.decides_exit = static_cast<int>(engine.exits.size());
    engine.ops.push_back(std::move(op));
    layer_ops.emplace_back();  // the backends' own op
    engine.exits.push_back(std::move(plan));
  }
  if (engine.options.exits != ExitPolicy::early) return;

  // Which ops each exit gates, from the data dependencies alone.
  std::vector<OpAccess> accesses;
  for (int op = 0; op < static_cast<int>(engine.ops.size()); ++op)
    accesses.push_back(engine.data_access(op));
  const Graph data(std::move(accesses));
  const int count = data.op_count();
  std::vector<bool> keep(static_cast<std::size_t>(count), false);  // grows with k: P_k
  auto keep_with_ancestors = [&](int op) {
    if (op < 0) return;
    for (int other = 0; other < count; ++other) {
      if (other == op || data.reaches(other, op)) keep[static_cast<std::size_t>(other)] = true;
    }
  };
  for (std::size_t k = 0; k < engine.exits.size(); ++k) {
    keep_with_ancestors(engine.exits[k].decision_op);
    const Value speculate = net.exits()[k].speculate_until;
    if (speculate.valid()) {
      const int op = producing_op(engine, net, speculate);
      if (op < 0 && net.producer(speculate) >= 0) {
        fail("exit '{}': speculate_until value '{}' is not computed for any output",
             engine.exits[k].name, net.desc(speculate).name);
      }
      keep_with_ancestors(op);
    }
    for (int op = 0; op < count; ++op) {
      if (!keep[static_cast<std::size_t>(op)])
        engine.ops[static_cast<std::size_t>(op)].gated_by |= 1u << k;
    }
  }

  // Reorder so each decision precedes the ops it gates (Kahn's algorithm over data and gate
  // edges, smallest original index first: the order stays close to program order).
  std::vector<std::vector<int>> next(static_cast<std::size_t>(count));
  std::vector<int> indegree(static_cast<std::size_t>(count), 0);
  auto link = [&](int from, int to) {
    next[static_cast<std::size_t>(from)].push_back(to);
    ++indegree[static_cast<std::size_t>(to)];
  };
  for (const Edge& edge : data.edges())
    link(edge.from, edge.to);
  for (std::size_t k = 0; k < engine.exits.size(); ++k) {
    for (int op = 0; op < count; ++op) {
      if (engine.ops[static_cast<std::size_t>(op)].gated_by & (1u << k))
        link(engine.exits[k].decision_op, op);
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int op = 0; op < count; ++op) {
    if (indegree[static_cast<std::size_t>(op)] == 0) ready.push(op);
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int op = ready.top();
    ready.pop();
    order.push_back(op);
    for (int to : next[static_cast<std::size_t>(op)]) {
      if (--indegree[static_cast<std::size_t>(to)] == 0) ready.push(to);
    }
  }
  CGR_ASSERT(static_cast<int>(order.size()) == count);
  std::vector<int> new_index(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i)
    new_index[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = i;
  std::vector<CompiledOp> ops;
  std::vector<LayerOp> reordered;
  for (int old : order) {
    ops.push_back(std::move(engine.ops[static_cast<std::size_t>(old)]));
    reordered.push_back(std::move(layer_ops[static_cast<std::size_t>(old)]));
  }
  engine.ops = std::move(ops);
  layer_ops = std::move(reordered);
  for (auto& op : engine.ops)
    op.gate_level = innermost_exit(op.gated_by);
  for (auto& value : engine.values) {
    if (value.producer >= 0) value.producer = new_index[static_cast<std::size_t>(value.producer)];
  }
  for (auto& plan : engine.exits)
    plan.decision_op = new_index[static_cast<std::size_t>(plan.decision_op)];
}

}  // namespace cgr::detail
