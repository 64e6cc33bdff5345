// LocalResponseNorm: each element divided by a power of the sum of squares over a window of
// neighbouring channels (AlexNet, GoogLeNet v1; ONNX LRN, nn.LocalResponseNorm):
//   y[n][c][p] = x[n][c][p] / (bias + alpha / size * sum_{c'} x[n][c'][p]^2) ^ beta
// over c' in [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] within [0, C). For odd
// sizes this is PyTorch's window too; for even sizes PyTorch puts the extra channel before c,
// ONNX after it (this layer follows ONNX). Input: N x C x any spatial dims (at least 2-D).
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

struct LocalResponseNormParams {
  std::int64_t size = 5;  // channels in the window
  float alpha = 1e-4f;    // ONNX's and PyTorch's defaults
  float beta = 0.75f;
  float bias = 1.0f;  // PyTorch's k
};

// The input as batch x channels x plane (the product of the spatial dims); the window of
// channel c is [c - before, c + after] clipped to [0, channels). Fixed-size, for kernels.
struct LocalResponseNormGeometry {
  std::int64_t batch = 0, channels = 0, plane = 0;
  std::int64_t before = 0, after = 0;
  float alpha_over_size = 0.0f, beta = 0.0f, bias = 0.0f;
};

class LocalResponseNorm final : public Layer {
 public:
  static constexpr std::string_view kKind = "LocalResponseNorm";
  LocalResponseNorm(std::string name, const TensorDesc& input,
                    const LocalResponseNormParams& params);

  std::string_view kind() const override { return kKind; }
  const LocalResponseNormParams& params() const { return params_; }
  const LocalResponseNormGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  LocalResponseNormParams params_;
  LocalResponseNormGeometry geometry_;
};

}  // namespace cgr
