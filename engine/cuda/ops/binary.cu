// Binary (see binary.hpp). The function is a template parameter, so each kernel is one
// arithmetic instruction per element after the index arithmetic; the dims loop is unrolled over
// the fixed slots so the geometry stays in parameter space. Merged dims keep that loop short:
// rank 1 for equal shapes, 2 or 3 for per-channel operands.
#include <memory>

#include "binary.hpp"
#include "device_memory.hpp"
#include "gpu_op.hpp"
#include "launch.cuh"

namespace cgr::cuda {
namespace {

constexpr int kMaxRank = BroadcastGeometry::kMaxRank;

template <BinaryOp Op, typename Index>
__global__ void binary_kernel(const float* a, const float* b, float* y, BroadcastGeometry g,
                              Index total) {
  for (Index i = detail::first_index<Index>(); i < total; i += detail::grid_stride<Index>()) {
    Index rest = i, ao = 0, bo = 0;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 0; --d) {
      if (d < g.rank) {
        const auto dim = static_cast<Index>(g.out_dims[d]);
        const Index k = rest % dim;
        rest /= dim;
        ao += k * static_cast<Index>(g.a_strides[d]);
        bo += k * static_cast<Index>(g.b_strides[d]);
      }
    }
    y[i] = math::binary(Op, a[ao], b[bo]);
  }
}

template <BinaryOp Op>
KernelLaunch describe_for(const float* a, const float* b, float* y, const BroadcastGeometry& g) {
  const unsigned blocks = detail::blocks_for(g.count);
  // Operand offsets never exceed the output's element count (each stride is at most the
  // product of the dims inside it).
  if (detail::fits_int32({g.count})) {
    return detail::describe(binary_kernel<Op, std::int32_t>, blocks, detail::kThreads, 0, a, b, y,
                            g, static_cast<std::int32_t>(g.count));
  } else {
    return detail::describe(binary_kernel<Op, std::int64_t>, blocks, detail::kThreads, 0, a, b, y,
                            g, g.count);
  }
}

std::unique_ptr<GpuOp> make_binary(const Binary& layer, const GpuOpBuild& build) {
  const BroadcastGeometry g = layer.geometry();
  const BinaryOp op = layer.op();
  if (!layer.constant()) {
    return kernel_op([op, g](const GpuBuffers& b) {
      return describe_binary(op, b.inputs[0], b.inputs[1], b.output, g);
    });
  }
  auto constant = std::make_shared<const DeviceFloats>(build.op.weights.at("constant")->f32());
  const bool first = layer.constant()->first;
  return kernel_op([op, g, constant, first](const GpuBuffers& b) {
    const float* x = b.inputs[0];
    const float* c = constant->get();
    return describe_binary(op, first ? c : x, first ? x : c, b.output, g);
  });
}

const GpuOpRegistration<Binary> binary_op(make_binary);

}  // namespace

KernelLaunch describe_binary(BinaryOp op, const float* a, const float* b, float* y,
                             const BroadcastGeometry& g) {
  if (g.rank < 1 || g.rank > kMaxRank || g.count < 0) {
    return KernelLaunch::refused(cudaErrorInvalidValue,
                                 "binary: rank outside [1, kMaxRank] or a negative count");
  }
  if (g.count == 0) return KernelLaunch{};
  switch (op) {
    case BinaryOp::add:
      return describe_for<BinaryOp::add>(a, b, y, g);
    case BinaryOp::sub:
      return describe_for<BinaryOp::sub>(a, b, y, g);
    case BinaryOp::mul:
      return describe_for<BinaryOp::mul>(a, b, y, g);
    case BinaryOp::div:
      return describe_for<BinaryOp::div>(a, b, y, g);
    case BinaryOp::pow:
      return describe_for<BinaryOp::pow>(a, b, y, g);
    case BinaryOp::min:
      return describe_for<BinaryOp::min>(a, b, y, g);
    case BinaryOp::max:
      return describe_for<BinaryOp::max>(a, b, y, g);
    case BinaryOp::prelu:
      return describe_for<BinaryOp::prelu>(a, b, y, g);
  }
  return KernelLaunch::refused(cudaErrorInvalidValue, "binary: unknown function");
}

}  // namespace cgr::cuda
