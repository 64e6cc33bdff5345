// Dependency analysis: hazard edges, transitive reduction, reachability, width (maximum
// antichain), lanes and the DOT export, on hand-made networks and on random DAGs checked
// against brute force.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "cgr/error.hpp"
#include "cgr/graph.hpp"

namespace {

using cgr::Graph;
using EdgeList = std::vector<std::pair<int, int>>;

// Names resources so test programs read like the networks they stand for.
struct Program {
  std::map<std::string, int> ids;
  std::vector<cgr::OpAccess> ops;

  int id(const std::string& resource) {
    return ids.emplace(resource, static_cast<int>(ids.size())).first->second;
  }
  int op(const std::string& name, const std::vector<std::string>& reads,
         const std::vector<std::string>& writes, const std::string& label = "") {
    cgr::OpAccess access{name, label, {}, {}};
    for (const auto& r : reads)
      access.reads.push_back(id(r));
    for (const auto& w : writes)
      access.writes.push_back(id(w));
    ops.push_back(std::move(access));
    return static_cast<int>(ops.size()) - 1;
  }
  Graph build() const { return Graph(ops); }
};

EdgeList edge_pairs(const Graph& graph) {
  EdgeList pairs;
  for (const cgr::Edge& edge : graph.edges())
    pairs.emplace_back(edge.from, edge.to);
  return pairs;
}

std::uint8_t hazards_of(const Graph& graph, int from, int to) {
  for (const cgr::Edge& edge : graph.edges()) {
    if (edge.from == from && edge.to == to) return edge.hazards;
  }
  return 0;
}

// The reference ordering, from first principles: i < j must stay ordered when they share a
// resource and at least one of them writes it. Closed transitively by brute force.
std::vector<std::vector<bool>> reference_closure(const std::vector<cgr::OpAccess>& ops) {
  const int n = static_cast<int>(ops.size());
  auto touches = [](const std::vector<int>& list, int r) {
    return std::find(list.begin(), list.end(), r) != list.end();
  };
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      for (const int w : ops[i].writes) {
        if (touches(ops[j].reads, w) || touches(ops[j].writes, w)) reach[i][j] = true;
      }
      for (const int r : ops[i].reads) {
        if (touches(ops[j].writes, r)) reach[i][j] = true;
      }
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    for (int j = i + 1; j < n; ++j) {
      if (!reach[i][j]) continue;
      for (int k = j + 1; k < n; ++k) {
        if (reach[j][k]) reach[i][k] = true;
      }
    }
  }
  return reach;
}

// BFS over a graph's reduced edges, optionally ignoring one edge.
std::vector<bool> bfs(const Graph& graph, int start, std::pair<int, int> skipped = {-1, -1}) {
  std::vector<bool> seen(graph.op_count(), false);
  std::vector<int> frontier{start};
  while (!frontier.empty()) {
    const int u = frontier.back();
    frontier.pop_back();
    for (const int v : graph.successors(u)) {
      if (std::make_pair(u, v) == skipped || seen[v]) continue;
      seen[v] = true;
      frontier.push_back(v);
    }
  }
  return seen;
}

// Ops reading and writing a small pool of resources, so RAW, WAR, WAW and in-place access
// all occur.
std::vector<cgr::OpAccess> random_ops(std::mt19937& rng, int n, int resources, double density) {
  std::bernoulli_distribution pick(density);
  std::vector<cgr::OpAccess> ops(n);
  for (int i = 0; i < n; ++i) {
    ops[i].name = "op" + std::to_string(i);
    for (int r = 0; r < resources; ++r) {
      if (pick(rng)) ops[i].reads.push_back(r);
      if (pick(rng)) ops[i].writes.push_back(r);
    }
  }
  return ops;
}

// Each op writes its own value and reads a few earlier ones: a pure dataflow DAG.
std::vector<cgr::OpAccess> random_dataflow(std::mt19937& rng, int n, int max_inputs) {
  std::vector<cgr::OpAccess> ops(n);
  for (int i = 0; i < n; ++i) {
    ops[i].name = "op" + std::to_string(i);
    ops[i].writes.push_back(i);
    if (i == 0) continue;
    std::uniform_int_distribution<int> earlier(0, i - 1);
    const int inputs = std::uniform_int_distribution<int>(0, max_inputs)(rng);
    for (int k = 0; k < inputs; ++k)
      ops[i].reads.push_back(earlier(rng));
  }
  return ops;
}

