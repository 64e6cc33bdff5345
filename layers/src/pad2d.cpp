// Pad2d: each output plane is zeros with the input plane copied in at (top, left).
#include "cgr/layers/pad2d.hpp"

#include <algorithm>
#include <cstring>

#include "cgr/error.hpp"
#include "cgr/layers/spatial.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Pad2d);

namespace {

class Pad2dCpuKernel final : public CpuKernel {
 public:
  explicit Pad2dCpuKernel(const Pad2dGeometry& g) : g_(g) {}

  void run(const KernelIo& io) const override {
    const std::int64_t in_h = g_.in_h, in_w = g_.in_w, out_h = g_.out_h, out_w = g_.out_w;
    const auto planes = static_cast<std::size_t>(g_.planes);
    io.pool->parallel_for(planes, 8, [&](std::size_t begin, std::size_t end) {
      for (std::size_t plane = begin; plane < end; ++plane) {
        const float* x = io.inputs[0] + plane * static_cast<std::size_t>(in_h * in_w);
        float* y = io.output + plane * static_cast<std::size_t>(out_h * out_w);
        std::fill(y, y + out_h * out_w, 0.0f);
        for (std::int64_t h = 0; h < in_h; ++h) {
          std::memcpy(y + (h + g_.top) * out_w + g_.left, x + h * in_w,
                      static_cast<std::size_t>(in_w) * sizeof(float));
        }
      }
    });
  }

 private:
  Pad2dGeometry g_;
};

}  // namespace

Pad2d::Pad2d(std::string name, const TensorDesc& input, const Padding2d& padding)
    : Layer(std::move(name), {input}), padding_(padding) {
  const SpatialShape s = spatial_shape(kKind, this->name(), input);
  if (padding_.top < 0 || padding_.left < 0 || padding_.bottom < 0 || padding_.right < 0) {
    fail("Pad2d '{}': padding {} must be non-negative", this->name(), to_string(padding_));
  }
  check_1d_window(kKind, this->name(), input, s, 1, 1, 1, padding_);
  const std::int64_t out_h = s.h + padding_.top + padding_.bottom;
  const std::int64_t out_w = s.w + padding_.left + padding_.right;
  set_output(spatial_output(s, s.channels, out_h, out_w));
  geometry_ = {s.batch * s.channels, s.h, s.w, out_h, out_w, padding_.top, padding_.left};
}

std::string Pad2d::attributes() const { return fmt::format("p{}", to_string(padding_)); }

std::unique_ptr<CpuKernel> Pad2d::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<Pad2dCpuKernel>(geometry_);
}

}  // namespace cgr
