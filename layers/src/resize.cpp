// Resize: the sampling tables (ONNX's coordinate transformations and nearest roundings, in
// float as ONNX Runtime computes them) and the CPU kernel, which reads them as the GPU does.
#include "cgr/layers/resize.hpp"

#include <algorithm>
#include <cmath>

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Resize);

std::string_view resize_coordinates_name(ResizeCoordinates coordinates) {
  switch (coordinates) {
    case ResizeCoordinates::half_pixel:
      return "half_pixel";
    case ResizeCoordinates::half_pixel_symmetric:
      return "half_pixel_symmetric";
    case ResizeCoordinates::pytorch_half_pixel:
      return "pytorch_half_pixel";
    case ResizeCoordinates::align_corners:
      return "align_corners";
    case ResizeCoordinates::asymmetric:
      return "asymmetric";
    case ResizeCoordinates::tf_half_pixel_for_nn:
      return "tf_half_pixel_for_nn";
  }
  return "?";
}

std::string_view nearest_rounding_name(NearestRounding rounding) {
  switch (rounding) {
    case NearestRounding::round_prefer_floor:
      return "round_prefer_floor";
    case NearestRounding::round_prefer_ceil:
      return "round_prefer_ceil";
    case NearestRounding::floor:
      return "floor";
    case NearestRounding::ceil:
      return "ceil";
    case NearestRounding::legacy:
      return "legacy";
  }
  return "?";
}

namespace {

// ONNX's coordinate transformation of output position x along an axis of in -> out with
// scale (out / in, or the given scale), in float as ONNX Runtime evaluates it.
float original_coordinate(float x, float scale, std::int64_t in, std::int64_t out,
                          ResizeCoordinates coordinates) {
  const auto length_in = static_cast<float>(in), length_out = static_cast<float>(out);
  switch (coordinates) {
    case ResizeCoordinates::half_pixel:
      return (x + 0.5f) / scale - 0.5f;
    case ResizeCoordinates::half_pixel_symmetric: {
      // The output's centre maps to the input's even when floor(in * scale) cut the output.
      const float adjustment = length_out / (scale * length_in);
      const float offset = length_in / 2 * (1 - adjustment);
      return static_cast<float>(offset + (x + 0.5) / scale - 0.5);
    }
    case ResizeCoordinates::pytorch_half_pixel:
      return out > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case ResizeCoordinates::align_corners:
      return out == 1 ? 0.0f : x * (length_in - 1) / (length_out - 1);
    case ResizeCoordinates::asymmetric:
      return x / scale;
    case ResizeCoordinates::tf_half_pixel_for_nn:
      return (x + 0.5f) / scale;
  }
  return 0.0f;
}

std::int64_t nearest_index(float c, float scale, NearestRounding rounding) {
  switch (rounding) {
    case NearestRounding::round_prefer_floor:
      return static_cast<std::int64_t>(c == std::floor(c) + 0.5f ? std::floor(c) : std::round(c));
    case NearestRounding::round_prefer_ceil:
      return static_cast<std::int64_t>(c == std::floor(c) + 0.5f ? std::ceil(c) : std::round(c));
    case NearestRounding::floor:
      return static_cast<std::int64_t>(std::floor(c));
    case NearestRounding::ceil:
      return static_cast<std::int64_t>(std::ceil(c));
    case NearestRounding::legacy:
      return static_cast<std::int64_t>(scale < 1.0f ? std::ceil(c) : std::trunc(c));
  }
  return 0;
}

using LinearTap = math::LinearTap<std::int64_t>;

class ResizeCpuKernel final : public CpuKernel {
 public:
  ResizeCpuKernel(const ResizeGeometry& g, const std::vector<float>& tables) : g_(g) {
    for (std::int64_t i = 0; i < g.out_h; ++i)
      rows_.push_back(math::linear_tap(tables[static_cast<std::size_t>(i)], g.in_h));
    for (std::int64_t i = 0; i < g.out_w; ++i)
      columns_.push_back(math::linear_tap(tables[static_cast<std::size_t>(g.out_h + i)], g.in_w));
  }

