// Slice: the geometry both backends gather with, and the CPU kernel (rows of the innermost dim
// copied when it is contiguous, element by element otherwise).
#include "cgr/layers/slice.hpp"

#include <algorithm>
#include <cstring>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Slice);

SliceAxis slice_axis(std::int64_t size, std::int64_t start, std::int64_t end, std::int64_t step) {
  // A step longer than the axis takes one element, like a step of size + 1.
  const std::int64_t s = std::clamp<std::int64_t>(step, -(size + 1), size + 1);
  std::int64_t b = start < 0 ? std::max(start, -size - 1) + size : start;
  std::int64_t e = end < 0 ? std::max(end, -size - 1) + size : end;
  SliceAxis axis{0, s, 0};
  if (s > 0) {
    b = std::clamp<std::int64_t>(b, 0, size);
    e = std::clamp<std::int64_t>(e, 0, size);
    axis.count = std::max<std::int64_t>(0, (e - b + s - 1) / s);
  } else {
    b = std::clamp<std::int64_t>(b, 0, size - 1);
    e = std::clamp<std::int64_t>(e, -1, size - 1);
    axis.count = std::max<std::int64_t>(0, (b - e + (-s) - 1) / (-s));
  }
  axis.first = b;
  return axis;
}

namespace {

class SliceCpuKernel final : public CpuKernel {
 public:
  explicit SliceCpuKernel(const SliceGeometry& g) : g_(g) {}

  void run(const KernelIo& io) const override {
    const float* x = io.inputs[0];
    float* y = io.output;
    const int last = g_.rank - 1;
    const std::int64_t inner = g_.out_dims[last], step = g_.strides[last];
    const auto rows = static_cast<std::size_t>(g_.count / std::max<std::int64_t>(inner, 1));
    const std::size_t grain = std::max<std::size_t>(
        1, (1u << 15) / static_cast<std::size_t>(std::max<std::int64_t>(inner, 1)));
    io.pool->parallel_for(rows, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t row = begin; row < end; ++row) {
        std::int64_t rest = static_cast<std::int64_t>(row), offset = g_.base;
        for (int d = last - 1; d >= 0; --d) {
          offset += (rest % g_.out_dims[d]) * g_.strides[d];
          rest /= g_.out_dims[d];
        }
        float* out = y + static_cast<std::int64_t>(row) * inner;
        if (step == 1) {
          std::memcpy(out, x + offset, static_cast<std::size_t>(inner) * sizeof(float));
        } else {
          for (std::int64_t j = 0; j < inner; ++j)
            out[j] = x[offset + j * step];
        }
      }
    });
  }

 private:
  SliceGeometry g_;
};

}  // namespace

Slice::Slice(std::string name, const TensorDesc& input, const SliceParams& p)
    : Layer(std::move(name), {input}) {
  const Shape& s = input.shape;
  const auto rank = static_cast<int>(s.rank());
  const std::size_t n = p.starts.size();
  if (p.ends.size() != n || (!p.axes.empty() && p.axes.size() != n) ||
      (!p.steps.empty() && p.steps.size() != n)) {
    fail("Slice '{}': starts, ends, axes and steps differ in length", this->name());
  }
  if (rank > SliceGeometry::kMaxRank) {
    fail("Slice '{}': '{}' has {} dims, more than {}", this->name(), input.name, rank,
         SliceGeometry::kMaxRank);
  }
  std::vector<SliceAxis> axes(static_cast<std::size_t>(rank));
  std::vector<bool> seen(static_cast<std::size_t>(rank), false);
  for (int d = 0; d < rank; ++d)
    axes[static_cast<std::size_t>(d)] = {0, 1, s[static_cast<std::size_t>(d)]};
  for (std::size_t i = 0; i < n; ++i) {
    int axis = p.axes.empty() ? static_cast<int>(i) : p.axes[i];
    if (axis < -rank || axis >= rank) {
      fail("Slice '{}': axis {} is out of range for '{}' of shape {}", this->name(), axis,
           input.name, s.to_string());
    }
    if (axis < 0) axis += rank;
    if (seen[static_cast<std::size_t>(axis)])
      fail("Slice '{}': axis {} is listed twice", this->name(), axis);
    seen[static_cast<std::size_t>(axis)] = true;
    const std::int64_t step = p.steps.empty() ? 1 : p.steps[i];
    if (step == 0) fail("Slice '{}': a step of 0 along axis {}", this->name(), axis);
    axes[static_cast<std::size_t>(axis)] =
        slice_axis(s[static_cast<std::size_t>(axis)], p.starts[i], p.ends[i], step);
  }
  std::vector<std::int64_t> out;
  std::int64_t stride = 1;
  std::vector<std::int64_t> in_strides(static_cast<std::size_t>(rank));
  for (int d = rank; d-- > 0;) {
    in_strides[static_cast<std::size_t>(d)] = stride;
    stride *= s[static_cast<std::size_t>(d)];
  }
  geometry_.rank = std::max(rank, 1);
  geometry_.count = 1;
  for (int d = 0; d < rank; ++d) {
    const SliceAxis& a = axes[static_cast<std::size_t>(d)];
    out.push_back(a.count);
    geometry_.out_dims[d] = a.count;
    geometry_.strides[d] = a.step * in_strides[static_cast<std::size_t>(d)];
    geometry_.base += a.first * in_strides[static_cast<std::size_t>(d)];
    geometry_.count *= a.count;
  }
  if (rank == 0) geometry_.out_dims[0] = geometry_.count = 1;
  std::vector<std::string> parts;
  for (int d = 0; d < rank; ++d) {
    const SliceAxis& a = axes[static_cast<std::size_t>(d)];
    if (a.first == 0 && a.step == 1 && a.count == s[static_cast<std::size_t>(d)]) continue;
    parts.push_back(fmt::format("axis {}: {}+{}x{}", d, a.first, a.step, a.count));
  }
  attributes_ = fmt::format("{}", fmt::join(parts, ", "));
  geometry_.input_count = s.numel();
  set_output(Shape(std::move(out)));
}

std::string Slice::attributes() const {
  return attributes_;
}

OpCost Slice::cost() const {
  return {0.0, 2.0 * static_cast<double>(output().shape.numel()) * sizeof(float)};
}

std::unique_ptr<CpuKernel> Slice::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<SliceCpuKernel>(geometry_);
}

}  // namespace cgr
