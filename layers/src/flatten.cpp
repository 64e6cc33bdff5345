// Flatten: the data copied unchanged into the output.
#include "cgr/layers/flatten.hpp"

#include <cstring>

#include "cgr/error.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Flatten);

namespace {

class CopyCpuKernel final : public CpuKernel {
 public:
  explicit CopyCpuKernel(std::int64_t count) : count_(static_cast<std::size_t>(count)) {}
  void run(const KernelIo& io) const override {
    std::memcpy(io.output, io.inputs[0], count_ * sizeof(float));
  }

 private:
  std::size_t count_;
};

}  // namespace

Flatten::Flatten(std::string name, const TensorDesc& input, int start_dim)
    : Layer(std::move(name), {input}), start_dim_(start_dim) {
  const auto rank = static_cast<int>(input.shape.rank());
  if (start_dim_ < 0) start_dim_ += rank;
  if (start_dim_ < 0 || start_dim_ >= std::max(rank, 1)) {
    fail("Flatten '{}': start_dim {} is out of range for input '{}' of shape {}", this->name(),
         start_dim, input.name, input.shape.to_string());
  }
  std::vector<std::int64_t> dims(input.shape.dims().begin(),
                                 input.shape.dims().begin() + start_dim_);
  std::int64_t merged = 1;
  for (int d = start_dim_; d < rank; ++d) merged *= input.shape[d];
  dims.push_back(merged);
  set_output(Shape(std::move(dims)));
}

std::string Flatten::attributes() const { return fmt::format("start_dim {}", start_dim_); }

std::unique_ptr<CpuKernel> Flatten::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<CopyCpuKernel>(output().shape.numel());
}

}  // namespace cgr
