// Activation memory planner: first-fit offset assignment in one arena, where two values may
// share bytes only when the dependency DAG already orders their lifetimes. The planner asks
// the graph and never changes it, so memory reuse can never serialise parallel branches:
// two values that could be live at the same time (on concurrent branches, or two concurrent
// ops' workspaces) simply get disjoint bytes.
#include "cgr/memory_plan.hpp"

#include <algorithm>
#include <limits>

#include "cgr/error.hpp"

namespace cgr {
namespace {

// What the ordering test needs of a value, gathered once so the planner's O(values^2)
// pair tests do not rebuild it.
struct Lifetime {
  std::vector<int> writers;   // producer and other writers
  std::vector<int> touchers;  // writers and readers: every op that uses the bytes
  bool shareable = false;     // neither persistent nor a graph input
};

Lifetime lifetime_of(const PlannedValue& value) {
  Lifetime lifetime;
  if (value.producer >= 0) lifetime.writers.push_back(value.producer);
  lifetime.writers.insert(lifetime.writers.end(), value.other_writers.begin(),
                          value.other_writers.end());
  lifetime.shareable = !value.persistent && value.producer >= 0;
  lifetime.touchers = lifetime.writers;
  lifetime.touchers.insert(lifetime.touchers.end(), value.readers.begin(), value.readers.end());
  std::sort(lifetime.touchers.begin(), lifetime.touchers.end());
  lifetime.touchers.erase(std::unique(lifetime.touchers.begin(), lifetime.touchers.end()),
                          lifetime.touchers.end());
  return lifetime;
}

// A strict ancestor relation, not "ancestor or equal": an op that reads `first` and writes
// `second` would otherwise get the same bytes for its input and output. Every writer of
// `second` must come after all of `first`'s touchers, since any of them may write first.
bool finished_before(const Graph& graph, const Lifetime& first, const Lifetime& second) {
  if (!first.shareable || !second.shareable) return false;
  return std::all_of(first.touchers.begin(), first.touchers.end(), [&](int op) {
    return std::all_of(second.writers.begin(), second.writers.end(),
                       [&](int writer) { return graph.reaches(op, writer); });
  });
}

std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

void validate(const Graph& graph, const std::vector<PlannedValue>& values, std::size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    fail("plan_memory: alignment {} is not a power of two", alignment);
  }
  const int n = graph.op_count();
  // Keeps every offset + bytes + alignment below the size_t limit, so no sum can wrap.
  const std::size_t max_bytes = std::numeric_limits<std::size_t>::max() / 4;
  std::size_t total = 0;
  for (const PlannedValue& value : values) {
    if (value.bytes > max_bytes - total) {
      fail("plan_memory: value '{}' ({} bytes) takes the total past what an arena can hold",
           value.name, value.bytes);
    }
    total += value.bytes;
    if (value.producer < -1 || value.producer >= n) {
      fail("plan_memory: value '{}' has producer op {}, but the graph has {} ops", value.name,
           value.producer, n);
    }
    for (const int writer : value.other_writers) {
      if (value.producer < 0 || writer < 0 || writer >= n) {
        fail("plan_memory: value '{}' has another writer op {} {}", value.name, writer,
             value.producer < 0 ? "but no producer" : fmt::format("but the graph has {} ops", n));
      }
    }
    for (const int reader : value.readers) {
      if (reader < 0 || reader >= n) {
        fail("plan_memory: value '{}' is read by op {}, but the graph has {} ops", value.name,
             reader, n);
      }
      // A read the graph does not order after the write is a read of garbage, and the
      // lifetime test (which only looks at ancestors of producers) would be unsound.
      const auto writes_before = [&](int writer) {
        return writer == reader || graph.reaches(writer, reader);
      };
      if (value.producer >= 0 && !writes_before(value.producer) &&
          std::none_of(value.other_writers.begin(), value.other_writers.end(), writes_before)) {
        fail(
            "plan_memory: value '{}' is read by op {} ('{}'), which the graph does not order "
            "after its producer op {} ('{}'); declare the read in that op's OpAccess",
            value.name, reader, graph.op(reader).name, value.producer,
            graph.op(value.producer).name);
      }
    }
  }
}

}  // namespace

bool lifetimes_ordered(const Graph& graph, const PlannedValue& first, const PlannedValue& second) {
  return finished_before(graph, lifetime_of(first), lifetime_of(second));
}

MemoryPlan plan_memory(const Graph& graph, const std::vector<PlannedValue>& values,
                       std::size_t alignment) {
  validate(graph, values, alignment);

  std::vector<int> position(static_cast<std::size_t>(graph.op_count()));
  for (int i = 0; i < graph.op_count(); ++i)
    position[graph.topological_order()[i]] = i;

  const int count = static_cast<int>(values.size());
  std::vector<Lifetime> lifetimes;
  lifetimes.reserve(values.size());
  for (const PlannedValue& value : values)
    lifetimes.push_back(lifetime_of(value));

  // Persistent values conflict with everything, so they go first and form one block at the
  // bottom of the arena instead of fragmenting it. The rest follow the order in which they
  // come to life, larger first among values born at the same op (first-fit packs better
  // when big blocks are placed before the small ones that could split their gap).
  std::vector<int> placement_order(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i)
    placement_order[i] = i;
  auto born = [&](int i) {
    if (values[i].producer < 0) return -1;
    int first = position[values[i].producer];
    for (const int writer : values[i].other_writers)
      first = std::min(first, position[writer]);
    return first;
  };
  std::sort(placement_order.begin(), placement_order.end(), [&](int a, int b) {
    if (values[a].persistent != values[b].persistent) return values[a].persistent;
    if (born(a) != born(b)) return born(a) < born(b);
    if (values[a].bytes != values[b].bytes) return values[a].bytes > values[b].bytes;
    return a < b;
  });

  MemoryPlan plan;
  plan.offsets.assign(values.size(), 0);
  struct Interval {
    std::size_t begin;
    std::size_t end;
  };
  std::vector<int> placed;
  std::vector<Interval> blocked;
  for (const int v : placement_order) {
    const std::size_t bytes = values[v].bytes;
    plan.total_bytes += bytes;
    if (bytes == 0) continue;  // occupies nothing; offset 0 is as good as any

    blocked.clear();
    for (const int p : placed) {
      if (finished_before(graph, lifetimes[p], lifetimes[v]) ||
          finished_before(graph, lifetimes[v], lifetimes[p])) {
        continue;
      }
      blocked.push_back(Interval{plan.offsets[p], plan.offsets[p] + values[p].bytes});
    }
    std::sort(blocked.begin(), blocked.end(),
              [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
    // Walk the blocked intervals by start: the first gap that fits wins. Blocked intervals
    // may overlap each other (they can share bytes among themselves), hence the skip.
    std::size_t offset = 0;
    for (const Interval& interval : blocked) {
      if (interval.end <= offset) continue;
      if (interval.begin >= offset + bytes) break;
      offset = align_up(interval.end, alignment);
    }
    plan.offsets[v] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, align_up(offset + bytes, alignment));
    placed.push_back(v);
  }
  return plan;
}

}  // namespace cgr
