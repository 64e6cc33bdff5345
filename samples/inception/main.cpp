// One Inception module (GoogLeNet's inception3a: 192 x 28 x 28 in, four branches, concat):
// the dependency analysis shows the four branches as parallel lanes (width 4), and the modes
// of the device are timed side by side.
//
//   inception [--device cpu|cuda] [--size S] [--threads N] [--iterations N] [--dot FILE]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/device.hpp"
#include "common/mode_comparison.hpp"
#include "models/inception.hpp"

namespace {

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "inception: %s\nusage: inception [--device cpu|cuda] [--size S] [--threads N] "
               "[--iterations N] [--dot FILE]\n",
               problem.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  cgr::samples::ModeComparison options;
  std::string device;  // no --device: the GPU when there is one
  std::int64_t size = 28;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    try {
      if (arg == "--device") device = value();
      else if (arg == "--size") size = std::stoll(value());
      else if (arg == "--threads") options.threads = std::stoi(value());
      else if (arg == "--iterations") options.iterations = std::max(1, std::stoi(value()));
      else if (arg == "--dot") options.dot_path = value();
      else usage("unknown argument " + arg);
    } catch (const std::logic_error&) {
      usage("bad number for " + arg);
    }
  }
  try {
    options.device = cgr::samples::choose_device(device);
    cgr::samples::compare_modes(cgr::models::inception_module(192, size), "inception3a (192 x " +
                                std::to_string(size) + " x " + std::to_string(size) + ")", options);
  } catch (const cgr::Error& e) {
    std::fprintf(stderr, "inception: %s\n", e.what());
    return 1;
  }
  return 0;
}
