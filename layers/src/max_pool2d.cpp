// MaxPool2d: shape rule shared with AvgPool2d, and the CPU kernel (one output plane per task).
#include "cgr/layers/max_pool2d.hpp"

#include <algorithm>
#include <limits>

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {
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
  MaxPoolCpuKernel(const Shape& in, const Shape& out, const Pool2dParams& p)
      : in_(in), out_(out), p_(p) {}

  void run(const KernelIo& io) const override {
    const std::int64_t in_h = in_[2], in_w = in_[3], out_h = out_[2], out_w = out_[3];
    const auto planes = static_cast<std::size_t>(in_[0] * in_[1]);
    io.pool->parallel_for(planes, 4, [&](std::size_t begin, std::size_t end) {
      for (std::size_t plane = begin; plane < end; ++plane) {
        const float* x = io.inputs[0] + plane * static_cast<std::size_t>(in_h * in_w);
        float* y = io.output + plane * static_cast<std::size_t>(out_h * out_w);
        for (std::int64_t oh = 0; oh < out_h; ++oh) {
          const std::int64_t h0 = oh * p_.stride.h - p_.padding.top;
          const auto [kh_begin, kh_end] = valid_taps(h0, p_.dilation.h, p_.kernel.h, in_h);
          float* out_row = y + oh * out_w;
          std::fill(out_row, out_row + out_w, -std::numeric_limits<float>::infinity());
          // Tap-major, output-minor: the inner loop runs along the row with a fixed tap, so
          // it vectorises; each output still sees its taps in (kh, kw) order.
          for (std::int64_t kh = kh_begin; kh < kh_end; ++kh) {
            const float* row = x + (h0 + kh * p_.dilation.h) * in_w;
            for (std::int64_t kw = 0; kw < p_.kernel.w; ++kw) {
              const std::int64_t offset = kw * p_.dilation.w - p_.padding.left;
              // Outputs whose tap kw lands inside the row: 0 <= ow * stride + offset < in_w.
              const std::int64_t sw = p_.stride.w;
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
  Shape in_, out_;
  Pool2dParams p_;
};

}  // namespace

Shape pool2d_output_shape(std::string_view kind, const std::string& name, const TensorDesc& input,
                          Pool2dParams& p) {
  const Shape& s = input.shape;
  if (s.rank() != 4) {
    fail("{} '{}': input '{}' has shape {}, expected 4 dims (N x C x H x W)", kind, name,
         input.name, s.to_string());
  }
  if (p.stride.h == 0) p.stride.h = p.kernel.h;
  if (p.stride.w == 0) p.stride.w = p.kernel.w;
  if (p.kernel.h <= 0 || p.kernel.w <= 0 || p.stride.h <= 0 || p.stride.w <= 0 ||
      p.dilation.h <= 0 || p.dilation.w <= 0 || p.padding.top < 0 || p.padding.left < 0 ||
      p.padding.bottom < 0 || p.padding.right < 0) {
    fail("{} '{}': invalid window (kernel {}, stride {}, padding {}, dilation {})", kind, name,
         to_string(p.kernel), to_string(p.stride), to_string(p.padding), to_string(p.dilation));
  }
  // ONNX's rule (PyTorch's, at most half the kernel, is stricter): padding smaller than the
  // kernel, so no window lies wholly in the padding.
  if (p.padding.top >= p.kernel.h || p.padding.bottom >= p.kernel.h ||
      p.padding.left >= p.kernel.w || p.padding.right >= p.kernel.w) {
    fail("{} '{}': padding {} must be smaller than the kernel {}", kind, name,
         to_string(p.padding), to_string(p.kernel));
  }
  const std::int64_t out_h = math::window_output_size(s[2], p.kernel.h, p.stride.h, p.padding.top,
                                                      p.padding.bottom, p.dilation.h, p.ceil_mode);
  const std::int64_t out_w =
      math::window_output_size(s[3], p.kernel.w, p.stride.w, p.padding.left, p.padding.right,
                               p.dilation.w, p.ceil_mode);
  if (out_h <= 0 || out_w <= 0) {
    fail("{} '{}': input {} is smaller than the window (kernel {}, padding {})", kind, name,
         s.to_string(), to_string(p.kernel), to_string(p.padding));
  }
  return Shape{s[0], s[1], out_h, out_w};
}

std::string pool2d_attributes(const Pool2dParams& p) {
  return fmt::format("k{} s{} p{}{}", to_string(p.kernel), to_string(p.stride),
                     to_string(p.padding), p.ceil_mode ? " ceil" : "");
}

MaxPool2d::MaxPool2d(std::string name, const TensorDesc& input, const Pool2dParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  set_output(pool2d_output_shape(kind(), this->name(), input, params_));
}

std::string MaxPool2d::attributes() const { return pool2d_attributes(params_); }

std::unique_ptr<CpuKernel> MaxPool2d::make_cpu_kernel(const LayerWeights&) const {
  return std::make_unique<MaxPoolCpuKernel>(inputs()[0].shape, output().shape, params_);
}

}  // namespace cgr
