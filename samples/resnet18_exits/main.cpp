// ResNet-18 with auxiliary early exits after layer1, layer2 and layer3.
// With --heldout DIR (what scripts/run-sample.sh runs, on the model train_digits.py trains):
// every held-out image under the three exit policies, accuracy, agreement with PyTorch,
// latency and a threshold sweep (heldout.cpp).
// Without: runs one image under the chosen exit policy and prints, per exit, the head's top-1
// class, its confidence and whether it fired, which exit answered, and the latency of the three
// policies side by side (off: backbone only; all: every head, concurrently with the backbone;
// early: a confident head stops the rest).
//
//   resnet18_exits --heldout DIR [--device cuda|cpu] [--threshold T] [--sweep T1,T2,...]
//                  [--export-json FILE] [--plot FILE.svg] [--threads N]
//   resnet18_exits [--device cuda|cpu] [--weights FILE.safetensors] [--image FILE.npy]
//                  [--exits off|all|early] [--threshold T] [--classes N]
//                  [--export-output DIR] [--threads N] [--iterations N] [--size S]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <cgr/engine.hpp>
#include <cgr/files.hpp>
#include <cgr/npy.hpp>

#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18_exits.hpp"
#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/timing.hpp"
#include "heldout.hpp"
#include "options.hpp"

int main(int argc, char** argv) {
  const cgr::samples::ExitsOptions o = cgr::samples::parse_exits_options(argc, argv);
  return cgr::samples::run_guarded("resnet18_exits", [&] {
    // Where the outputs go is checked before anything runs.
    if (!o.export_dir.empty()) cgr::prepare_output_folder(o.export_dir);
    const cgr::Device device = cgr::samples::choose_device(o.device, o.verbose);
    if (!o.heldout.empty()) return cgr::samples::run_heldout(o, device);
    cgr::Weights weights;
    std::int64_t classes = o.classes;
    if (!o.weights.empty()) {
      weights = cgr::Weights::load_safetensors(o.weights);
      const cgr::Tensor* fc = weights.find("fc.weight");
      if (fc == nullptr)
        cgr::fail("{}: no 'fc.weight' (is this a ResNet-18 checkpoint?)", o.weights);
      if (fc->shape().rank() != 2 || fc->shape()[0] < 1) {
        cgr::fail("{}: 'fc.weight' has shape {}, expected classes x 512", o.weights,
                  fc->shape().to_string());
      }
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
      if (s.rank() == 3) image = cgr::Tensor(cgr::Shape{1, s[0], s[1], s[2]}, image.to_vector());
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
    std::map<std::string, std::filesystem::path> export_files;
    if (!o.export_dir.empty()) {
      std::vector<std::string> names;
      for (const auto& desc : engines[0].outputs())
        names.push_back(desc.name);
      const auto paths = cgr::output_file_paths(o.export_dir, names, ".npy");
      for (std::size_t i = 0; i < names.size(); ++i)
        export_files.emplace(names[i], paths[i]);
    }
    const auto chosen = static_cast<std::size_t>(o.policy);
    const cgr::Result result = contexts[chosen].infer({{"image", cgr::TensorView(image)}});
    // A row with a NaN or an infinity has no top-1 class.
    auto finite = [](std::span<const float> row) {
      return std::all_of(row.begin(), row.end(), [](float v) { return std::isfinite(v); });
    };

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
      const bool usable = finite(result.output(e.name).f32());
      fmt::print("  {:<6} {:>6} {:>11.4f}  {}\n", e.name, usable ? std::to_string(e.top1[0]) : "-",
                 e.confidence[0], e.fired ? "yes" : "no");
    }
    if (const auto it = result.outputs.find("final"); it != result.outputs.end()) {
      const auto logits = it->second.f32();
      const auto top = std::max_element(logits.begin(), logits.end()) - logits.begin();
      fmt::print("  {:<6} {:>6}\n", "final", finite(logits) ? std::to_string(top) : "-");
    }
    fmt::print("answered by: {}\n", result.answered_by);

    if (!o.export_dir.empty()) {
      for (const auto& [name, tensor] : result.outputs)
        cgr::save_npy(export_files.at(name), tensor);
      fmt::print("outputs written to {}\n", o.export_dir);
    }
    if (!result.non_finite_outputs.empty()) {
      std::fprintf(
          stderr, "resnet18_exits: outputs %s hold NaN or infinite values (is the image finite?)\n",
          fmt::format("{}", fmt::join(result.non_finite_outputs, ", ")).c_str());
      return 1;
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
    return 0;
  });
}
