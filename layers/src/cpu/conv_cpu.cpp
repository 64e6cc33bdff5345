// CPU convolution: output[n, g-block of channels] = W_g (M x K) * im2col_g(input[n]) (K x N)
// per group g, with M = out channels per group, K = in channels per group x kernel_h x
// kernel_w, N = out_h x out_w, then + bias + residual and ReLU in the GEMM's last store.
// Groups of one input channel (depthwise convolutions) are computed directly instead
// (depthwise_conv_cpu.hpp says why), and convolutions of one group read B in place without
// im2col (conv_direct_cpu.cpp); im2col remains for grouped convolutions.
//
// Why this shape: the weights are packed once into the micro-kernel's row strips; im2col
// writes the input patches straight into the column-strip panel the micro-kernel reads
// (k-major inside each nr-wide strip), so there is no separate packing pass over B. Work is
// split over (group, row block, column strip) tiles only; the sum over K of every output
// element is the same chain whatever the split, so results do not depend on the thread count.
// When the weights fit in L2 and there are enough column strips to keep every thread busy,
// one task im2cols a few strips at a time into the same cache-resident slot and multiplies
// them at once (fused). Otherwise (big weights, as in the late layers of a network, or tiny
// outputs) im2col runs first and the GEMM is split over row blocks, each task multiplying
// its rows of weights by every column strip: each weight byte is then read from memory once
// per image, and the threads stream disjoint parts of the weights.
// im2col costs about as much per panel element as the GEMM spends on it when M is small (64),
// hence the AVX-512 version built from masked loads rather than scalar copies and gathers.
//
// A 1x1 conv next to an NHWC value of the CPU layout plan computes the transposed product
// instead (run_pointwise_rows): the points are the GEMM's rows, read in place by the
// micro-kernel (its broadcasts come from each point's channels, NHWC, or each channel's
// points, NCHW; packing them cost as much as the product), the output channels its columns.
// So MobileNet-v2's early blocks stay NHWC and their depthwise convs skip the transposes to
// and from lanes. Measured per op at one thread against the NCHW path: the depthwise convs
// 0.52-0.73x the time, the 1x1 convs 1.0-1.4x (24 output channels leave a quarter of each
// tile's columns padding); the model about 0.97x.
#include "cpu/conv_cpu.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/gemm.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define CGR_CONV_X86 1
#include <immintrin.h>
#endif

