// AvgPool2d: CPU kernel over math::pool_window_axis, one output plane per task.
#include "cgr/layers/avg_pool2d.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/layers/spatial.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(AvgPool2d);

namespace {

class AvgPoolCpuKernel final : public CpuKernel {
 public:
  explicit AvgPoolCpuKernel(const Pool2dGeometry& g) : g_(g) {}

  void run(const KernelIo& io) const override {
    const Pool2dGeometry& g = g_;
    const std::int64_t in_h = g.in_h, in_w = g.in_w, out_h = g.out_h, out_w = g.out_w;
    io.pool->parallel_for(
        static_cast<std::size_t>(g.planes), 4, [&](std::size_t begin, std::size_t end) {
          for (std::size_t plane = begin; plane < end; ++plane) {
            const float* x = io.inputs[0] + plane * static_cast<std::size_t>(in_h * in_w);
            float* y = io.output + plane * static_cast<std::size_t>(out_h * out_w);
            for (std::int64_t oh = 0; oh < out_h; ++oh) {
              const math::WindowAxis wh =
                  math::pool_window_axis(oh, in_h, g.kernel_h, g.stride_h, g.pad_top, g.pad_bottom);
              for (std::int64_t ow = 0; ow < out_w; ++ow) {
                const math::WindowAxis ww = math::pool_window_axis(ow, in_w, g.kernel_w, g.stride_w,
                                                                   g.pad_left, g.pad_right);
                float sum = 0.0f;
                for (std::int64_t ih = wh.begin; ih < wh.end; ++ih) {
                  for (std::int64_t iw = ww.begin; iw < ww.end; ++iw)
                    sum += x[ih * in_w + iw];
                }
                const std::int64_t divisor = g.count_include_pad
                                                 ? wh.padded_length * ww.padded_length
                                                 : (wh.end - wh.begin) * (ww.end - ww.begin);
                y[oh * out_w + ow] = sum / static_cast<float>(divisor);
              }
            }
          }
        });
  }

 private:
  Pool2dGeometry g_;
};

}  // namespace

AvgPool2d::AvgPool2d(std::string name, const TensorDesc& input, const Pool2dParams& params)
    : Layer(std::move(name), {input}), params_(resolved(params)) {
  if (!(params_.dilation == Size2(1))) {
    fail("AvgPool2d '{}': dilation {} is not supported (average pooling has none)", this->name(),
         to_string(params_.dilation));
  }
  geometry_ = pool2d_geometry(kind(), this->name(), input, params_);
  set_output(spatial_output(spatial_shape(kind(), this->name(), input), input.shape[1],
                            geometry_.out_h, geometry_.out_w));
}

std::string AvgPool2d::attributes() const {
  return pool2d_attributes(params_) + (params_.count_include_pad ? "" : " exclude-pad");
}

OpCost AvgPool2d::cost() const {
  const Pool2dGeometry& g = geometry_;
  return {static_cast<double>(g.planes * g.out_h * g.out_w * g.kernel_h * g.kernel_w),
          activation_bytes()};
}

std::unique_ptr<CpuKernel> AvgPool2d::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<AvgPoolCpuKernel>(geometry_);
}

}  // namespace cgr
