// Dependency analysis: hazard edges from per-resource last-writer / readers tracking (the
// tinygrad idea, made explicit), a transitive reduction over reachability bitsets, and the
// figures the bench and the DOT export report (levels, critical path, maximum antichain,
// chain lanes).
//
// Program order is itself a topological order (every hazard edge points forward), so all
// passes run in index order and need no explicit sort. Reachability is kept as one bitset
// per op: n^2/8 bytes (0.5 MB for 2000 ops) buys O(1) `reaches` queries, which the memory
// planner makes for nearly every pair of values.
#include "cgr/graph.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <unordered_map>
#include <utility>

#include "cgr/error.hpp"

namespace cgr {
namespace {

using Bitset = std::vector<std::uint64_t>;

std::size_t word_count(int bits) {
  return (static_cast<std::size_t>(bits) + 63) / 64;
}

void set_bit(Bitset& set, int bit) {
  set[static_cast<std::size_t>(bit) / 64] |= std::uint64_t{1} << (bit % 64);
}

bool test_bit(const Bitset& set, int bit) {
  return (set[static_cast<std::size_t>(bit) / 64] >> (bit % 64)) & 1u;
}

// Maximum bipartite matching between two copies of the ops (left u, right v, allowed when
// bit v of adjacency[u] is set). Kuhn's augmenting paths over bitsets: the scan for an
// unvisited neighbour is a word-wide AND, so one search costs O(n^2 / 64) and the whole
// matching O(n^3 / 64), about 10^8 word operations for 2000 ops even on a dense closure.
// Returns, for each left vertex, its matched right vertex or -1.
std::vector<int> max_bipartite_matching(const std::vector<Bitset>& adjacency) {
  const int n = static_cast<int>(adjacency.size());
  const std::size_t words = word_count(n);
  std::vector<int> right_of_left(static_cast<std::size_t>(n), -1);
  std::vector<int> left_of_right(static_cast<std::size_t>(n), -1);

  // A greedy first pass settles most vertices cheaply and, because it takes the
  // lowest-numbered free neighbour, makes the result (and so the lanes) predictable.
  Bitset free_right(words, ~std::uint64_t{0});
  for (int u = 0; u < n; ++u) {
    for (std::size_t w = 0; w < words; ++w) {
      const std::uint64_t candidates = adjacency[u][w] & free_right[w];
      if (candidates == 0) continue;
      const int v = static_cast<int>(w * 64) + std::countr_zero(candidates);
      right_of_left[u] = v;
      left_of_right[v] = u;
      free_right[w] &= ~(std::uint64_t{1} << (v % 64));
      break;
    }
  }

  // Right vertices visited by a failed search cannot lie on any augmenting path until the
  // matching changes, so `visited` is only cleared after a success.
  Bitset visited(words, 0);
  struct Frame {
    int left;
    std::size_t word;
    int right;
  };
  std::vector<Frame> stack;  // explicit, so deep chains cannot overflow the call stack
  for (int start = 0; start < n; ++start) {
    if (right_of_left[start] >= 0) continue;
    stack.assign(1, Frame{start, 0, -1});
    bool augmented = false;
    while (!stack.empty() && !augmented) {
      Frame& frame = stack.back();
      int next = -1;
      for (; frame.word < words; ++frame.word) {
        const std::uint64_t candidates = adjacency[frame.left][frame.word] & ~visited[frame.word];
        if (candidates != 0) {
          next = static_cast<int>(frame.word * 64) + std::countr_zero(candidates);
          break;
        }
      }
      if (next < 0) {
        stack.pop_back();
        continue;
      }
      set_bit(visited, next);
      frame.right = next;
      if (left_of_right[next] < 0) {
        // Flip the alternating path: every left vertex on the stack takes the right vertex
        // it reached, and the last one takes the free vertex just found.
        for (const Frame& step : stack) {
          right_of_left[step.left] = step.right;
          left_of_right[step.right] = step.left;
        }
        augmented = true;
      } else {
        stack.push_back(Frame{left_of_right[next], 0, -1});
      }
    }
    if (augmented) std::fill(visited.begin(), visited.end(), 0);
  }
  return right_of_left;
}

// Escapes text for a double-quoted DOT string. A newline becomes DOT's own "\n" line break.
std::string dot_escape(const std::string& text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '"':
        escaped += "\\\"";
        break;
      case '\\':
        escaped += "\\\\";
        break;
      case '\n':
        escaped += "\\n";
        break;
      case '\r':
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string hazard_names(std::uint8_t hazards) {
  std::string names;
  const std::pair<Hazard, const char*> kinds[] = {{kRaw, "RAW"}, {kWar, "WAR"}, {kWaw, "WAW"}};
  for (const auto& [bit, name] : kinds) {
    if ((hazards & bit) == 0) continue;
    if (!names.empty()) names += '+';
    names += name;
  }
  return names;
}

// Raw hazard edges in program order, before reduction. Keyed by (from, to) so duplicate
// pairs merge and OR their hazard bits.
std::vector<Edge> hazard_edges(const std::vector<OpAccess>& ops) {
  struct ResourceState {
    int last_writer = -1;
    std::vector<int> readers;  // readers since the last write
  };
  std::unordered_map<int, ResourceState> resources;
  std::unordered_map<std::uint64_t, std::uint8_t> found;
  auto add = [&](int from, int to, Hazard hazard) {
    if (from < 0 || from == to) return;  // no writer yet, or an in-place op touching itself
    const std::uint64_t key =
        (static_cast<std::uint64_t>(from) << 32) | static_cast<std::uint32_t>(to);
    found[key] |= hazard;
  };

  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const OpAccess& op = ops[i];
    for (const int r : op.reads)
      add(resources[r].last_writer, i, kRaw);
    for (const int w : op.writes) {
      ResourceState& state = resources[w];
      for (const int reader : state.readers)
        add(reader, i, kWar);
      add(state.last_writer, i, kWaw);
    }
    // Updates come after all hazards of this op, so an op that lists a resource twice or
    // both reads and writes it never sees its own access as an earlier one.
    for (const int w : op.writes) {
      ResourceState& state = resources[w];
      state.last_writer = i;
      state.readers.clear();
    }
    for (const int r : op.reads) {
      ResourceState& state = resources[r];
      // An op that also writes r is its last writer: later writers order after it by WAW.
      if (state.last_writer == i) continue;
      if (state.readers.empty() || state.readers.back() != i) state.readers.push_back(i);
    }
  }

  std::vector<Edge> edges;
  edges.reserve(found.size());
  for (const auto& [key, hazards] : found) {
    edges.push_back(
        Edge{static_cast<int>(key >> 32), static_cast<int>(key & 0xffffffffu), hazards});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.from != b.from ? a.from < b.from : a.to < b.to;
  });
  return edges;
}

}  // namespace