namespace cgr::cpu {
namespace {

// Floats of im2col output one task should at least write when im2col runs on its own.
constexpr std::int64_t kTaskIm2colFloats = std::int64_t{1} << 16;
// Bytes of B panel (K x strips x nr) one fused step im2cols before multiplying: well inside
// L2 next to the A block, so the GEMM reads what im2col just wrote from cache.
constexpr std::int64_t kPanelBlockBytes = std::int64_t{192} << 10;
// An im2col panel up to this size stays in L3 while the unfused path re-reads it.
constexpr std::int64_t kUnfusedPanelBytes = std::int64_t{4} << 20;

// Floor division for possibly negative numerators (positive divisor).
std::int64_t floor_div(std::int64_t x, std::int64_t d) {
  return x >= 0 ? x / d : -((-x + d - 1) / d);
}

// One run of consecutive output columns inside one output row of a strip.
struct Segment {
  std::int64_t ih0;     // input row of kernel row 0
  std::int64_t ow0;     // first output column
  std::int64_t length;  // output columns in the run
  std::int64_t offset;  // position inside the strip
};

// What im2col reads for one group (see the members of ConvKernelCpu).
struct StripSource {
  const float* input = nullptr;  // the group's first input channel
  std::int64_t channels = 0, plane = 0, in_h = 0, in_w = 0;
  std::int64_t kernel_h = 0, kernel_w = 0, dilation_h = 0, dilation_w = 0;
  std::int64_t pad_left = 0, stride_w = 0;
  const std::int64_t* kw_begin = nullptr;
  const std::int64_t* kw_end = nullptr;
};

// Writes the K rows (c, kh, kw) of one column strip: per row, each segment copies its input
// pixels, or zeros where the window hangs over the padding; columns past `count` are zero.
void im2col_rows(const StripSource& src, const Segment* segments, std::int64_t segment_count,
                 std::int64_t count, std::int64_t nr, float* row) {
  for (std::int64_t c = 0; c < src.channels; ++c) {
    const float* channel = src.input + c * src.plane;
    for (std::int64_t kh = 0; kh < src.kernel_h; ++kh) {
      const std::int64_t dy = kh * src.dilation_h;
      for (std::int64_t kw = 0; kw < src.kernel_w; ++kw) {
        const std::int64_t valid_begin = src.kw_begin[kw];
        const std::int64_t valid_end = src.kw_end[kw];
        const std::int64_t shift = kw * src.dilation_w - src.pad_left;
        for (std::int64_t s = 0; s < segment_count; ++s) {
          const Segment& seg = segments[s];
          float* out = row + seg.offset;
          const std::int64_t ih = seg.ih0 + dy;
          if (ih < 0 || ih >= src.in_h) {
            std::fill_n(out, seg.length, 0.0f);
            continue;
          }
          const std::int64_t end = seg.ow0 + seg.length;
          const std::int64_t lo = std::clamp(valid_begin, seg.ow0, end);
          const std::int64_t hi = std::clamp(valid_end, lo, end);
          std::fill(out, out + (lo - seg.ow0), 0.0f);
          const float* in_row = channel + ih * src.in_w;
          if (src.stride_w == 1 && hi > lo) {
            std::memcpy(out + (lo - seg.ow0), in_row + (lo + shift),
                        static_cast<std::size_t>(hi - lo) * sizeof(float));
          } else {
            for (std::int64_t ow = lo; ow < hi; ++ow) {
              out[ow - seg.ow0] = in_row[ow * src.stride_w + shift];
            }
          }
          std::fill(out + (hi - seg.ow0), out + seg.length, 0.0f);
        }
        if (count < nr) std::fill(row + count, row + nr, 0.0f);
        row += nr;
      }
    }
  }
}

#if defined(CGR_CONV_X86)
// The same for a 32-column strip with AVX-512: a row is built in two registers, segment by
// segment, from masked loads (stride 1 and 2) or masked gathers (larger strides); lanes
// outside the image stay zero. Masked-off lanes are never touched, so addresses before a row
// start or past its end are fine.
__attribute__((target("avx512f,bmi2"))) void im2col_rows_avx512(const StripSource& src,
                                                                const Segment* segments,
                                                                std::int64_t segment_count,
                                                                float* row) {
  const auto stride = static_cast<int>(src.stride_w);
  const __m512i lane_index =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(stride));
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (std::int64_t c = 0; c < src.channels; ++c) {
    const float* channel = src.input + c * src.plane;
    for (std::int64_t kh = 0; kh < src.kernel_h; ++kh) {
      const std::int64_t dy = kh * src.dilation_h;
      for (std::int64_t kw = 0; kw < src.kernel_w; ++kw) {
        const std::int64_t valid_begin = src.kw_begin[kw];
        const std::int64_t valid_end = src.kw_end[kw];
        const std::int64_t shift = kw * src.dilation_w - src.pad_left;
        __m512 low = _mm512_setzero_ps();
        __m512 high = _mm512_setzero_ps();
        for (std::int64_t s = 0; s < segment_count; ++s) {
          const Segment& seg = segments[s];
          const std::int64_t ih = seg.ih0 + dy;
          if (ih < 0 || ih >= src.in_h) continue;
          const std::int64_t end = seg.ow0 + seg.length;
          const std::int64_t lo = std::clamp(valid_begin, seg.ow0, end);
          const std::int64_t hi = std::clamp(valid_end, lo, end);
          if (lo == hi) continue;
          const auto mask = static_cast<std::uint32_t>(((std::uint64_t{1} << (hi - lo)) - 1)
                                                       << (seg.offset + lo - seg.ow0));
          const auto mask_low = static_cast<__mmask16>(mask & 0xffffu);
          const auto mask_high = static_cast<__mmask16>(mask >> 16);
          const float* in_row = channel + ih * src.in_w;
          // Lane j holds input column (ow0 - offset + j) * stride + shift.
          const std::int64_t first = (seg.ow0 - seg.offset) * src.stride_w + shift;
          if (stride == 1) {
            const std::uintptr_t base =
                reinterpret_cast<std::uintptr_t>(in_row) +
                static_cast<std::uintptr_t>(first) * sizeof(float);  // wraps when negative
            low = _mm512_mask_loadu_ps(low, mask_low, reinterpret_cast<const float*>(base));
            high = _mm512_mask_loadu_ps(high, mask_high,
                                        reinterpret_cast<const float*>(base + 16 * sizeof(float)));
          } else if (stride == 2) {
            // Much faster than a gather: load the 32 inputs that 16 lanes span, masked to the
            // even positions of valid lanes, and keep the even ones with a permute.
            const std::uintptr_t base =
                reinterpret_cast<std::uintptr_t>(in_row) +
                static_cast<std::uintptr_t>(first) * sizeof(float);  // wraps when negative
            if (mask_low != 0) {
              const std::uint32_t spread = _pdep_u32(mask_low, 0x55555555u);
              const __m512 a = _mm512_maskz_loadu_ps(static_cast<__mmask16>(spread & 0xffffu),
                                                     reinterpret_cast<const float*>(base));
              const __m512 b = _mm512_maskz_loadu_ps(static_cast<__mmask16>(spread >> 16),
                                                     reinterpret_cast<const float*>(base + 64));
              low = _mm512_mask_mov_ps(low, mask_low, _mm512_permutex2var_ps(a, even, b));
            }
            if (mask_high != 0) {
              const std::uint32_t spread = _pdep_u32(mask_high, 0x55555555u);
              const __m512 a = _mm512_maskz_loadu_ps(static_cast<__mmask16>(spread & 0xffffu),
                                                     reinterpret_cast<const float*>(base + 128));
              const __m512 b = _mm512_maskz_loadu_ps(static_cast<__mmask16>(spread >> 16),
                                                     reinterpret_cast<const float*>(base + 192));
              high = _mm512_mask_mov_ps(high, mask_high, _mm512_permutex2var_ps(a, even, b));
            }
          } else {
            const __m512i index =
                _mm512_add_epi32(lane_index, _mm512_set1_epi32(static_cast<int>(first)));
            low = _mm512_mask_i32gather_ps(low, mask_low, index, in_row, 4);
            high = _mm512_mask_i32gather_ps(high, mask_high,
                                            _mm512_add_epi32(index, _mm512_set1_epi32(16 * stride)),
                                            in_row, 4);
          }
        }
        _mm512_storeu_ps(row, low);
        _mm512_storeu_ps(row + 16, high);
        row += 32;
      }
    }
  }
}
#endif  // CGR_CONV_X86

}  // namespace

