// Elementwise activations: ReLU, Clip, LeakyReLU, and the functions of the Unary layer. Memory
// bound: one thread per element in a grid-stride loop over a function object from
// cgr/layers/element_math.hpp (see activation.hpp).
#include "activation.hpp"

#include "cgr/layers/clip.hpp"
#include "cgr/layers/leaky_relu.hpp"
#include "cgr/layers/relu.hpp"
#include "cgr/layers/unary.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

template <typename Fn>
__global__ void unary_kernel(const float* x, float* y, std::int64_t n, Fn fn) {
  for (std::int64_t i = detail::first_index<std::int64_t>(); i < n;
       i += detail::grid_stride<std::int64_t>()) {
    y[i] = fn(x[i]);
  }
}

template <typename Fn>
KernelLaunch describe_unary(const float* x, float* y, std::int64_t n, Fn fn) {
  if (n < 0)
    return KernelLaunch::refused(cudaErrorInvalidValue, "elementwise: a negative element count");
  if (n == 0) return KernelLaunch{};
  return detail::describe(unary_kernel<Fn>, detail::blocks_for(n), detail::kThreads, 0, x, y, n,
                          fn);
}

// The op of a unary layer: `fn` over the output's elements.
template <typename Fn>
std::unique_ptr<GpuOp> unary_op(const Layer& layer, Fn fn) {
  const std::int64_t n = layer.output().shape.numel();
  return kernel_op(
      [n, fn](const GpuBuffers& b) { return describe_unary(b.inputs[0], b.output, n, fn); });
}

std::unique_ptr<GpuOp> make_relu(const Relu& layer, const GpuOpBuild&) {
  return unary_op(layer, math::ReluFn{});
}

std::unique_ptr<GpuOp> make_clip(const Clip& layer, const GpuOpBuild&) {
  return unary_op(layer, math::ClipFn{layer.params().low, layer.params().high});
}

std::unique_ptr<GpuOp> make_leaky_relu(const LeakyRelu& layer, const GpuOpBuild&) {
  return unary_op(layer, math::LeakyReluFn{layer.params().negative_slope});
}

std::unique_ptr<GpuOp> make_unary(const Unary& layer, const GpuOpBuild&) {
  const UnaryParams& p = layer.params();
  return unary_op(layer, math::UnaryFn{p.op, p.alpha, p.beta});
}

const GpuOpRegistration<Relu> relu_op(make_relu);
const GpuOpRegistration<Unary> unary_gpu_op(make_unary);
const GpuOpRegistration<Clip> clip_op(make_clip);
const GpuOpRegistration<LeakyRelu> leaky_relu_op(make_leaky_relu);

}  // namespace

KernelLaunch describe_relu(const float* x, float* y, std::int64_t n) {
  return describe_unary(x, y, n, math::ReluFn{});
}

KernelLaunch describe_clip(const float* x, float* y, std::int64_t n, float low, float high) {
  return describe_unary(x, y, n, math::ClipFn{low, high});
}

KernelLaunch describe_activation(const float* x, float* y, std::int64_t n,
                                 const math::Activation& activation) {
  return describe_unary(x, y, n, activation);
}

}  // namespace cgr::cuda
