// Memory planner: values share bytes only where the DAG already orders their lifetimes, on
// random DAGs (checked against an independent reachability), chains, parallel branches and
// workspaces, plus the exact arena sizes first-fit gives on the small cases.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "cgr/error.hpp"
#include "cgr/memory_plan.hpp"

namespace {

using cgr::Graph;
using cgr::MemoryPlan;
using cgr::PlannedValue;

// Builds the graph from the values themselves: value i is resource i, written by its
// producer and read by its readers. So the graph sees exactly the accesses the plan models.
Graph graph_of(int op_count, const std::vector<PlannedValue>& values) {
  std::vector<cgr::OpAccess> ops(op_count);
  for (int i = 0; i < op_count; ++i)
    ops[i].name = "op" + std::to_string(i);
  for (int v = 0; v < static_cast<int>(values.size()); ++v) {
    if (values[v].producer >= 0) ops[values[v].producer].writes.push_back(v);
    // Other writers write their own parts (resource size + v, shared by them here), as the
    // engine's in-place Concat inputs do: no write-after-write edge orders them.
    const int parts = static_cast<int>(values.size()) + v;
    for (const int writer : values[v].other_writers)
      ops[writer].writes.push_back(parts);
    for (const int reader : values[v].readers) {
      ops[reader].reads.push_back(v);
      if (!values[v].other_writers.empty()) ops[reader].reads.push_back(parts);
    }
  }
  return Graph(ops);
}

bool overlap(const MemoryPlan& plan, const std::vector<PlannedValue>& values, int a, int b) {
  if (values[a].bytes == 0 || values[b].bytes == 0) return false;
  return plan.offsets[a] < plan.offsets[b] + values[b].bytes &&
         plan.offsets[b] < plan.offsets[a] + values[a].bytes;
}

// The basic invariants every plan must satisfy, whatever the heuristic.
void check_plan(const Graph& graph, const std::vector<PlannedValue>& values, const MemoryPlan& plan,
                std::size_t alignment) {
  REQUIRE(plan.offsets.size() == values.size());
  std::size_t total = 0;
  for (std::size_t v = 0; v < values.size(); ++v) {
    total += values[v].bytes;
    CHECK(plan.offsets[v] % alignment == 0);
    CHECK(plan.offsets[v] + values[v].bytes <= plan.arena_bytes);
  }
  CHECK(plan.total_bytes == total);
  CHECK(plan.arena_bytes % alignment == 0);
  const int n = static_cast<int>(values.size());
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (!overlap(plan, values, a, b)) continue;
      INFO("values ", values[a].name, " and ", values[b].name, " overlap");
      CHECK_FALSE(values[a].persistent);
      CHECK_FALSE(values[b].persistent);
      CHECK((cgr::lifetimes_ordered(graph, values[a], values[b]) ||
             cgr::lifetimes_ordered(graph, values[b], values[a])));
    }
  }
}

PlannedValue value(const std::string& name, std::size_t bytes, int producer,
                   std::vector<int> readers, bool persistent = false) {
  return PlannedValue{name, bytes, producer, std::move(readers), persistent, {}};
}

// A dataflow DAG of n ops: graph inputs, one output per op read by a few later ops, some
// workspaces, the last op's output persistent as the network output.
std::vector<PlannedValue> random_values(std::mt19937& rng, int n) {
  std::vector<PlannedValue> values;
  std::uniform_int_distribution<std::size_t> size(0, 5000);
  std::bernoulli_distribution coin(0.3);
  for (int k = 0; k < 2; ++k) {
    PlannedValue input = value("in" + std::to_string(k), size(rng), -1, {}, true);
    input.readers.push_back(std::uniform_int_distribution<int>(0, n - 1)(rng));
    values.push_back(input);
  }
  for (int i = 0; i < n; ++i) {
    PlannedValue out = value("v" + std::to_string(i), size(rng), i, {});
    if (size(rng) < 250) out.bytes = 0;
    for (int j = i + 1; j < n; ++j) {
      // Mostly near readers, now and then a long skip connection.
      if ((j - i <= 3 && coin(rng)) || std::uniform_int_distribution<int>(0, 40)(rng) == 0) {
        out.readers.push_back(j);
      }
    }
    out.persistent = (i == n - 1);
    values.push_back(out);
    if (coin(rng)) values.push_back(value("ws" + std::to_string(i), size(rng), i, {i}));
  }
  return values;
}