ConvKernelCpu::ConvKernelCpu(const ConvGeometry& geometry, std::span<const float> weight,
                             std::span<const float> bias)
    : geometry_(geometry), kernel_(&gemm::best_kernel()) {
  const ConvGeometry& g = geometry_;
  if (g.batch < 0 || g.in_channels <= 0 || g.out_channels <= 0 || g.in_h < 0 || g.in_w < 0 ||
      g.kernel_h <= 0 || g.kernel_w <= 0 || g.stride_h <= 0 || g.stride_w <= 0 ||
      g.dilation_h <= 0 || g.dilation_w <= 0 || g.groups <= 0 || g.pad_top < 0 || g.pad_left < 0 ||
      g.pad_bottom < 0 || g.pad_right < 0) {
    fail(
        "conv: invalid geometry (batch {}, channels {}->{}, input {}x{}, kernel {}x{}, stride "
        "{}x{}, dilation {}x{}, groups {}, pads {},{},{},{})",
        g.batch, g.in_channels, g.out_channels, g.in_h, g.in_w, g.kernel_h, g.kernel_w, g.stride_h,
        g.stride_w, g.dilation_h, g.dilation_w, g.groups, g.pad_top, g.pad_left, g.pad_bottom,
        g.pad_right);
  }
  if (g.in_channels % g.groups != 0 || g.out_channels % g.groups != 0) {
    fail("conv: groups {} must divide in_channels {} and out_channels {}", g.groups, g.in_channels,
         g.out_channels);
  }
  const std::int64_t expect_h = math::window_output_size(g.in_h, g.kernel_h, g.stride_h, g.pad_top,
                                                         g.pad_bottom, g.dilation_h, false);
  const std::int64_t expect_w = math::window_output_size(g.in_w, g.kernel_w, g.stride_w, g.pad_left,
                                                         g.pad_right, g.dilation_w, false);
  if (g.out_h != expect_h || g.out_w != expect_w) {
    fail("conv: output size {}x{} does not match the geometry, which gives {}x{}", g.out_h, g.out_w,
         expect_h, expect_w);
  }
  group_m_ = g.out_channels / g.groups;
  group_k_ = g.in_channels / g.groups * g.kernel_h * g.kernel_w;
  const auto weight_size = static_cast<std::size_t>(g.out_channels * group_k_);
  if (weight.size() != weight_size) {
    fail("conv: weight has {} values, expected {} ({}x{}x{}x{})", weight.size(), weight_size,
         g.out_channels, g.in_channels / g.groups, g.kernel_h, g.kernel_w);
  }
  if (!bias.empty() && bias.size() != static_cast<std::size_t>(g.out_channels)) {
    fail("conv: bias has {} values, expected {}", bias.size(), g.out_channels);
  }

  if (g.in_channels == g.groups) {
    depthwise_ = std::make_unique<DepthwiseConvCpu>(g, weight, bias);
    return;
  }
  if (OneDnnConv::wanted(g)) {
    onednn_ = OneDnnConv::make(g, weight, bias);
    if (onednn_) return;
  }

  const std::int64_t mr = kernel_->mr;
  m_padded_ = gemm::round_up(group_m_, mr);
  columns_ = g.out_h * g.out_w;
  col_strips_ = gemm::ceil_div(columns_, kernel_->nr);
  packed_weight_ = gemm::PackedBuffer(static_cast<std::size_t>(g.groups * m_padded_ * group_k_));
  for (std::int64_t group = 0; group < g.groups; ++group) {
    gemm::pack_a(weight.data() + group * group_m_ * group_k_, group_k_, group_m_, group_k_, mr,
                 packed_weight_.data() + group * m_padded_ * group_k_);
  }
  if (!bias.empty()) {
    bias_.assign(static_cast<std::size_t>(g.groups * m_padded_), 0.0f);
    for (std::int64_t group = 0; group < g.groups; ++group) {
      std::copy_n(bias.data() + group * group_m_, group_m_, bias_.data() + group * m_padded_);
    }
  }

  const bool pointwise = g.pointwise();
  view_in_h_ = pointwise ? 1 : g.in_h;
  view_in_w_ = pointwise ? g.in_h * g.in_w : g.in_w;
  view_out_w_ = pointwise ? columns_ : g.out_w;
  kw_begin_.resize(static_cast<std::size_t>(g.kernel_w));
  kw_end_.resize(static_cast<std::size_t>(g.kernel_w));
  for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
    // Input column ow * stride + shift must lie in [0, in_w).
    const std::int64_t shift = kw * g.dilation_w - g.pad_left;
    const std::int64_t begin = -floor_div(shift, g.stride_w);  // ceil(-shift / stride)
    const std::int64_t end = floor_div(view_in_w_ - 1 - shift, g.stride_w) + 1;
    kw_begin_[static_cast<std::size_t>(kw)] = std::clamp<std::int64_t>(begin, 0, view_out_w_);
    kw_end_[static_cast<std::size_t>(kw)] =
        std::clamp<std::int64_t>(end, kw_begin_[static_cast<std::size_t>(kw)], view_out_w_);
  }
  if (g.groups == 1) {
    // B read in place (conv_direct_cpu.cpp): rows (c, kh, kw) in the weights' order.
    // pointwise: the input itself is the one phase, no padding (cpu/phases.hpp).
    direct_ = pointwise ? Direct::pointwise : Direct::phases;
    phases_ =
        PhaseLayout::make(g.in_h, g.in_w, g.pad_top, g.pad_left, g.pad_top + g.in_h + g.pad_bottom,
                          g.pad_left + g.in_w + g.pad_right, g.stride_h, g.stride_w);
    phases_.read_by(g.kernel_h, g.dilation_h, g.kernel_w, g.dilation_w);
    flat_columns_ = (g.out_h - 1) * phases_.phase_w + g.out_w;
    // The flat run computes (phase width - out_w) junk columns per row; where that costs more
    // column strips than im2col's copy saves (~10-17% of a conv's time), as for a 1x7 conv on
    // a 17x17 map (26% junk) or a 1x3 on 8x8, im2col stays. Measured single-threaded: 1x7 on
    // 17x17 direct 1.40 ms vs im2col 1.14; 3x3 on 56x56 (4% more strips) 2.41 vs 2.60.
    const std::int64_t direct_strips = gemm::ceil_div(flat_columns_, kernel_->nr);
    if (direct_strips * 10 > col_strips_ * 11) direct_ = Direct::none;
  }
  if (direct_ != Direct::none) {
    // Row (c, kh, kw) of B: channel c's phases, at the tap's offset.
    b_offsets_.reserve(static_cast<std::size_t>(group_k_));
    for (std::int64_t c = 0; c < g.in_channels; ++c) {
      for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
        for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
          b_offsets_.push_back(c * phases_.floats() +
                               phases_.tap_offset(kh * g.dilation_h, kw * g.dilation_w));
        }
      }
    }
  }
  flat_avx512_ = std::string_view(kernel_->name) == "avx512";
  if (direct_ == Direct::pointwise && flat_avx512_) {
    pointwise_rows_ = &gemm::avx512_rows_kernel(g.out_channels);
  }
