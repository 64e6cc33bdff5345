#pragma once

#include <cuda_runtime.h>

#include <vector>

namespace cgr::test {

struct ElementMathInput {
  std::vector<float> values;
  std::vector<float> softmax_input;  // softmax_rows rows
  int softmax_rows = 1;
  std::vector<long long> windows;    // 7 numbers per case, see window_kernel
};

struct ElementMathOutput {
  std::vector<float> relu, nan_max, softmax;
  std::vector<long long> windows;    // size, last window begin, end, padded length
};

cudaError_t run_element_math_on_device(const ElementMathInput& in, ElementMathOutput& out);

}  // namespace cgr::test
