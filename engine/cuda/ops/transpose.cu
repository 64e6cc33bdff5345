// Transpose (any permutation of up to 8 dims): y[index] = x[sum_d index[d] * source_strides[d]]
// over the output's dims, the CPU's gather.
//
// A thread per output float: stores are coalesced, loads are gathered with the permuted
// strides. CNNs transpose rarely and small tensors (an imported channel shuffle), so a
// shared-memory tiled transpose is not worth its code yet. The dims loop is unrolled over the
// fixed 8 slots so the geometry stays in kernel parameter space rather than local memory.
// Exact: a copy.
#include "transpose.hpp"

#include "cgr/layers/transpose.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

constexpr int kMaxRank = TransposeGeometry::kMaxRank;

template <typename Index>
__global__ void transpose_kernel(const float* x, float* y, TransposeGeometry g, Index total) {
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    Index rest = i, source = 0;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 0; --d) {
      if (d < g.rank) {
        const auto dim = static_cast<Index>(g.out_dims[d]);
        source += (rest % dim) * static_cast<Index>(g.source_strides[d]);
        rest /= dim;
      }
    }
    y[i] = x[source];
  }
}

std::unique_ptr<GpuOp> make_transpose(const Transpose& layer, const GpuOpBuild&) {
  const TransposeGeometry g = layer.geometry();
  return kernel_op([g](const GpuBuffers& b) { return describe_transpose(b.inputs[0], b.output, g); });
}

const GpuOpRegistration<Transpose> transpose_op(make_transpose);

}  // namespace

KernelLaunch describe_transpose(const float* x, float* y, const TransposeGeometry& g) {
  if (g.rank < 1 || g.rank > kMaxRank)
    return KernelLaunch::refused(cudaErrorInvalidValue, "transpose: rank outside [1, kMaxRank]");
  std::int64_t total = 1;
  for (int d = 0; d < g.rank; ++d) {
    if (g.out_dims[d] < 0 || g.source_strides[d] < 0)
      return KernelLaunch::refused(cudaErrorInvalidValue, "transpose: a negative size or stride");
    total *= g.out_dims[d];
  }
  if (total == 0) return KernelLaunch{};
  const unsigned blocks = detail::blocks_for(total);
  // A permutation reads as many floats as it writes, so `total` bounds the source index too.
  if (detail::fits_int32({total})) {
    return detail::describe(transpose_kernel<std::int32_t>, blocks, detail::kThreads, 0, x, y, g,
                            static_cast<std::int32_t>(total));
  } else {
    return detail::describe(transpose_kernel<std::int64_t>, blocks, detail::kThreads, 0, x, y, g,
                            total);
  }
}

}  // namespace cgr::cuda