#if defined(CGR_CONV_X86)
  // Gather indices are 32-bit: keep to rows they can address.
  __builtin_cpu_init();
  im2col_avx512_ = kernel_->nr == 32 && __builtin_cpu_supports("avx512f") &&
                   __builtin_cpu_supports("bmi2") &&
                   (g.stride_w == 1 || (view_in_w_ + 64) * g.stride_w < (std::int64_t{1} << 30));
#endif
}

ConvKernelCpu::TaskSplit ConvKernelCpu::split_tasks(std::int64_t groups, std::int64_t strips,
                                                    bool by_columns, std::int64_t threads) const {
  const std::int64_t mr = kernel_->mr;
  const std::int64_t nr = kernel_->nr;
  const std::int64_t m_strips = m_padded_ / mr;
  // By row blocks: all row strips per task unless that leaves threads idle and there is
  // enough work to share. Splitting by rows (not columns) gives each thread a disjoint part
  // of the weights, so the threads share the weight stream instead of both reading all of it.
  std::int64_t task_m_strips = m_strips;
  if (!by_columns && threads > 1) {
    while (task_m_strips > 1 && groups * gemm::ceil_div(m_strips, task_m_strips) < 4 * threads &&
           (task_m_strips / 2) * mr * group_k_ * strips * nr >= kTaskMacs) {
      task_m_strips = gemm::ceil_div(task_m_strips, 2);
    }
  }
  const std::int64_t item_macs =
      by_columns ? m_strips * mr * group_k_ * nr : task_m_strips * mr * group_k_ * strips * nr;
  return {task_m_strips, gemm::ceil_div(m_strips, task_m_strips),
          std::max<std::int64_t>(1, gemm::ceil_div(kTaskMacs, item_macs))};
}

