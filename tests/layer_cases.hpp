// The layer cases of the GPU test (tests/cuda/test_cuda_layers.cpp runs each through the CUDA
// executor in every mode against the CPU executor) and of the coverage test
// (tests/test_coverage.cpp checks that every registered layer kind appears in one and runs on
// the CPU). A new layer kind needs a case here, or the coverage test fails.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <cgr/engine.hpp>

namespace cgr::test {

struct LayerCase {
  std::string name;
  Shape input;
  std::function<Value(Network&, Value)> build;
  bool fuse = true;
};

// Makes the device work of the CustomOp case: a device-to-device copy of `bytes` bytes on the
// given stream (the CPU-only test binary passes work that is never called).
using DeviceCopy = std::function<decltype(CustomOpParams::cuda)(std::size_t bytes)>;

std::vector<LayerCase> layer_cases(const DeviceCopy& device_copy);

}  // namespace cgr::test
