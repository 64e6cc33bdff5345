// Transpose: each output row (last dim) is gathered from the input with the permuted strides
// of the layer's geometry; rows are independent, so they are split across the pool.
#include "cgr/layers/transpose.hpp"

#include <algorithm>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Transpose);

namespace {

class TransposeCpuKernel final : public CpuKernel {
 public:
  explicit TransposeCpuKernel(const TransposeGeometry& g) : g_(g) {}

  void run(const KernelIo& io) const override {
    const auto rank = static_cast<std::size_t>(g_.rank);
    const std::int64_t row = g_.out_dims[rank - 1];
    std::int64_t total = 1;
    for (std::size_t d = 0; d < rank; ++d)
      total *= g_.out_dims[d];
    const auto rows = static_cast<std::size_t>(total / row);
    io.pool->parallel_for(rows, 64, [&](std::size_t begin, std::size_t end) {
      std::int64_t index[TransposeGeometry::kMaxRank] = {};
      for (std::size_t r = begin; r < end; ++r) {
        // Output index of this row from its linear number.
        auto rest = static_cast<std::int64_t>(r);
        for (std::size_t d = rank - 1; d-- > 0;) {
          index[d] = rest % g_.out_dims[d];
          rest /= g_.out_dims[d];
        }
        std::int64_t source = 0;
        for (std::size_t d = 0; d + 1 < rank; ++d)
          source += index[d] * g_.source_strides[d];
        const std::int64_t step = g_.source_strides[rank - 1];
        float* y = io.output + r * static_cast<std::size_t>(row);
        for (std::int64_t i = 0; i < row; ++i)
          y[i] = io.inputs[0][source + i * step];
      }
    });
  }

 private:
  TransposeGeometry g_;
};

}  // namespace

Transpose::Transpose(std::string name, const TensorDesc& input, std::vector<int> perm)
    : Layer(std::move(name), {input}), perm_(std::move(perm)) {
  const Shape& s = input.shape;
  std::vector<int> sorted = perm_;
  std::sort(sorted.begin(), sorted.end());
  bool valid = sorted.size() == s.rank();
  for (std::size_t i = 0; valid && i < sorted.size(); ++i)
    valid = sorted[i] == static_cast<int>(i);
  if (!valid) {
    fail("Transpose '{}': perm [{}] is not a permutation of the {} dims of '{}' ({})", this->name(),
         fmt::join(perm_, ", "), s.rank(), input.name, s.to_string());
  }
  if (s.rank() > static_cast<std::size_t>(TransposeGeometry::kMaxRank)) {
    fail("Transpose '{}': '{}' has {} dims; at most {} are supported", this->name(), input.name,
         s.rank(), TransposeGeometry::kMaxRank);
  }
  std::vector<std::int64_t> dims;
  for (int p : perm_)
    dims.push_back(s[static_cast<std::size_t>(p)]);
  set_output(Shape(dims));

  std::vector<std::int64_t> in_strides(s.rank(), 1);
  for (std::size_t d = s.rank() - 1; d-- > 0;)
    in_strides[d] = in_strides[d + 1] * s[d + 1];
  geometry_.rank = static_cast<int>(s.rank());
  for (std::size_t d = 0; d < s.rank(); ++d) {
    geometry_.out_dims[d] = dims[d];
    geometry_.source_strides[d] = in_strides[static_cast<std::size_t>(perm_[d])];
  }
  if (s.rank() == 0) geometry_ = {.rank = 1, .out_dims = {1}, .source_strides = {1}};  // a scalar
}

std::string Transpose::attributes() const {
  return fmt::format("perm {}", fmt::join(perm_, ","));
}

std::unique_ptr<CpuKernel> Transpose::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<TransposeCpuKernel>(geometry_);
}

}  // namespace cgr