void ConvKernelCpu::set_channels_last(bool input, bool output) {
  if (onednn_ != nullptr) return onednn_->set_channels_last(input, output);
  if (depthwise_ != nullptr) return depthwise_->set_channels_last(input, output);
  if (!input && !output) return;
  if (pointwise_rows_ == nullptr) {
    fail("conv: cgr's GEMM computes this convolution on NCHW values only");
  }
  input_nhwc_ = input;
  output_nhwc_ = output;
  // W^T from the packed weights (row strips of the NCHW path's kernel), which the NCHW path
  // alone reads.
  const ConvGeometry& g = geometry_;
  const std::int64_t mr = kernel_->mr;
  const std::int64_t nr = pointwise_rows_->nr;
  std::vector<float> weight(static_cast<std::size_t>(g.out_channels * group_k_));
  for (std::int64_t m = 0; m < g.out_channels; ++m) {
    for (std::int64_t k = 0; k < group_k_; ++k) {
      weight[static_cast<std::size_t>(m * group_k_ + k)] =
          packed_weight_.data()[(m / mr * group_k_ + k) * mr + m % mr];
    }
  }
  packed_weight_t_ =
      gemm::PackedBuffer(static_cast<std::size_t>(group_k_ * gemm::round_up(g.out_channels, nr)));
  gemm::pack_b_transposed(weight.data(), group_k_, g.out_channels, group_k_, nr,
                          packed_weight_t_.data());
  if (!bias_.empty()) {
    col_bias_.assign(static_cast<std::size_t>(gemm::round_up(g.out_channels, nr)), 0.0f);
    std::copy_n(bias_.data(), g.out_channels, col_bias_.data());
  }
  packed_weight_ = gemm::PackedBuffer();
}