Graph::Graph(std::vector<OpAccess> ops) : ops_(std::move(ops)) {
  const int n = op_count();
  for (int i = 0; i < n; ++i) {
    const OpAccess& op = ops_[i];
    for (const auto* list : {&op.reads, &op.writes}) {
      for (const int resource : *list) {
        if (resource < 0) {
          fail("op {} ('{}'): resource id {} is negative; resource ids must be >= 0", i, op.name,
               resource);
        }
      }
    }
  }

  const std::vector<Edge> all_edges = hazard_edges(ops_);
  std::vector<std::vector<const Edge*>> out_edges(static_cast<std::size_t>(n));
  for (const Edge& edge : all_edges)
    out_edges[edge.from].push_back(&edge);

  // Reverse program order visits every successor before its predecessors. `indirect` is
  // what u reaches through its successors; an edge u -> v is implied by another path
  // exactly when v is in it (v cannot reach itself, so v's own reach set is harmless).
  const std::size_t words = word_count(n);
  reach_.assign(static_cast<std::size_t>(n), Bitset(words, 0));
  std::vector<std::vector<Edge>> kept(static_cast<std::size_t>(n));
  Bitset indirect(words);
  for (int u = n - 1; u >= 0; --u) {
    std::fill(indirect.begin(), indirect.end(), 0);
    for (const Edge* edge : out_edges[u]) {
      const Bitset& via = reach_[edge->to];
      for (std::size_t w = 0; w < words; ++w)
        indirect[w] |= via[w];
    }
    Bitset& reach = reach_[u];
    reach = indirect;
    for (const Edge* edge : out_edges[u]) {
      set_bit(reach, edge->to);
      if (!test_bit(indirect, edge->to)) kept[u].push_back(*edge);
    }
  }

  successors_.assign(static_cast<std::size_t>(n), {});
  predecessors_.assign(static_cast<std::size_t>(n), {});
  for (int u = 0; u < n; ++u) {
    for (const Edge& edge : kept[u]) {
      edges_.push_back(edge);
      successors_[u].push_back(edge.to);
      predecessors_[edge.to].push_back(u);  // filled in increasing u, so already sorted
    }
  }

  levels_.assign(static_cast<std::size_t>(n), 0);
  for (int v = 0; v < n; ++v) {
    for (const int p : predecessors_[v])
      levels_[v] = std::max(levels_[v], levels_[p] + 1);
    critical_path_ = std::max(critical_path_, levels_[v] + 1);
  }
  order_.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    order_[i] = i;
  std::stable_sort(order_.begin(), order_.end(),
                   [&](int a, int b) { return levels_[a] < levels_[b]; });

  // Dilworth: a maximum antichain is as large as a minimum chain cover of the partial order,
  // which is n minus a maximum matching in the comparability (closure) bipartite graph.
  const std::vector<int> closure_matching = max_bipartite_matching(reach_);
  max_width_ = n - static_cast<int>(std::count_if(closure_matching.begin(), closure_matching.end(),
                                                  [](int v) { return v >= 0; }));

  // Lanes are drawn along edges, so they must be paths in the reduced graph: a minimum path
  // cover, i.e. the same matching but on reduced edges only. It can need more lanes than
  // max_width (chains in the closure may skip over ops), which is fine for drawing.
  std::vector<Bitset> reduced(static_cast<std::size_t>(n), Bitset(words, 0));
  for (const Edge& edge : edges_)
    set_bit(reduced[edge.from], edge.to);
  const std::vector<int> next_in_lane = max_bipartite_matching(reduced);
  lanes_.assign(static_cast<std::size_t>(n), -1);
  for (const int head : order_) {
    if (lanes_[head] >= 0) continue;
    // The first unassigned op in topological order starts its lane: any lane predecessor
    // sits on a lower level and would already have been walked through.
    for (int op = head; op >= 0; op = next_in_lane[op])
      lanes_[op] = lane_count_;
    ++lane_count_;
  }
}

