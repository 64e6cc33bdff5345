// Concat, one input at a time: `outer` blocks of `block` floats land `offset` floats into
// the output's blocks of `out_block` floats (the CPU's memcpy per block).
//
// One launch per input, not one for all: the inputs are produced by different branches, so
// in the graph each copy depends only on its own producer and can start as soon as that
// branch is done. A thread per float (a gather with one division, in 32-bit when it fits);
// consecutive threads copy consecutive floats of a block, so loads and stores coalesce.
// Exact: a copy.
#include "concat.hpp"

#include "cgr/layers/concat.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

template <typename Index>
__global__ void concat_part_kernel(const float* x, float* y, Index total, Index block,
                                   Index out_block, Index offset) {
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    y[(i / block) * out_block + offset + i % block] = x[i];
  }
}

// One launch per input, each writing its own columns: in dag, sibling kernel nodes.
std::unique_ptr<GpuOp> make_concat(const Concat& layer, const GpuOpBuild&) {
  const ConcatGeometry g = layer.geometry();
  return kernel_op([g](const GpuBuffers& b) {
    std::vector<KernelLaunch> launches;
    for (std::size_t k = 0; k < g.blocks.size(); ++k) {
      launches.push_back(describe_concat_part(b.inputs[k], b.output, g.outer, g.blocks[k],
                                              g.out_block, g.offsets[k]));
    }
    return launches;
  });
}

const GpuOpRegistration<Concat> concat_op(make_concat);

}  // namespace

KernelLaunch describe_concat_part(const float* x, float* y, std::int64_t outer, std::int64_t block,
                                  std::int64_t out_block, std::int64_t offset) {
  if (detail::any_negative({outer, block, out_block, offset}) || offset + block > out_block) {
    return KernelLaunch::refused(cudaErrorInvalidValue, "concat: a negative size, or a part past the end of the output");
  }
  const std::int64_t total = outer * block;
  if (total == 0) return KernelLaunch{};
  const unsigned blocks = detail::blocks_for(total);
  if (detail::fits_int32({total, outer * out_block})) {
    return detail::describe(concat_part_kernel<std::int32_t>, blocks, detail::kThreads, 0, x, y,
                            static_cast<std::int32_t>(total), static_cast<std::int32_t>(block),
                            static_cast<std::int32_t>(out_block),
                            static_cast<std::int32_t>(offset));
  } else {
    return detail::describe(concat_part_kernel<std::int64_t>, blocks, detail::kThreads, 0, x, y,
                            total, block, out_block, offset);
  }
}

}  // namespace cgr::cuda
