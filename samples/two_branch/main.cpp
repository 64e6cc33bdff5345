// The network users ask about first: two independent conv chains on one input, concatenated.
//   y = conv3(conv2(conv1(x)));  z = conv6(conv5(conv4(x)));  out = cat((y, z), dim=1)
// Prints the dependency analysis (the two groups have no path between them), optionally the
// DOT, and the median latency of each mode side by side with the ratio to dag.
//
//   two_branch [--device cpu|cuda] [--verbose] [--size S] [--width W] [--threads N]
//              [--iterations N] [--dot FILE [--dot-before-fusion]]
#include <cstdio>
#include <string>

#include "cgr/models/two_branch.hpp"
#include "common/cli.hpp"
#include "common/device.hpp"
#include "common/mode_comparison.hpp"

int main(int argc, char** argv) {
  std::string device_name, dot_path;  // no --device: the GPU when there is one
  cgr::models::TwoBranchOptions model;
  int threads = 0, iterations = 50;
  bool verbose = false, dot_before_fusion = false;
  CLI::App app(
      "Two independent conv chains on one input, concatenated: the dependency "
      "analysis and the latency of every mode of the device, side by side.",
      "two_branch");
  cgr::samples::add_device_option(app, device_name, verbose);
  cgr::samples::add_size_option(app, model.size, "input height and width");
  app.add_option("--width", model.width, "channels of every conv")
      ->check(cgr::samples::in_range(1, 65536))
      ->capture_default_str();
  cgr::samples::add_threads_option(app, threads);
  cgr::samples::add_iterations_option(app, iterations);
  app.add_option("--dot", dot_path,
                 "write the engine's graph (after fusion, as cgr-bench draws it) as DOT to FILE");
  app.add_flag("--dot-before-fusion", dot_before_fusion,
               "--dot draws the network's layers instead");
  cgr::samples::parse_command_line(app, argc, argv);
  return cgr::samples::run_guarded("two_branch", [&] {
    cgr::samples::ModeComparison options{cgr::samples::choose_device(device_name, verbose), threads,
                                         iterations, dot_path, dot_before_fusion};
    const std::string title = "two-branch (1x" + std::to_string(model.channels) + "x" +
                              std::to_string(model.size) + "x" + std::to_string(model.size) + ", " +
                              std::to_string(model.width) + " channels per conv)";
    cgr::samples::compare_modes(cgr::models::two_branch(model), title, options);
    return 0;
  });
}
