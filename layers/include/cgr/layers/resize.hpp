// Resize: nearest or bilinear resampling of the last two dims (H and W of NCHW; the length of
// N x C x L) by ONNX Resize's rules (every coordinate transformation but tf_crop_and_resize,
// every nearest rounding, and Upsample's older reading), which cover F.interpolate and
// nn.Upsample. The output size is floor(input * scale), or the sizes given.
//
// Where each output row and column samples is computed once, on the host, into two tables
// (one entry per output row, one per output column): both backends read the same tables, so
// they sample the very same positions whatever their floating-point contraction.
#pragma once

#include <vector>

#include "cgr/layers/layer.hpp"

namespace cgr {

enum class ResizeMode : std::int32_t { nearest, linear };

// ONNX's coordinate_transformation_mode: where output coordinate x samples the input, with
// scale = output / input (the given scale, or the sizes' ratio).
enum class ResizeCoordinates : std::int32_t {
  half_pixel,            // (x + 0.5) / scale - 0.5
  half_pixel_symmetric,  // half_pixel, shifted so the output's centre maps to the input's
  pytorch_half_pixel,    // half_pixel, but 0 for an output of length 1
  align_corners,         // x * (in - 1) / (out - 1): the corner pixels align
  asymmetric,            // x / scale
  tf_half_pixel_for_nn,  // (x + 0.5) / scale (ONNX opsets 11-12)
};

// ONNX's nearest_mode: how a nearest sample rounds its coordinate.
enum class NearestRounding : std::int32_t {
  round_prefer_floor,
  round_prefer_ceil,
  floor,
  ceil,
  // Upsample (opsets 7-9) and Resize-10, which have no nearest_mode, as ONNX Runtime reads
  // them: the coordinate truncated when the axis grows or keeps its size, rounded up when it
  // shrinks.
  legacy,
};

std::string_view resize_coordinates_name(ResizeCoordinates coordinates);
std::string_view nearest_rounding_name(NearestRounding rounding);

struct ResizeParams {
  ResizeMode mode = ResizeMode::nearest;
  ResizeCoordinates coordinates = ResizeCoordinates::half_pixel;
  NearestRounding rounding = NearestRounding::round_prefer_floor;
  // One per input dim, exactly one of the two given: each output dim is floor(in * scale),
  // or sizes[d]. Only the last two dims may change (a dim above them keeps its size, with
  // scale 1 unless it is 1 long).
  std::vector<float> scales{};
  std::vector<std::int64_t> sizes{};
  // With sizes, one per dim: the scale of each dim's coordinate transform where it is not
  // size / input (ONNX's keep_aspect_ratio_policy gives the dims it resizes one scale); empty:
  // the ratios.
  std::vector<float> size_scales{};
};

// `planes` (the product of the dims above the last two) planes of in_h x in_w resampled to
// out_h x out_w. Fixed-size, so kernels take it by value.
struct ResizeGeometry {
  std::int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  ResizeMode mode = ResizeMode::nearest;
};

// The input coordinate each output position along one axis samples: for nearest the index,
// for linear the clamped coordinate (linear takes floor(c) and floor(c) + 1, capped at in - 1,
// weighted by the fraction). Floats, exact for every index below 2^24 (above the layer's limit).
std::vector<float> resize_axis_table(std::int64_t in, std::int64_t out, float scale,
                                     const ResizeParams& params);

class Resize final : public Layer {
 public:
  static constexpr std::string_view kKind = "Resize";
  // The largest input or output height and width. The tables hold indices as floats (exact
  // below 2^24), and are made when the layer is: a corrupt model's sizes must not make them big.
  static constexpr std::int64_t kMaxSide = std::int64_t{1} << 20;

  Resize(std::string name, const TensorDesc& input, const ResizeParams& params);

  std::string_view kind() const override { return kKind; }
  const ResizeParams& params() const { return params_; }
  const ResizeGeometry& geometry() const { return geometry_; }
  // One entry per output row (out_h), then one per output column (out_w).
  const std::vector<float>& tables() const { return tables_; }
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  ResizeParams params_;
  ResizeGeometry geometry_;
  std::vector<float> tables_;
};

}  // namespace cgr
