// Activation memory plan: every value (activation or workspace) gets an offset in one arena.
// Two values may share bytes only when the dependency DAG already orders them: every op that
// touches the first is a strict ancestor of the op that writes the second (or the other way
// round). The planner never adds an edge to save memory, so reuse never costs concurrency.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cgr/graph.hpp"

namespace cgr {

struct PlannedValue {
  std::string name;
  std::size_t bytes = 0;
  int producer = -1;         // op that writes it; -1: written before any op (a graph input)
  std::vector<int> readers;  // ops that read it (a workspace lists its own op)
  bool persistent = false;   // inputs and outputs: live for the whole inference, never shared
  // Ops besides the producer that write parts of it: a Concat output whose inputs are written
  // in place. Its bytes are live from the first of its writers on; a reader need only be
  // ordered after one of them (it may read just that writer's part).
  std::vector<int> other_writers;
};

struct MemoryPlan {
  std::vector<std::size_t> offsets;  // per value, in bytes from the arena start
  std::size_t arena_bytes = 0;       // size of the arena
  std::size_t total_bytes = 0;       // sum of all value sizes (what no reuse would need)
};

// True when `first` is finished with before `second` is written, so they may share bytes.
bool lifetimes_ordered(const Graph& graph, const PlannedValue& first, const PlannedValue& second);

// Offsets are multiples of `alignment` (a power of two).
MemoryPlan plan_memory(const Graph& graph, const std::vector<PlannedValue>& values,
                       std::size_t alignment = 64);

}  // namespace cgr
