// Add (see add.hpp).
#include "add.hpp"

#include "cgr/layers/add.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

template <bool kRelu>
__global__ void add_kernel(const float* a, const float* b, float* y, std::int64_t n) {
  for (std::int64_t i = detail::first_index<std::int64_t>(); i < n;
       i += detail::grid_stride<std::int64_t>()) {
    const float sum = a[i] + b[i];
    y[i] = kRelu ? math::relu(sum) : sum;
  }
}

std::unique_ptr<GpuOp> make_add(const Add& layer, const GpuOpBuild& build) {
  const std::int64_t n = layer.output().shape.numel();
  const bool relu = build.op.epilogue.relu;
  return kernel_op([n, relu](const GpuBuffers& b) {
    return describe_add(b.inputs[0], b.inputs[1], b.output, n, relu);
  });
}

const GpuOpRegistration<Add> add_op(make_add);

}  // namespace

KernelLaunch describe_add(const float* a, const float* b, float* y, std::int64_t n, bool relu) {
  if (n < 0) return KernelLaunch::refused(cudaErrorInvalidValue, "add: a negative element count");
  if (n == 0) return KernelLaunch{};
  if (relu) {
    return detail::describe(add_kernel<true>, detail::blocks_for(n), detail::kThreads, 0, a, b, y,
                            n);
  } else {
    return detail::describe(add_kernel<false>, detail::blocks_for(n), detail::kThreads, 0, a, b, y,
                            n);
  }
}

}  // namespace cgr::cuda
