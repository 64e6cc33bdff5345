// Concat: each input is a run of `outer` blocks; block i of input k lands at block i of the
// output, shifted by the sizes of inputs 0..k-1 along the axis.
#include "cgr/layers/concat.hpp"

#include <algorithm>
#include <cstring>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Concat);

namespace {

class ConcatCpuKernel final : public CpuKernel {
 public:
  explicit ConcatCpuKernel(const ConcatGeometry& g)
      : outer_(static_cast<std::size_t>(g.outer)), blocks_(g.blocks), out_block_(g.out_block) {}

  void run(const KernelIo& io) const override {
    io.pool->parallel_for(outer_, 1, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        float* out = io.output + i * static_cast<std::size_t>(out_block_);
        for (std::size_t k = 0; k < blocks_.size(); ++k) {
          const auto size = static_cast<std::size_t>(blocks_[k]);
          std::memcpy(out, io.inputs[k] + i * size, size * sizeof(float));
          out += size;
        }
      }
    });
  }

 private:
  std::size_t outer_;
  std::vector<std::int64_t> blocks_;
  std::int64_t out_block_ = 0;
};

}  // namespace

Concat::Concat(std::string name, std::vector<TensorDesc> inputs_in, int axis)
    : Layer(std::move(name), std::move(inputs_in)), axis_(axis) {
  const auto& ins = inputs();
  if (ins.empty()) fail("Concat '{}': needs at least one input", this->name());
  const auto rank = static_cast<int>(ins[0].shape.rank());
  if (axis_ < 0) axis_ += rank;
  if (axis_ < 0 || axis_ >= rank) {
    fail("Concat '{}': axis {} is out of range for input '{}' of shape {}", this->name(), axis,
         ins[0].name, ins[0].shape.to_string());
  }
  std::vector<std::int64_t> dims = ins[0].shape.dims();
  for (std::size_t k = 1; k < ins.size(); ++k) {
    const Shape& s = ins[k].shape;
    bool compatible = static_cast<int>(s.rank()) == rank;
    for (int d = 0; compatible && d < rank; ++d) {
      if (d != axis_ && s[d] != dims[d]) compatible = false;
    }
    if (!compatible) {
      fail("Concat '{}': input '{}' has shape {} but '{}' has shape {}; all dims except axis {} "
           "must match",
           this->name(), ins[k].name, s.to_string(), ins[0].name, ins[0].shape.to_string(),
           axis_);
    }
    dims[axis_] += s[axis_];
  }
  set_output(Shape(std::move(dims)));
  for (int d = 0; d < axis_; ++d) geometry_.outer *= output().shape[d];
  for (const auto& in : ins) {
    geometry_.offsets.push_back(geometry_.out_block);
    geometry_.blocks.push_back(in.shape.numel() / std::max<std::int64_t>(geometry_.outer, 1));
    geometry_.out_block += geometry_.blocks.back();
  }
}

std::string Concat::attributes() const { return fmt::format("axis {}", axis_); }

std::unique_ptr<CpuKernel> Concat::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<ConcatCpuKernel>(geometry_);
}

}  // namespace cgr
