// Tile (see tile.hpp). The dims loop is unrolled over the fixed slots so the geometry stays
// in parameter space; 32-bit indices when the input and the output both fit.
#include "gpu_op.hpp"
#include "launch.cuh"
#include "tile.hpp"

namespace cgr::cuda {
namespace {

constexpr int kMaxRank = TileGeometry::kMaxRank;

template <typename Index>
__global__ void tile_kernel(const float* x, float* y, TileGeometry g, Index total) {
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    Index rest = i, source = 0;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 0; --d) {
      if (d < g.rank) {
        const auto dim = static_cast<Index>(g.out_dims[d]);
        source +=
            (rest % dim) % static_cast<Index>(g.in_dims[d]) * static_cast<Index>(g.in_strides[d]);
        rest /= dim;
      }
    }
    y[i] = x[source];
  }
}

std::unique_ptr<GpuOp> make_tile(const Tile& layer, const GpuOpBuild&) {
  const TileGeometry g = layer.geometry();
  return kernel_op([g](const GpuBuffers& b) { return describe_tile(b.inputs[0], b.output, g); });
}

const GpuOpRegistration<Tile> tile_op(make_tile);

}  // namespace

KernelLaunch describe_tile(const float* x, float* y, const TileGeometry& g) {
  if (g.rank < 1 || g.rank > kMaxRank || g.count < 0 || g.input_count < 0) {
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "tile: rank outside [1, kMaxRank] or a negative count");
  }
  if (g.count == 0) return KernelLaunch{};
  const unsigned blocks = detail::blocks_for(g.count);
  if (detail::fits_int32({g.count, g.input_count})) {
    return detail::describe(tile_kernel<std::int32_t>, blocks, detail::kThreads, 0, x, y, g,
                            static_cast<std::int32_t>(g.count));
  } else {
    return detail::describe(tile_kernel<std::int64_t>, blocks, detail::kThreads, 0, x, y, g,
                            g.count);
  }
}

}  // namespace cgr::cuda
