// ResNet-18 with auxiliary early exits after layer1, layer2 and layer3.
// Runs one image under the chosen exit policy and prints, per exit, the head's top-1 class,
// its confidence and whether it fired, which exit answered, and the latency of the three
// policies side by side (off: backbone only; all: every head, concurrently with the backbone;
// early: a confident head stops the rest).
//
//   resnet18_exits [--device cuda|cpu] [--weights FILE.safetensors] [--image FILE.npy]
//                  [--exits off|all|early] [--threshold T] [--classes N]
//                  [--export-output DIR] [--threads N] [--iterations N] [--size S]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <cgr/engine.hpp>
#include <cgr/npy.hpp>

#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18_exits.hpp"
#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/timing.hpp"

namespace {

struct Options {
  std::string device;  // empty: cuda when there is a device, else cpu
  std::string weights, image, export_dir;
  cgr::ExitPolicy policy = cgr::ExitPolicy::early;
  float threshold = 0.9f;
  std::int64_t classes = 0;  // 0: from the weights file, else 1000
  std::int64_t size = 224;
  int threads = 0, iterations = 20;
};

Options parse(int argc, char** argv) {
  Options o;
  std::string policy = "early";
  CLI::App app(
      "ResNet-18 with auxiliary early exits after layer1, layer2 and layer3: one image "
      "under the chosen exit policy (each head's top-1, confidence and whether it "
      "fired; which exit answered), then the latency of the three policies side by side.",
      "resnet18_exits");
  cgr::samples::add_device_option(app, o.device);
  app.add_option("--weights", o.weights,
                 "FILE.safetensors with the sample's weight names (default: seeded)");
  app.add_option("--image", o.image, "FILE.npy, 1x3xSxS or 3xSxS (default: seeded)");
  app.add_option("--exits", policy, "off, all or early")
      ->check(CLI::IsMember({"off", "all", "early"}))
      ->capture_default_str();
  app.add_option("--threshold", o.threshold, "an exit fires when its confidence reaches T")
      ->capture_default_str();
  app.add_option("--classes", o.classes, "classes (default: from the weights file, else 1000)")
      ->check(cgr::samples::kNonNegative);
  app.add_option("--export-output", o.export_dir, "write the outputs as DIR/NAME.npy");
  cgr::samples::add_threads_option(app, o.threads);
  cgr::samples::add_iterations_option(app, o.iterations);
  app.add_option("--size", o.size, "input height and width of the seeded image")
      ->check(cgr::samples::kPositive)
      ->capture_default_str();
  cgr::samples::parse_command_line(app, argc, argv);
  o.policy = cgr::parse_exit_policy(policy);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    const cgr::Device device = cgr::samples::choose_device(o.device);
    cgr::Weights weights;
    std::int64_t classes = o.classes;
    if (!o.weights.empty()) {
      weights = cgr::Weights::load_safetensors(o.weights);
      const cgr::Tensor* fc = weights.find("fc.weight");
      if (fc == nullptr)
        cgr::fail("{}: no 'fc.weight' (is this a ResNet-18 checkpoint?)", o.weights);
      if (classes == 0) classes = fc->shape()[0];
    }
    if (classes == 0) classes = 1000;

    cgr::Tensor image;
    if (!o.image.empty()) {
      image = cgr::load_npy(o.image);
      const cgr::Shape& s = image.shape();
      const bool ok = (s.rank() == 4 && s[0] == 1 && s[1] == 3 && s[2] == s[3]) ||
                      (s.rank() == 3 && s[0] == 3 && s[1] == s[2]);
      if (!ok)
        cgr::fail("{}: image has shape {}, expected 1x3xSxS or 3xSxS", o.image, s.to_string());
    } else {
      image = cgr::Tensor(
          cgr::Shape{1, 3, o.size, o.size},
          cgr::models::random_values(static_cast<std::size_t>(3 * o.size * o.size), 2024));
    }
    const std::int64_t size = image.shape()[image.shape().rank() - 1];
    const cgr::Network net = cgr::models::resnet18_exits(1, size, classes);
    if (o.weights.empty()) weights = cgr::models::random_weights(net, 18);

    const cgr::ExitPolicy policies[] = {cgr::ExitPolicy::off, cgr::ExitPolicy::all,
                                        cgr::ExitPolicy::early};
    std::vector<cgr::Engine> engines;
    std::vector<cgr::ExecutionContext> contexts;
    for (cgr::ExitPolicy policy : policies) {
      engines.push_back(cgr::Engine::build(net, weights,
                                           {.device = device,
                                            .mode = cgr::Mode::dag,
                                            .threads = o.threads,
                                            .exits = policy,
                                            .threshold = o.threshold}));
      contexts.push_back(engines.back().create_context());
    }
    const auto chosen = static_cast<std::size_t>(o.policy);
    const cgr::Result result = contexts[chosen].infer({{"image", cgr::TensorView(image)}});

    fmt::print(
        "ResNet-18 with exits after layer1, layer2, layer3; 1x3x{}x{}, {} classes, {} weights; "
        "device {}, policy {}, threshold {}\n",
        size, size, classes, o.weights.empty() ? "seeded" : o.weights, cgr::to_string(device),
        cgr::to_string(o.policy), o.threshold);
    fmt::print("  {:<6} {:>6} {:>11}  {}\n", "head", "top-1", "confidence", "fired");
    for (const auto& e : result.exits) {
      if (!e.ran) {
        fmt::print("  {:<6} {:>6} {:>11}  skipped (an earlier exit answered)\n", e.name, "-", "-");
        continue;
      }
      fmt::print("  {:<6} {:>6} {:>11.4f}  {}\n", e.name, e.top1[0], e.confidence[0],
                 e.fired ? "yes" : "no");
    }
    if (const auto it = result.outputs.find("final"); it != result.outputs.end()) {
      const auto logits = it->second.f32();
      const auto top = std::max_element(logits.begin(), logits.end()) - logits.begin();
      fmt::print("  {:<6} {:>6}\n", "final", top);
    }
    fmt::print("answered by: {}\n", result.answered_by);

    if (!o.export_dir.empty()) {
      std::filesystem::create_directories(o.export_dir);
      for (const auto& [name, tensor] : result.outputs) {
        cgr::save_npy(std::filesystem::path(o.export_dir) / (name + ".npy"), tensor);
      }
      fmt::print("outputs written to {}\n", o.export_dir);
    }

    for (std::size_t k = 0; k < contexts.size(); ++k) {
      std::copy(image.f32().begin(), image.f32().end(), contexts[k].input_buffer("image").begin());
    }
    std::vector<cgr::ExecutionContext*> pointers;
    for (auto& ctx : contexts)
      pointers.push_back(&ctx);
    const auto medians = cgr::samples::interleaved_median_ms(pointers, o.iterations);
    fmt::print("median latency, {} interleaved rounds, {} threads (dag):\n", o.iterations,
               o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency()));
    for (std::size_t k = 0; k < 3; ++k) {
      fmt::print("  exits {:<6} {:8.2f} ms  ({:.2f}x off)  ops run: {}\n",
                 cgr::to_string(policies[k]), medians[k], medians[k] / medians[0],
                 contexts[k].ops_executed());
    }
  } catch (const cgr::Error& e) {
    std::fprintf(stderr, "resnet18_exits: %s\n", e.what());
    return 1;
  }
  return 0;
}