  void run(const KernelIo& io) const override {
    const ResizeGeometry& g = g_;
    const auto rows = static_cast<std::size_t>(g.planes * g.out_h);
    const std::size_t grain =
        std::max<std::size_t>(1, 4096 / static_cast<std::size_t>(g.out_w + 1));
    io.pool->parallel_for(rows, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t row = begin; row < end; ++row) {
        const auto plane = static_cast<std::int64_t>(row) / g.out_h;
        const LinearTap& r = rows_[row % static_cast<std::size_t>(g.out_h)];
        const float* x = io.inputs[0] + plane * g.in_h * g.in_w;
        float* y = io.output + static_cast<std::int64_t>(row) * g.out_w;
        if (g.mode == ResizeMode::nearest) {
          const float* source = x + r.first * g.in_w;
          for (std::int64_t ow = 0; ow < g.out_w; ++ow)
            y[ow] = source[columns_[static_cast<std::size_t>(ow)].first];
          continue;
        }
        const float* top = x + r.first * g.in_w;
        const float* bottom = x + r.second * g.in_w;
        for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
          const LinearTap& c = columns_[static_cast<std::size_t>(ow)];
          y[ow] = math::bilinear(top[c.first], top[c.second], bottom[c.first], bottom[c.second],
                                 r.weight, c.weight);
        }
      }
    });
  }

 private:
  ResizeGeometry g_;
  // Nearest reads `first` (the table's index, weight 0).
  std::vector<LinearTap> rows_, columns_;
};

}  // namespace

std::vector<float> resize_axis_table(std::int64_t in, std::int64_t out, float scale,
                                     const ResizeParams& params) {
  std::vector<float> table;
  table.reserve(static_cast<std::size_t>(out));
  for (std::int64_t i = 0; i < out; ++i) {
    const float c = original_coordinate(static_cast<float>(i), scale, in, out, params.coordinates);
    if (params.mode == ResizeMode::nearest) {
      const std::int64_t index =
          std::clamp<std::int64_t>(nearest_index(c, scale, params.rounding), 0, in - 1);
      table.push_back(static_cast<float>(index));
    } else {
      // Outside the input the border pixel repeats (no extrapolation outside tf_crop_and_resize).
      table.push_back(std::clamp(c, 0.0f, static_cast<float>(in - 1)));
    }
  }
  return table;
}

