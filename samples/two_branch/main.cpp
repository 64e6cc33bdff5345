// The network users ask about first: two independent conv chains on one input, concatenated.
//   y = conv3(conv2(conv1(x)));  z = conv6(conv5(conv4(x)));  out = cat((y, z), dim=1)
// Prints the dependency analysis (the two groups have no path between them), optionally the
// DOT, and the median latency of each mode side by side with the ratio to dag.
//
//   two_branch [--device cpu|cuda] [--size S] [--width W] [--threads N] [--iterations N]
//              [--dot FILE]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <cgr/engine.hpp>
#include <fmt/format.h>

#include "common/timing.hpp"
#include "models/random_weights.hpp"
#include "models/two_branch.hpp"

namespace {

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "two_branch: %s\nusage: two_branch [--device cpu|cuda] [--size S] [--width W] "
               "[--threads N] [--iterations N] [--dot FILE]\n",
               problem.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cpu", dot_path;
  cgr::models::TwoBranchOptions model;
  int threads = 0, iterations = 50;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    try {
      if (arg == "--device") device_name = value();
      else if (arg == "--size") model.size = std::stoll(value());
      else if (arg == "--width") model.width = std::stoll(value());
      else if (arg == "--threads") threads = std::stoi(value());
      else if (arg == "--iterations") iterations = std::max(1, std::stoi(value()));
      else if (arg == "--dot") dot_path = value();
      else usage("unknown argument " + arg);
    } catch (const std::logic_error&) {
      usage("bad number for " + arg);
    }
  }
  try {
    const cgr::Device device = cgr::parse_device(device_name);
    const cgr::Network net = cgr::models::two_branch(model);
    const cgr::Graph graph = net.graph();
    fmt::print("two-branch: 1x{}x{}x{} input, {} channels per conv; {} layers, critical path {}, "
               "width {}\n",
               model.channels, model.size, model.size, model.width, graph.op_count(),
               graph.critical_path_length(), graph.max_width());
    if (!dot_path.empty()) {
      std::ofstream(dot_path) << graph.to_dot("two_branch");
      fmt::print("DOT written to {}\n", dot_path);
    }
    const cgr::Weights weights = cgr::models::random_weights(net, 1);
    const auto x = cgr::models::random_values(
        static_cast<std::size_t>(model.channels * model.size * model.size), 2);
    std::vector<cgr::Mode> modes{cgr::Mode::dag, cgr::Mode::eager};
    if (device == cgr::Device::cuda) modes.insert(modes.begin() + 1, cgr::Mode::stream_graph);
    std::vector<cgr::Engine> engines;
    std::vector<cgr::ExecutionContext> contexts;
    for (cgr::Mode mode : modes) {
      engines.push_back(
          cgr::Engine::build(net, weights, {.device = device, .mode = mode, .threads = threads}));
      contexts.push_back(engines.back().create_context());
      std::copy(x.begin(), x.end(), contexts.back().input_buffer("x").begin());
    }
    std::vector<cgr::ExecutionContext*> pointers;
    for (auto& ctx : contexts) pointers.push_back(&ctx);
    const auto medians = cgr::samples::interleaved_median_ms(pointers, iterations);
    for (std::size_t k = 0; k < modes.size(); ++k) {
      fmt::print("  {:<13} median {:9.3f} ms   ({:.2f}x dag)\n", cgr::to_string(modes[k]),
                 medians[k], medians[k] / medians[0]);
    }
  } catch (const cgr::Error& e) {
    std::fprintf(stderr, "two_branch: %s\n", e.what());
    return 1;
  }
  return 0;
}