std::size_t ConvKernelCpu::workspace_bytes() const {
  if (depthwise_) return 0;
  if (onednn_) return onednn_->workspace_bytes();
  if (input_nhwc_ || output_nhwc_) {
    // An NCHW output's partial sums between passes over K (channels-last, like the tiles).
    return !output_nhwc_ && group_k_ > gemm::kKc
               ? static_cast<std::size_t>(columns_ * geometry_.out_channels) * sizeof(float)
               : 0;
  }
  const std::int64_t nr = kernel_->nr;
  if (direct_ == Direct::pointwise) return static_cast<std::size_t>(group_k_ * nr) * sizeof(float);
  if (direct_ == Direct::phases) {
    // The phases with nr floats of slack (run_direct), then the flat result.
    const ConvGeometry& g = geometry_;
    const std::int64_t phases = gemm::round_up(g.in_channels * phases_.floats() + nr, 16);
    return static_cast<std::size_t>(phases + g.out_channels * g.out_h * phases_.phase_w) *
           sizeof(float);
  }
  return static_cast<std::size_t>(geometry_.groups * group_k_ * col_strips_ * kernel_->nr) *
         sizeof(float);
}

void ConvKernelCpu::im2col_strip(const float* group_input, std::int64_t strip, float* dst) const {
  const ConvGeometry& g = geometry_;
  const std::int64_t nr = kernel_->nr;
  const std::int64_t first = strip * nr;
  const std::int64_t count = std::min(nr, columns_ - first);

  Segment segments[gemm::kMaxNr];
  std::int64_t segment_count = 0;
  for (std::int64_t column = first; column < first + count;) {
    const std::int64_t oh = column / view_out_w_;
    const std::int64_t ow = column % view_out_w_;
    const std::int64_t length = std::min(view_out_w_ - ow, first + count - column);
    segments[segment_count++] = Segment{oh * g.stride_h - g.pad_top, ow, length, column - first};
    column += length;
  }

  StripSource source;
  source.input = group_input;
  source.channels = g.in_channels / g.groups;
  source.plane = g.in_h * g.in_w;
  source.in_h = view_in_h_;
  source.in_w = view_in_w_;
  source.kernel_h = g.kernel_h;
  source.kernel_w = g.kernel_w;
  source.dilation_h = g.dilation_h;
  source.dilation_w = g.dilation_w;
  source.pad_left = g.pad_left;
  source.stride_w = g.stride_w;
  source.kw_begin = kw_begin_.data();
  source.kw_end = kw_end_.data();
#if defined(CGR_CONV_X86)
  if (im2col_avx512_) {
    im2col_rows_avx512(source, segments, segment_count, dst);
    return;
  }
#endif
  im2col_rows(source, segments, segment_count, count, nr, dst);
}

