// The network users ask about first: two independent conv chains on one input, concatenated.
//   y = conv3(conv2(conv1(x)));  z = conv6(conv5(conv4(x)));  out = cat((y, z), dim=1)
// Prints the dependency analysis (the two groups have no path between them), optionally the
// DOT, and the median latency of each mode side by side with the ratio to dag.
//
//   two_branch [--device cpu|cuda] [--size S] [--width W] [--threads N] [--iterations N]
//              [--dot FILE]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/device.hpp"
#include "common/mode_comparison.hpp"
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
  std::string device_name, dot_path;  // no --device: the GPU when there is one
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
    cgr::samples::ModeComparison options{cgr::samples::choose_device(device_name), threads, iterations,
                                         dot_path};
    const std::string title = "two-branch (1x" + std::to_string(model.channels) + "x" +
                              std::to_string(model.size) + "x" + std::to_string(model.size) +
                              ", " + std::to_string(model.width) + " channels per conv)";
    cgr::samples::compare_modes(cgr::models::two_branch(model), title, options);
  } catch (const cgr::Error& e) {
    std::fprintf(stderr, "two_branch: %s\n", e.what());
    return 1;
  }
  return 0;
}
