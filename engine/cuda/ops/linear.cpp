// Linear through cuBLAS: y = x Wᵀ + b. cuBLAS is column-major, so Yᵀ = W Xᵀ with W used
// transposed; the bias is the epilogue kernel of linear.cu. cuBLAS's workspace is this op's
// own (a workspace value of the arena), set after the stream because cublasSetStream resets it.
#include <memory>

#include "cgr/layers/linear.hpp"
#include "device_memory.hpp"
#include "gpu_op.hpp"
#include "library_check.hpp"
#include "linear.hpp"

namespace cgr::cuda {
namespace {

class LinearOp final : public GpuOp {
 public:
  LinearOp(const LinearGeometry& g, std::span<const float> weight, std::span<const float> bias)
      : g_(g), weight_(weight), bias_(bias) {}

  std::size_t workspace_bytes() const override { return kCublasWorkspace; }

  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles& h) const override {
    CGR_CUBLAS_CHECK(cublasSetStream(h.cublas, stream));
    CGR_CUBLAS_CHECK(cublasSetWorkspace(h.cublas, b.workspace, kCublasWorkspace));
    const float alpha = 1.0f, beta = 0.0f;
    const int out = static_cast<int>(g_.out_features), in = static_cast<int>(g_.in_features);
    CGR_CUBLAS_CHECK(cublasSgemm(h.cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, static_cast<int>(g_.rows),
                                 in, &alpha, weight_.get(), in, b.inputs[0], in, &beta, b.output,
                                 out));
    if (bias_.size() > 0) {
      CGR_CUDA_CHECK(
          bias_activation(b.output, bias_.get(), g_.rows, g_.out_features, false, stream));
    }
  }

 private:
  // cuBLAS's recommended 4 MiB (Hopper: 32 MiB for its best kernels).
  static constexpr std::size_t kCublasWorkspace = 4u << 20;
  LinearGeometry g_;
  DeviceFloats weight_, bias_;
};

std::unique_ptr<GpuOp> make_linear(const Linear& layer, const GpuOpBuild& build) {
  const LinearGeometry& g = layer.geometry();
  constexpr std::int64_t kIntMax = (std::int64_t{1} << 31) - 1;
  if (g.rows > kIntMax || g.in_features > kIntMax || g.out_features > kIntMax) {
    fail("Linear '{}': {} rows of {} -> {} features do not fit cuBLAS's int sizes", layer.name(),
         g.rows, g.in_features, g.out_features);
  }
  const Tensor* bias = layer.params().bias ? build.op.weights.at("bias") : nullptr;
  return std::make_unique<LinearOp>(g, build.op.weights.at("weight")->f32(),
                                    bias ? bias->f32() : std::span<const float>{});
}

const GpuOpRegistration<Linear> linear_op(make_linear);

}  // namespace
}  // namespace cgr::cuda
