// Tile: the geometry both backends gather with, and the CPU kernel, which builds each output
// row of the innermost dim from copies of one input row.
#include "cgr/layers/tile.hpp"

#include <algorithm>
#include <cstring>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Tile);

namespace {

class TileCpuKernel final : public CpuKernel {
 public:
  explicit TileCpuKernel(const TileGeometry& g) : g_(g) {}

  void run(const KernelIo& io) const override {
    const TileGeometry& g = g_;
    const int last = g.rank - 1;
    const std::int64_t inner = g.out_dims[last], in_inner = g.in_dims[last];
    if (g.count == 0) return;
    const auto rows = static_cast<std::size_t>(g.count / inner);
    const std::size_t grain =
        std::max<std::size_t>(1, (1u << 15) / static_cast<std::size_t>(inner));
    io.pool->parallel_for(rows, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t row = begin; row < end; ++row) {
        std::int64_t rest = static_cast<std::int64_t>(row), offset = 0;
        for (int d = last - 1; d >= 0; --d) {
          offset += (rest % g.out_dims[d]) % g.in_dims[d] * g.in_strides[d];
          rest /= g.out_dims[d];
        }
        const float* x = io.inputs[0] + offset;
        float* y = io.output + static_cast<std::int64_t>(row) * inner;
        for (std::int64_t j = 0; j < inner; j += in_inner) {
          std::memcpy(y + j, x, static_cast<std::size_t>(in_inner) * sizeof(float));
        }
      }
    });
  }

 private:
  TileGeometry g_;
};

}  // namespace

Tile::Tile(std::string name, const TensorDesc& input, const TileParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  const Shape& s = input.shape;
  const auto rank = static_cast<int>(s.rank());
  if (params_.repeats.size() != s.rank()) {
    fail("Tile '{}': {} repeats for '{}' of shape {} ({} dims)", this->name(),
         params_.repeats.size(), input.name, s.to_string(), rank);
  }
  if (rank < 1 || rank > TileGeometry::kMaxRank) {
    fail("Tile '{}': '{}' has {} dims; 1 to {} are supported", this->name(), input.name, rank,
         TileGeometry::kMaxRank);
  }
  std::vector<std::int64_t> out;
  geometry_.rank = rank;
  geometry_.count = 1;
  std::int64_t stride = 1;
  for (int d = rank; d-- > 0;) {
    geometry_.in_strides[d] = stride;
    stride *= s[static_cast<std::size_t>(d)];
  }
  for (int d = 0; d < rank; ++d) {
    const std::int64_t repeat = params_.repeats[static_cast<std::size_t>(d)];
    const std::int64_t dim = s[static_cast<std::size_t>(d)];
    if (repeat < 0) fail("Tile '{}': repeat {} of dim {} is negative", this->name(), repeat, d);
    if (dim > 0 && repeat > (std::int64_t{1} << 40) / dim) {
      fail("Tile '{}': repeat {} of dim {} ({} long) is implausibly large", this->name(), repeat, d,
           dim);
    }
    geometry_.out_dims[d] = dim * repeat;
    geometry_.in_dims[d] = dim;
    if (__builtin_mul_overflow(geometry_.count, dim * repeat, &geometry_.count) ||
        geometry_.count > (std::int64_t{1} << 40)) {
      fail("Tile '{}': repeats {} make '{}' of shape {} implausibly large", this->name(),
           fmt::join(params_.repeats, ","), input.name, s.to_string());
    }
    out.push_back(dim * repeat);
  }
  geometry_.input_count = s.numel();
  set_output(Shape(std::move(out)));
}

std::string Tile::attributes() const {
  return fmt::format("x{}", fmt::join(params_.repeats, "x"));
}

OpCost Tile::cost() const {
  return {0.0,
          static_cast<double>(output().shape.numel() + inputs()[0].shape.numel()) * sizeof(float)};
}

std::unique_ptr<CpuKernel> Tile::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<TileCpuKernel>(geometry_);
}

}  // namespace cgr
