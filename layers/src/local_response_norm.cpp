// LocalResponseNorm: the window geometry both backends run, and the CPU kernel (one output row
// of a channel plane per step; each element sums its window's squares in channel order, as the
// CUDA kernel does).
#include "cgr/layers/local_response_norm.hpp"

#include <algorithm>
#include <cmath>

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(LocalResponseNorm);

namespace {

class LocalResponseNormCpuKernel final : public CpuKernel {
 public:
  explicit LocalResponseNormCpuKernel(const LocalResponseNormGeometry& g) : g_(g) {}

  void run(const KernelIo& io) const override {
    const std::int64_t channels = g_.channels, plane = g_.plane;
    if (plane == 0) return;
    const float* x = io.inputs[0];
    float* y = io.output;
    const auto grain =
        std::max<std::size_t>(1, (std::size_t{1} << 14) / static_cast<std::size_t>(plane));
    io.pool->parallel_for(static_cast<std::size_t>(g_.batch * channels), grain,
                          [&](std::size_t begin, std::size_t end) {
                            for (std::size_t row = begin; row < end; ++row) {
                              const auto r = static_cast<std::int64_t>(row);
                              const std::int64_t c = r % channels;
                              const float* image = x + (r - c) * plane;  // channel 0 of this sample
                              const std::int64_t first = std::max<std::int64_t>(0, c - g_.before);
                              const std::int64_t last = std::min(channels - 1, c + g_.after);
                              for (std::int64_t p = 0; p < plane; ++p) {
                                float square_sum = 0.0f;
                                for (std::int64_t k = first; k <= last; ++k) {
                                  const float v = image[k * plane + p];
                                  square_sum += v * v;
                                }
                                y[r * plane + p] =
                                    math::local_response_norm(x[r * plane + p], square_sum,
                                                              g_.alpha_over_size, g_.beta, g_.bias);
                              }
                            }
                          });
  }

 private:
  LocalResponseNormGeometry g_;
};

}  // namespace

LocalResponseNorm::LocalResponseNorm(std::string name, const TensorDesc& input,
                                     const LocalResponseNormParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  const Shape& s = input.shape;
  if (s.rank() < 2) {
    fail("LocalResponseNorm '{}': input '{}' has shape {}, expected N x C x spatial dims",
         this->name(), input.name, s.to_string());
  }
  if (params_.size <= 0) {
    fail("LocalResponseNorm '{}': size {} must be positive", this->name(), params_.size);
  }
  if (!std::isfinite(params_.alpha) || !std::isfinite(params_.beta) ||
      !std::isfinite(params_.bias)) {
    fail("LocalResponseNorm '{}': alpha {}, beta {} and bias {} must be finite numbers",
         this->name(), params_.alpha, params_.beta, params_.bias);
  }
  geometry_.batch = s[0];
  geometry_.channels = s[1];
  geometry_.plane = s[0] * s[1] == 0 ? 0 : s.numel() / (s[0] * s[1]);
  // ONNX: floor((size - 1) / 2) channels before c, ceil((size - 1) / 2) after.
  geometry_.before = (params_.size - 1) / 2;
  geometry_.after = params_.size - 1 - geometry_.before;
  geometry_.alpha_over_size = params_.alpha / static_cast<float>(params_.size);
  geometry_.beta = params_.beta;
  geometry_.bias = params_.bias;
  set_output(s);
}

std::string LocalResponseNorm::attributes() const {
  return fmt::format("size {}, alpha {}, beta {}, bias {}", params_.size, params_.alpha,
                     params_.beta, params_.bias);
}

OpCost LocalResponseNorm::cost() const {
  // Per element: a multiply-add per window channel, then a power and a division.
  return {static_cast<double>(output().shape.numel()) *
              (2.0 * static_cast<double>(params_.size) + 10.0),
          activation_bytes()};
}

std::unique_ptr<CpuKernel> LocalResponseNorm::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<LocalResponseNormCpuKernel>(geometry_);
}

}  // namespace cgr
