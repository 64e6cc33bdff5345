// ReLU: elementwise, split over contiguous ranges of the tensor.
#include "cgr/layers/relu.hpp"

#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {
namespace {

class ReluCpuKernel final : public CpuKernel {
 public:
  explicit ReluCpuKernel(std::int64_t count) : count_(static_cast<std::size_t>(count)) {}
  void run(const KernelIo& io) const override {
    const float* x = io.inputs[0];
    float* y = io.output;
    io.pool->parallel_for(count_, 1 << 16, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) y[i] = math::relu(x[i]);
    });
  }

 private:
  std::size_t count_;
};

}  // namespace

Relu::Relu(std::string name, const TensorDesc& input) : Layer(std::move(name), {input}) {
  set_output(input.shape);
}

std::unique_ptr<CpuKernel> Relu::make_cpu_kernel(const LayerWeights&) const {
  return std::make_unique<ReluCpuKernel>(inputs()[0].shape.numel());
}

}  // namespace cgr
