// Slice: a strided window of a tensor (x[a:b:s, ...] in NumPy, ONNX Slice and Split): along
// each listed axis, elements start, start + step, ... before end; negative indices count from
// the end and out-of-range ones clamp, by ONNX's rules; steps may be negative (reversal).
#pragma once

#include <vector>

#include "cgr/layers/layer.hpp"

namespace cgr {

struct SliceParams {
  std::vector<std::int64_t> starts, ends;
  std::vector<int> axes;            // empty: 0, 1, ... (one per start)
  std::vector<std::int64_t> steps;  // empty: all 1
};

// One axis after ONNX's clamping: the first index taken, the step and how many are taken.
struct SliceAxis {
  std::int64_t first = 0, step = 1, count = 0;
};
// ONNX Slice's rule for one axis of `size` elements (step != 0): negative start/end count from
// the end; then starts clamp to [0, size] and ends to [0, size] for positive steps, to
// [0, size - 1] and [-1, size - 1] for negative ones.
SliceAxis slice_axis(std::int64_t size, std::int64_t start, std::int64_t end, std::int64_t step);

// y[index] = x[base + sum_d index[d] * strides[d]] over the output's dims (strides are negative
// along reversed axes). Fixed-size, so kernels take it by value.
struct SliceGeometry {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  std::int64_t count = 0;        // output elements
  std::int64_t input_count = 0;  // input elements (every offset is below it)
  std::int64_t base = 0;
  std::int64_t out_dims[kMaxRank] = {};
  std::int64_t strides[kMaxRank] = {};
};

class Slice final : public Layer {
 public:
  static constexpr std::string_view kKind = "Slice";
  Slice(std::string name, const TensorDesc& input, const SliceParams& params);

  std::string_view kind() const override { return kKind; }
  const SliceGeometry& geometry() const { return geometry_; }
  std::string attributes() const override;
  OpCost cost() const override;
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  SliceGeometry geometry_;
  std::string attributes_;
};

}  // namespace cgr
