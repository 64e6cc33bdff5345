// Binary: y = f(a, b) elementwise for f in math::BinaryOp (add, sub, mul, div, pow, min, max,
// prelu), with NumPy broadcasting: shapes right-aligned, size-1 dims stretched. Either both
// operands are computed tensors, or one is a constant held as the weight "<name>.constant"
// (on the left for c - x, c / x, ...). ONNX Add/Sub/Mul/Div/Pow/Min/Max/PRelu and the
// variadic Sum/Mean/Max/Min (chains of these). The same-shape Add of two computed tensors
// keeps its own kind (Add): convolutions fuse it as their residual.
#pragma once

#include <optional>

#include "cgr/layers/element_math.hpp"
#include "cgr/layers/layer.hpp"

namespace cgr {

using math::BinaryOp;

// y[i] = f(a[a_offset(i)], b[b_offset(i)]) over the output's dims, each operand's offset the
// sum of index[d] * its stride (0 where it broadcasts). Adjacent dims that broadcast alike are
// merged, so a same-shape operation has rank 1 and a per-channel one rank 2 or 3. Fixed-size,
// so kernels take it by value.
struct BroadcastGeometry {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  std::int64_t count = 0;  // output elements
  std::int64_t out_dims[kMaxRank] = {};
  std::int64_t a_strides[kMaxRank] = {};
  std::int64_t b_strides[kMaxRank] = {};
};

// NumPy's broadcast of two shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// The geometry of `out` = broadcast(a, b) (both must broadcast to it), dims merged.
BroadcastGeometry broadcast_geometry(const Shape& out, const Shape& a, const Shape& b);

std::string_view binary_op_name(BinaryOp op);  // "Add", "Mul", "PRelu", ...

// Where a Binary's constant operand goes.
struct BinaryConstant {
  Shape shape;
  bool first = false;  // f(c, x) instead of f(x, c)
};

class Binary final : public Layer {
 public:
  static constexpr std::string_view kKind = "Binary";
  // Two computed operands.
  Binary(std::string name, const TensorDesc& a, const TensorDesc& b, BinaryOp op);
  // One computed operand and the constant "<name>.constant".
  Binary(std::string name, const TensorDesc& x, BinaryOp op, BinaryConstant constant);

  std::string_view kind() const override { return kKind; }
  std::string_view label() const override { return binary_op_name(op_); }
  BinaryOp op() const { return op_; }
  const std::optional<BinaryConstant>& constant() const { return constant_; }
  // Shapes of the left and right operands (the constant's where it is one).
  const Shape& a_shape() const { return a_shape_; }
  const Shape& b_shape() const { return b_shape_; }
  const BroadcastGeometry& geometry() const { return geometry_; }
  std::vector<WeightSpec> weight_specs() const override;
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  void finish();
  BinaryOp op_;
  std::optional<BinaryConstant> constant_;
  Shape a_shape_, b_shape_;
  BroadcastGeometry geometry_;
};

}  // namespace cgr
