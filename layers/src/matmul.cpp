// MatMul: NumPy's matmul shape rule (1-D promotion, broadcast batch dims), the geometry both
// backends run, and the CPU kernel (cpu/matmul_cpu.cpp, on the GEMM core).
#include "cgr/layers/matmul.hpp"

#include "cgr/error.hpp"
#include "cpu/matmul_cpu.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(MatMul);

namespace {

class MatMulCpuKernel final : public CpuKernel {
 public:
  MatMulCpuKernel(const MatMulGeometry& g, std::optional<std::span<const float>> constant_a,
                  std::optional<std::span<const float>> constant_b)
      : constant_a_(constant_a.has_value()),
        constant_b_(constant_b.has_value()),
        matmul_(g, constant_a, constant_b) {}

  void run(const KernelIo& io) const override {
    // The computed operands, in order; a constant one is already packed in matmul_.
    const float* a = constant_a_ ? nullptr : io.inputs[0];
    const float* b = constant_b_ ? nullptr : io.inputs[constant_a_ ? 0 : 1];
    matmul_.run(a, b, io.output, io.workspace, io.pool);
  }
  std::size_t workspace_bytes() const override { return matmul_.workspace_bytes(); }

 private:
  bool constant_a_, constant_b_;
  cpu::MatMulKernelCpu matmul_;
};

// The dims before the last two (none for 1-D and 2-D operands).
Shape batch_dims(const Shape& s) {
  if (s.rank() <= 2) return Shape{};
  return Shape(std::vector<std::int64_t>(s.dims().begin(), s.dims().end() - 2));
}

}  // namespace

MatMul::MatMul(std::string name, const TensorDesc& a, const TensorDesc& b,
               const MatMulParams& params)
    : Layer(std::move(name), {a, b}), params_(params) {
  finish(a.shape, b.shape, a.name, b.name);
}

MatMul::MatMul(std::string name, const TensorDesc& x, MatMulConstant constant,
               const MatMulParams& params)
    : Layer(std::move(name), {x}), params_(params), constant_(std::move(constant)) {
  const std::string constant_name = this->name() + ".constant";
  if (constant_->first) {
    finish(constant_->shape, x.shape, constant_name, x.name);
  } else {
    finish(x.shape, constant_->shape, x.name, constant_name);
  }
}

void MatMul::finish(const Shape& a, const Shape& b, std::string_view a_name,
                    std::string_view b_name) {
  if (a.rank() == 0 || b.rank() == 0) {
    fail("MatMul '{}': '{}' is a scalar; a matrix product needs operands of 1 or more dims", name(),
         a.rank() == 0 ? a_name : b_name);
  }
  if (params_.transpose_a && a.rank() < 2) {
    fail("MatMul '{}': transpose_a needs A with 2 or more dims; '{}' has shape {}", name(), a_name,
         a.to_string());
  }
  if (params_.transpose_b && b.rank() < 2) {
    fail("MatMul '{}': transpose_b needs B with 2 or more dims; '{}' has shape {}", name(), b_name,
         b.to_string());
  }
  // op(A) is m x k (a 1-D A is one row), op(B) is k x n (a 1-D B is one column).
  std::int64_t m = 1, k_a = a[0], k_b = b[0], n = 1;
  if (a.rank() >= 2) {
    const std::int64_t rows = a[a.rank() - 2], cols = a[a.rank() - 1];
    m = params_.transpose_a ? cols : rows;
    k_a = params_.transpose_a ? rows : cols;
  }
  if (b.rank() >= 2) {
    const std::int64_t rows = b[b.rank() - 2], cols = b[b.rank() - 1];
    k_b = params_.transpose_b ? cols : rows;
    n = params_.transpose_b ? rows : cols;
  }
  if (k_a != k_b) {
    fail(
        "MatMul '{}': '{}' of shape {} gives op(A) {}x{} and '{}' of shape {} gives op(B) {}x{}: "
        "the inner dims differ",
        name(), a_name, a.to_string(), m, k_a, b_name, b.to_string(), k_b, n);
  }
  const Shape a_batch = batch_dims(a), b_batch = batch_dims(b);
  const std::optional<Shape> out_batch = broadcast_shapes(a_batch, b_batch);
  if (!out_batch) {
    fail("MatMul '{}': batch dims {} of '{}' and {} of '{}' do not broadcast", name(),
         a_batch.to_string(), a_name, b_batch.to_string(), b_name);
  }
  if (out_batch->rank() > static_cast<std::size_t>(BroadcastGeometry::kMaxRank)) {
    fail("MatMul '{}': {} batch dims, more than {}", name(), out_batch->rank(),
         BroadcastGeometry::kMaxRank);
  }
  geometry_.m = m;
  geometry_.n = n;
  geometry_.k = k_a;
  geometry_.transpose_a = params_.transpose_a;
  geometry_.transpose_b = params_.transpose_b;
  geometry_.alpha = params_.alpha;
  geometry_.batch = out_batch->numel();
  geometry_.a_matrices = a_batch.numel();
  geometry_.b_matrices = b_batch.numel();
  geometry_.batches = broadcast_geometry(*out_batch, a_batch, b_batch);
  std::vector<std::int64_t> out = out_batch->dims();
  if (a.rank() >= 2) out.push_back(m);
  if (b.rank() >= 2) out.push_back(n);
  set_output(Shape(std::move(out)));
}

std::vector<WeightSpec> MatMul::weight_specs() const {
  if (!constant_) return {};
  return {{"constant", constant_->shape}};
}

std::string MatMul::attributes() const {
  const MatMulGeometry& g = geometry_;
  std::string text = g.batch == 1 ? "" : fmt::format("{} x ", g.batch);
  text += fmt::format("{}x{} @ {}x{}", g.m, g.k, g.k, g.n);
  if (g.transpose_a) text += ", A transposed";
  if (g.transpose_b) text += ", B transposed";
  if (g.alpha != 1.0f) text += fmt::format(", alpha {}", g.alpha);
  if (constant_) {
    text +=
        fmt::format(", constant {} {}", constant_->first ? "A" : "B", constant_->shape.to_string());
  }
  return text;
}

OpCost MatMul::cost() const {
  const MatMulGeometry& g = geometry_;
  const double constant_bytes =
      constant_ ? static_cast<double>(constant_->shape.numel()) * sizeof(float) : 0.0;
  return {2.0 * static_cast<double>(g.batch) * static_cast<double>(g.m) * static_cast<double>(g.n) *
              static_cast<double>(g.k),
          activation_bytes() + constant_bytes};
}

std::unique_ptr<CpuKernel> MatMul::make_cpu_kernel(const LayerOp& op) const {
  std::optional<std::span<const float>> constant_a, constant_b;
  if (constant_) {
    (constant_->first ? constant_a : constant_b) = op.weights.at("constant")->f32();
  }
  return std::make_unique<MatMulCpuKernel>(geometry_, constant_a, constant_b);
}

}  // namespace cgr
