// The CUDA graph's construction plan against the IR, on the CPU (no device needed): the nodes
// and edges the CUDA executor will add, for dag and stream-graph, with and without copies,
// with the nested IF nodes of early exits.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18_exits.hpp"
#include "cgr/models/two_branch.hpp"
#include "test_support.hpp"

using namespace cgr;
using Kind = CudaGraphPlan::Kind;

namespace {

Engine build(const Network& net, ExitPolicy exits = ExitPolicy::all) {
  return Engine::build(net, models::random_weights(net, 3), {.threads = 1, .exits = exits});
}

// The op whose (fused) name starts with `prefix`, e.g. "layer2.0.conv1" for
// "layer2.0.conv1".
int op_index(const Engine& engine, const std::string& prefix) {
  for (int op = 0; op < engine.graph().op_count(); ++op) {
    if (engine.graph().op(op).name.rfind(prefix, 0) == 0) return op;
  }
  FAIL("no op named " << prefix << "...");
  return -1;
}

// Planned node of each op (-1: none).
std::vector<int> node_of_op(const Engine& engine, const CudaGraphPlan& plan) {
  std::vector<int> nodes(static_cast<std::size_t>(engine.graph().op_count()), -1);
  for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
    if (plan.nodes[i].kind == Kind::op) {
      REQUIRE(nodes[static_cast<std::size_t>(plan.nodes[i].op)] == -1);
      nodes[static_cast<std::size_t>(plan.nodes[i].op)] = static_cast<int>(i);
    }
  }
  return nodes;
}

// Path a -> b among planned nodes (dependencies point backwards in construction order).
bool plan_reaches(const CudaGraphPlan& plan, int from, int to) {
  std::vector<char> reached(plan.nodes.size(), 0);
  reached[static_cast<std::size_t>(from)] = 1;
  for (std::size_t i = static_cast<std::size_t>(from) + 1; i < plan.nodes.size(); ++i) {
    for (int d : plan.nodes[i].dependencies)
      reached[i] |= reached[static_cast<std::size_t>(d)];
  }
  return reached[static_cast<std::size_t>(to)] != 0;
}

// Every dependency precedes its node and lives in the same graph; a body's nodes come after
// the IF node that opens it (exit k's IF node opens graph k + 1), which lives in the graph
// before it.
void check_well_formed(const CudaGraphPlan& plan) {
  std::vector<int> opened_at(static_cast<std::size_t>(plan.graphs), -1);  // graph -> its IF node
  opened_at[0] = 0;
  for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
    const auto& node = plan.nodes[i];
    CAPTURE(node.name);
    REQUIRE((node.graph >= 0 && node.graph < plan.graphs));
    CHECK(opened_at[static_cast<std::size_t>(node.graph)] >= 0);  // its graph exists already
    if (node.kind == CudaGraphPlan::Kind::conditional) {
      REQUIRE((node.exit >= 0 && node.exit + 1 < plan.graphs));
      CHECK(node.graph == node.exit);  // exit k's IF node sits in graph k (the body of k - 1)
      CHECK(opened_at[static_cast<std::size_t>(node.exit) + 1] == -1);  // opened once
      opened_at[static_cast<std::size_t>(node.exit) + 1] = static_cast<int>(i);
    }
    for (int d : node.dependencies) {
      REQUIRE((d >= 0 && static_cast<std::size_t>(d) < i));
      CHECK(plan.nodes[static_cast<std::size_t>(d)].graph == node.graph);
    }
    CHECK(std::is_sorted(node.dependencies.begin(), node.dependencies.end()));
  }
  for (int g = 0; g < plan.graphs; ++g) CHECK(opened_at[static_cast<std::size_t>(g)] >= 0);
}

std::set<std::pair<int, int>> ir_edges(const Engine& engine) {
  std::set<std::pair<int, int>> edges;
  for (const Edge& e : engine.graph().edges())
    edges.insert({e.from, e.to});
  return edges;
}

std::set<std::pair<int, int>> planned_op_edges(const CudaGraphPlan& plan) {
  std::set<std::pair<int, int>> edges;
  for (const auto& node : plan.nodes) {
    if (node.kind != Kind::op) continue;
    for (int d : node.dependencies) {
      const auto& dep = plan.nodes[static_cast<std::size_t>(d)];
      if (dep.kind == Kind::op) edges.insert({dep.op, node.op});
    }
  }
  return edges;
}

}  // namespace