void ConvKernelCpu::run(const float* input, const float* residual, float* output, float* workspace,
                        const math::Activation& activation, ThreadPool* pool) const {
  if (depthwise_) {
    depthwise_->run(input, residual, output, activation, pool);
    return;
  }
  if (onednn_) {
    if (geometry_.batch != 0) onednn_->run(input, residual, output, workspace, activation, pool);
    return;
  }
  if (input_nhwc_ || output_nhwc_) {
    if (columns_ != 0 && geometry_.batch != 0) {
      run_pointwise_rows(input, residual, output, workspace, activation, pool);
    }
    return;
  }
  if (direct_ != Direct::none) {
    if (columns_ != 0 && geometry_.batch != 0) {
      run_direct(input, residual, output, workspace, activation, pool);
    }
    return;
  }
  // ReLU and Clip run in the micro-kernel's registers; any other activation over each stored
  // tile.
  const gemm::GemmActivation epilogue_activation = gemm::gemm_activation(activation);
  const ConvGeometry& g = geometry_;
  if (columns_ == 0 || g.batch == 0) return;
  const std::int64_t mr = kernel_->mr;
  const std::int64_t nr = kernel_->nr;
  const std::int64_t groups = g.groups;
  const std::int64_t strips = col_strips_;
  const std::int64_t m_strips = m_padded_ / mr;
  const std::int64_t panel = group_k_ * strips * nr;  // floats of one group's panel
  const std::int64_t threads = pool ? pool->size() : 1;

  // Strips im2col'd and multiplied together: a panel block that fits in L2.
  const std::int64_t block_strips = std::clamp<std::int64_t>(
      kPanelBlockBytes / (group_k_ * nr * static_cast<std::int64_t>(sizeof(float))), 1, strips);
  // Which operand gets read more than once: the fused path multiplies every block of strips
  // by all of a group's weights, so it reads them once per block; the unfused path below
  // reads the whole im2col panel once per row block. Big weights (a 3x3 512->512 conv has
  // 9.4 MB; a network's weights outgrow L3, so they come from DRAM) are better read once,
  // unfused, as long as the panel stays cached for its re-reads; weights that fit in L2, or
  // a panel too big for the caches, stay fused.
  const auto float_bytes = static_cast<std::int64_t>(sizeof(float));
  const bool panel_cached = groups * panel * float_bytes <= kUnfusedPanelBytes;
  const bool fused =
      (weights_cached() || !panel_cached) && (threads == 1 || groups * strips >= 4 * threads);
  const TaskSplit split = split_tasks(groups, strips, fused, threads);
  const std::int64_t task_m_strips = split.task_m_strips;
  const std::int64_t m_blocks = split.m_blocks;
  const std::int64_t gemm_grain = split.grain;

  const std::int64_t in_image = g.in_channels * g.in_h * g.in_w;
  const std::int64_t out_image = g.out_channels * columns_;
  for (std::int64_t n = 0; n < g.batch; ++n) {
    const float* image = input + n * in_image;
    float* out = output + n * out_image;
    const float* res = residual ? residual + n * out_image : nullptr;

    auto product = [&](std::int64_t group) {
      gemm::PackedProduct p;
      p.kernel = kernel_;
      p.m = group_m_;
      p.n = columns_;
      p.k = group_k_;
      p.a = packed_weight_.data() + group * m_padded_ * group_k_;
      p.b = workspace + group * panel;
      p.c = out + group * group_m_ * columns_;
      p.ldc = columns_;
      p.row_bias = bias_.empty() ? nullptr : bias_.data() + group * m_padded_;
      p.residual = res ? res + group * group_m_ * columns_ : nullptr;
      p.ldr = columns_;
      p.activation = epilogue_activation;
      return p;
    };
    auto group_input = [&](std::int64_t group) {
      return image + group * (g.in_channels / groups) * g.in_h * g.in_w;
    };
    auto strip_panel = [&](std::int64_t group, std::int64_t strip) {
      return workspace + group * panel + strip * group_k_ * nr;
    };

    if (fused) {
      // Fused: each task im2cols a block of strips and multiplies it while it is in cache.
      // Items: (group, column strip).
      gemm::parallel_range(
          pool, groups * strips, gemm_grain, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t item = begin; item < end;) {
              const std::int64_t group = item / strips;
              const std::int64_t s_end = std::min(end - group * strips, strips);
              const std::int64_t s_begin = item - group * strips;
              // Every block of this range goes through the panel slot of its first strips, so
              // im2col writes to lines still in cache instead of fresh ones.
              gemm::PackedProduct p = product(group);
              float* slot = strip_panel(group, s_begin);
              p.b = slot;
              for (std::int64_t s0 = s_begin; s0 < s_end; s0 += block_strips) {
                const std::int64_t s1 = std::min(s_end, s0 + block_strips);
                for (std::int64_t s = s0; s < s1; ++s) {
                  im2col_strip(group_input(group), s, slot + (s - s0) * group_k_ * nr);
                }
                p.b_first = s0;
                gemm::gemm_packed(p, 0, m_strips, s0, s1);
              }
              item = group * strips + s_end;
            }
          });
      continue;
    }

    // Unfused: im2col first, then items (group, row block), each over all column strips. In
    // the GEMM a kKc-deep slice of the task's weights then meets every strip while in L2,
    // and only kKc x nr of each strip's panel is live at a time, so no panel blocking.
    const std::int64_t im2col_grain =
        std::max<std::int64_t>(1, gemm::ceil_div(kTaskIm2colFloats, group_k_ * nr));
    gemm::parallel_range(pool, groups * strips, im2col_grain,
                         [&](std::int64_t begin, std::int64_t end) {
                           for (std::int64_t item = begin; item < end; ++item) {
                             const std::int64_t group = item / strips;
                             const std::int64_t s = item % strips;
                             im2col_strip(group_input(group), s, strip_panel(group, s));
                           }
                         });
    gemm::parallel_range(pool, groups * m_blocks, gemm_grain,
                         [&](std::int64_t begin, std::int64_t end) {
                           for (std::int64_t item = begin; item < end; ++item) {
                             const std::int64_t group = item / m_blocks;
                             const std::int64_t m0 = (item % m_blocks) * task_m_strips;
                             gemm::gemm_packed(product(group), m0,
                                               std::min(m_strips, m0 + task_m_strips), 0, strips);
                           }
                         });
  }
}

