// The inputs of the layers with a 2-D window (Conv2d, ConvTranspose2d, MaxPool2d, AvgPool2d,
// GlobalAvgPool, Pad2d): N x C x H x W, or N x C x L, which they take as N x C x 1 x L. Both
// have the same bytes, so a 1-D model (nn.Conv1d, MaxPool1d, AvgPool1d, ...) runs through the
// 2-D layers, their geometry and every backend's kernels unchanged, with no reshape around
// them (a Reshape is a copy in cgr). The output keeps the input's rank.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

// The input as N x C x H x W (H = 1 for an N x C x L input).
struct SpatialShape {
  std::int64_t batch = 0, channels = 0, h = 1, w = 0;
  bool one_d = false;  // the input is N x C x L
};

// `input` as N x C x H x W; fails naming the layer (`kind` '`name`') for ranks other than 3
// and 4.
SpatialShape spatial_shape(std::string_view kind, const std::string& name, const TensorDesc& input);

// The layer's output in the input's rank: N x C x H x W, or N x C x W after a 1-D input.
Shape spatial_output(const SpatialShape& input, std::int64_t channels, std::int64_t h,
                     std::int64_t w);

// A 1-D input has no height to slide over: fails unless the window's height part is trivial
// (kernel, stride and dilation 1, no padding at the top or bottom). Nothing for 2-D inputs.
void check_1d_window(std::string_view kind, const std::string& name, const TensorDesc& input,
                     const SpatialShape& shape, Size2 kernel, Size2 stride, Size2 dilation,
                     const Padding2d& padding);

}  // namespace cgr
