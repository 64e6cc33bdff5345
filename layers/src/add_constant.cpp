// AddConstant: the constant is broadcast to the full output shape once, when the kernel is
// made, so the run is a plain elementwise add (activations at batch 1 are small).
#include "cgr/layers/add_constant.hpp"

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(AddConstant);

namespace {

class AddConstantCpuKernel final : public CpuKernel {
 public:
  explicit AddConstantCpuKernel(std::vector<float> expanded) : constant_(std::move(expanded)) {}
  void run(const KernelIo& io) const override {
    const float* x = io.inputs[0];
    float* y = io.output;
    io.pool->parallel_for(constant_.size(), 1 << 16, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) y[i] = x[i] + constant_[i];
    });
  }

 private:
  std::vector<float> constant_;
};

}  // namespace

AddConstant::AddConstant(std::string name, const TensorDesc& input, Shape constant_shape)
    : Layer(std::move(name), {input}), constant_shape_(std::move(constant_shape)) {
  const Shape& s = input.shape;
  bool fits = constant_shape_.rank() <= s.rank();
  for (std::size_t i = 0; fits && i < constant_shape_.rank(); ++i) {
    const std::int64_t c = constant_shape_[constant_shape_.rank() - 1 - i];
    fits = c == 1 || c == s[s.rank() - 1 - i];
  }
  if (!fits) {
    fail("AddConstant '{}': a constant of shape {} does not broadcast to '{}' of shape {}",
         this->name(), constant_shape_.to_string(), input.name, s.to_string());
  }
  set_output(s);
}

std::vector<WeightSpec> AddConstant::weight_specs() const { return {{"constant", constant_shape_}}; }

std::string AddConstant::attributes() const { return "+ " + constant_shape_.to_string(); }

std::unique_ptr<CpuKernel> AddConstant::make_cpu_kernel(const LayerOp& op) const {
  return std::make_unique<AddConstantCpuKernel>(expanded(op.weights.at("constant")->f32()));
}

std::vector<float> AddConstant::expanded(std::span<const float> c) const {
  const Shape& out = output().shape;
  const std::size_t rank = out.rank(), offset = rank - constant_shape_.rank();
  // Stride of each output dim in the constant (0 where it broadcasts).
  std::vector<std::int64_t> strides(rank, 0);
  std::int64_t stride = 1;
  for (std::size_t i = constant_shape_.rank(); i-- > 0;) {
    strides[offset + i] = constant_shape_[i] == 1 ? 0 : stride;
    stride *= constant_shape_[i];
  }
  std::vector<float> expanded(static_cast<std::size_t>(out.numel()));
  std::vector<std::int64_t> index(rank, 0);
  for (auto& value : expanded) {
    std::int64_t source = 0;
    for (std::size_t d = 0; d < rank; ++d) source += index[d] * strides[d];
    value = c[static_cast<std::size_t>(source)];
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < out[d]) break;
      index[d] = 0;
    }
  }
  return expanded;
}

}  // namespace cgr
