// Row normalisation on the CPU: rows split over the threads; each row's mean and variance are
// accumulated in double over two passes (mean first, then squared deviations, which keeps
// the variance exact for rows far from zero), so the CPU reference is as close to the exact
// result as float output allows. Each row is computed on its own: the same bits for any split.
#include "cpu/row_norm_cpu.hpp"

#include <algorithm>
#include <cmath>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr::cpu {
namespace {

class RowNormCpuKernel final : public CpuKernel {
 public:
  RowNormCpuKernel(const RowNormGeometry& g, std::vector<float> scale, std::vector<float> shift)
      : g_(g), scale_(std::move(scale)), shift_(std::move(shift)) {}

  void run(const KernelIo& io) const override {
    const std::int64_t cols = g_.cols;
    if (cols == 0) return;
    const float* x = io.inputs[0];
    float* y = io.output;
    const auto grain =
        std::max<std::size_t>(1, (std::size_t{1} << 15) / static_cast<std::size_t>(cols));
    io.pool->parallel_for(
        static_cast<std::size_t>(g_.rows), grain, [&](std::size_t begin, std::size_t end) {
          for (std::size_t row = begin; row < end; ++row) {
            const float* xr = x + static_cast<std::int64_t>(row) * cols;
            float* yr = y + static_cast<std::int64_t>(row) * cols;
            double sum = 0.0;
            for (std::int64_t j = 0; j < cols; ++j)
              sum += xr[j];
            const double mean = sum / static_cast<double>(cols);
            double squares = 0.0;
            for (std::int64_t j = 0; j < cols; ++j) {
              const double d = xr[j] - mean;
              squares += d * d;
            }
            const double inv_std =
                1.0 / std::sqrt(squares / static_cast<double>(cols) + static_cast<double>(g_.eps));
            if (g_.affine_per_row) {
              const auto c = static_cast<std::size_t>(static_cast<std::int64_t>(row) % g_.channels);
              const double scale = scale_[c], shift = shift_[c];
              for (std::int64_t j = 0; j < cols; ++j)
                yr[j] = static_cast<float>((xr[j] - mean) * inv_std * scale + shift);
            } else {
              for (std::int64_t j = 0; j < cols; ++j) {
                const auto i = static_cast<std::size_t>(j);
                yr[j] = static_cast<float>((xr[j] - mean) * inv_std * scale_[i] + shift_[i]);
              }
            }
          }
        });
  }

 private:
  RowNormGeometry g_;
  std::vector<float> scale_, shift_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_row_norm_kernel(const RowNormGeometry& g, std::vector<float> scale,
                                                std::vector<float> shift) {
  const std::int64_t expected = g.affine_per_row ? g.channels : g.cols;
  if (static_cast<std::int64_t>(scale.size()) != expected ||
      static_cast<std::int64_t>(shift.size()) != expected) {
    fail("row normalisation: {} scale and {} shift values, expected {}", scale.size(), shift.size(),
         expected);
  }
  return std::make_unique<RowNormCpuKernel>(g, std::move(scale), std::move(shift));
}

}  // namespace cgr::cpu
