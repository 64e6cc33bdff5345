// Exit heads in the engine. Each exit gets a decision op (confidence = largest softmax
// probability per sample). With ExitPolicy::early, exit k gates every op that is not needed
// by an earlier-or-equal decision and not needed for its speculation value: those ops wait
// for decision k (a control edge, expressed as a pseudo-resource the decision writes and the
// gated ops read) and are skipped when it fires. The gated sets are closed under successors,
// so a skipped op's consumers are skipped too and nothing reads unwritten data.
#include <algorithm>
#include <queue>

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"
#include "engine_impl.hpp"

namespace cgr::detail {
namespace {

class ExitDecisionKernel final : public CpuKernel {
 public:
  ExitDecisionKernel(std::int64_t batch, std::int64_t classes) : batch_(batch), classes_(classes) {}
  void run(const KernelIo& io) const override {
    for (std::int64_t n = 0; n < batch_; ++n) {
      io.output[n] = math::max_softmax_probability(io.inputs[0] + n * classes_, classes_);
    }
  }

 private:
  std::int64_t batch_, classes_;
};

// The engine op that computes `value`, or -1 (a graph input).
int producing_op(const EngineImpl& impl, const Network& net, Value value) {
  const int layer = net.producer(value);
  if (layer < 0) return -1;
  for (std::size_t op = 0; op < impl.ops.size(); ++op) {
    const auto& layers = impl.ops[op].layers;
    if (std::find(layers.begin(), layers.end(), layer) != layers.end()) return static_cast<int>(op);
  }
  return -1;
}

}  // namespace

void plan_exits(const Network& net, EngineImpl& impl) {
  impl.gate_masks.assign(impl.ops.size(), 0);
  impl.decision_exit.assign(impl.ops.size(), -1);
  if (impl.options.exits == ExitPolicy::off || net.exits().empty()) return;

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
    confidence.pinned = true;
    plan.confidence_value = static_cast<int>(impl.values.size());
    plan.decision_op = static_cast<int>(impl.ops.size());
    confidence.producer = plan.decision_op;
    impl.values.push_back(std::move(confidence));
    LoweredOp op;
    op.name = e.name + ".decide";
    op.kind = "ExitDecision";
    op.inputs = {e.logits.id};
    op.output = plan.confidence_value;
    op.kernel = std::make_unique<ExitDecisionKernel>(shape[0], shape[1]);
    impl.ops.push_back(std::move(op));
    impl.gate_masks.push_back(0);
    impl.decision_exit.push_back(static_cast<int>(impl.exits.size()));
    impl.exits.push_back(std::move(plan));
  }
  if (impl.options.exits != ExitPolicy::early) return;

  // Which ops each exit gates, from the data dependencies alone.
  std::vector<OpAccess> accesses;
  for (const auto& op : impl.ops) accesses.push_back(OpAccess{op.name, op.kind, op.inputs, {op.output}});
  const Graph data(std::move(accesses));
  const int count = data.op_count();
  std::vector<bool> keep(static_cast<std::size_t>(count), false);  // grows with k: P_k
  auto keep_with_ancestors = [&](int op) {
    if (op < 0) return;
    for (int other = 0; other < count; ++other) {
      if (other == op || data.reaches(other, op)) keep[static_cast<std::size_t>(other)] = true;
    }
  };
  for (std::size_t k = 0; k < impl.exits.size(); ++k) {
    keep_with_ancestors(impl.exits[k].decision_op);
    const Value speculate = net.exits()[k].speculate_until;
    if (speculate.valid()) {
      const int op = producing_op(impl, net, speculate);
      if (op < 0 && net.producer(speculate) >= 0) {
        fail("exit '{}': speculate_until value '{}' is not computed for any output", impl.exits[k].name,
             net.desc(speculate).name);
      }
      keep_with_ancestors(op);
    }
    for (int op = 0; op < count; ++op) {
      if (!keep[static_cast<std::size_t>(op)]) impl.gate_masks[static_cast<std::size_t>(op)] |= 1u << k;
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
  for (const Edge& edge : data.edges()) link(edge.from, edge.to);
  for (std::size_t k = 0; k < impl.exits.size(); ++k) {
    for (int op = 0; op < count; ++op) {
      if (impl.gate_masks[static_cast<std::size_t>(op)] & (1u << k)) link(impl.exits[k].decision_op, op);
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
  for (int i = 0; i < count; ++i) new_index[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = i;
  std::vector<LoweredOp> ops;
  std::vector<std::uint32_t> masks;
  std::vector<int> decisions;
  for (int old : order) {
    ops.push_back(std::move(impl.ops[static_cast<std::size_t>(old)]));
    masks.push_back(impl.gate_masks[static_cast<std::size_t>(old)]);
    decisions.push_back(impl.decision_exit[static_cast<std::size_t>(old)]);
  }
  impl.ops = std::move(ops);
  impl.gate_masks = std::move(masks);
  impl.decision_exit = std::move(decisions);
  for (auto& value : impl.values) {
    if (value.producer >= 0) value.producer = new_index[static_cast<std::size_t>(value.producer)];
  }
  for (auto& plan : impl.exits) plan.decision_op = new_index[static_cast<std::size_t>(plan.decision_op)];
}

}  // namespace cgr::detail
