// Concat: joins tensors along one axis (channels of NCHW by default), torch.cat.
// Every other dimension must match.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

// Each input is a run of `outer` blocks of blocks[k] floats; block i of input k lands in block
// i of the output (out_block floats), offsets[k] floats in.
struct ConcatGeometry {
  std::int64_t outer = 1;
  std::vector<std::int64_t> blocks, offsets;
  std::int64_t out_block = 0;
};

class Concat final : public Layer {
 public:
  static constexpr std::string_view kKind = "Concat";
  Concat(std::string name, std::vector<TensorDesc> inputs, int axis);

  std::string_view kind() const override { return kKind; }
  int axis() const { return axis_; }
  const ConcatGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  int axis_;
  ConcatGeometry geometry_;
};

}  // namespace cgr
