// Pad2d: each output row is a fill (constant mode, outside the kept rows) or a source row whose
// kept columns are copied in and whose border columns come from math::pad_source, the mapping
// the GPU kernel uses too.
#include "cgr/layers/pad2d.hpp"

#include <algorithm>
#include <cstring>

#include "cgr/error.hpp"
#include "cgr/layers/spatial.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Pad2d);

std::string_view pad_mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::constant:
      return "constant";
    case PadMode::reflect:
      return "reflect";
    case PadMode::edge:
      return "edge";
    case PadMode::wrap:
      return "wrap";
  }
  return "?";
}

Pad2dGeometry make_pad2d_geometry(std::int64_t planes, std::int64_t in_h, std::int64_t in_w,
                                  const Pad2dParams& params) {
  const Padding2d& p = params.padding;
  Pad2dGeometry g;
  g.planes = planes;
  g.in_h = in_h;
  g.in_w = in_w;
  g.out_h = in_h + p.top + p.bottom;
  g.out_w = in_w + p.left + p.right;
  g.top = std::max<std::int64_t>(p.top, 0);
  g.left = std::max<std::int64_t>(p.left, 0);
  g.crop_top = std::max<std::int64_t>(-p.top, 0);
  g.crop_left = std::max<std::int64_t>(-p.left, 0);
  g.kept_h = in_h - g.crop_top - std::max<std::int64_t>(-p.bottom, 0);
  g.kept_w = in_w - g.crop_left - std::max<std::int64_t>(-p.right, 0);
  g.mode = params.mode;
  g.value = params.value;
  return g;
}

namespace {

class Pad2dCpuKernel final : public CpuKernel {
 public:
  explicit Pad2dCpuKernel(const Pad2dGeometry& g) : g_(g) {}

  void run(const KernelIo& io) const override {
    const Pad2dGeometry& g = g_;
    const auto rows = static_cast<std::size_t>(g.planes * g.out_h);
    const std::size_t grain =
        std::max<std::size_t>(1, 4096 / static_cast<std::size_t>(g.out_w + 1));
    io.pool->parallel_for(rows, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t row = begin; row < end; ++row) {
        const auto plane = static_cast<std::int64_t>(row) / g.out_h;
        const auto oh = static_cast<std::int64_t>(row) % g.out_h;
        float* y = io.output + static_cast<std::int64_t>(row) * g.out_w;
        const std::int64_t source_row = math::pad_source(oh - g.top, g.kept_h, g.mode);
        if (source_row < 0) {
          std::fill(y, y + g.out_w, g.value);
          continue;
        }
        const float* x =
            io.inputs[0] + (plane * g.in_h + g.crop_top + source_row) * g.in_w + g.crop_left;
        // The kept columns in one copy; the border columns (at most the pads) one by one.
        const std::int64_t inside_end = std::min(g.left + g.kept_w, g.out_w);
        for (std::int64_t ow = 0; ow < g.left; ++ow) {
          const std::int64_t c = math::pad_source(ow - g.left, g.kept_w, g.mode);
          y[ow] = c < 0 ? g.value : x[c];
        }
        std::memcpy(y + g.left, x, static_cast<std::size_t>(inside_end - g.left) * sizeof(float));
        for (std::int64_t ow = inside_end; ow < g.out_w; ++ow) {
          const std::int64_t c = math::pad_source(ow - g.left, g.kept_w, g.mode);
          y[ow] = c < 0 ? g.value : x[c];
        }
      }
    });
  }

 private:
  Pad2dGeometry g_;
};

}  // namespace

Pad2d::Pad2d(std::string name, const TensorDesc& input, const Pad2dParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  const SpatialShape s = spatial_shape(kKind, this->name(), input);
  const Padding2d& p = params_.padding;
  check_1d_window(kKind, this->name(), input, s, 1, 1, 1, p);
  geometry_ = make_pad2d_geometry(s.batch * s.channels, s.h, s.w, params_);
  const Pad2dGeometry& g = geometry_;
  if (g.kept_h < 1 || g.kept_w < 1) {
    fail("Pad2d '{}': padding {} crops all of '{}' of shape {}", this->name(), to_string(p),
         input.name, input.shape.to_string());
  }
  // Reflection repeats no border pixel, so it has at most kept - 1 pixels to mirror per side
  // (PyTorch and ONNX Runtime refuse more too).
  if (params_.mode == PadMode::reflect) {
    const std::int64_t most_h = std::max(p.top, p.bottom), most_w = std::max(p.left, p.right);
    if (most_h >= g.kept_h || most_w >= g.kept_w) {
      fail(
          "Pad2d '{}': reflect padding {} needs pads smaller than the {}x{} plane it mirrors "
          "('{}' of shape {})",
          this->name(), to_string(p), g.kept_h, g.kept_w, input.name, input.shape.to_string());
    }
  }
  set_output(spatial_output(s, s.channels, g.out_h, g.out_w));
}

std::string Pad2d::attributes() const {
  std::string text = fmt::format("p{}", to_string(params_.padding));
  if (params_.mode != PadMode::constant)
    return fmt::format("{} {}", text, pad_mode_name(params_.mode));
  if (params_.value != 0.0f) return fmt::format("{} value {}", text, params_.value);
  return text;
}

std::unique_ptr<CpuKernel> Pad2d::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<Pad2dCpuKernel>(geometry_);
}

}  // namespace cgr