namespace {

// An NCHW image as a pointwise product's tiles see it: rows are points, columns channels.
struct PlanesSink {
  float* output = nullptr;
  const float* residual = nullptr;
  std::int64_t plane = 0;  // points per channel
};

void scatter_to_planes(const void* context, float* tile, std::int64_t ld, std::int64_t row0,
                       std::int64_t col0, std::int64_t rows, std::int64_t cols) {
  const auto& sink = *static_cast<const PlanesSink*>(context);
  for (std::int64_t j = 0; j < cols; ++j) {
    float* out = sink.output + (col0 + j) * sink.plane + row0;
    for (std::int64_t r = 0; r < rows; ++r)
      out[r] = tile[r * ld + j];
  }
}

void gather_from_planes(const void* context, float* tile, std::int64_t ld, std::int64_t row0,
                        std::int64_t col0, std::int64_t rows, std::int64_t cols) {
  const auto& sink = *static_cast<const PlanesSink*>(context);
  for (std::int64_t j = 0; j < cols; ++j) {
    const float* res = sink.residual + (col0 + j) * sink.plane + row0;
    for (std::int64_t r = 0; r < rows; ++r)
      tile[r * ld + j] = res[r];
  }
}

}  // namespace

void ConvKernelCpu::run_pointwise_rows(const float* input, const float* residual, float* output,
                                       float* workspace, const math::Activation& activation,
                                       ThreadPool* pool) const {
  const ConvGeometry& g = geometry_;
  const gemm::MicroKernel& kernel = *pointwise_rows_;
  const std::int64_t points = columns_;
  const std::int64_t m_strips = gemm::ceil_div(points, kernel.mr);
  const std::int64_t n_strips = gemm::ceil_div(g.out_channels, kernel.nr);
  // Items: row strips (points), each over every column strip, so a strip's A is packed once.
  const std::int64_t grain = std::max<std::int64_t>(
      1, gemm::ceil_div(kRowsTaskMacs, kernel.mr * group_k_ * n_strips * kernel.nr));
  for (std::int64_t n = 0; n < g.batch; ++n) {
    const std::int64_t in_at = n * g.in_channels * points;
    const std::int64_t out_at = n * g.out_channels * points;
    gemm::RowsProduct p;
    p.kernel = &kernel;
    p.m = points;
    p.n = g.out_channels;
    p.k = group_k_;
    p.a = input + in_at;
    p.lda = input_nhwc_ ? g.in_channels : 1;
    p.a_k_stride = input_nhwc_ ? 1 : points;
    p.a_in_place = true;
    p.b = packed_weight_t_.data();
    p.col_bias = col_bias_.empty() ? nullptr : col_bias_.data();
    p.activation = gemm::gemm_activation(activation);
    PlanesSink planes;
    if (output_nhwc_) {
      p.c = output + out_at;
      p.ldc = g.out_channels;
      p.residual = residual != nullptr ? residual + out_at : nullptr;
      p.ldr = g.out_channels;
    } else {
      planes = {output + out_at, residual != nullptr ? residual + out_at : nullptr, points};
      p.c = workspace;  // partial sums only (K over one pass: untouched)
      p.ldc = g.out_channels;
      p.sink = {scatter_to_planes, residual != nullptr ? gather_from_planes : nullptr, &planes};
    }
    gemm::parallel_range(pool, m_strips, grain, [&](std::int64_t begin, std::int64_t end) {
      gemm::gemm_rows(p, begin, end, 0, n_strips);
    });
  }
}

}  // namespace cgr::cpu