// Independent oracle for lifetimes: every value here is pure dataflow, so op a precedes
// op b exactly when a chain of producer -> reader links leads from a to b.
std::vector<std::vector<bool>> dataflow_closure(int n, const std::vector<PlannedValue>& values) {
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  for (const PlannedValue& v : values) {
    for (const int r : v.readers) {
      if (v.producer >= 0 && r != v.producer) reach[v.producer][r] = true;
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    for (int j = i + 1; j < n; ++j) {
      if (!reach[i][j]) continue;
      for (int k = j + 1; k < n; ++k)
        reach[i][k] = reach[i][k] || reach[j][k];
    }
  }
  return reach;
}

}  // namespace

TEST_CASE("memory plan: random DAGs share bytes only between ordered lifetimes") {
  std::mt19937 rng(4242);
  std::size_t arenas = 0, totals = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const int n = 2 + trial % 40;
    const std::vector<PlannedValue> values = random_values(rng, n);
    const Graph graph = graph_of(n, values);
    const std::size_t alignment = std::size_t{1} << (trial % 9);
    const MemoryPlan plan = cgr::plan_memory(graph, values, alignment);
    INFO("trial ", trial, ", n = ", n);
    check_plan(graph, values, plan, alignment);

    // The same check against an oracle that does not go through Graph: overlapping values
    // must have every op of one strictly before the producer of the other.
    const auto reach = dataflow_closure(n, values);
    auto done_before = [&](const PlannedValue& a, const PlannedValue& b) {
      if (a.persistent || b.persistent || a.producer < 0 || b.producer < 0) return false;
      if (!reach[a.producer][b.producer]) return false;
      return std::all_of(a.readers.begin(), a.readers.end(),
                         [&](int r) { return reach[r][b.producer]; });
    };
    for (std::size_t a = 0; a < values.size(); ++a) {
      for (std::size_t b = a + 1; b < values.size(); ++b) {
        if (!overlap(plan, values, static_cast<int>(a), static_cast<int>(b))) continue;
        CHECK((done_before(values[a], values[b]) || done_before(values[b], values[a])));
      }
    }
    arenas += plan.arena_bytes;
    totals += plan.total_bytes;
  }
  // Sharing has to actually happen, or the planner is merely safe. These DAGs are wide
  // (many ops start from graph inputs only), so most of their data is genuinely live at the
  // same time; the chain and branch cases below pin down the amount of reuse exactly.
  CHECK(arenas * 10 < totals * 9);
}

TEST_CASE("memory plan: lifetimes_ordered") {
  // op0 -> op1 -> op2 -> op3 chain; v_i produced by op i and read by op i+1.
  std::vector<PlannedValue> values;
  for (int i = 0; i < 4; ++i) {
    values.push_back(value("v" + std::to_string(i), 64, i,
                           i < 3 ? std::vector<int>{i + 1} : std::vector<int>{}));
  }
  values.push_back(value("dead", 64, 0, {}));  // nobody reads it: ends at its producer
  values.push_back(value("input", 64, -1, {0}));
  const Graph graph = graph_of(4, values);
  using cgr::lifetimes_ordered;
  CHECK(lifetimes_ordered(graph, values[0], values[2]));
  CHECK(lifetimes_ordered(graph, values[0], values[3]));
  CHECK_FALSE(lifetimes_ordered(graph, values[0], values[1]));  // op1 reads v0, writes v1
  CHECK_FALSE(lifetimes_ordered(graph, values[2], values[0]));
  CHECK_FALSE(lifetimes_ordered(graph, values[1], values[1]));
  CHECK(lifetimes_ordered(graph, values[4], values[1]));
  CHECK_FALSE(lifetimes_ordered(graph, values[1], values[4]));
  // A graph input is live from before the first op: never finished before anything.
  CHECK_FALSE(lifetimes_ordered(graph, values[5], values[3]));
  CHECK_FALSE(lifetimes_ordered(graph, values[0], values[5]));
  PlannedValue persistent = values[0];
  persistent.persistent = true;
  CHECK_FALSE(lifetimes_ordered(graph, persistent, values[3]));
  persistent = values[3];
  persistent.persistent = true;
  CHECK_FALSE(lifetimes_ordered(graph, values[0], persistent));
}

