// CPU kernel of the row normalisation LayerNorm and InstanceNorm share (RowNormGeometry).
#pragma once

#include <memory>
#include <vector>

#include "cgr/layers/layer.hpp"
#include "cgr/layers/row_norm.hpp"

namespace cgr::cpu {

// scale and shift: g.channels values (affine_per_row) or g.cols values.
std::unique_ptr<CpuKernel> make_row_norm_kernel(const RowNormGeometry& g, std::vector<float> scale,
                                                std::vector<float> shift);

}  // namespace cgr::cpu
