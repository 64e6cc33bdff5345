// Add: elementwise, optionally followed by a fused activation (the epilogue).
#include "cgr/layers/add.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Add);

namespace {

class AddCpuKernel final : public CpuKernel {
 public:
  AddCpuKernel(std::int64_t count, const math::Activation& activation)
      : count_(static_cast<std::size_t>(count)), activation_(activation) {}
  void run(const KernelIo& io) const override {
    const float* a = io.inputs[0];
    const float* b = io.inputs[1];
    float* y = io.output;
    const math::Activation activation = activation_;
    io.pool->parallel_for(count_, 1 << 16, [&](std::size_t begin, std::size_t end) {
      math::with_activation_fn(activation, [&](auto fn) {
        for (std::size_t i = begin; i < end; ++i)
          y[i] = fn(a[i] + b[i]);
      });
    });
  }

 private:
  std::size_t count_;
  math::Activation activation_;
};

}  // namespace

Add::Add(std::string name, const TensorDesc& a, const TensorDesc& b)
    : Layer(std::move(name), {a, b}) {
  if (a.shape != b.shape) {
    fail("Add '{}': operands '{}' ({}) and '{}' ({}) must have the same shape", this->name(),
         a.name, a.shape.to_string(), b.name, b.shape.to_string());
  }
  set_output(a.shape);
}

std::unique_ptr<CpuKernel> Add::make_cpu_kernel(const LayerOp& op) const {
  return std::make_unique<AddCpuKernel>(output().shape.numel(), op.epilogue.activation);
}

}  // namespace cgr
