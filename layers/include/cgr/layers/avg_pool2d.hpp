// AvgPool2d: PyTorch's nn.AvgPool2d (kernel, stride, padding, ceil_mode, count_include_pad).
// The divisor follows PyTorch exactly: with count_include_pad the window counts padding but
// not the part a ceil_mode window hangs past the padded input.
#pragma once

#include "cgr/layers/max_pool2d.hpp"

namespace cgr {

class AvgPool2d final : public Layer {
 public:
  AvgPool2d(std::string name, const TensorDesc& input, const Pool2dParams& params);

  std::string_view kind() const override { return "AvgPool2d"; }
  const Pool2dParams& params() const { return params_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  // --- GPU emission (CUDA executor): one thread per output over math::pool_window_axis. ---

 private:
  Pool2dParams params_;
};

}  // namespace cgr
