// The normalisation LayerNorm and InstanceNorm share: the input seen as `rows` rows of `cols`
// contiguous values, each row brought to mean 0 and variance 1 (the population variance, eps
// added before the square root), then scaled and shifted per element:
//   y[r][j] = (x[r][j] - mean_r) / sqrt(var_r + eps) * scale[i] + shift[i]
// with i = r % channels for InstanceNorm (a row is one channel of one image) and i = j for
// LayerNorm (the normalised dims are the row). Fixed-size, so kernels take it by value.
#pragma once

#include <cstdint>

namespace cgr {

struct RowNormGeometry {
  std::int64_t rows = 0, cols = 0;
  std::int64_t channels = 1;    // affine values per row index (affine_per_row)
  bool affine_per_row = false;  // scale[r % channels] (InstanceNorm), else scale[j] (LayerNorm)
  float eps = 1e-5f;
};

}  // namespace cgr
