// MaxPool2d: the CPU kernel over the layer's window geometry (one output plane per task).
#include "cgr/layers/max_pool2d.hpp"

#include <algorithm>
#include <limits>

#include "cgr/layers/element_math.hpp"
#include "cgr/layers/spatial.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(MaxPool2d);

namespace {

// Taps k in [begin, end) of a window starting at `start` (dilation d) that land inside
// [0, size): hoisting the bounds out of the inner loop keeps it branch-free.
std::pair<std::int64_t, std::int64_t> valid_taps(std::int64_t start, std::int64_t d,
                                                 std::int64_t kernel, std::int64_t size) {
  // Undilated windows (nearly all) need no division: a 64-bit divide per output costs more
  // than the window's compares.
  if (d == 1) return {std::max<std::int64_t>(0, -start), std::clamp<std::int64_t>(size - start, 0, kernel)};
  std::int64_t begin = start < 0 ? (-start + d - 1) / d : 0;
  std::int64_t end = start + (kernel - 1) * d < size ? kernel : (size - start + d - 1) / d;
  if (end < begin) end = begin;
  return {begin, end};
}

class MaxPoolCpuKernel final : public CpuKernel {
 public:
  explicit MaxPoolCpuKernel(const Pool2dGeometry& g) : g_(g) {}

  void run(const KernelIo& io) const override {
    const Pool2dGeometry& g = g_;
    const std::int64_t in_h = g.in_h, in_w = g.in_w, out_h = g.out_h, out_w = g.out_w;
    const auto planes = static_cast<std::size_t>(g.planes);
    io.pool->parallel_for(planes, 4, [&](std::size_t begin, std::size_t end) {
      for (std::size_t plane = begin; plane < end; ++plane) {
        const float* x = io.inputs[0] + plane * static_cast<std::size_t>(in_h * in_w);
        float* y = io.output + plane * static_cast<std::size_t>(out_h * out_w);
        for (std::int64_t oh = 0; oh < out_h; ++oh) {
          const std::int64_t h0 = oh * g.stride_h - g.pad_top;
          const auto [kh_begin, kh_end] = valid_taps(h0, g.dilation_h, g.kernel_h, in_h);
          float* out_row = y + oh * out_w;
          std::fill(out_row, out_row + out_w, -std::numeric_limits<float>::infinity());
          // Tap-major, output-minor: the inner loop runs along the row with a fixed tap, so
          // it vectorises; each output still sees its taps in (kh, kw) order.
          for (std::int64_t kh = kh_begin; kh < kh_end; ++kh) {
            const float* row = x + (h0 + kh * g.dilation_h) * in_w;
            for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
              const std::int64_t offset = kw * g.dilation_w - g.pad_left;
              // Outputs whose tap kw lands inside the row: 0 <= ow * stride + offset < in_w.
              const std::int64_t sw = g.stride_w;
              const std::int64_t first = offset >= 0 ? 0 : (-offset + sw - 1) / sw;
              const std::int64_t last = std::min(out_w, in_w - offset <= 0 ? 0 : (in_w - offset + sw - 1) / sw);
              if (sw == 1) {
                for (std::int64_t ow = first; ow < last; ++ow) {
                  out_row[ow] = math::nan_max(out_row[ow], row[ow + offset]);
                }
              } else {
                for (std::int64_t ow = first; ow < last; ++ow) {
                  out_row[ow] = math::nan_max(out_row[ow], row[ow * sw + offset]);
                }
              }
            }
          }
        }
      }
    });
  }

 private:
  Pool2dGeometry g_;
};

}  // namespace

MaxPool2d::MaxPool2d(std::string name, const TensorDesc& input, const Pool2dParams& params)
    : Layer(std::move(name), {input}), params_(resolved(params)) {
  geometry_ = pool2d_geometry(kind(), this->name(), input, params_);
  set_output(spatial_output(spatial_shape(kind(), this->name(), input), input.shape[1],
                            geometry_.out_h, geometry_.out_w));
}

std::string MaxPool2d::attributes() const { return pool2d_attributes(params_); }

OpCost MaxPool2d::cost() const {
  const Pool2dGeometry& g = geometry_;
  return {static_cast<double>(g.planes * g.out_h * g.out_w * g.kernel_h * g.kernel_w),
          activation_bytes()};
}

std::unique_ptr<CpuKernel> MaxPool2d::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<MaxPoolCpuKernel>(geometry_);
}

}  // namespace cgr
