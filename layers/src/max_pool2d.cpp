// MaxPool2d: the layer; its CPU kernel is cpu/pool_cpu.hpp's.
#include "cgr/layers/max_pool2d.hpp"

#include "cgr/layers/element_math.hpp"
#include "cgr/layers/spatial.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/pool_cpu.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(MaxPool2d);

namespace {

class MaxPoolCpuKernel final : public CpuKernel {
 public:
  MaxPoolCpuKernel(const Pool2dGeometry& g, std::int64_t channels)
      : pool_(g, cpu::PoolKind::max), channels_(channels) {}
  void run(const KernelIo& io) const override { pool_.run(io.inputs[0], io.output, *io.pool); }
  // NHWC in on the lane path (a copy per point instead of a transpose).
  bool can_read_channels_last(std::size_t input) const override {
    return input == 0 && pool_.can_read_channels_last();
  }
  // NHWC out too (cpu/pool_cpu.hpp says where).
  bool can_write_channels_last() const override { return pool_.can_write_channels_last(channels_); }
  void use_channels_last(std::span<const bool> inputs, bool output) override {
    if (!inputs.empty() && inputs[0]) pool_.set_channels_last_input(channels_);
    if (output) pool_.set_channels_last_output(channels_);
  }

 private:
  cpu::PoolKernelCpu pool_;
  std::int64_t channels_;
};

}  // namespace

MaxPool2d::MaxPool2d(std::string name, const TensorDesc& input, const Pool2dParams& params)
    : Layer(std::move(name), {input}), params_(resolved(params)) {
  geometry_ = pool2d_geometry(kind(), this->name(), input, params_);
  set_output(spatial_output(spatial_shape(kind(), this->name(), input), input.shape[1],
                            geometry_.out_h, geometry_.out_w));
}

std::string MaxPool2d::attributes() const {
  return pool2d_attributes(params_);
}

OpCost MaxPool2d::cost() const {
  const Pool2dGeometry& g = geometry_;
  return {static_cast<double>(g.planes * g.out_h * g.out_w * g.kernel_h * g.kernel_w),
          activation_bytes()};
}

std::unique_ptr<CpuKernel> MaxPool2d::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<MaxPoolCpuKernel>(geometry_, inputs()[0].shape[1]);
}

}  // namespace cgr
