// CPU 2-D convolution (NCHW, float): im2col into the GEMM's packed panel layout + the GEMM
// core, with bias, residual add and ReLU fused into the final store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cgr/error.hpp"
#include "cgr/layers/conv2d.hpp"
#include "cpu/conv_onednn.hpp"
#include "cpu/depthwise_conv_cpu.hpp"
#include "cpu/gemm.hpp"
#include "cpu/phases.hpp"

namespace cgr {
class ThreadPool;
}

namespace cgr::cpu {

// The Conv2d layer's geometry (out_h / out_w from PyTorch's formula).
using ConvGeometry = Conv2dGeometry;

class ConvKernelCpu {
 public:
  // weight: [out_channels, in_channels/groups, kernel_h, kernel_w] (PyTorch layout), packed
  // here once. bias: out_channels values, or empty for none. Throws cgr::Error on a geometry
  // or size mismatch.
  ConvKernelCpu(const ConvGeometry& geometry, std::span<const float> weight,
                std::span<const float> bias);

  const ConvGeometry& geometry() const { return geometry_; }
  // Whether oneDNN computes this convolution (conv_onednn.hpp). Its bits then differ from
  // cgr's own kernels' (another order of the sums), though not between thread counts.
  bool uses_onednn() const { return onednn_ != nullptr; }
  // Whether that is oneDNN's Winograd algorithm (a dense 3x3 stride-1 conv): its transforms
  // round differently, up to about 1e-4 of the output's magnitude where a direct sum stays
  // within 1e-5.
  bool uses_winograd() const { return onednn_ != nullptr && onednn_->winograd(); }
  // Whether the input and output can be NHWC values (OneDnnConv::channels_last, a depthwise
  // conv's channel lanes), whether a residual can then be NHWC too (oneDNN's), and the choice,
  // made before the first run (the CPU layout plan, Layer::make_cpu_kernel's caller).
  // A 1x1 conv on cgr's GEMM takes NHWC values too (pointwise_rows_).
  bool channels_last_input() const {
    return onednn_ != nullptr      ? onednn_->channels_last()
           : depthwise_ != nullptr ? depthwise_->channel_lanes()
                                   : pointwise_rows_ != nullptr;
  }
  bool channels_last_output() const {
    return onednn_ != nullptr      ? onednn_->channels_last_output()
           : depthwise_ != nullptr ? depthwise_->channel_lanes()
                                   : pointwise_rows_ != nullptr;
  }
  bool channels_last_residual() const { return onednn_ != nullptr || pointwise_rows_ != nullptr; }
  // The depthwise kernel, where one input channel per group makes this a depthwise conv.
  const DepthwiseConvCpu* depthwise() const { return depthwise_.get(); }
  void set_channels_last(bool input, bool output);

  // Bytes of scratch one run needs (the im2col panel); the caller provides it (the memory
  // plan owns it), 64-byte aligned for best speed.
  std::size_t workspace_bytes() const;

  // output[n, oc, oh, ow] = act(conv + bias[oc] + residual[n, oc, oh, ow]), act the fused
  // activation (math::Activation; kind none: the identity). residual may be null. input NCHW
  // dense. pool may be null (single thread). The result is the same, bit for bit, for every
  // pool size.
  void run(const float* input, const float* residual, float* output, float* workspace,
           const math::Activation& activation, ThreadPool* pool) const;

 private:
  // Writes column strip `strip` of one group's im2col panel (group_k_ rows of nr columns).
  void im2col_strip(const float* group_input, std::int64_t strip, float* dst) const;
  // Multiply-adds one task should at least carry: ~20-40 us of work against a few us of pool
  // overhead per task.
  static constexpr std::int64_t kTaskMacs = std::int64_t{1} << 20;
  // The same for run_pointwise_rows, whose tasks pack nothing (A read in place, W^T packed at
  // build): a quarter of it, so MobileNet-v2's small 1x1 convs (3.6M multiply-adds for 144->32
  // at 28x28) split evenly over two threads: 0.033 ms instead of 0.044.
  static constexpr std::int64_t kRowsTaskMacs = std::int64_t{1} << 18;
  // Weights (one group's, packed) up to this size stay in L2 while tasks split by column
  // strips re-read them: about half of a typical L2.
  static constexpr std::int64_t kFusedWeightBytes = std::int64_t{1} << 20;
  bool weights_cached() const {
    return m_padded_ * group_k_ * static_cast<std::int64_t>(sizeof(float)) <= kFusedWeightBytes;
  }
  // How a product over `groups` x `strips` column strips is split into tasks: by column
  // strips, each over all rows (by_columns), or by blocks of task_m_strips row strips, each
  // over all strips; grain: items per task.
  struct TaskSplit {
    std::int64_t task_m_strips = 0, m_blocks = 0, grain = 0;
  };
  TaskSplit split_tasks(std::int64_t groups, std::int64_t strips, bool by_columns,
                        std::int64_t threads) const;
  // A 1x1 conv with an NHWC input or output: points as the GEMM's rows (pointwise_rows_).
  void run_pointwise_rows(const float* input, const float* residual, float* output,
                          float* workspace, const math::Activation& activation,
                          ThreadPool* pool) const;
  // One group: the GEMM reads B in place (conv_direct_cpu.cpp).
  void run_direct(const float* input, const float* residual, float* output, float* workspace,
                  const math::Activation& activation, ThreadPool* pool) const;

