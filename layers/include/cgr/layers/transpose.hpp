// Transpose: permutes dims (torch.permute, ONNX Transpose): output dim i is input dim perm[i].
// Up to kMaxRank dims.
#pragma once

#include "cgr/layers/layer.hpp"

namespace cgr {

// y[index] = x[sum_d index[d] * source_strides[d]] over the output's dims: a gather with the
// input's strides permuted. Fixed-size, so kernels take it by value.
struct TransposeGeometry {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  std::int64_t out_dims[kMaxRank] = {};
  std::int64_t source_strides[kMaxRank] = {};
};

class Transpose final : public Layer {
 public:
  static constexpr std::string_view kKind = "Transpose";
  Transpose(std::string name, const TensorDesc& input, std::vector<int> perm);

  std::string_view kind() const override { return kKind; }
  const std::vector<int>& perm() const { return perm_; }
  const TransposeGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  std::vector<int> perm_;
  TransposeGeometry geometry_;
};

}  // namespace cgr
