// Dependency analysis. A Graph is built from ops listed in program order, each declaring the
// resources (values, buffers) it reads and writes. Edges come from the hazards between them:
//   RAW  a later op reads what an earlier op wrote,
//   WAR  a later op overwrites what an earlier op read,
//   WAW  a later op overwrites what an earlier op wrote,
// and are then transitively reduced, so every remaining edge orders data that nothing else
// orders. Ops with no path between them may run at the same time: that is the concurrency
// the executors exploit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cgr {

// Resource access of one op. Resource ids are any non-negative integers.
struct OpAccess {
  std::string name;
  std::string label;  // shown in the DOT export (e.g. the layer kind); may be empty
  std::vector<int> reads;
  std::vector<int> writes;
};

enum Hazard : std::uint8_t { kRaw = 1, kWar = 2, kWaw = 4 };

struct Edge {
  int from = 0;
  int to = 0;
  std::uint8_t hazards = 0;  // bitmask of Hazard: why this ordering exists

  bool operator==(const Edge& other) const { return from == other.from && to == other.to; }
};

class Graph {
 public:
  Graph() = default;
  // Ops are given in a valid sequential (program) order.
  explicit Graph(std::vector<OpAccess> ops);

  int op_count() const { return static_cast<int>(ops_.size()); }
  const OpAccess& op(int index) const { return ops_[index]; }

  // Transitively reduced edges, sorted by (from, to).
  const std::vector<Edge>& edges() const { return edges_; }
  const std::vector<int>& successors(int op) const { return successors_[op]; }
  const std::vector<int>& predecessors(int op) const { return predecessors_[op]; }
  // A topological order (program order is one; this one is stable by level).
  const std::vector<int>& topological_order() const { return order_; }

  // True when a path of one or more edges leads from `from` to `to`.
  bool reaches(int from, int to) const;
  // True when the two ops are ordered one way or the other.
  bool ordered(int a, int b) const { return reaches(a, b) || reaches(b, a); }

  // Number of ops on the longest dependency chain.
  int critical_path_length() const { return critical_path_; }
  // Largest set of ops with no path between any two of them (maximum antichain).
  int max_width() const { return max_width_; }
  // Level of each op: 0 for ops with no predecessor, else 1 + max level of its predecessors.
  const std::vector<int>& levels() const { return levels_; }
  // Each op's lane: a decomposition of the ops into chains (paths); the DOT export draws one
  // lane per chain, so parallel branches appear side by side.
  const std::vector<int>& lanes() const { return lanes_; }
  int lane_count() const { return lane_count_; }

  // What a caller knows better than the graph: per op a short label and a tooltip, per edge
  // (in edges() order) a label such as the shape of the data it carries. Empty: the defaults
  // (the op's name and label; the hazards of edges other than read-after-write).
  struct DotText {
    std::vector<std::string> labels, tooltips, edge_labels;
  };
  // Graphviz DOT of the reduced graph: ops ranked by level, coloured by lane.
  std::string to_dot(const std::string& title = "cgr") const;
  std::string to_dot(const std::string& title, const DotText& text) const;

 private:
  std::vector<OpAccess> ops_;
  std::vector<Edge> edges_;
  std::vector<std::vector<int>> successors_;
  std::vector<std::vector<int>> predecessors_;
  std::vector<int> order_;
  std::vector<std::vector<std::uint64_t>> reach_;  // reach_[a] bit b: path a -> b
  std::vector<int> levels_;
  std::vector<int> lanes_;
  int lane_count_ = 0;
  int critical_path_ = 0;
  int max_width_ = 0;
};

}  // namespace cgr
