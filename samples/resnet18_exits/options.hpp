// The resnet18_exits sample's command line (CLI11), in its own file so that the command-line
// fuzzer (tests/fuzz/fuzz_cli.cpp) can parse argument vectors without running the sample.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cgr/engine.hpp>

namespace cgr::samples {

struct ExitsOptions {
  std::string device;    // empty: cuda when there is a device, else cpu
  bool verbose = false;  // say why the GPU is not used
  std::string weights, image, export_dir;
  ExitPolicy policy = ExitPolicy::early;
  float threshold = 0.9f;
  std::int64_t classes = 0;  // 0: from the weights file, else 1000
  std::int64_t size = 224;
  int threads = 0, iterations = 20;
  // Held-out mode (heldout.hpp): the folder train_digits.py writes, the thresholds of the
  // sweep, and the files the results go to.
  std::string heldout, export_json, plot;
  std::vector<float> sweep = {0.5f, 0.7f, 0.8f, 0.9f, 0.95f, 0.99f};
};

// nullopt when --help was printed; UsageError (common/cli.hpp) for a bad argument.
std::optional<ExitsOptions> try_parse_exits_options(int argc, char** argv);
// For main: --help exits 0, a bad argument exits 2.
ExitsOptions parse_exits_options(int argc, char** argv);

}  // namespace cgr::samples
