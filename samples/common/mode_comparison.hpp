// What the branch samples print: the dependency analysis of the network, optionally its DOT,
// and the median latency of every mode of the device, side by side with the ratio to dag.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <cgr/engine.hpp>
#include <cgr/files.hpp>

#include "cgr/models/random_weights.hpp"
#include "common/timing.hpp"

namespace cgr::samples {

struct ModeComparison {
  Device device = Device::cpu;
  int threads = 0;
  int iterations = 50;
  std::string dot_path;
  bool dot_before_fusion = false;  // the DOT of the network's layers, not the engine's ops
};

inline void compare_modes(const Network& net, const std::string& title, const ModeComparison& o) {
  const Graph graph = net.graph();
  fmt::print("{}: {} layers, critical path {}, width {}\n", title, graph.op_count(),
             graph.critical_path_length(), graph.max_width());
  const Weights weights = models::random_weights(net, 1);
  const TensorDesc& input = net.desc(net.inputs().at(0));
  const auto x = models::random_values(static_cast<std::size_t>(input.shape.numel()), 2);
  std::vector<Mode> modes{Mode::dag, Mode::eager};
  if (o.device == Device::cuda) modes.insert(modes.begin() + 1, Mode::stream_graph);
  std::vector<Engine> engines;
  std::vector<ExecutionContext> contexts;
  for (Mode mode : modes) {
    engines.push_back(
        Engine::build(net, weights, {.device = o.device, .mode = mode, .threads = o.threads}));
    contexts.push_back(engines.back().create_context());
    std::copy(x.begin(), x.end(), contexts.back().input_buffer(input.name).begin());
  }
  if (!o.dot_path.empty()) {  // written before anything is timed: a bad path fails first
    // The graph after fusion, as cgr-bench --export-dot draws it; the layers when asked.
    write_text_file(o.dot_path, o.dot_before_fusion ? graph.to_dot(title + " (layers)")
                                                    : engines[0].to_dot(title));
    fmt::print("DOT written to {}\n", o.dot_path);
  }
  const EngineInfo info = engines[0].info();
  fmt::print("engine: {} ops after fusion, {} edges, critical path {}, width {}, device {}\n",
             info.ops, info.edges, info.critical_path, info.max_width, to_string(o.device));
  std::vector<ExecutionContext*> pointers;
  for (auto& ctx : contexts)
    pointers.push_back(&ctx);
  const auto medians = interleaved_median_ms(pointers, o.iterations);
  for (std::size_t k = 0; k < modes.size(); ++k) {
    fmt::print("  {:<13} median {:9.3f} ms   ({:.2f}x dag)\n", to_string(modes[k]), medians[k],
               medians[k] / medians[0]);
  }
}

}  // namespace cgr::samples
