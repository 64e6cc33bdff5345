// CustomOp: shape checks and the CPU kernel that calls the user's host function. The CUDA
// backend's op for this kind (engine/cuda/ops/custom.cpp) captures the stream callable.
#include "cgr/capture/custom_op.hpp"

#include "cgr/error.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(CustomOp);

namespace {

class CustomCpuKernel final : public CpuKernel {
 public:
  explicit CustomCpuKernel(std::function<void(std::span<const float* const>, float*)> work)
      : work_(std::move(work)) {}
  void run(const KernelIo& io) const override { work_(io.inputs, io.output); }

 private:
  std::function<void(std::span<const float* const>, float*)> work_;
};

}  // namespace

CustomOp::CustomOp(std::string name, std::vector<TensorDesc> inputs, CustomOpParams params)
    : Layer(std::move(name), std::move(inputs)), params_(std::move(params)) {
  if (params_.output_shape.rank() == 0)
    fail("{} '{}': the output needs a shape", label(), this->name());
  for (auto d : params_.output_shape.dims()) {
    if (d <= 0)
      fail("{} '{}': output shape {} has a dimension <= 0", label(), this->name(),
           params_.output_shape.to_string());
  }
  if (!params_.cuda && !params_.cpu)
    fail("{} '{}': give a cuda or a cpu callable", label(), this->name());
  set_output(params_.output_shape);
}

std::unique_ptr<CpuKernel> CustomOp::make_cpu_kernel(const LayerOp&) const {
  if (!params_.cpu) {
    fail("{} '{}' has no CPU implementation (CustomOpParams::cpu): build the engine for cuda",
         label(), name());
  }
  return std::make_unique<CustomCpuKernel>(params_.cpu);
}

}  // namespace cgr
