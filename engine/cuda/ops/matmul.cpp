// MatMul through cuBLAS: y = alpha * op(A) op(B) per output matrix. cuBLAS is column-major, so
// each row-major product Y = op(A) op(B) is computed as Yᵀ = op(B)ᵀ op(A)ᵀ, where a row-major
// matrix read column-major is already its transpose. The batch dims run as strided batched
// calls along the innermost merged batch dim (stride 0 where an operand broadcasts along it)
// and one call per index of the outer ones, which a broadcast across several dims needs. A
// constant operand is uploaded once. cuBLAS's workspace is this op's own (see linear.cpp).
#include <memory>

#include "cgr/layers/matmul.hpp"
#include "device_memory.hpp"
#include "gpu_op.hpp"
#include "library_check.hpp"

namespace cgr::cuda {
namespace {

constexpr std::int64_t kIntMax = (std::int64_t{1} << 31) - 1;

class MatMulOp final : public GpuOp {
 public:
  MatMulOp(const MatMulGeometry& g, std::shared_ptr<const DeviceFloats> constant,
           bool constant_first)
      : g_(g), constant_(std::move(constant)), constant_first_(constant_first) {}

  std::size_t workspace_bytes() const override { return kCublasWorkspace; }

  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles& h) const override {
    const MatMulGeometry& g = g_;
    if (g.batch == 0 || g.m == 0 || g.n == 0) return;
    if (g.k == 0) {  // an empty sum: every element is 0
      CGR_CUDA_CHECK(cudaMemsetAsync(
          b.output, 0, static_cast<std::size_t>(g.batch * g.m * g.n) * sizeof(float), stream));
      return;
    }
    const float* a = b.inputs[0];
    const float* bm = constant_ ? nullptr : b.inputs[1];
    if (constant_) {
      a = constant_first_ ? constant_->get() : b.inputs[0];
      bm = constant_first_ ? b.inputs[0] : constant_->get();
    }
    CGR_CUBLAS_CHECK(cublasSetStream(h.cublas, stream));
    CGR_CUBLAS_CHECK(cublasSetWorkspace(h.cublas, b.workspace, kCublasWorkspace));
    const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
    // cuBLAS's first operand is op(B)ᵀ (n x k), its second op(A)ᵀ (k x m); Yᵀ is n x m.
    const cublasOperation_t op_b = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int ld_b = g.transpose_b ? k : n, ld_a = g.transpose_a ? m : k;
    const BroadcastGeometry& bg = g.batches;
    const int inner = bg.rank - 1;
    const std::int64_t a_size = g.m * g.k, b_size = g.k * g.n, y_size = g.m * g.n;
    const long long a_stride = bg.a_strides[inner] * a_size,
                    b_stride = bg.b_strides[inner] * b_size;
    const std::int64_t count = bg.out_dims[inner];
    const float alpha = g.alpha, beta = 0.0f;
    for (std::int64_t outer = 0; outer < g.batch / count; ++outer) {
      // The first matrix of this run of the inner dim, in A, B and Y.
      std::int64_t rest = outer, ia = 0, ib = 0;
      for (int d = inner - 1; d >= 0; --d) {
        const std::int64_t i = rest % bg.out_dims[d];
        rest /= bg.out_dims[d];
        ia += i * bg.a_strides[d];
        ib += i * bg.b_strides[d];
      }
      for (std::int64_t first = 0; first < count; first += kIntMax) {
        const std::int64_t calls = count - first < kIntMax ? count - first : kIntMax;
        CGR_CUBLAS_CHECK(cublasSgemmStridedBatched(
            h.cublas, op_b, op_a, n, m, k, &alpha, bm + ib * b_size + first * b_stride, ld_b,
            b_stride, a + ia * a_size + first * a_stride, ld_a, a_stride, &beta,
            b.output + (outer * count + first) * y_size, n, static_cast<long long>(y_size),
            static_cast<int>(calls)));
      }
    }
  }

 private:
  // cuBLAS's recommended 4 MiB, as Linear.
  static constexpr std::size_t kCublasWorkspace = 4u << 20;
  MatMulGeometry g_;
  std::shared_ptr<const DeviceFloats> constant_;
  bool constant_first_;
};

std::unique_ptr<GpuOp> make_matmul(const MatMul& layer, const GpuOpBuild& build) {
  const MatMulGeometry& g = layer.geometry();
  if (g.m > kIntMax || g.n > kIntMax || g.k > kIntMax) {
    fail("MatMul '{}': {}x{} @ {}x{} does not fit cuBLAS's int sizes", layer.name(), g.m, g.k, g.k,
         g.n);
  }
  std::shared_ptr<const DeviceFloats> constant;
  if (layer.constant()) {
    constant = std::make_shared<const DeviceFloats>(build.op.weights.at("constant")->f32());
  }
  return std::make_unique<MatMulOp>(g, std::move(constant),
                                    layer.constant() && layer.constant()->first);
}

const GpuOpRegistration<MatMul> matmul_op(make_matmul);

}  // namespace
}  // namespace cgr::cuda