  ConvGeometry geometry_;
  // One input channel per group (depthwise, any multiplier): computed directly, no im2col.
  std::unique_ptr<DepthwiseConvCpu> depthwise_;
  // Dense convolutions oneDNN takes (conv_onednn.hpp): computed there.
  std::unique_ptr<OneDnnConv> onednn_;
  const gemm::MicroKernel* kernel_ = nullptr;
  std::int64_t group_m_ = 0;          // output channels per group (GEMM M)
  std::int64_t group_k_ = 0;          // (in_channels / groups) * kernel_h * kernel_w (GEMM K)
  std::int64_t m_padded_ = 0;         // group_m_ rounded up to the micro-kernel's mr
  std::int64_t columns_ = 0;          // out_h * out_w (GEMM N)
  std::int64_t col_strips_ = 0;       // columns_ / nr, rounded up
  gemm::PackedBuffer packed_weight_;  // groups x m_padded_ x group_k_, row strips
  std::vector<float> bias_;           // groups x m_padded_, or empty

  // The input plane as im2col sees it: a 1x1 stride-1 unpadded conv reads each channel as a
  // single row of in_h * in_w pixels, so its strips copy whole runs.
  std::int64_t view_in_h_ = 0, view_in_w_ = 0, view_out_w_ = 0;
  // Per kernel column kw: the output columns [begin, end) whose input column is inside the
  // image (outside it im2col writes the zero padding).
  std::vector<std::int64_t> kw_begin_, kw_end_;
  bool im2col_avx512_ = false;  // 32-column strips built with AVX-512 masked loads
  bool flat_avx512_ = false;    // the flat result copied out with AVX-512 (as the GEMM runs)

  // One group: no im2col. pointwise (1x1, stride 1, unpadded): B is the input itself, row c
  // at c * H * W; phases: B is a copy of the zero-padded input split into stride_h x stride_w
  // phases (phases_, per channel; at stride 1, one phase: the padded input), read as one flat
  // run of flat_columns_ columns, element t = oh * phase_w + ow, row (c, kh, kw) at its
  // b_offsets_ entry; the GEMM's last pass over K hands each tile of the flat result to the
  // epilogue, which drops the phase_w - out_w columns between rows as it copies the rest to
  // the output (the flat result in the workspace holds earlier passes' partial sums).
  enum class Direct { none, pointwise, phases };
  Direct direct_ = Direct::none;
  PhaseLayout phases_;
  std::int64_t flat_columns_ = 0;
  std::vector<std::int64_t> b_offsets_;  // group_k_ entries

  // A pointwise conv next to NHWC values of the layout plan computes output^T = input^T W^T:
  // the rows are the image's points, read in place from an NHWC input (a point's channels
  // contiguous) or an NCHW one (strided), and written as rows of an NHWC output, the bias per
  // column; an NCHW output takes each finished tile transposed (a TileSink). The kernel: the
  // 8 x 32 tile, or 16 x 16 where that computes fewer padding columns (16 or 24 output
  // channels); null: not offered (no AVX-512 GEMM, or not a pointwise conv). Each output is
  // the same fma chain over the input channels as on the NCHW path, bias, residual and
  // activation after it in the same order: the same bits in either layout.
  const gemm::MicroKernel* pointwise_rows_ = nullptr;
  gemm::PackedBuffer packed_weight_t_;             // W^T in column strips of pointwise_rows_->nr
  std::vector<float> col_bias_;                    // out_channels rounded up to nr, or empty
  bool input_nhwc_ = false, output_nhwc_ = false;  // set_channels_last
};

}  // namespace cgr::cpu
