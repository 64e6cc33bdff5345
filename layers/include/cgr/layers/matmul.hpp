// MatMul: y = alpha * op(A) op(B) with NumPy's matmul semantics (ONNX MatMul; Gemm when B is
// not a constant weight): the last two dims of each operand are the matrices, the dims before
// them are batch dims that broadcast NumPy-style; a 1-D A is a row [1, K] and a 1-D B a column
// [K, 1] whose unit dim is dropped from the output. op() swaps the last two dims when asked
// (Gemm's transA / transB). Either both operands are computed tensors, or one is a constant
// held as the weight "<name>.constant" (A for c @ x, B for x @ c). A constant 2-D B with a
// computed A is a Linear instead: its weight is packed once and it fuses a bias.
#pragma once

#include <optional>

#include "cgr/layers/binary.hpp"
#include "cgr/layers/layer.hpp"

namespace cgr {

struct MatMulParams {
  bool transpose_a = false;  // op(A) = A with its last two dims swapped
  bool transpose_b = false;
  float alpha = 1.0f;  // the product's scale
};

// Where a MatMul's constant operand goes.
struct MatMulConstant {
  Shape shape;
  bool first = false;  // the constant is A (c @ x) instead of B (x @ c)
};

// The product as both backends run it: `batch` output matrices of m x n, each the product of
// op(A) (m x k) and op(B) (k x n). A and B hold a_matrices and b_matrices matrices of m * k
// and k * n floats, stored [m, k] and [k, n], or [k, m] and [n, k] when transposed. Output
// matrix t reads A matrix sum_d index[d] * batches.a_strides[d] and B matrix sum_d index[d] *
// batches.b_strides[d] over the output's batch index (strides count matrices, 0 where an
// operand broadcasts); batch dims that broadcast alike are merged, as in Binary.
struct MatMulGeometry {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  float alpha = 1.0f;
  std::int64_t batch = 1;
  std::int64_t a_matrices = 1, b_matrices = 1;
  BroadcastGeometry batches;
};

class MatMul final : public Layer {
 public:
  static constexpr std::string_view kKind = "MatMul";
  // Two computed operands.
  MatMul(std::string name, const TensorDesc& a, const TensorDesc& b, const MatMulParams& params);
  // One computed operand and the constant "<name>.constant".
  MatMul(std::string name, const TensorDesc& x, MatMulConstant constant,
         const MatMulParams& params);

  std::string_view kind() const override { return kKind; }
  const MatMulParams& params() const { return params_; }
  const std::optional<MatMulConstant>& constant() const { return constant_; }
  const MatMulGeometry& geometry() const { return geometry_; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  void finish(const Shape& a, const Shape& b, std::string_view a_name, std::string_view b_name);
  MatMulParams params_;
  std::optional<MatMulConstant> constant_;
  MatMulGeometry geometry_;
};

}  // namespace cgr
