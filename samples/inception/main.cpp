// One Inception module (GoogLeNet's inception3a: 192 x 28 x 28 in, four branches, concat):
// the dependency analysis shows the four branches as parallel lanes (width 4), and the modes
// of the device are timed side by side.
//
//   inception [--device cpu|cuda] [--verbose] [--size S] [--threads N] [--iterations N]
//             [--dot FILE [--dot-before-fusion]]
#include <cstdio>
#include <string>

#include "cgr/models/inception.hpp"
#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/mode_comparison.hpp"

int main(int argc, char** argv) {
  cgr::samples::ModeComparison options;
  std::string device;  // no --device: the GPU when there is one
  bool verbose = false;
  std::int64_t size = 28;
  CLI::App app(
      "GoogLeNet's inception3a module (192 x S x S in, four branches, concat): the "
      "dependency analysis and the latency of every mode of the device, side by side.",
      "inception");
  cgr::samples::add_device_option(app, device, verbose);
  cgr::samples::add_size_option(app, size, "input height and width");
  cgr::samples::add_threads_option(app, options.threads);
  cgr::samples::add_iterations_option(app, options.iterations);
  app.add_option("--dot", options.dot_path,
                 "write the engine's graph (after fusion, as cgr-bench draws it) as DOT to FILE");
  app.add_flag("--dot-before-fusion", options.dot_before_fusion,
               "--dot draws the network's layers instead");
  cgr::samples::parse_command_line(app, argc, argv);
  return cgr::samples::run_guarded("inception", [&] {
    options.device = cgr::samples::choose_device(device, verbose);
    cgr::samples::compare_modes(
        cgr::models::inception_module(192, size),
        "inception3a (192 x " + std::to_string(size) + " x " + std::to_string(size) + ")", options);
    return 0;
  });
}
