// Pad2d: zero padding of the H and W dims of an NCHW tensor (F.pad(x, (l, r, t, b)), ONNX Pad
// in constant mode with value 0). The ONNX importer folds a Pad into the Conv it feeds.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

class Pad2d final : public Layer {
 public:
  Pad2d(std::string name, const TensorDesc& input, const Padding2d& padding);

  std::string_view kind() const override { return "Pad2d"; }
  const Padding2d& padding() const { return padding_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerWeights& weights) const override;

  // --- GPU emission (CUDA executor): one thread per output element. ---

 private:
  Padding2d padding_;
};

}  // namespace cgr
