// Linear on the GPU: at small batch one own kernel (the rows kernel of linear.cu: a fused
// pool, the dot products and the bias in one graph node); otherwise cuBLAS: y = x Wᵀ + b, where
// cuBLAS is column-major, so Yᵀ = W Xᵀ with W used transposed, after the pooling kernel when a
// GlobalAvgPool is fused (its means in the op's workspace) and before the bias kernel. cuBLAS's
// workspace is this op's own (a workspace value of the arena), set after the stream because
// cublasSetStream resets it.
#include <memory>

#include "cgr/layers/linear.hpp"
#include "device_memory.hpp"
#include "global_avg_pool.hpp"
#include "gpu_op.hpp"
#include "library_check.hpp"
#include "linear.hpp"

namespace cgr::cuda {
namespace {

class LinearOp final : public GpuOp {
 public:
  LinearOp(const LinearGeometry& g, std::int64_t pooled_plane, std::span<const float> weight,
           std::span<const float> bias)
      : g_(g), pooled_plane_(pooled_plane), weight_(weight), bias_(bias) {}

  // The pooled means first (256-byte aligned), then cuBLAS's workspace.
  std::size_t workspace_bytes() const override { return means_bytes() + kCublasWorkspace; }

  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles& h) const override {
    const float* x = b.inputs[0];
    auto* workspace = static_cast<char*>(b.workspace);
    if (pooled_plane_ > 0) {
      auto* means = reinterpret_cast<float*>(workspace);
      CGR_CUDA_CHECK(global_avg_pool(x, means, g_.rows * g_.in_features, pooled_plane_, stream));
      x = means;
    }
    CGR_CUBLAS_CHECK(cublasSetStream(h.cublas, stream));
    CGR_CUBLAS_CHECK(cublasSetWorkspace(h.cublas, workspace + means_bytes(), kCublasWorkspace));
    const float alpha = 1.0f, beta = 0.0f;
    const int out = static_cast<int>(g_.out_features), in = static_cast<int>(g_.in_features);
    CGR_CUBLAS_CHECK(cublasSgemm(h.cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, static_cast<int>(g_.rows),
                                 in, &alpha, weight_.get(), in, x, in, &beta, b.output, out));
    if (bias_.size() > 0) {
      CGR_CUDA_CHECK(
          bias_activation(b.output, bias_.get(), g_.rows, g_.out_features, false, stream));
    }
  }

 private:
  // cuBLAS's recommended 4 MiB (Hopper: 32 MiB for its best kernels).
  static constexpr std::size_t kCublasWorkspace = 4u << 20;
  std::size_t means_bytes() const {
    if (pooled_plane_ == 0) return 0;
    const auto bytes = static_cast<std::size_t>(g_.rows * g_.in_features) * sizeof(float);
    return (bytes + 255) / 256 * 256;
  }
  LinearGeometry g_;
  std::int64_t pooled_plane_;
  DeviceFloats weight_, bias_;
};

std::unique_ptr<GpuOp> make_linear(const Linear& layer, const GpuOpBuild& build) {
  const LinearGeometry& g = layer.geometry();
  const Tensor* bias = layer.params().bias ? build.op.weights.at("bias") : nullptr;
  const std::int64_t pooled_plane = build.op.pooled_plane;
  if (linear_rows_suits(g.rows, g.in_features, g.out_features, pooled_plane)) {
    auto weight = std::make_shared<const DeviceFloats>(build.op.weights.at("weight")->f32());
    auto bias_values =
        std::make_shared<const DeviceFloats>(bias ? bias->f32() : std::span<const float>{});
    return kernel_op([g, pooled_plane, weight, bias_values](const GpuBuffers& b) {
      return describe_linear_rows(b.inputs[0], weight->get(),
                                  bias_values->size() > 0 ? bias_values->get() : nullptr, b.output,
                                  g.rows, g.in_features, g.out_features, pooled_plane);
    });
  }
  constexpr std::int64_t kIntMax = (std::int64_t{1} << 31) - 1;
  if (g.rows > kIntMax || g.in_features > kIntMax || g.out_features > kIntMax) {
    fail("Linear '{}': {} rows of {} -> {} features do not fit cuBLAS's int sizes", layer.name(),
         g.rows, g.in_features, g.out_features);
  }
  return std::make_unique<LinearOp>(g, pooled_plane, build.op.weights.at("weight")->f32(),
                                    bias ? bias->f32() : std::span<const float>{});
}

const GpuOpRegistration<Linear> linear_op(make_linear);

}  // namespace
}  // namespace cgr::cuda
