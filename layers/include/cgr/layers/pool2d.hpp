// The window of MaxPool2d and AvgPool2d: PyTorch's arguments, and the geometry both pools'
// kernels take (on every backend), computed once when the layer is made.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

struct Pool2dParams {
  Size2 kernel{};
  Size2 stride = 0;  // 0: same as kernel, PyTorch's default
  Padding2d padding{};
  Size2 dilation = 1;  // MaxPool2d only
  bool ceil_mode = false;
  bool count_include_pad = true;  // AvgPool2d only
};

// A pooling over `planes` (N * C) planes of in_h x in_w into out_h x out_w (the output size by
// math::window_output_size); pad_bottom / pad_right clip the last windows. The stride is the
// resolved one (never 0).
struct Pool2dGeometry {
  std::int64_t planes, in_h, in_w, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_top,
      pad_left, pad_bottom, pad_right, dilation_h, dilation_w;
  bool count_include_pad;
};

// Validates the window for `input` (errors name the kind and the layer) and returns its
// geometry; the output shape is N x C x out_h x out_w, or N x C x out_w after an N x C x L
// input (MaxPool1d, AvgPool1d: height 1, see spatial.hpp).
Pool2dGeometry pool2d_geometry(std::string_view kind, const std::string& name,
                               const TensorDesc& input, const Pool2dParams& params);
std::string pool2d_attributes(const Pool2dParams& params);
// The params with the stride resolved (PyTorch's default: the kernel).
Pool2dParams resolved(const Pool2dParams& params);

}  // namespace cgr
