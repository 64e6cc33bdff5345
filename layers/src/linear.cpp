// Linear: shape rule and the CPU kernel (cpu/linear_cpu.cpp).
#include "cgr/layers/linear.hpp"

#include <algorithm>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/linear_cpu.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Linear);

namespace {

class LinearCpuKernel final : public CpuKernel {
 public:
  LinearCpuKernel(std::int64_t rows, std::int64_t in, std::int64_t out, std::int64_t pooled_plane,
                  std::span<const float> weight, std::span<const float> bias)
      : rows_(rows), pooled_plane_(pooled_plane), linear_(in, out, weight, bias) {}

  // The pooled input's means, when a GlobalAvgPool is fused before the layer.
  std::size_t workspace_bytes() const override {
    return pooled_plane_ > 0
               ? static_cast<std::size_t>(rows_ * linear_.in_features()) * sizeof(float)
               : 0;
  }

  void run(const KernelIo& io) const override {
    const float* x = io.inputs[0];
    if (pooled_plane_ > 0) {
      // The same sums and division as GlobalAvgPool's kernel: fused or not, the same bits.
      float* means = io.workspace;
      const auto plane = static_cast<std::size_t>(pooled_plane_);
      const std::size_t planes = static_cast<std::size_t>(rows_ * linear_.in_features());
      const std::size_t grain = std::max<std::size_t>(1, 8192 / plane);
      io.pool->parallel_for(planes, grain, [&](std::size_t begin, std::size_t end) {
        for (std::size_t p = begin; p < end; ++p) {
          const float* values = x + p * plane;
          float sum = 0.0f;
          for (std::size_t i = 0; i < plane; ++i)
            sum += values[i];
          means[p] = sum / static_cast<float>(pooled_plane_);
        }
      });
      x = means;
    }
    linear_.run(x, rows_, io.output, false, io.pool);
  }

 private:
  std::int64_t rows_;
  std::int64_t pooled_plane_;
  cpu::LinearKernelCpu linear_;
};

}  // namespace

Linear::Linear(std::string name, const TensorDesc& input, const LinearParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  const Shape& s = input.shape;
  if (s.rank() < 1 || s.dims().back() <= 0) {
    fail("Linear '{}': input '{}' has shape {}, expected [..., in_features] with in_features > 0",
         this->name(), input.name, s.to_string());
  }
  if (params_.out_features <= 0) {
    fail("Linear '{}': out_features must be positive, got {}", this->name(), params_.out_features);
  }
  std::vector<std::int64_t> dims = s.dims();
  dims.back() = params_.out_features;
  set_output(Shape(std::move(dims)));
  geometry_ = {s.numel() / s.dims().back(), s.dims().back(), params_.out_features};
}

std::vector<WeightSpec> Linear::weight_specs() const {
  std::vector<WeightSpec> specs{{"weight", Shape{params_.out_features, in_features()}}};
  if (params_.bias) specs.push_back({"bias", Shape{params_.out_features}});
  return specs;
}

std::string Linear::attributes() const {
  return fmt::format("{} -> {}", in_features(), params_.out_features);
}

OpCost Linear::cost() const {
  const LinearGeometry& g = geometry_;
  const double weights = static_cast<double>(g.in_features * g.out_features) * sizeof(float);
  return {2 * static_cast<double>(g.rows * g.in_features * g.out_features),
          activation_bytes() + weights};
}

std::unique_ptr<CpuKernel> Linear::make_cpu_kernel(const LayerOp& op) const {
  const Tensor* bias = params_.bias ? op.weights.at("bias") : nullptr;
  return std::make_unique<LinearCpuKernel>(
      geometry_.rows, geometry_.in_features, geometry_.out_features, op.pooled_plane,
      op.weights.at("weight")->f32(), bias ? bias->f32() : std::span<const float>{});
}

}  // namespace cgr