int max_level_width(const Graph& graph) {
  std::map<int, int> per_level;
  int widest = 0;
  for (const int level : graph.levels())
    widest = std::max(widest, ++per_level[level]);
  return widest;
}

// Lanes must be paths of reduced edges, numbered by their first op in topological order.
void check_lanes(const Graph& graph) {
  std::vector<std::vector<int>> members(graph.lane_count());
  for (const int op : graph.topological_order()) {
    const int lane = graph.lanes()[op];
    REQUIRE(lane >= 0);
    REQUIRE(lane < graph.lane_count());
    if (members[lane].empty()) {
      // First op of this lane: every lower-numbered lane must already have started.
      for (int earlier = 0; earlier < lane; ++earlier)
        CHECK(!members[earlier].empty());
    } else {
      const auto& succ = graph.successors(members[lane].back());
      CHECK(std::find(succ.begin(), succ.end(), op) != succ.end());
    }
    members[lane].push_back(op);
  }
  // A path cover can never beat a chain cover of the closure.
  CHECK(graph.lane_count() >= graph.max_width());
}

Program two_branch() {
  Program p;
  p.op("conv1", {"x"}, {"a"}, "Conv2d");
  p.op("conv2", {"a"}, {"b"}, "Conv2d");
  p.op("conv3", {"b"}, {"c"}, "Conv2d");
  p.op("conv4", {"x"}, {"d"}, "Conv2d");
  p.op("conv5", {"d"}, {"e"}, "Conv2d");
  p.op("conv6", {"e"}, {"f"}, "Conv2d");
  p.op("concat", {"c", "f"}, {"y"}, "Concat");
  return p;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);)
    lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("graph: two independent branches stay unordered and side by side") {
  const Graph g = two_branch().build();
  REQUIRE(g.op_count() == 7);
  for (int a = 0; a < 3; ++a) {
    for (int b = 3; b < 6; ++b) {
      CHECK_FALSE(g.reaches(a, b));
      CHECK_FALSE(g.reaches(b, a));
      CHECK_FALSE(g.ordered(a, b));
    }
  }
  CHECK(edge_pairs(g) == EdgeList{{0, 1}, {1, 2}, {2, 6}, {3, 4}, {4, 5}, {5, 6}});
  for (const cgr::Edge& edge : g.edges())
    CHECK(edge.hazards == cgr::kRaw);
  CHECK(g.critical_path_length() == 4);
  CHECK(g.max_width() == 2);
  CHECK(g.levels() == std::vector<int>{0, 1, 2, 0, 1, 2, 3});
  CHECK(g.topological_order() == std::vector<int>{0, 3, 1, 4, 2, 5, 6});
  CHECK(g.lane_count() == 2);
  CHECK(g.lanes() == std::vector<int>{0, 0, 0, 1, 1, 1, 0});
  check_lanes(g);
  CHECK(g.successors(6).empty());
  CHECK(g.predecessors(6) == std::vector<int>{2, 5});

  const std::string dot = g.to_dot("two-branch");
  CHECK(dot.rfind("digraph \"two-branch\" {", 0) == 0);
  CHECK(dot.find("rankdir=TB;") != std::string::npos);
  CHECK(dot.find("op0 [label=\"conv1\\nConv2d\"") != std::string::npos);
  CHECK(dot.find("op0 -> op1;") != std::string::npos);
  CHECK(dot.find("op5 -> op6;") != std::string::npos);
  int rank_groups = 0;
  bool conv1_beside_conv4 = false;
  for (const std::string& line : lines_of(dot)) {
    if (line.find("rank=same") == std::string::npos) continue;
    ++rank_groups;
    if (line.find(" op0;") != std::string::npos && line.find(" op3;") != std::string::npos) {
      conv1_beside_conv4 = true;
    }
  }
  CHECK(rank_groups == 4);
  CHECK(conv1_beside_conv4);
  CHECK(dot.find("WAR") == std::string::npos);
}

