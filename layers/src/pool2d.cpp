// The pooling window shared by MaxPool2d and AvgPool2d: validation and geometry.
#include "cgr/layers/pool2d.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/layers/spatial.hpp"

namespace cgr {

Pool2dParams resolved(const Pool2dParams& params) {
  Pool2dParams p = params;
  if (p.stride.h == 0) p.stride.h = p.kernel.h;
  if (p.stride.w == 0) p.stride.w = p.kernel.w;
  return p;
}

Pool2dGeometry pool2d_geometry(std::string_view kind, const std::string& name,
                               const TensorDesc& input, const Pool2dParams& params) {
  const SpatialShape s = spatial_shape(kind, name, input);
  const Pool2dParams p = resolved(params);
  if (p.kernel.h <= 0 || p.kernel.w <= 0 || p.stride.h <= 0 || p.stride.w <= 0 ||
      p.dilation.h <= 0 || p.dilation.w <= 0 || p.padding.top < 0 || p.padding.left < 0 ||
      p.padding.bottom < 0 || p.padding.right < 0) {
    fail("{} '{}': invalid window (kernel {}, stride {}, padding {}, dilation {})", kind, name,
         to_string(p.kernel), to_string(p.stride), to_string(p.padding), to_string(p.dilation));
  }
  check_1d_window(kind, name, input, s, p.kernel, p.stride, p.dilation, p.padding);
  // ONNX's rule (PyTorch's, at most half the kernel, is stricter): padding smaller than the
  // kernel, so no window lies wholly in the padding.
  if (p.padding.top >= p.kernel.h || p.padding.bottom >= p.kernel.h ||
      p.padding.left >= p.kernel.w || p.padding.right >= p.kernel.w) {
    fail("{} '{}': padding {} must be smaller than the kernel {}", kind, name, to_string(p.padding),
         to_string(p.kernel));
  }
  const std::int64_t out_h = math::window_output_size(s.h, p.kernel.h, p.stride.h, p.padding.top,
                                                      p.padding.bottom, p.dilation.h, p.ceil_mode);
  const std::int64_t out_w = math::window_output_size(s.w, p.kernel.w, p.stride.w, p.padding.left,
                                                      p.padding.right, p.dilation.w, p.ceil_mode);
  if (out_h <= 0 || out_w <= 0) {
    fail("{} '{}': input {} is smaller than the window (kernel {}, padding {})", kind, name,
         input.shape.to_string(), to_string(p.kernel), to_string(p.padding));
  }
  return {.planes = s.batch * s.channels,
          .in_h = s.h,
          .in_w = s.w,
          .out_h = out_h,
          .out_w = out_w,
          .kernel_h = p.kernel.h,
          .kernel_w = p.kernel.w,
          .stride_h = p.stride.h,
          .stride_w = p.stride.w,
          .pad_top = p.padding.top,
          .pad_left = p.padding.left,
          .pad_bottom = p.padding.bottom,
          .pad_right = p.padding.right,
          .dilation_h = p.dilation.h,
          .dilation_w = p.dilation.w,
          .count_include_pad = p.count_include_pad};
}

std::string pool2d_attributes(const Pool2dParams& p) {
  return fmt::format("k{} s{} p{}{}", to_string(p.kernel), to_string(p.stride),
                     to_string(p.padding), p.ceil_mode ? " ceil" : "");
}

}  // namespace cgr
