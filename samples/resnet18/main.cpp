// ResNet-18 on cgr: builds torchvision's ResNet-18 with the Network API, binds deterministic
// seeded weights, runs a seeded image and prints the top-5 classes and the latency of each
// executor mode side by side. (The auxiliary early-exit version of this sample comes with the
// exits work; this one is the backbone it hangs off.)
//
//   resnet18 [--device cpu|cuda] [--verbose] [--threads N] [--size S] [--iterations N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <cgr/engine.hpp>

#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18.hpp"
#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/timing.hpp"

namespace {

struct Options {
  std::string device;  // empty: cuda when there is a device, else cpu
  bool verbose = false;
  int threads = 0;
  std::int64_t size = 224;
  int iterations = 20;
};

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app(
      "torchvision's ResNet-18 with seeded weights: the graph facts, the top-5 classes "
      "of a seeded image and the latency of every mode of the device, side by side.",
      "resnet18");
  cgr::samples::add_device_option(app, o.device, o.verbose);
  cgr::samples::add_threads_option(app, o.threads);
  cgr::samples::add_size_option(app, o.size, "input height and width");
  cgr::samples::add_iterations_option(app, o.iterations);
  cgr::samples::parse_command_line(app, argc, argv);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  return cgr::samples::run_guarded("resnet18", [&] {
    const cgr::Device device = cgr::samples::choose_device(o.device, o.verbose);

    const cgr::Network net = cgr::models::resnet18(1, o.size);
    const cgr::Weights weights = cgr::models::random_weights(net, 18);
    const std::vector<float> image =
        cgr::models::random_values(static_cast<std::size_t>(3 * o.size * o.size), 2024);

    std::vector<cgr::Mode> modes{cgr::Mode::dag, cgr::Mode::eager};
    if (device == cgr::Device::cuda) modes.insert(modes.begin() + 1, cgr::Mode::stream_graph);
    std::vector<cgr::Engine> engines;
    std::vector<cgr::ExecutionContext> contexts;
    for (cgr::Mode mode : modes) {
      engines.push_back(
          cgr::Engine::build(net, weights, {.device = device, .mode = mode, .threads = o.threads}));
      contexts.push_back(engines.back().create_context());
    }
    const cgr::EngineInfo info = engines[0].info();
    fmt::print(
        "ResNet-18, 1x3x{}x{}, device {}, {} layers -> {} ops after fusion, "
        "{} edges, critical path {}, width {}\n",
        o.size, o.size, cgr::to_string(device), info.layers, info.ops, info.edges,
        info.critical_path, info.max_width);
    fmt::print("activation arena {:.2f} MiB (no reuse: {:.2f} MiB), weights {:.1f} MiB\n",
               info.arena_bytes / 1048576.0, info.activation_bytes / 1048576.0,
               info.weight_bytes / 1048576.0);
    const cgr::Tensor logits_tensor = contexts[0].infer({{"image", image}}).output("logits");
    const auto logits = logits_tensor.f32();
    std::vector<int> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                      [&](int a, int b) { return logits[a] > logits[b]; });
    fmt::print("top-5 classes (seeded weights, seeded image):");
    for (int k = 0; k < 5; ++k)
      fmt::print(" {} ({:.4f})", order[k], logits[order[k]]);
    fmt::print("\n");
    for (std::size_t k = 1; k < contexts.size(); ++k) {
      std::copy(image.begin(), image.end(), contexts[k].input_buffer("image").begin());
    }
    std::vector<cgr::ExecutionContext*> pointers;
    for (auto& ctx : contexts)
      pointers.push_back(&ctx);
    const auto medians = cgr::samples::interleaved_median_ms(pointers, o.iterations);
    fmt::print("median latency over {} interleaved rounds, {} threads:\n", o.iterations,
               o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency()));
    for (std::size_t k = 0; k < modes.size(); ++k) {
      fmt::print("  {:<13} {:8.2f} ms   ({:.2f}x dag)\n", cgr::to_string(modes[k]), medians[k],
                 medians[k] / medians[0]);
    }
    return 0;
  });
}
