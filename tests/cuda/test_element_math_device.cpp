// The element math the CPU kernels use, run on the GPU: same results from the same source.
// Skipped (visibly, through doctest's skip) where there is no CUDA device.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "cgr/layers/element_math.hpp"
#include "cgr/capture/cuda_check.hpp"
#include "element_math_kernels.hpp"
#include "../test_support.hpp"

namespace {
const bool no_cuda_device = !cgr::cuda_unavailable_reason().empty();
}

TEST_SUITE_BEGIN("kernels");

TEST_CASE("element math gives the same answers on the GPU as on the host" *
          doctest::skip(no_cuda_device)) {
  cgr::test::ElementMathInput in;
  in.values = cgr::test::random_vector(1000, 3, -5.0f, 5.0f);
  in.values[17] = std::numeric_limits<float>::quiet_NaN();
  in.values[18] = -std::numeric_limits<float>::infinity();
  in.softmax_rows = 4;
  in.softmax_input = cgr::test::random_vector(4 * 37, 4, -20.0f, 20.0f);
  for (long long c : {112, 3, 2, 0, 0, 1, 1, 6, 3, 2, 1, 1, 1, 1, 8, 3, 2, 1, 1, 2, 1, 13, 3, 2,
                      1, 1, 1, 0, 7, 2, 2, 0, 0, 1, 1}) {
    in.windows.push_back(c);
  }
  cgr::test::ElementMathOutput out;
  CGR_CUDA_CHECK(cgr::test::run_element_math_on_device(in, out));

  const std::size_t n = in.values.size();
  for (std::size_t i = 0; i < n; ++i) {
    const float relu = cgr::math::relu(in.values[i]);
    const float maxed = cgr::math::nan_max(in.values[i], in.values[(i + 1) % n]);
    CHECK((std::isnan(relu) ? std::isnan(out.relu[i]) : out.relu[i] == relu));
    CHECK((std::isnan(maxed) ? std::isnan(out.nan_max[i]) : out.nan_max[i] == maxed));
  }
  std::vector<float> softmax(in.softmax_input.size());
  for (int r = 0; r < 4; ++r) {
    cgr::math::softmax_row(in.softmax_input.data() + r * 37, softmax.data() + r * 37, 37, 1);
  }
  CHECK(cgr::test::relative_error(out.softmax, softmax) < 1e-6);
  for (std::size_t k = 0; k < in.windows.size() / 7; ++k) {
    const long long* p = in.windows.data() + 7 * k;
    const auto size = cgr::math::window_output_size(p[0], p[1], p[2], p[3], p[4], p[5], p[6] != 0);
    const auto last = cgr::math::pool_window_axis(size - 1, p[0], p[1], p[2], p[3], p[4]);
    CHECK(out.windows[4 * k + 0] == size);
    CHECK(out.windows[4 * k + 1] == last.begin);
    CHECK(out.windows[4 * k + 2] == last.end);
    CHECK(out.windows[4 * k + 3] == last.padded_length);
  }
}

TEST_SUITE_END();
