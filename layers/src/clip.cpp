// Clip: elementwise over math::clip, split over contiguous ranges.
#include "cgr/layers/clip.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {
namespace {

class ClipCpuKernel final : public CpuKernel {
 public:
  ClipCpuKernel(std::int64_t count, ClipParams params)
      : count_(static_cast<std::size_t>(count)), params_(params) {}
  void run(const KernelIo& io) const override {
    const float* x = io.inputs[0];
    float* y = io.output;
    const float low = params_.low, high = params_.high;
    io.pool->parallel_for(count_, 1 << 16, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) y[i] = math::clip(x[i], low, high);
    });
  }

 private:
  std::size_t count_;
  ClipParams params_;
};

}  // namespace

Clip::Clip(std::string name, const TensorDesc& input, const ClipParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  if (params_.low != params_.low || params_.high != params_.high || params_.low > params_.high) {
    fail("Clip '{}': bounds [{}, {}] are not an interval", this->name(), params_.low,
         params_.high);
  }
  set_output(input.shape);
}

std::string Clip::attributes() const { return fmt::format("[{}, {}]", params_.low, params_.high); }

std::unique_ptr<CpuKernel> Clip::make_cpu_kernel(const LayerWeights&) const {
  return std::make_unique<ClipCpuKernel>(inputs()[0].shape.numel(), params_);
}

}  // namespace cgr
