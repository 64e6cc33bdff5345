#include "options.hpp"

#include <cstdio>
#include <cstdlib>

#include "common/cli.hpp"

namespace cgr::samples {

std::optional<ExitsOptions> try_parse_exits_options(int argc, char** argv) {
  ExitsOptions o;
  std::string policy = "early";
  CLI::App app(
      "ResNet-18 with auxiliary early exits after layer1, layer2 and layer3.\n"
      "With --heldout DIR (what scripts/run-sample.sh runs): a trained model and its held-out "
      "set, every image under the exit policies off, all and early: accuracy per answering "
      "exit, agreement with PyTorch, latency per image, a threshold sweep.\n"
      "Without: one image under the chosen exit policy (each head's top-1, confidence and "
      "whether it fired; which exit answered), then the latency of the three policies side "
      "by side.",
      "resnet18_exits");
  add_device_option(app, o.device, o.verbose);
  app.add_option("--weights", o.weights,
                 "FILE.safetensors with the sample's weight names (default: seeded)");
  app.add_option("--image", o.image, "FILE.npy, 1x3xSxS or 3xSxS (default: seeded)");
  app.add_option("--exits", policy, "off, all or early")
      ->check(CLI::IsMember({"off", "all", "early"}))
      ->capture_default_str();
  app.add_option("--threshold", o.threshold, "an exit fires when its confidence reaches T")
      ->check(in_range(0, 1))
      ->capture_default_str();
  app.add_option("--classes", o.classes, "classes (default 0: from the weights file, else 1000)")
      ->check(in_range(0, 1'000'000));
  app.add_option("--export-output", o.export_dir, "write the outputs as DIR/NAME.npy");
  add_threads_option(app, o.threads);
  add_iterations_option(app, o.iterations);
  add_size_option(app, o.size, "input height and width of the seeded image");
  CLI::Option* heldout =
      app.add_option("--heldout", o.heldout,
                     "DIR written by train_digits.py: weights.safetensors, heldout_images.npy, "
                     "heldout_labels.npy, torch_top1.npy, torch_confidence.npy");
  app.add_option("--export-json", o.export_json, "with --heldout: the results as JSON")
      ->needs(heldout);
  app.add_option("--plot", o.plot, "with --heldout: the accuracy-latency trade-off as SVG")
      ->needs(heldout);
  app.add_option("--sweep", o.sweep, "with --heldout: thresholds of the sweep, e.g. 0.5,0.9")
      ->delimiter(',')
      ->check(in_range(0, 1))
      ->needs(heldout);
  for (const char* single : {"--weights", "--image", "--exits", "--classes", "--export-output",
                             "--iterations", "--size"}) {
    heldout->excludes(app.get_option(single));
  }
  if (!parse_arguments(app, argc, argv)) return std::nullopt;
  if (!o.heldout.empty() && o.sweep.empty()) throw UsageError("--sweep: no thresholds given");
  o.policy = parse_exit_policy(policy);
  return o;
}

ExitsOptions parse_exits_options(int argc, char** argv) {
  try {
    std::optional<ExitsOptions> options = try_parse_exits_options(argc, argv);
    if (!options) std::exit(0);
    return *options;
  } catch (const UsageError& e) {
    std::fprintf(
        stderr,
        "resnet18_exits: %s\nusage: resnet18_exits [OPTIONS]; 'resnet18_exits --help' lists them\n",
        e.what());
    std::exit(2);
  }
}

}  // namespace cgr::samples
