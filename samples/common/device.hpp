// The device a sample runs on: the one asked for, or the GPU when this build and machine have
// one, else the CPU executor (saying why the GPU is not used).
#pragma once

#include <string>

#include <cgr/engine.hpp>
#include <fmt/format.h>

namespace cgr::samples {

inline Device choose_device(const std::string& requested) {
  if (!requested.empty()) return parse_device(requested);
  if (const std::string reason = cuda_unavailable_reason(); !reason.empty()) {
    fmt::print("GPU not used ({}); running on the CPU executor.\n", reason);
    return Device::cpu;
  }
  return Device::cuda;
}

}  // namespace cgr::samples