TEST_CASE("graph: residual block keeps only the chain") {
  Program p;
  p.op("conv1", {"x"}, {"c1"});
  p.op("bn1", {"c1"}, {"b1"});
  p.op("relu1", {"b1"}, {"r1"});
  p.op("conv2", {"r1"}, {"c2"});
  p.op("bn2", {"c2"}, {"b2"});
  p.op("add", {"b2", "x"}, {"s"});
  p.op("relu2", {"s"}, {"y"});
  const Graph g = p.build();
  // x is a graph input (nobody writes it), so the skip connection adds no edge at all.
  CHECK(edge_pairs(g) == EdgeList{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}});
  CHECK(g.critical_path_length() == 7);
  CHECK(g.max_width() == 1);
  CHECK(g.lane_count() == 1);
  CHECK(g.reaches(0, 6));
  CHECK_FALSE(g.reaches(6, 0));
  CHECK_FALSE(g.reaches(3, 3));

  SUBCASE("a skip read of an ancestor's value is redundant and reduced away") {
    Program q;
    q.op("stem", {"x"}, {"h"});
    q.op("conv1", {"h"}, {"c1"});
    q.op("relu1", {"c1"}, {"r1"});
    q.op("conv2", {"r1"}, {"c2"});
    q.op("add", {"c2", "h"}, {"s"});   // reads h directly and through the chain
    q.op("add2", {"s", "c1"}, {"y"});  // c1 too is an ancestor of s
    const Graph r = q.build();
    CHECK(edge_pairs(r) == EdgeList{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}});
    CHECK(r.reaches(0, 4));
    CHECK(r.reaches(1, 5));
    CHECK(r.critical_path_length() == 6);
  }
}

