// GlobalAvgPool: one sum per plane, split over planes.
#include "cgr/layers/global_avg_pool.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/spatial.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(GlobalAvgPool);

namespace {

class GlobalAvgPoolCpuKernel final : public CpuKernel {
 public:
  GlobalAvgPoolCpuKernel(std::int64_t planes, std::int64_t plane_size)
      : planes_(static_cast<std::size_t>(planes)), plane_size_(plane_size) {}

  void run(const KernelIo& io) const override {
    const std::size_t grain = std::max<std::size_t>(1, 8192 / static_cast<std::size_t>(plane_size_));
    io.pool->parallel_for(planes_, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t plane = begin; plane < end; ++plane) {
        const float* x = io.inputs[0] + plane * static_cast<std::size_t>(plane_size_);
        float sum = 0.0f;
        for (std::int64_t i = 0; i < plane_size_; ++i) sum += x[i];
        io.output[plane] = sum / static_cast<float>(plane_size_);
      }
    });
  }

 private:
  std::size_t planes_;
  std::int64_t plane_size_;
};

}  // namespace

GlobalAvgPool::GlobalAvgPool(std::string name, const TensorDesc& input)
    : Layer(std::move(name), {input}) {
  const Shape& s = input.shape;
  if ((s.rank() != 4 && s.rank() != 3) || s[2] * (s.rank() == 4 ? s[3] : 1) == 0) {
    fail(
        "GlobalAvgPool '{}': input '{}' has shape {}, expected N x C x H x W with H, W > 0 "
        "(or N x C x L with L > 0)",
        this->name(), input.name, s.to_string());
  }
  const SpatialShape shape = spatial_shape(kind(), this->name(), input);
  set_output(spatial_output(shape, shape.channels, 1, 1));
  geometry_ = {shape.batch * shape.channels, shape.h * shape.w};
}

OpCost GlobalAvgPool::cost() const {
  return {static_cast<double>(inputs()[0].shape.numel()), activation_bytes()};
}

std::unique_ptr<CpuKernel> GlobalAvgPool::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<GlobalAvgPoolCpuKernel>(geometry_.planes, geometry_.plane_size);
}

}  // namespace cgr
