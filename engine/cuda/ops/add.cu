// Add (see add.hpp).
#include "add.hpp"

#include "cgr/layers/add.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

struct IdentityFn {
  __device__ float operator()(float x) const { return x; }
};

// ReLU and no activation get their own instantiations (the common cases, no switch); any
// other activation goes through math::Activation.
template <typename Fn>
__global__ void add_kernel(const float* a, const float* b, float* y, std::int64_t n, Fn fn) {
  for (std::int64_t i = detail::first_index<std::int64_t>(); i < n;
       i += detail::grid_stride<std::int64_t>()) {
    y[i] = fn(a[i] + b[i]);
  }
}

template <typename Fn>
KernelLaunch describe_add_with(const float* a, const float* b, float* y, std::int64_t n, Fn fn) {
  return detail::describe(add_kernel<Fn>, detail::blocks_for(n), detail::kThreads, 0, a, b, y, n,
                          fn);
}

std::unique_ptr<GpuOp> make_add(const Add& layer, const GpuOpBuild& build) {
  const std::int64_t n = layer.output().shape.numel();
  const math::Activation activation = build.op.epilogue.activation;
  return kernel_op([n, activation](const GpuBuffers& b) {
    return describe_add(b.inputs[0], b.inputs[1], b.output, n, activation);
  });
}

const GpuOpRegistration<Add> add_op(make_add);

}  // namespace

KernelLaunch describe_add(const float* a, const float* b, float* y, std::int64_t n,
                          const math::Activation& activation) {
  if (n < 0) return KernelLaunch::refused(cudaErrorInvalidValue, "add: a negative element count");
  if (n == 0) return KernelLaunch{};
  switch (activation.kind) {
    case math::ActivationKind::none:
      return describe_add_with(a, b, y, n, IdentityFn{});
    case math::ActivationKind::relu:
      return describe_add_with(a, b, y, n, math::ReluFn{});
    default:
      return describe_add_with(a, b, y, n, activation);
  }
}

}  // namespace cgr::cuda
