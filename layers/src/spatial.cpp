// N x C x L inputs of the 2-D window layers, taken as N x C x 1 x L (see spatial.hpp).
#include "cgr/layers/spatial.hpp"

#include "cgr/error.hpp"

namespace cgr {

SpatialShape spatial_shape(std::string_view kind, const std::string& name,
                           const TensorDesc& input) {
  const Shape& s = input.shape;
  if (s.rank() == 4) return {s[0], s[1], s[2], s[3], false};
  if (s.rank() == 3) return {s[0], s[1], 1, s[2], true};
  fail("{} '{}': input '{}' has shape {}, expected N x C x H x W or N x C x L", kind, name,
       input.name, s.to_string());
}

Shape spatial_output(const SpatialShape& input, std::int64_t channels, std::int64_t h,
                     std::int64_t w) {
  if (input.one_d) return Shape{input.batch, channels, w};
  return Shape{input.batch, channels, h, w};
}

void check_1d_window(std::string_view kind, const std::string& name, const TensorDesc& input,
                     const SpatialShape& shape, Size2 kernel, Size2 stride, Size2 dilation,
                     const Padding2d& padding) {
  if (!shape.one_d) return;
  if (kernel.h != 1 || stride.h != 1 || dilation.h != 1 || padding.top != 0 ||
      padding.bottom != 0) {
    fail(
        "{} '{}': input '{}' of shape {} is 1-D (N x C x L), so the window must have height 1 "
        "(kernel {}, stride {}, dilation {}, padding {})",
        kind, name, input.name, input.shape.to_string(), to_string(kernel), to_string(stride),
        to_string(dilation), to_string(padding));
  }
}

}  // namespace cgr
