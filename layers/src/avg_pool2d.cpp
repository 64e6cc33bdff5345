// AvgPool2d: CPU kernel over math::pool_window_axis, one output plane per task.
#include "cgr/layers/avg_pool2d.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {
namespace {

class AvgPoolCpuKernel final : public CpuKernel {
 public:
  AvgPoolCpuKernel(const Shape& in, const Shape& out, const Pool2dParams& p)
      : in_(in), out_(out), p_(p) {}

  void run(const KernelIo& io) const override {
    const std::int64_t in_h = in_[2], in_w = in_[3], out_h = out_[2], out_w = out_[3];
    const auto planes = static_cast<std::size_t>(in_[0] * in_[1]);
    io.pool->parallel_for(planes, 4, [&](std::size_t begin, std::size_t end) {
      for (std::size_t plane = begin; plane < end; ++plane) {
        const float* x = io.inputs[0] + plane * static_cast<std::size_t>(in_h * in_w);
        float* y = io.output + plane * static_cast<std::size_t>(out_h * out_w);
        for (std::int64_t oh = 0; oh < out_h; ++oh) {
          const math::WindowAxis wh = math::pool_window_axis(oh, in_h, p_.kernel.h, p_.stride.h,
                                                             p_.padding.top, p_.padding.bottom);
          for (std::int64_t ow = 0; ow < out_w; ++ow) {
            const math::WindowAxis ww = math::pool_window_axis(
                ow, in_w, p_.kernel.w, p_.stride.w, p_.padding.left, p_.padding.right);
            float sum = 0.0f;
            for (std::int64_t ih = wh.begin; ih < wh.end; ++ih) {
              for (std::int64_t iw = ww.begin; iw < ww.end; ++iw) sum += x[ih * in_w + iw];
            }
            const std::int64_t divisor = p_.count_include_pad
                                             ? wh.padded_length * ww.padded_length
                                             : (wh.end - wh.begin) * (ww.end - ww.begin);
            y[oh * out_w + ow] = sum / static_cast<float>(divisor);
          }
        }
      }
    });
  }

 private:
  Shape in_, out_;
  Pool2dParams p_;
};

}  // namespace

AvgPool2d::AvgPool2d(std::string name, const TensorDesc& input, const Pool2dParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  if (!(params_.dilation == Size2(1))) {
    fail("AvgPool2d '{}': dilation {} is not supported (average pooling has none)", this->name(),
         to_string(params_.dilation));
  }
  set_output(pool2d_output_shape(kind(), this->name(), input, params_));
}

std::string AvgPool2d::attributes() const {
  return pool2d_attributes(params_) + (params_.count_include_pad ? "" : " exclude-pad");
}

std::unique_ptr<CpuKernel> AvgPool2d::make_cpu_kernel(const LayerWeights&) const {
  return std::make_unique<AvgPoolCpuKernel>(inputs()[0].shape, output().shape, params_);
}

}  // namespace cgr