Resize::Resize(std::string name, const TensorDesc& input, const ResizeParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  const Shape& s = input.shape;
  const std::size_t rank = s.rank();
  if (rank < 2) {
    fail(
        "Resize '{}': input '{}' has shape {}; it resamples the last two dims, so it needs 2 or "
        "more",
        this->name(), input.name, s.to_string());
  }
  const bool by_scales = !params_.scales.empty();
  if (by_scales == !params_.sizes.empty()) {
    fail("Resize '{}': give either scales or sizes (one per dim of '{}'), not {}", this->name(),
         input.name, by_scales ? "both" : "neither");
  }
  const std::size_t given = by_scales ? params_.scales.size() : params_.sizes.size();
  if (given != rank ||
      (!by_scales && !params_.size_scales.empty() && params_.size_scales.size() != rank)) {
    fail("Resize '{}': {} {} for '{}' of shape {} ({} dims)", this->name(),
         given != rank ? given : params_.size_scales.size(),
         given != rank ? (by_scales ? "scales" : "sizes") : "size_scales", input.name,
         s.to_string(), rank);
  }
  for (const float v : params_.size_scales) {
    if (!(v > 0.0f) || !std::isfinite(v))
      fail("Resize '{}': size scale {} must be positive and finite", this->name(), v);
  }
  std::vector<std::int64_t> out(rank);
  std::vector<float> scale(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    if (by_scales) {
      scale[d] = params_.scales[d];
      if (!(scale[d] > 0.0f) || !std::isfinite(scale[d])) {
        fail("Resize '{}': scale {} of dim {} must be positive and finite", this->name(), scale[d],
             d);
      }
      // floor(in * scale), in float as ONNX Runtime computes it.
      const float size = std::floor(static_cast<float>(s[d]) * scale[d]);
      if (size > static_cast<float>(kMaxSide)) {
        fail("Resize '{}': scale {} makes dim {} of '{}' ({}) too large", this->name(), scale[d], d,
             input.name, s[d]);
      }
      out[d] = static_cast<std::int64_t>(size);
    } else {
      out[d] = params_.sizes[d];
      if (out[d] < 0 || out[d] > kMaxSide) {
        fail("Resize '{}': size {} of dim {} is out of range", this->name(), out[d], d);
      }
      if (s[d] == 0 && out[d] != 0) {
        fail("Resize '{}': dim {} of '{}' is empty and cannot become {} long", this->name(), d,
             input.name, out[d]);
      }
      scale[d] = !params_.size_scales.empty()
                     ? params_.size_scales[d]
                     : (s[d] == 0 ? 1.0f : static_cast<float>(out[d]) / static_cast<float>(s[d]));
    }
    if (out[d] < 1 && s[d] > 0) {
      fail("Resize '{}': dim {} of '{}' of shape {} would become {} long", this->name(), d,
           input.name, s.to_string(), out[d]);
    }
  }
  // Dims above the last two are planes, copied as they are: they must keep their size, and a
  // dim longer than 1 must be sampled 1:1 (scale 1), else it would be resampled too.
  for (std::size_t d = 0; d + 2 < rank; ++d) {
    if (out[d] != s[d] || (s[d] > 1 && scale[d] != 1.0f)) {
      fail(
          "Resize '{}': only the last two dims can be resized, and dim {} of '{}' of shape {} "
          "has scale {} (output {})",
          this->name(), d, input.name, s.to_string(), scale[d], out[d]);
    }
  }
  const std::size_t h = rank - 2, w = rank - 1;
  if (s[h] > kMaxSide || s[w] > kMaxSide) {
    fail("Resize '{}': '{}' of shape {} has a plane side above {}", this->name(), input.name,
         s.to_string(), kMaxSide);
  }
  geometry_ = {1, s[h], s[w], out[h], out[w], params_.mode};
  for (std::size_t d = 0; d < h; ++d)
    geometry_.planes *= s[d];
  tables_ = resize_axis_table(s[h], out[h], scale[h], params_);
  const std::vector<float> columns = resize_axis_table(s[w], out[w], scale[w], params_);
  tables_.insert(tables_.end(), columns.begin(), columns.end());
  std::vector<std::int64_t> dims = s.dims();
  dims[h] = out[h];
  dims[w] = out[w];
  set_output(Shape(std::move(dims)));
}

std::string Resize::attributes() const {
  const ResizeGeometry& g = geometry_;
  std::string text = fmt::format("{}x{} -> {}x{} {} {}", g.in_h, g.in_w, g.out_h, g.out_w,
                                 g.mode == ResizeMode::nearest ? "nearest" : "linear",
                                 resize_coordinates_name(params_.coordinates));
  if (g.mode == ResizeMode::nearest)
    text += fmt::format(" {}", nearest_rounding_name(params_.rounding));
  return text;
}

OpCost Resize::cost() const {
  const double outputs = static_cast<double>(output().shape.numel());
  const bool linear = params_.mode == ResizeMode::linear;
  return {linear ? 8.0 * outputs : 0.0, (linear ? 5.0 : 2.0) * outputs * sizeof(float)};
}

std::unique_ptr<CpuKernel> Resize::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<ResizeCpuKernel>(geometry_, tables_);
}

}  // namespace cgr