TEST_CASE("graph: WAR and WAW hazards, reduction keeps the hazard bits") {
  Program p;
  p.op("write", {}, {"r"});
  p.op("read1", {"r"}, {"o1"});
  p.op("read2", {"r"}, {"o2"});
  p.op("overwrite", {}, {"r"});
  const Graph g = p.build();
  // write -> overwrite (WAW) is implied by write -> read1 -> overwrite.
  CHECK(edge_pairs(g) == EdgeList{{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  CHECK(hazards_of(g, 0, 1) == cgr::kRaw);
  CHECK(hazards_of(g, 0, 2) == cgr::kRaw);
  CHECK(hazards_of(g, 1, 3) == cgr::kWar);
  CHECK(hazards_of(g, 2, 3) == cgr::kWar);
  CHECK(g.reaches(0, 3));
  CHECK(g.max_width() == 2);
  const std::string dot = g.to_dot();
  CHECK(dot.find("op1 -> op3 [label=\"WAR\", style=dashed];") != std::string::npos);
  CHECK(dot.find("op0 -> op1;") != std::string::npos);

  SUBCASE("a write with no reader in between keeps its WAW edge") {
    Program q;
    q.op("first", {}, {"r"});
    q.op("second", {}, {"r"});
    q.op("reader", {"r"}, {"o"});
    const Graph h = q.build();
    CHECK(edge_pairs(h) == EdgeList{{0, 1}, {1, 2}});
    CHECK(hazards_of(h, 0, 1) == cgr::kWaw);
    CHECK(hazards_of(h, 1, 2) == cgr::kRaw);
    CHECK(h.to_dot().find("op0 -> op1 [label=\"WAW\"") != std::string::npos);
  }
  SUBCASE("duplicate pairs merge and OR their bits") {
    Program q;
    q.op("a", {"s"}, {"t"});  // reads s, writes t
    q.op("b", {"t"}, {"s"});  // RAW on t and WAR on s: one edge carrying both
    const Graph h = q.build();
    REQUIRE(h.edges().size() == 1);
    CHECK(h.edges()[0].hazards == (cgr::kRaw | cgr::kWar));
    CHECK(h.to_dot().find("[label=\"RAW+WAR\", style=solid]") != std::string::npos);
  }
  SUBCASE("an in-place op has no self edge and orders later readers after it") {
    Program q;
    q.op("produce", {}, {"r"});
    q.op("relu_inplace", {"r"}, {"r"});
    q.op("consume", {"r"}, {"o"});
    q.op("reuse", {}, {"r"});
    const Graph h = q.build();
    CHECK(edge_pairs(h) == EdgeList{{0, 1}, {1, 2}, {2, 3}});
    CHECK(hazards_of(h, 0, 1) == (cgr::kRaw | cgr::kWaw));
    CHECK(hazards_of(h, 1, 2) == cgr::kRaw);
    CHECK(hazards_of(h, 2, 3) == cgr::kWar);
  }
}

TEST_CASE("graph: width is the maximum antichain, not the widest level") {
  SUBCASE("leaves hanging off a long chain, one per level") {
    Program p;
    p.op("c0", {}, {"c0"});
    for (int k = 1; k <= 4; ++k) {
      const std::string prev = "c" + std::to_string(k - 1);
      p.op("c" + std::to_string(k), {prev}, {"c" + std::to_string(k)});
      p.op("leaf" + std::to_string(k), {prev}, {"leaf" + std::to_string(k)});
    }
    const Graph g = p.build();
    CHECK(max_level_width(g) == 2);
    CHECK(g.max_width() == 5);  // the four leaves and the chain's end
    CHECK(g.critical_path_length() == 5);
    CHECK(g.lane_count() == 5);
    check_lanes(g);
  }
  SUBCASE("a long chain beside short chains that start late") {
    // Short chains s_k = (a_k -> b_k) hang off chain op k; their tails are pairwise
    // unordered although they sit on different levels.
    Program p;
    for (int k = 0; k < 6; ++k) {
      p.op("c" + std::to_string(k), {k ? "c" + std::to_string(k - 1) : "in"},
           {"c" + std::to_string(k)});
    }
    for (int k = 0; k < 5; ++k) {
      p.op("a" + std::to_string(k), {"c" + std::to_string(k)}, {"a" + std::to_string(k)});
      p.op("b" + std::to_string(k), {"a" + std::to_string(k)}, {"b" + std::to_string(k)});
    }
    const Graph g = p.build();
    CHECK(max_level_width(g) == 3);
    CHECK(g.max_width() == 6);  // b0..b4 and c5
    check_lanes(g);
  }
  SUBCASE("diamond") {
    Program p;
    p.op("a", {}, {"a"});
    p.op("b", {"a"}, {"b"});
    p.op("c", {"a"}, {"c"});
    p.op("d", {"b", "c"}, {"d"});
    const Graph g = p.build();
    CHECK(g.max_width() == 2);
    CHECK(g.critical_path_length() == 3);
    CHECK(g.lane_count() == 2);
    CHECK(edge_pairs(g) == EdgeList{{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  }
  SUBCASE("empty and single-op graphs") {
    const Graph empty;
    CHECK(empty.op_count() == 0);
    CHECK(empty.max_width() == 0);
    CHECK(empty.critical_path_length() == 0);
    CHECK(empty.lane_count() == 0);
    const Graph built_empty{std::vector<cgr::OpAccess>{}};
    CHECK(built_empty.max_width() == 0);
    CHECK(built_empty.to_dot("e") ==
          "digraph \"e\" {\n  rankdir=TB;\n"
          "  node [shape=box, style=\"rounded,filled\", "
          "fontname=\"Helvetica\"];\n"
          "  edge [fontname=\"Helvetica\", fontsize=10, fontcolor=\"#444444\"];\n}\n");
    const Graph one{std::vector<cgr::OpAccess>{{"only", "", {0}, {1}}}};
    CHECK(one.max_width() == 1);
    CHECK(one.critical_path_length() == 1);
    CHECK(one.lane_count() == 1);
    CHECK(one.edges().empty());
  }
  SUBCASE("independent ops") {
    std::vector<cgr::OpAccess> ops;
    for (int i = 0; i < 70; ++i)
      ops.push_back({"op" + std::to_string(i), "", {0}, {i + 1}});
    const Graph g(ops);
    CHECK(g.max_width() == 70);  // crosses a 64-bit word boundary
    CHECK(g.lane_count() == 70);
    CHECK(g.critical_path_length() == 1);
  }
}

TEST_CASE("graph: max_width matches brute force on random small DAGs") {
  std::mt19937 rng(20240601);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + trial % 12;
    const auto ops = (trial % 2) ? random_ops(rng, n, 4, 0.3) : random_dataflow(rng, n, 2);
    const Graph g(ops);
    const auto closure = reference_closure(ops);
    int best = 0;
    for (unsigned mask = 1; mask < (1u << n); ++mask) {
      const int size = std::popcount(mask);
      if (size <= best) continue;
      bool antichain = true;
      for (int i = 0; i < n && antichain; ++i) {
        for (int j = i + 1; j < n && antichain; ++j) {
          if ((mask >> i & 1) && (mask >> j & 1) && closure[i][j]) antichain = false;
        }
      }
      if (antichain) best = size;
    }
    INFO("trial ", trial, ", n = ", n);
    CHECK(g.max_width() == best);
    CHECK(g.max_width() >= max_level_width(g));
    check_lanes(g);
  }
}

TEST_CASE("graph: reaches and the reduction agree with brute force on random DAGs") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 5 + trial % 60;
    const auto ops = (trial % 3 == 0)
                         ? random_dataflow(rng, n, 3)
                         : random_ops(rng, n, 3 + trial % 8, 0.15 + 0.01 * (trial % 10));
    const Graph g(ops);
    const auto closure = reference_closure(ops);
    INFO("trial ", trial, ", n = ", n);
    for (int u = 0; u < n; ++u) {
      const std::vector<bool> seen = bfs(g, u);
      for (int v = 0; v < n; ++v) {
        REQUIRE(g.reaches(u, v) == closure[u][v]);
        REQUIRE(seen[v] == closure[u][v]);  // the reduced edges keep every ordering
      }
    }
    // Reduced means minimal: removing any edge loses an ordering.
    for (const cgr::Edge& edge : g.edges()) {
      CHECK(edge.hazards != 0);
      CHECK_FALSE(bfs(g, edge.from, {edge.from, edge.to})[edge.to]);
    }
    CHECK(std::is_sorted(g.edges().begin(), g.edges().end(), [](const auto& a, const auto& b) {
      return std::make_pair(a.from, a.to) < std::make_pair(b.from, b.to);
    }));
    // The level order is a topological order.
    std::vector<int> position(n);
    for (int i = 0; i < n; ++i)
      position[g.topological_order()[i]] = i;
    for (const cgr::Edge& edge : g.edges()) {
      CHECK(position[edge.from] < position[edge.to]);
      CHECK(g.levels()[edge.from] < g.levels()[edge.to]);
    }
  }
}

TEST_CASE("graph: large graphs stay fast and exact") {
  // 40 chains of 50 ops, interleaved in program order as a builder would emit branches.
  std::vector<cgr::OpAccess> ops;
  constexpr int kChains = 40, kLength = 50;
  for (int step = 0; step < kLength; ++step) {
    for (int chain = 0; chain < kChains; ++chain) {
      const int value = step * kChains + chain;
      cgr::OpAccess op{"op" + std::to_string(value), "", {}, {value}};
      if (step > 0) op.reads.push_back(value - kChains);
      ops.push_back(std::move(op));
    }
  }
  const Graph chains(ops);
  CHECK(chains.op_count() == 2000);
  CHECK(chains.max_width() == kChains);
  CHECK(chains.lane_count() == kChains);
  CHECK(chains.critical_path_length() == kLength);
  CHECK(chains.edges().size() == static_cast<std::size_t>(kChains * (kLength - 1)));
  CHECK(chains.reaches(0, 1960));
  CHECK_FALSE(chains.reaches(0, 1961));

  std::mt19937 rng(99);
  const Graph random(random_dataflow(rng, 2000, 3));
  CHECK(random.max_width() >= max_level_width(random));
  CHECK(random.max_width() <= 2000);
  check_lanes(random);
}

TEST_CASE("graph: bad input and bad queries are errors that name the problem") {
  const std::vector<cgr::OpAccess> ops{{"conv1", "", {0}, {1}}, {"bad_op", "", {1}, {-3}}};
  CHECK_THROWS_WITH_AS(Graph{ops}, doctest::Contains("bad_op"), cgr::Error);
  const Graph g = two_branch().build();
  CHECK_THROWS_AS(g.reaches(-1, 0), cgr::Error);
  CHECK_THROWS_AS(g.reaches(0, 7), cgr::Error);
  CHECK_THROWS_WITH_AS(g.reaches(7, 0), doctest::Contains("out of range"), cgr::Error);
  CHECK_THROWS_AS(Graph().reaches(0, 0), cgr::Error);
}

TEST_CASE("graph: DOT escapes names and labels") {
  const Graph g{
      std::vector<cgr::OpAccess>{{"say \"hi\"\\", "Kind\"X", {}, {0}}, {"next", "", {0}, {1}}}};
  const std::string dot = g.to_dot("my \"net\"");
  CHECK(dot.rfind("digraph \"my \\\"net\\\"\" {", 0) == 0);
  CHECK(dot.find("op0 [label=\"say \\\"hi\\\"\\\\\\nKind\\\"X\"") != std::string::npos);
  CHECK(dot.find("op1 [label=\"next\"") != std::string::npos);
  // Lanes colour the nodes: one lane here, so both share the first palette colour.
  CHECK(dot.find("op0 [label=\"say \\\"hi\\\"\\\\\\nKind\\\"X\", fillcolor=\"#8dd3c7\"]") !=
        std::string::npos);
  CHECK(dot.find("op1 [label=\"next\", fillcolor=\"#8dd3c7\"]") != std::string::npos);
}
