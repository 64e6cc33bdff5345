// The resnet18_exits sample on a trained model and its held-out set (the folder
// train_digits.py writes): every image through the engine under the exit policies off, all and
// early, accuracy per answering exit, agreement with PyTorch's own answers on the same weights,
// latency per image, and a threshold sweep (the accuracy-latency trade-off).
#pragma once

#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include <cgr/engine.hpp>

#include "options.hpp"

namespace cgr::samples {

inline constexpr std::array<const char*, 4> kHeads = {"exit0", "exit1", "exit2", "final"};

// One threshold of the sweep (or the early policy at --threshold): what answered, how well,
// how fast.
struct PolicySummary {
  std::string policy;  // off, all or early
  float threshold = 0;
  double accuracy = 0;                // of the answers
  double mean_ms = 0, median_ms = 0;  // infer() per image: copy in, run, copy out
  std::array<int, 4> answered{};      // images answered by exit0, exit1, exit2, final
  std::array<int, 4> correct{};       // of those, correct
  int agree = 0;                      // images where exit and class equal PyTorch's
  int decisions_differ = 0;           // images where the answering exit differs from PyTorch's
  int decisions_unexplained = 0;      // ... with no confidence within 1e-5 of the threshold
};

// The accuracy-latency picture (tradeoff_svg.cpp): accuracy against mean latency per image for
// each threshold of the sweep, with off and all for reference, and the share of images each
// exit answered per threshold. Error when the file cannot be written.
void write_tradeoff_svg(const std::filesystem::path& path, const std::string& title,
                        const PolicySummary& off, const PolicySummary& all,
                        const std::vector<PolicySummary>& sweep);

// Runs the held-out mode of the sample; the exit status (1 when the engine disagrees with
// PyTorch beyond the allowed rounding).
int run_heldout(const ExitsOptions& options, Device device);

}  // namespace cgr::samples
