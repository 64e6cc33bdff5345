// See expanded_depthwise_cpu.hpp.
#include "cpu/expanded_depthwise_cpu.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/depthwise_conv_cpu.hpp"
#include "cpu/lanes.hpp"
#include "cpu/phases.hpp"

namespace cgr::cpu {
namespace {

constexpr std::int64_t kLanes = lanes::kLanes;
// The most expanded rows one output row reads: a kernel this tall (with its dilation) is rare
// enough to take the unbanded path.
constexpr std::int64_t kMaxSpanRows = DepthwiseConvCpu::kMaxNhwcTaps;
// Points the expansion computes per product at least, where the window allows: one row of a
// 14-wide map is two strips of the GEMM's 8 rows, one of them partial (packed), and each
// product streams all of W^T.
constexpr std::int64_t kChunkPoints = 128;
// The window's most floats (384 KiB: within a core's L2 next to W^T and the output rows).
constexpr std::int64_t kMaxWindowFloats = std::int64_t{96} << 10;

}  // namespace

ExpandedDepthwiseCpu::ExpandedDepthwiseCpu(const Conv2dGeometry& expansion,
                                           std::span<const float> expansion_weight,
                                           std::span<const float> expansion_bias,
                                           const math::Activation& expansion_activation,
                                           const Conv2dGeometry& depthwise,
                                           std::span<const float> weight,
                                           std::span<const float> bias, bool residual)
    : expansion_geometry_(expansion),
      expansion_activation_(expansion_activation),
      depthwise_(depthwise, weight, bias) {
  const Conv2dGeometry& e = expansion;
  const Conv2dGeometry& d = depthwise;
  if (!e.pointwise() || e.groups != 1 || d.groups != d.in_channels ||
      d.out_channels != d.in_channels || e.out_channels != d.in_channels || e.batch != d.batch ||
      e.out_h != d.in_h || e.out_w != d.in_w) {
    fail(
        "conv: an expansion must be a 1x1, stride-1, unpadded conv of one group whose output "
        "({} x {} x {}) is a depthwise conv's input ({} x {} x {}, groups {}, {} outputs)",
        e.out_channels, e.out_h, e.out_w, d.in_channels, d.in_h, d.in_w, d.groups, d.out_channels);
  }
  const std::int64_t channels = e.out_channels;
  if (expansion_weight.size() != static_cast<std::size_t>(channels * e.in_channels) ||
      (!expansion_bias.empty() && expansion_bias.size() != static_cast<std::size_t>(channels))) {
    fail("conv: the expansion's weight has {} values and its bias {}; expected {} and {} or none",
         expansion_weight.size(), expansion_bias.size(), channels * e.in_channels, channels);
  }
  const DepthwiseConvCpu* rows = depthwise_.depthwise();
  const gemm::MicroKernel& best = gemm::best_kernel();
  span_rows_ = (d.kernel_h - 1) * d.dilation_h + 1;
  banded_ = !residual && d.in_h > 0 && d.in_w > 0 && rows != nullptr && rows->nhwc_rows() &&
            std::string_view(best.name) == "avx512" && span_rows_ <= kMaxSpanRows &&
            (span_rows_ + 1) * d.in_w * channels <= lanes::kMaxPaddedFloats;
  if (!banded_) {
    expansion_ = std::make_unique<ConvKernelCpu>(expansion, expansion_weight, expansion_bias);
    expanded_bytes_ =
        (static_cast<std::size_t>(d.batch * channels * d.in_h * d.in_w) * sizeof(float) + 63) / 64 *
        64;
    return;
  }
  chunk_rows_ =
      std::clamp<std::int64_t>(std::min(gemm::ceil_div(kChunkPoints, d.in_w),
                                        kMaxWindowFloats / (d.in_w * channels) - span_rows_),
                               1, d.in_h);
  rows_kernel_ = &gemm::avx512_rows_kernel(channels);
  const std::int64_t columns = gemm::round_up(channels, rows_kernel_->nr);
  weight_t_ = gemm::PackedBuffer(static_cast<std::size_t>(e.in_channels * columns));
  gemm::pack_b_transposed(expansion_weight.data(), e.in_channels, channels, e.in_channels,
                          rows_kernel_->nr, weight_t_.data());
  if (!expansion_bias.empty()) {
    col_bias_.assign(static_cast<std::size_t>(columns), 0.0f);
    std::copy(expansion_bias.begin(), expansion_bias.end(), col_bias_.begin());
  }
}

bool ExpandedDepthwiseCpu::channels_last_input() const {
  return banded_ || expansion_->channels_last_input();
}

bool ExpandedDepthwiseCpu::channels_last_output() const {
  return banded_ || depthwise_.channels_last_output();
}

void ExpandedDepthwiseCpu::set_channels_last(bool input, bool output) {
  input_nhwc_ = input;
  output_nhwc_ = output;
  if (banded_) return;
  // The expanded tensor in the workspace NHWC where both convs take it so.
  const bool expanded_nhwc = expansion_->channels_last_output() && depthwise_.channels_last_input();
  expansion_->set_channels_last(input, expanded_nhwc);
  depthwise_.set_channels_last(expanded_nhwc, output);
}

std::size_t ExpandedDepthwiseCpu::workspace_bytes() const {
  if (banded_) return 0;
  return expanded_bytes_ + std::max(expansion_->workspace_bytes(), depthwise_.workspace_bytes());
}

void ExpandedDepthwiseCpu::run(const float* input, const float* residual, float* output,
                               float* workspace, const math::Activation& activation,
                               ThreadPool* pool) const {
  const Conv2dGeometry& g = depthwise_.geometry();
  if (g.batch == 0 || g.out_h == 0 || g.out_w == 0) return;
  if (banded_) {
    if (residual != nullptr) fail("conv: the banded expansion path takes no residual");
    return run_banded(input, output, activation, pool);
  }
  float* expanded = workspace;
  float* rest = workspace + expanded_bytes_ / sizeof(float);
  expansion_->run(input, nullptr, expanded, rest, expansion_activation_, pool);
  depthwise_.run(expanded, residual, output, rest, activation, pool);
}

void ExpandedDepthwiseCpu::expand_rows(const float* input, std::int64_t n, std::int64_t ih,
                                       std::int64_t rows, std::int64_t c0, std::int64_t channels,
                                       float* out) const {
  const Conv2dGeometry& e = expansion_geometry_;
  const std::int64_t plane = e.in_h * e.in_w;
  const std::int64_t nr = rows_kernel_->nr;
  gemm::RowsProduct p;
  p.kernel = rows_kernel_;
  p.m = rows * e.in_w;
  p.n = channels;
  p.k = e.in_channels;
  if (input_nhwc_) {
    p.a = input + (n * plane + ih * e.in_w) * e.in_channels;
    p.lda = e.in_channels;
    p.a_k_stride = 1;
  } else {
    p.a = input + n * e.in_channels * plane + ih * e.in_w;
    p.lda = 1;
    p.a_k_stride = plane;
  }
  p.a_in_place = true;
  p.b = weight_t_.data() + c0 / nr * e.in_channels * nr;  // column strip c0 / nr on
  p.c = out;
  p.ldc = channels;
  p.col_bias = col_bias_.empty() ? nullptr : col_bias_.data() + c0;
  p.activation = gemm::gemm_activation(expansion_activation_);
  gemm::gemm_rows(p, 0, gemm::ceil_div(p.m, rows_kernel_->mr), 0, gemm::ceil_div(channels, nr));
}

void ExpandedDepthwiseCpu::run_banded(const float* input, float* output,
                                      const math::Activation& activation, ThreadPool* pool) const {
#if defined(CGR_LANES_X86)
  const Conv2dGeometry& g = depthwise_.geometry();
  const DepthwiseConvCpu& depthwise = *depthwise_.depthwise();
  const std::int64_t channels_total = g.out_channels;
  const std::int64_t nr = rows_kernel_->nr;
  const std::int64_t strips = gemm::ceil_div(channels_total, nr);
  // Each thread takes a part of an image: a band of output rows, whose edges compute
  // kernel_h - stride_h expanded rows again, or a group of the GEMM's column strips (channels:
  // nothing twice, but strips may not split evenly). Whichever wastes less: bands on
  // MobileNet-v2's 112 x 112 map of 96 channels (3 strips), groups on its 7 x 7 and 14 x 14
  // maps of 384 to 960 channels (2 of their 7 or 14 rows twice over two bands).
  const std::int64_t threads = pool != nullptr ? pool->size() : 1;
  const std::int64_t parts = gemm::ceil_div(threads, g.batch);
  std::int64_t bands = 1, groups = 1;
  if (parts > 1) {
    const std::int64_t split = std::min(parts, strips);
    const double group_waste =
        static_cast<double>(gemm::ceil_div(strips, split) * parts) / static_cast<double>(strips) -
        1.0;
    const double band_waste =
        static_cast<double>(std::max<std::int64_t>(0, span_rows_ - g.stride_h) * parts) /
        static_cast<double>(g.in_h);
    if (group_waste <= band_waste) {
      groups = split;
    } else {
      bands = std::min(parts, g.out_h);
    }
  }
  const std::int64_t result_floats = g.out_w * channels_total;
  const std::int64_t out_plane = g.out_h * g.out_w;
  // ReLU and Clip on the way out; another activation over the row first (as run_nhwc does).
  const gemm::GemmActivation clamp = gemm::gemm_activation(activation);
  const lanes::OutputFinish finish =
      lanes::output_finish(clamp.other != nullptr ? math::ActivationKind::none : activation.kind);
  const std::int64_t window_rows = span_rows_ + chunk_rows_;
  const std::int64_t items_per_image = bands * groups;
  gemm::parallel_range(
      pool, g.batch * items_per_image, 1, [&](std::int64_t begin, std::int64_t end) {
        const lanes::ThreadScratch scratch(
            static_cast<std::size_t>(window_rows * g.in_w * channels_total + result_floats));
        float* const window = scratch.data();
        float* const result = window + window_rows * g.in_w * channels_total;
        for (std::int64_t item = begin; item < end; ++item) {
          const std::int64_t n = item / items_per_image;
          const std::int64_t band = item % items_per_image / groups;
          const std::int64_t group = item % groups;
          const std::int64_t c0 = group * strips / groups * nr;
          const std::int64_t channels =
              std::min(channels_total, (group + 1) * strips / groups * nr) - c0;
          const std::int64_t row_floats = g.in_w * channels;
          const std::int64_t oh_end = (band + 1) * g.out_h / bands;
          // The last expanded row the band reads.
          const std::int64_t band_last = std::min(
              g.in_h - 1, (oh_end - 1) * g.stride_h - g.pad_top + (g.kernel_h - 1) * g.dilation_h);
          // The window holds expanded rows [first, first + held) of image n, the group's channels.
          std::int64_t first = 0, held = 0;
          for (std::int64_t oh = band * g.out_h / bands; oh < oh_end; ++oh) {
            const std::int64_t top = oh * g.stride_h - g.pad_top;
            const std::int64_t lo = std::max<std::int64_t>(0, top);
            const std::int64_t hi = std::min(g.in_h - 1, top + (g.kernel_h - 1) * g.dilation_h);
            if (lo <= hi && hi >= first + held) {
              // Rows below lo are read no more: keep [lo, first + held), then expand chunk_rows_
              // more (or up to the band's last), all in one product over their points.
              const std::int64_t keep = std::max<std::int64_t>(0, first + held - lo);
              if (keep > 0 && lo > first) {
                std::memmove(window, window + (lo - first) * row_floats,
                             static_cast<std::size_t>(keep * row_floats) * sizeof(float));
              }
              first = lo;
              held = keep;
              const std::int64_t count = std::min(window_rows, band_last + 1 - first) - held;
              expand_rows(input, n, first + held, count, c0, channels, window + held * row_floats);
              held += count;
            }
            const float* rows[kMaxSpanRows];
            for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
              const std::int64_t ih = top + kh * g.dilation_h;
              rows[kh] = ih >= 0 && ih < g.in_h ? window + (ih - first) * row_floats : nullptr;
            }
            depthwise.nhwc_row(rows, channels, c0, channels, result);
            if (clamp.other != nullptr) {
              const std::int64_t floats = g.out_w * channels;
              flat_epilogue(result, floats, nullptr, result, 1, floats, nullptr, activation, true);
            }
            if (output_nhwc_) {
              lanes::blocked_to_nhwc(result, g.out_w, channels,
                                     output + (n * out_plane + oh * g.out_w) * channels_total + c0,
                                     channels_total, clamp);
              continue;
            }
            for (std::int64_t c = 0; c < channels; c += kLanes) {
              finish(result + c * g.out_w, kLanes, g.out_w, kLanes, nullptr,
                     output + (n * channels_total + c0 + c) * out_plane + oh * g.out_w, out_plane,
                     activation.alpha, activation.beta);
            }
          }
        }
      });
#else
  (void)input, (void)output, (void)activation, (void)pool;
#endif
}

}  // namespace cgr::cpu
