// Tile: the input repeated along each dim (ONNX Tile, torch's x.repeat(...), NumPy's np.tile
// with one repeat per dim): output dim d is input dim d times repeats[d], and output index k
// along d reads input index k mod input dim d.
#pragma once

#include <vector>

#include "cgr/layers/layer.hpp"

namespace cgr {

struct TileParams {
  std::vector<std::int64_t> repeats{};  // one per input dim, each >= 0
};

// y[index] = x[sum_d (index[d] mod in_dims[d]) * in_strides[d]] over the output's dims.
// Fixed-size, so kernels take it by value.
struct TileGeometry {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  std::int64_t count = 0;        // output elements
  std::int64_t input_count = 0;  // input elements
  std::int64_t out_dims[kMaxRank] = {};
  std::int64_t in_dims[kMaxRank] = {};
  std::int64_t in_strides[kMaxRank] = {};
};

class Tile final : public Layer {
 public:
  static constexpr std::string_view kKind = "Tile";
  Tile(std::string name, const TensorDesc& input, const TileParams& params);

  std::string_view kind() const override { return kKind; }
  const TileParams& params() const { return params_; }
  const TileGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  TileParams params_;
  TileGeometry geometry_;
};

}  // namespace cgr
