// Transpose: each output row (last dim) is gathered from the input with the permuted strides;
// rows are independent, so they are split across the pool.
#include "cgr/layers/transpose.hpp"

#include <algorithm>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {
namespace {

class TransposeCpuKernel final : public CpuKernel {
 public:
  TransposeCpuKernel(const Shape& out, std::vector<std::int64_t> source_strides)
      : out_(out), strides_(std::move(source_strides)) {}

  void run(const KernelIo& io) const override {
    const std::size_t rank = out_.rank();
    const std::int64_t row = out_[rank - 1];
    const auto rows = static_cast<std::size_t>(out_.numel() / row);
    io.pool->parallel_for(rows, 64, [&](std::size_t begin, std::size_t end) {
      std::vector<std::int64_t> index(rank, 0);
      for (std::size_t r = begin; r < end; ++r) {
        // Output index of this row from its linear number.
        auto rest = static_cast<std::int64_t>(r);
        for (std::size_t d = rank - 1; d-- > 0;) {
          index[d] = rest % out_[d];
          rest /= out_[d];
        }
        std::int64_t source = 0;
        for (std::size_t d = 0; d + 1 < rank; ++d) source += index[d] * strides_[d];
        float* y = io.output + r * static_cast<std::size_t>(row);
        for (std::int64_t i = 0; i < row; ++i) y[i] = io.inputs[0][source + i * strides_[rank - 1]];
      }
    });
  }

 private:
  Shape out_;
  std::vector<std::int64_t> strides_;
};

}  // namespace

Transpose::Transpose(std::string name, const TensorDesc& input, std::vector<int> perm)
    : Layer(std::move(name), {input}), perm_(std::move(perm)) {
  const Shape& s = input.shape;
  std::vector<int> sorted = perm_;
  std::sort(sorted.begin(), sorted.end());
  bool valid = sorted.size() == s.rank();
  for (std::size_t i = 0; valid && i < sorted.size(); ++i) valid = sorted[i] == static_cast<int>(i);
  if (!valid) {
    fail("Transpose '{}': perm [{}] is not a permutation of the {} dims of '{}' ({})", this->name(),
         fmt::join(perm_, ", "), s.rank(), input.name, s.to_string());
  }
  std::vector<std::int64_t> dims;
  for (int p : perm_) dims.push_back(s[static_cast<std::size_t>(p)]);
  set_output(Shape(std::move(dims)));
}

std::string Transpose::attributes() const { return fmt::format("perm {}", fmt::join(perm_, ",")); }

std::unique_ptr<CpuKernel> Transpose::make_cpu_kernel(const LayerWeights&) const {
  const Shape& in = inputs()[0].shape;
  std::vector<std::int64_t> in_strides(in.rank(), 1);
  for (std::size_t d = in.rank() - 1; d-- > 0;) in_strides[d] = in_strides[d + 1] * in[d + 1];
  std::vector<std::int64_t> source;
  for (int p : perm_) source.push_back(in_strides[static_cast<std::size_t>(p)]);
  return std::make_unique<TransposeCpuKernel>(output().shape, std::move(source));
}

}  // namespace cgr