bool Graph::reaches(int from, int to) const {
  const int n = op_count();
  if (from < 0 || from >= n || to < 0 || to >= n) {
    fail("Graph::reaches({}, {}): op index out of range; the graph has {} ops", from, to, n);
  }
  return test_bit(reach_[from], to);
}

std::string Graph::to_dot(const std::string& title) const {
  return to_dot(title, DotText{});
}

std::string Graph::to_dot(const std::string& title, const DotText& text) const {
  auto given = [](const std::vector<std::string>& texts, std::size_t i) -> const std::string* {
    return i < texts.size() && !texts[i].empty() ? &texts[i] : nullptr;
  };
  // ColorBrewer Set3: light fills that keep black labels readable.
  static constexpr const char* kPalette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072",
                                             "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
                                             "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};
  constexpr std::size_t kColours = sizeof(kPalette) / sizeof(kPalette[0]);

  std::string dot = fmt::format("digraph \"{}\" {{\n", dot_escape(title));
  dot += "  rankdir=TB;\n";
  dot += "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n";
  dot += "  edge [fontname=\"Helvetica\", fontsize=10, fontcolor=\"#444444\"];\n";
  for (int i = 0; i < op_count(); ++i) {
    const OpAccess& op = ops_[i];
    const auto index = static_cast<std::size_t>(i);
    const std::string* label = given(text.labels, index);
    const std::string shown = label != nullptr   ? *label
                              : op.label.empty() ? op.name
                                                 : op.name + "\n" + op.label;
    const std::string* tooltip = given(text.tooltips, index);
    dot += fmt::format(
        "  op{} [label=\"{}\", fillcolor=\"{}\"{}];\n", i, dot_escape(shown),
        kPalette[static_cast<std::size_t>(lanes_[i]) % kColours],
        tooltip != nullptr ? fmt::format(", tooltip=\"{}\"", dot_escape(*tooltip)) : std::string());
  }
  // order_ is sorted by level, so each level is one contiguous run.
  for (std::size_t begin = 0; begin < order_.size();) {
    std::size_t end = begin;
    dot += "  { rank=same;";
    while (end < order_.size() && levels_[order_[end]] == levels_[order_[begin]]) {
      dot += fmt::format(" op{};", order_[end]);
      ++end;
    }
    dot += " }\n";
    begin = end;
  }
  for (std::size_t e = 0; e < edges_.size(); ++e) {
    const Edge& edge = edges_[e];
    const std::string* label = given(text.edge_labels, e);
    if (edge.hazards == kRaw) {
      dot += label != nullptr ? fmt::format("  op{} -> op{} [label=\"{}\"];\n", edge.from, edge.to,
                                            dot_escape(*label))
                              : fmt::format("  op{} -> op{};\n", edge.from, edge.to);
    } else {
      // Orderings that exist only because storage is reused deserve to stand out.
      const char* style = (edge.hazards & kRaw) ? "solid" : "dashed";
      dot += fmt::format("  op{} -> op{} [label=\"{}\", style={}];\n", edge.from, edge.to,
                         hazard_names(edge.hazards), style);
    }
  }
  dot += "}\n";
  return dot;
}

}  // namespace cgr
