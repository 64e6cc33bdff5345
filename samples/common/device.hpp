// The device a sample runs on: the one asked for, or the GPU when this build and machine have
// one, else the CPU executor (saying so in one line; --verbose adds the driver's words).
#pragma once

#include <string>

#include <fmt/format.h>
#include <cgr/engine.hpp>

namespace cgr::samples {

inline Device choose_device(const std::string& requested, bool verbose) {
  if (!requested.empty()) return parse_device(requested);
  if (const std::string reason = cuda_unavailable_reason(); !reason.empty()) {
    // cgr-bench's wording. The driver's full words only on request: without a GPU they are a
    // long, alarming line about something the user did not ask for.
    fmt::print("no usable CUDA device; running on the CPU executor{}\n",
               verbose ? fmt::format(" ({})", reason) : " (--verbose says why)");
    return Device::cpu;
  }
  return Device::cuda;
}

}  // namespace cgr::samples
