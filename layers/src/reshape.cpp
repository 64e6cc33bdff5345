// Reshape: the data copied unchanged into the output.
#include "cgr/layers/reshape.hpp"

#include <cstring>

#include "cgr/error.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Reshape);

namespace {

class ReshapeCpuKernel final : public CpuKernel {
 public:
  explicit ReshapeCpuKernel(std::int64_t count) : count_(static_cast<std::size_t>(count)) {}
  void run(const KernelIo& io) const override {
    std::memcpy(io.output, io.inputs[0], count_ * sizeof(float));
  }

 private:
  std::size_t count_;
};

}  // namespace

Reshape::Reshape(std::string name, const TensorDesc& input, Shape shape)
    : Layer(std::move(name), {input}) {
  for (auto d : shape.dims()) {
    if (d <= 0) {
      fail("Reshape '{}': target shape {} has a dimension <= 0", this->name(), shape.to_string());
    }
  }
  if (shape.numel() != input.shape.numel()) {
    fail("Reshape '{}': cannot reshape '{}' of shape {} ({} elements) to {} ({} elements)",
         this->name(), input.name, input.shape.to_string(), input.shape.numel(),
         shape.to_string(), shape.numel());
  }
  set_output(std::move(shape));
}

std::string Reshape::attributes() const { return output().shape.to_string(); }

std::unique_ptr<CpuKernel> Reshape::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<ReshapeCpuKernel>(output().shape.numel());
}

}  // namespace cgr