TEST_CASE("memory plan: a 20-layer chain needs two buffers") {
  constexpr std::size_t kBytes = 1024;
  std::vector<PlannedValue> values;
  for (int i = 0; i < 20; ++i) {
    values.push_back(value("v" + std::to_string(i), kBytes, i,
                           i < 19 ? std::vector<int>{i + 1} : std::vector<int>{}));
  }
  const Graph graph = graph_of(20, values);
  const MemoryPlan plan = cgr::plan_memory(graph, values);
  check_plan(graph, values, plan, 64);
  CHECK(plan.total_bytes == 20 * kBytes);
  CHECK(plan.arena_bytes == 2 * kBytes);
  for (int i = 0; i < 20; ++i)
    CHECK(plan.offsets[i] == (i % 2) * kBytes);

  SUBCASE("with a persistent input and output, which own their bytes") {
    values.back().persistent = true;
    values.push_back(value("image", kBytes, -1, {0}, true));
    const Graph persistent_graph = graph_of(20, values);
    const MemoryPlan persistent_plan = cgr::plan_memory(persistent_graph, values);
    check_plan(persistent_graph, values, persistent_plan, 64);
    CHECK(persistent_plan.total_bytes == 21 * kBytes);
    CHECK(persistent_plan.arena_bytes == 4 * kBytes);
    CHECK(persistent_plan.offsets[20] == 0);       // the input
    CHECK(persistent_plan.offsets[19] == kBytes);  // the output
  }
}

TEST_CASE("memory plan: parallel branches never share bytes") {
  // conv1..3 on x -> c and conv4..6 on x -> f, concat(c, f) -> y.
  constexpr std::size_t kBytes = 4096;
  const std::vector<PlannedValue> values{
      value("x", kBytes, -1, {0, 3}, true), value("a", kBytes, 0, {1}),
      value("b", kBytes, 1, {2}),           value("c", kBytes, 2, {6}),
      value("d", kBytes, 3, {4}),           value("e", kBytes, 4, {5}),
      value("f", kBytes, 5, {6}),           value("y", kBytes, 6, {}, true)};
  const Graph graph = graph_of(7, values);
  REQUIRE(graph.max_width() == 2);
  const MemoryPlan plan = cgr::plan_memory(graph, values);
  check_plan(graph, values, plan, 64);
  const std::vector<int> branch1{1, 2, 3}, branch2{4, 5, 6};
  for (const int a : branch1) {
    for (const int b : branch2) {
      INFO(values[a].name, " vs ", values[b].name);
      CHECK_FALSE(overlap(plan, values, a, b));
    }
  }
  // Within a branch, a is dead once conv2 is done, so c (from conv3) takes its bytes;
  // likewise f takes d's. Pinned x and y plus four concurrently live values: 6 buffers.
  CHECK(plan.offsets[3] == plan.offsets[1]);
  CHECK(plan.offsets[6] == plan.offsets[4]);
  CHECK(plan.arena_bytes == 6 * kBytes);
  CHECK(plan.total_bytes == 8 * kBytes);
}

TEST_CASE("memory plan: workspaces of concurrent ops are separate, of ordered ops shared") {
  constexpr std::size_t kOut = 1024, kWorkspace = 8192;
  SUBCASE("two concurrent convolutions") {
    const std::vector<PlannedValue> values{
        value("x", kOut, -1, {0, 1}, true), value("ya", kOut, 0, {2}),
        value("yb", kOut, 1, {2}),          value("ws_a", kWorkspace, 0, {0}),
        value("ws_b", kWorkspace, 1, {1}),  value("y", kOut, 2, {}, true)};
    const Graph graph = graph_of(3, values);
    REQUIRE_FALSE(graph.ordered(0, 1));
    const MemoryPlan plan = cgr::plan_memory(graph, values);
    check_plan(graph, values, plan, 64);
    CHECK_FALSE(overlap(plan, values, 3, 4));
    CHECK_FALSE(overlap(plan, values, 3, 2));  // ws_a is busy while conv b writes yb
    CHECK_FALSE(overlap(plan, values, 4, 1));
  }
  SUBCASE("two convolutions in a chain") {
    const std::vector<PlannedValue> values{
        value("x", kOut, -1, {0}, true), value("h", kOut, 0, {1}), value("ws1", kWorkspace, 0, {0}),
        value("ws2", kWorkspace, 1, {1}), value("y", kOut, 1, {}, true)};
    const Graph graph = graph_of(2, values);
    const MemoryPlan plan = cgr::plan_memory(graph, values);
    check_plan(graph, values, plan, 64);
    CHECK(plan.offsets[2] == plan.offsets[3]);
    CHECK_FALSE(overlap(plan, values, 1, 2));  // h is written while ws1 is in use
    CHECK(plan.arena_bytes == 3 * kOut + kWorkspace);
  }
}