TEST_CASE("cuda graph plan, dag: the two-branch model's nodes and edges are the IR's") {
  const Network net = models::two_branch({.size = 16, .width = 8});
  const Engine engine = build(net);
  const CudaGraphPlan plan = engine.cuda_graph_plan(Mode::dag);
  check_well_formed(plan);
  CHECK(plan.graphs == 1);

  // copy-in, one node per op, the output's copy-out.
  const int ops = engine.graph().op_count();
  REQUIRE(plan.nodes.size() == static_cast<std::size_t>(ops) + 2);
  CHECK(plan.nodes.front().kind == Kind::copy_in);
  CHECK(plan.nodes.front().dependencies.empty());
  CHECK(plan.nodes.back().kind == Kind::copy_out);
  CHECK(plan.nodes.back().name == "copy-out:cat");
  const std::vector<int> node = node_of_op(engine, plan);
  CHECK(plan.nodes.back().dependencies ==
        std::vector<int>{node[static_cast<std::size_t>(op_index(engine, "cat"))]});

  // Op edges: exactly the IR's reduced edges.
  CHECK(planned_op_edges(plan) == ir_edges(engine));
  // The copy-in precedes exactly the ops that read the input: the heads of both branches.
  std::set<std::string> after_copy_in;
  for (const auto& n : plan.nodes) {
    if (std::find(n.dependencies.begin(), n.dependencies.end(), 0) != n.dependencies.end())
      after_copy_in.insert(n.name);
  }
  CHECK(after_copy_in == std::set<std::string>{"conv1+conv1.relu", "conv4+conv4.relu"});
  // Edge count: IR edges + 2 from the copy-in + 1 to the copy-out.
  CHECK(plan.edge_count() == engine.graph().edges().size() + 3);

  // The branches have no path between them in the plan.
  const int c3 = node[static_cast<std::size_t>(op_index(engine, "conv3+conv3.relu"))];
  const int c4 = node[static_cast<std::size_t>(op_index(engine, "conv4+conv4.relu"))];
  const int c1 = node[static_cast<std::size_t>(op_index(engine, "conv1+conv1.relu"))];
  const int c6 = node[static_cast<std::size_t>(op_index(engine, "conv6+conv6.relu"))];
  for (int a : {c1, c3}) {
    for (int b : {c4, c6}) {
      CHECK_FALSE(plan_reaches(plan, a, b));
      CHECK_FALSE(plan_reaches(plan, b, a));
    }
  }
}

TEST_CASE("cuda graph plan, stream-graph: the same nodes in one chain") {
  const Network net = models::two_branch({.size = 16, .width = 8});
  const CudaGraphPlan dag = build(net).cuda_graph_plan(Mode::dag);
  const CudaGraphPlan chain = build(net).cuda_graph_plan(Mode::stream_graph);
  check_well_formed(chain);
  REQUIRE(chain.nodes.size() == dag.nodes.size());
  for (std::size_t i = 0; i < chain.nodes.size(); ++i) {
    CAPTURE(i);
    CHECK(chain.nodes[i].dependencies ==
          (i == 0 ? std::vector<int>{} : std::vector<int>{static_cast<int>(i) - 1}));
  }
  CHECK(chain.edge_count() == chain.nodes.size() - 1);
}

TEST_CASE("cuda graph plan: without copies (device-resident graph) only the ops") {
  const Network net = models::two_branch({.size = 16, .width = 8});
  const Engine engine = build(net);
  const CudaGraphPlan plan = engine.cuda_graph_plan(Mode::dag, false);
  check_well_formed(plan);
  CHECK(plan.nodes.size() == static_cast<std::size_t>(engine.graph().op_count()));
  for (const auto& n : plan.nodes)
    CHECK(n.kind == Kind::op);
  CHECK(plan.edge_count() == engine.graph().edges().size());
}

