// CPU transposed 2-D convolution (NCHW, float): per image and group, a GEMM of the transposed
// weights by the input's pixels (the GEMM core of gemm.hpp) into one column per input pixel,
// then a col2im scatter-add of those columns into the output, which starts as the bias.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cgr/layers/conv_transpose2d.hpp"
#include "cpu/gemm.hpp"

namespace cgr {
class ThreadPool;
}

namespace cgr::cpu {

class ConvTransposeKernelCpu {
 public:
  // weight: [in_channels, out_channels/groups, kernel_h, kernel_w] (PyTorch's layout), packed
  // here once. bias: out_channels values, or empty for none. Throws cgr::Error on a geometry
  // or size mismatch.
  ConvTransposeKernelCpu(const ConvTranspose2dGeometry& geometry, std::span<const float> weight,
                         std::span<const float> bias);

  const ConvTranspose2dGeometry& geometry() const { return geometry_; }

  // Bytes of scratch one run needs: the packed input panel and the GEMM's columns.
  std::size_t workspace_bytes() const;

  // output = conv_transpose(input) + bias, input and output NCHW dense. pool may be null
  // (single thread). The result is the same, bit for bit, for every pool size: each output
  // element is the bias plus its contributions in one fixed order.
  void run(const float* input, float* output, float* workspace, ThreadPool* pool) const;

 private:
  // Scatter-adds the kernel_h x kernel_w columns of output channel `channel` (of all channels)
  // into its plane, which holds the bias already.
  void col2im_channel(const float* columns, std::int64_t channel, float* plane) const;

  ConvTranspose2dGeometry geometry_;
  const gemm::MicroKernel* kernel_ = nullptr;
  std::int64_t group_m_ = 0;          // (out_channels / groups) * kernel_h * kernel_w (GEMM M)
  std::int64_t group_k_ = 0;          // in_channels / groups (GEMM K)
  std::int64_t m_padded_ = 0;         // group_m_ rounded up to the micro-kernel's mr
  std::int64_t columns_ = 0;          // in_h * in_w: one GEMM column per input pixel (GEMM N)
  std::int64_t col_strips_ = 0;       // columns_ / nr, rounded up
  gemm::PackedBuffer packed_weight_;  // groups x m_padded_ x group_k_, row strips
  std::vector<float> bias_;           // out_channels, or empty

  // Per kernel row kh (column kw): the input rows (columns) [begin, end) whose output row
  // ih * stride + kh * dilation - pad lies inside the output; the rest fall in the trimmed
  // padding.
  std::vector<std::int64_t> kh_begin_, kh_end_, kw_begin_, kw_end_;
};

}  // namespace cgr::cpu