TEST_CASE("memory plan: a value with several writers is live from the first of them") {
  // op0: x -> u; op1: u -> v; op2: v -> y (part); op3: x -> y (part, beside op0..op2); op4: y.
  // y's producer op2 comes after u's last reader, but op3 writes y while u may still be live.
  constexpr std::size_t kBytes = 1024;
  std::vector<PlannedValue> values{value("x", kBytes, -1, {0, 3}, true), value("u", kBytes, 0, {1}),
                                   value("v", kBytes, 1, {2}), value("y", 2 * kBytes, 2, {4}),
                                   value("z", kBytes, 4, {}, true)};
  values[3].other_writers = {3};
  const Graph graph = graph_of(5, values);
  CHECK_FALSE(cgr::lifetimes_ordered(graph, values[1], values[3]));
  const MemoryPlan plan = cgr::plan_memory(graph, values);
  check_plan(graph, values, plan, 64);
  CHECK_FALSE(overlap(plan, values, 1, 3));
  CHECK_FALSE(overlap(plan, values, 2, 3));
  // With op3 left out, u is dead before op2 writes y: they could share.
  PlannedValue single = values[3];
  single.other_writers.clear();
  CHECK(cgr::lifetimes_ordered(graph, values[1], single));

  SUBCASE("a reader ordered after none of the writers is an error naming the value") {
    values[3].readers.push_back(0);
    CHECK_THROWS_WITH_AS(cgr::plan_memory(graph_of(5, values), values),
                         doctest::Contains("value 'y' is read by op 0"), cgr::Error);
  }
  SUBCASE("another writer without a producer is an error") {
    values[3].producer = -1;
    CHECK_THROWS_WITH_AS(cgr::plan_memory(graph_of(5, values), values),
                         doctest::Contains("value 'y' has another writer op 3 but no producer"),
                         cgr::Error);
  }
}

TEST_CASE("memory plan: offsets are aligned and odd sizes pack into aligned slots") {
  const std::vector<PlannedValue> values{
      value("in", 1, -1, {0}, true), value("a", 100, 0, {1}),   value("b", 37, 1, {2}),
      value("c", 300, 2, {3}),       value("empty", 0, 2, {3}), value("out", 5, 3, {}, true)};
  const Graph graph = graph_of(4, values);
  for (const std::size_t alignment : {1u, 8u, 256u}) {
    const MemoryPlan plan = cgr::plan_memory(graph, values, alignment);
    check_plan(graph, values, plan, alignment);
    CHECK(plan.total_bytes == 443);
    CHECK(plan.offsets[4] == 0);
  }
  const MemoryPlan plan = cgr::plan_memory(graph, values, 256);
  // in, out: 256 each; a and c alternate with b (c reuses a's slot, 300 bytes -> 2 slots).
  CHECK(plan.offsets[0] == 0);
  CHECK(plan.offsets[5] == 256);
  CHECK(plan.offsets[1] == 512);
  CHECK(plan.offsets[2] == 768);
  CHECK(plan.offsets[3] == 1024);  // 300 bytes do not fit in a's 256-byte slot below b
  CHECK(plan.arena_bytes == 1536);

  for (const std::size_t bad : {0u, 3u, 48u}) {
    CHECK_THROWS_WITH_AS(cgr::plan_memory(graph, values, bad), doctest::Contains("power of two"),
                         cgr::Error);
  }
}

TEST_CASE("memory plan: inconsistent values are errors naming the value") {
  const std::vector<PlannedValue> chain{value("a", 64, 0, {1}), value("b", 64, 1, {})};
  const Graph graph = graph_of(2, chain);
  CHECK_NOTHROW(cgr::plan_memory(graph, chain));
  CHECK_THROWS_WITH_AS(cgr::plan_memory(graph, {value("late", 64, 5, {})}),
                       doctest::Contains("late"), cgr::Error);
  CHECK_THROWS_WITH_AS(cgr::plan_memory(graph, {value("ghost", 64, 0, {9})}),
                       doctest::Contains("ghost"), cgr::Error);
  // b is read by op 0, which runs before op 1 writes it.
  CHECK_THROWS_WITH_AS(cgr::plan_memory(graph, {value("backwards", 64, 1, {0})}),
                       doctest::Contains("backwards"), cgr::Error);
  const Graph empty;
  const MemoryPlan nothing = cgr::plan_memory(empty, {});
  CHECK(nothing.arena_bytes == 0);
  CHECK(nothing.total_bytes == 0);
  CHECK(nothing.offsets.empty());
}
