// Softmax: each row of the layer's geometry (outer x length x inner) computed by
// math::softmax_row.
#include "cgr/layers/softmax.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Softmax);

namespace {

class SoftmaxCpuKernel final : public CpuKernel {
 public:
  SoftmaxCpuKernel(const SoftmaxGeometry& g, bool log)
      : outer_(g.outer), length_(g.length), inner_(g.inner), log_(log) {}

  void run(const KernelIo& io) const override {
    const auto rows = static_cast<std::size_t>(outer_ * inner_);
    const std::size_t grain = std::max<std::size_t>(1, 4096 / static_cast<std::size_t>(length_));
    io.pool->parallel_for(rows, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t row = begin; row < end; ++row) {
        const auto o = static_cast<std::int64_t>(row) / inner_;
        const auto i = static_cast<std::int64_t>(row) % inner_;
        const std::int64_t offset = o * length_ * inner_ + i;
        if (log_) {
          math::log_softmax_row(io.inputs[0] + offset, io.output + offset, length_, inner_);
        } else {
          math::softmax_row(io.inputs[0] + offset, io.output + offset, length_, inner_);
        }
      }
    });
  }

 private:
  std::int64_t outer_, length_, inner_;
  bool log_;
};

}  // namespace

Softmax::Softmax(std::string name, const TensorDesc& input, int axis, bool log)
    : Layer(std::move(name), {input}), axis_(axis), log_(log) {
  const auto rank = static_cast<int>(input.shape.rank());
  if (axis_ < 0) axis_ += rank;
  if (axis_ < 0 || axis_ >= rank || input.shape.numel() == 0) {
    fail("{} '{}': axis {} is out of range for input '{}' of shape {}", label(), this->name(), axis,
         input.name, input.shape.to_string());
  }
  set_output(input.shape);
  const Shape& s = input.shape;
  for (int d = 0; d < axis_; ++d)
    geometry_.outer *= s[d];
  for (int d = axis_ + 1; d < rank; ++d)
    geometry_.inner *= s[d];
  geometry_.length = s[axis_];
}

std::string Softmax::attributes() const {
  return fmt::format("axis {}", axis_);
}

OpCost Softmax::cost() const {
  return {5 * static_cast<double>(output().shape.numel()), activation_bytes()};
}

std::unique_ptr<CpuKernel> Softmax::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<SoftmaxCpuKernel>(geometry_, log_);
}

}  // namespace cgr
