// The pooling window shared by MaxPool2d and AvgPool2d: validation and geometry.
#include "cgr/layers/pool2d.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"

namespace cgr {

Pool2dParams resolved(const Pool2dParams& params) {
  Pool2dParams p = params;
  if (p.stride.h == 0) p.stride.h = p.kernel.h;
  if (p.stride.w == 0) p.stride.w = p.kernel.w;
  return p;
}

Pool2dGeometry pool2d_geometry(std::string_view kind, const std::string& name,
                               const TensorDesc& input, const Pool2dParams& params) {
  const Shape& s = input.shape;
  if (s.rank() != 4) {
    fail("{} '{}': input '{}' has shape {}, expected 4 dims (N x C x H x W)", kind, name,
         input.name, s.to_string());
  }
  const Pool2dParams p = resolved(params);
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
    fail("{} '{}': padding {} must be smaller than the kernel {}", kind, name, to_string(p.padding),
         to_string(p.kernel));
  }
  const std::int64_t out_h = math::window_output_size(s[2], p.kernel.h, p.stride.h, p.padding.top,
                                                      p.padding.bottom, p.dilation.h, p.ceil_mode);
  const std::int64_t out_w = math::window_output_size(s[3], p.kernel.w, p.stride.w, p.padding.left,
                                                      p.padding.right, p.dilation.w, p.ceil_mode);
  if (out_h <= 0 || out_w <= 0) {
    fail("{} '{}': input {} is smaller than the window (kernel {}, padding {})", kind, name,
         s.to_string(), to_string(p.kernel), to_string(p.padding));
  }
  return {s[0] * s[1],     s[2],          s[3],           out_h,
          out_w,           p.kernel.h,    p.kernel.w,     p.stride.h,
          p.stride.w,      p.padding.top, p.padding.left, p.padding.bottom,
          p.padding.right, p.dilation.h,  p.dilation.w,   p.count_include_pad};
}

std::string pool2d_attributes(const Pool2dParams& p) {
  return fmt::format("k{} s{} p{}{}", to_string(p.kernel), to_string(p.stride),
                     to_string(p.padding), p.ceil_mode ? " ceil" : "");
}

}  // namespace cgr