TEST_CASE("cuda graph plan, early exits: nested IF nodes, one body per exit") {
  const Network net = models::resnet18_exits(1, 64, 10);
  const Engine engine = build(net, ExitPolicy::early);
  const CudaGraphPlan plan = engine.cuda_graph_plan(Mode::dag);
  check_well_formed(plan);
  REQUIRE(plan.graphs == 4);  // top level + the bodies of exits 0, 1 and 2

  std::vector<int> conditional(3, -1);
  for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
    const auto& n = plan.nodes[i];
    if (n.kind != Kind::conditional) continue;
    REQUIRE(n.exit >= 0);
    REQUIRE(n.exit < 3);
    CHECK(conditional[static_cast<std::size_t>(n.exit)] == -1);
    conditional[static_cast<std::size_t>(n.exit)] = static_cast<int>(i);
    CHECK(n.graph == n.exit);  // exit k's IF node sits in the body of exit k-1's (k=0: top)
  }
  CHECK(std::count(conditional.begin(), conditional.end(), -1) == 0);

  // Each decision sets its exit's handle, sits in the IF node's graph, and the IF node waits
  // for it; every node of body k+1 comes after IF node k.
  const std::vector<int> node = node_of_op(engine, plan);
  for (int k = 0; k < 3; ++k) {
    const int decision = op_index(engine, "exit" + std::to_string(k) + ".decide");
    const auto& d = plan.nodes[static_cast<std::size_t>(node[static_cast<std::size_t>(decision)])];
    CHECK(d.exit == k);
    CHECK(d.graph == k);
    const auto& cond =
        plan.nodes[static_cast<std::size_t>(conditional[static_cast<std::size_t>(k)])];
    CHECK(std::find(cond.dependencies.begin(), cond.dependencies.end(),
                    node[static_cast<std::size_t>(decision)]) != cond.dependencies.end());
    for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
      if (plan.nodes[i].graph == k + 1)
        CHECK(static_cast<int>(i) > conditional[static_cast<std::size_t>(k)]);
    }
  }

  // The backbone after block k+1 is in body k: layer3 in exit 0's, layer4 in exit 1's, the
  // final classifier in exit 2's; the heads run at their block's level.
  const auto graph_of = [&](const std::string& name) {
    return plan
        .nodes[static_cast<std::size_t>(node[static_cast<std::size_t>(op_index(engine, name))])]
        .graph;
  };
  CHECK(graph_of("conv1+") == 0);
  CHECK(graph_of("exits.0.conv") == 0);
  CHECK(graph_of("layer2.0.conv1") == 0);
  CHECK(graph_of("layer3.0.conv1") == 1);
  CHECK(graph_of("layer4.0.conv1") == 2);
  CHECK(graph_of("avgpool+flatten+fc") == 3);

  // IR edges inside one graph are planned edges; an IR edge into a deeper body is carried by
  // the IF node of the body nested directly in the source's graph.
  const std::set<std::pair<int, int>> planned = planned_op_edges(plan);
  for (const Edge& e : engine.graph().edges()) {
    const int from = node[static_cast<std::size_t>(e.from)],
              to = node[static_cast<std::size_t>(e.to)];
    const int g_from = plan.nodes[static_cast<std::size_t>(from)].graph;
    const int g_to = plan.nodes[static_cast<std::size_t>(to)].graph;
    CAPTURE(engine.graph().op(e.from).name);
    CAPTURE(engine.graph().op(e.to).name);
    REQUIRE(g_from <= g_to);
    if (g_from == g_to) {
      CHECK(planned.contains({e.from, e.to}));
    } else {
      const auto& cond =
          plan.nodes[static_cast<std::size_t>(conditional[static_cast<std::size_t>(g_from)])];
      CHECK(std::find(cond.dependencies.begin(), cond.dependencies.end(), from) !=
            cond.dependencies.end());
    }
  }
  // Nothing else: op-to-op planned edges are IR edges.
  for (const auto& [a, b] : planned)
    CHECK(ir_edges(engine).contains({a, b}));

  // Head k and block k+1 have no path between them in the plan (head 0 vs layer2).
  const int head0 = node[static_cast<std::size_t>(op_index(engine, "exits.0.pool+"))];
  const int layer2 = node[static_cast<std::size_t>(op_index(engine, "layer2.1.conv2"))];
  CHECK_FALSE(plan_reaches(plan, head0, layer2));
  CHECK_FALSE(plan_reaches(plan, layer2, head0));

  // stream-graph: the same nodes in the same graphs, each after the previous one of its graph.
  const CudaGraphPlan chain = engine.cuda_graph_plan(Mode::stream_graph);
  check_well_formed(chain);
  CHECK(chain.graphs == plan.graphs);
  REQUIRE(chain.nodes.size() == plan.nodes.size());
  std::vector<int> last(static_cast<std::size_t>(chain.graphs), -1);
  for (std::size_t i = 0; i < chain.nodes.size(); ++i) {
    const auto& n = chain.nodes[i];
    CHECK(n.name == plan.nodes[i].name);
    CHECK(n.graph == plan.nodes[i].graph);
    const int previous = last[static_cast<std::size_t>(n.graph)];
    CHECK(n.dependencies == (previous < 0 ? std::vector<int>{} : std::vector<int>{previous}));
    last[static_cast<std::size_t>(n.graph)] = static_cast<int>(i);
  }
}

TEST_CASE("cuda graph plan: exits all or off build no conditional node, eager builds no graph") {
  const Network net = models::resnet18_exits(1, 64, 10);
  for (ExitPolicy policy : {ExitPolicy::all, ExitPolicy::off}) {
    const Engine engine = build(net, policy);
    const CudaGraphPlan plan = engine.cuda_graph_plan(Mode::dag);
    check_well_formed(plan);
    CHECK(plan.graphs == 1);
    for (const auto& n : plan.nodes)
      CHECK(n.kind != Kind::conditional);
    CHECK(planned_op_edges(plan) == ir_edges(engine));
  }
  const Engine engine = build(models::two_branch({.size = 8, .width = 4}));
  CHECK(test::error_message([&] {
          (void)engine.cuda_graph_plan(Mode::eager);
        }).find("mode eager") != std::string::npos);
}
