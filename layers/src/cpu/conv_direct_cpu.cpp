// ConvKernelCpu's one-group path: the GEMM reads the input in place instead of an im2col
// panel (conv_cpu.hpp's Direct says what B is).
//
// Why: for a 3x3 conv with 64 output channels im2col took ~17% of the time (perf, one thread,
// ResNet-18's layer1 conv) for a copy the micro-kernel can do without. At stride 1 the im2col
// row (c, kh, kw) of output pixel t = oh * Wp + ow of a padded plane of row width Wp is
// padded element c * Hp * Wp + kh * Wp + kw + t: each row of B is a contiguous run of the
// padded input, so the micro-kernel loads it directly (gemm::TileArgs::b_offsets). At stride
// s the padded input is split into s x s phases (every s-th row and column from each offset),
// and a tap (kh, kw) reads one phase at a shift: again a contiguous run. The flat result has
// (phase width - out_w) junk columns per row: the last pass over K computes each tile with its
// epilogue into a stack buffer and copies the valid columns out (gemm::TileSink,
// flat_scatter_block), so the flat result never makes a trip through memory for an epilogue
// pass of its own.
// The arithmetic per output is the im2col path's, fma for fma, so the bits are the same.
#include <algorithm>

#include "cgr/thread_pool.hpp"
#include "cpu/conv_cpu.hpp"

namespace cgr::cpu {
void ConvKernelCpu::run_direct(const float* input, const float* residual, float* output,
                               float* workspace, const math::Activation& activation,
                               ThreadPool* pool) const {
  const ConvGeometry& g = geometry_;
  const std::int64_t mr = kernel_->mr;
  const std::int64_t nr = kernel_->nr;
  const std::int64_t m_strips = m_padded_ / mr;
  const std::int64_t threads = pool ? pool->size() : 1;
  const bool padded = direct_ == Direct::phases;
  const std::int64_t flat = padded ? flat_columns_ : columns_;
  const std::int64_t strips = gemm::ceil_div(flat, nr);
  // Pointwise: the input holds no room past a plane's end for the last strip's full-width
  // loads, so a partial last strip is packed (im2col) into the workspace instead.
  const std::int64_t direct_strips = padded ? strips : columns_ / nr;

  // Tasks: column strips over all rows while the weights stay in L2; otherwise row blocks
  // over all strips, so the threads share the weight stream (conv_cpu.cpp says more).
  const bool by_columns = threads == 1 || (weights_cached() && strips >= 4 * threads);
  const TaskSplit split = split_tasks(1, strips, by_columns, threads);
  const std::int64_t task_m_strips = split.task_m_strips;
  const std::int64_t m_blocks = split.m_blocks;
  const std::int64_t grain = split.grain;

  const std::int64_t plane = g.in_h * g.in_w;
  // Workspace: the phases (+ nr floats of slack) then the flat result (out_channels rows of
  // ldc); pointwise, one packed strip.
  float* const phase_input = workspace;
  const std::int64_t phase_floats = gemm::round_up(g.in_channels * phases_.floats() + nr, 16);
  float* const flat_out = workspace + phase_floats;
  const std::int64_t ldc = padded ? g.out_h * phases_.phase_w : columns_;

  for (std::int64_t n = 0; n < g.batch; ++n) {
    const float* image = input + n * g.in_channels * plane;
    float* out = output + n * g.out_channels * columns_;
    const float* res = residual ? residual + n * g.out_channels * columns_ : nullptr;

    if (padded) {
      // Every cell written, padding included: the workspace holds other ops' data.
      const std::int64_t channel_floats = phases_.floats();
      gemm::parallel_range(
          pool, g.in_channels,
          std::max<std::int64_t>(1, (1 << 16) / std::max<std::int64_t>(1, channel_floats)),
          [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t c = begin; c < end; ++c)
              phases_.copy(image + c * plane, phase_input + c * channel_floats, true, 0.0f);
          });
      std::fill(phase_input + g.in_channels * channel_floats, phase_input + phase_floats, 0.0f);
    }

    gemm::PackedProduct p;
    p.kernel = kernel_;
    p.m = group_m_;
    p.n = flat;
    p.k = group_k_;
    p.a = packed_weight_.data();
    p.b = padded ? phase_input : image;
    p.b_offsets = b_offsets_.data();
    p.c = padded ? flat_out : out;
    p.ldc = ldc;
    p.row_bias = bias_.empty() ? nullptr : bias_.data();
    p.activation = gemm::gemm_activation(activation);
    // Padded: the last pass over K computes each tile of the flat result with its epilogue in
    // a stack buffer (the residual gathered into the flat layout) and copies its valid columns
    // out; the flat result holds only earlier passes' partial sums.
    FlatTarget target;
    if (padded) {
      target.dst = out;
      target.residual = res;
      target.plane = columns_;
      target.phase_w = phases_.phase_w;
      target.out_w = g.out_w;
      target.avx512 = flat_avx512_;
      p.sink.context = &target;
      p.sink.scatter = [](const void* context, float* tile, std::int64_t ld, std::int64_t row0,
                          std::int64_t col0, std::int64_t rows, std::int64_t cols) {
        flat_scatter_block(*static_cast<const FlatTarget*>(context), tile, ld, row0, rows, col0,
                           cols);
      };
      if (res != nullptr) {
        p.sink.gather = [](const void* context, float* tile, std::int64_t ld, std::int64_t row0,
                           std::int64_t col0, std::int64_t rows, std::int64_t cols) {
          flat_gather_block(*static_cast<const FlatTarget*>(context), tile, ld, row0, rows, col0,
                            cols);
        };
      }
    } else {
      p.residual = res;
      p.ldr = columns_;
    }
    // Pointwise's packed last strip, when it is partial.
    gemm::PackedProduct tail = p;
    tail.b_offsets = nullptr;
    tail.b = workspace;
    tail.b_first = direct_strips;
    auto multiply = [&](std::int64_t ms0, std::int64_t ms1, std::int64_t ns0, std::int64_t ns1) {
      if (ns0 < std::min(ns1, direct_strips)) {
        gemm::gemm_packed(p, ms0, ms1, ns0, std::min(ns1, direct_strips));
      }
      if (ns1 > direct_strips) gemm::gemm_packed(tail, ms0, ms1, direct_strips, ns1);
    };
    if (direct_strips < strips) im2col_strip(image, direct_strips, workspace);

    if (by_columns) {
      gemm::parallel_range(pool, strips, grain, [&](std::int64_t begin, std::int64_t end) {
        multiply(0, m_strips, begin, end);
      });
    } else {
      gemm::parallel_range(pool, m_blocks, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t item = begin; item < end; ++item) {
          const std::int64_t m0 = item * task_m_strips;
          multiply(m0, std::min(m_strips, m0 + task_m_strips), 0, strips);
        }
      });
    }
  }
}

}  // namespace cgr::cpu
