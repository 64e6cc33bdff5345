// See pool_cpu.hpp.
#include "cpu/pool_cpu.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/gemm.hpp"
#include "cpu/lanes.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define CGR_POOL_X86 1
#include <immintrin.h>
#endif

namespace cgr::cpu {
namespace {

// Outputs per task, at least: planes of a few thousand elements each.
constexpr std::size_t kTaskOutputs = 1 << 14;
// The same for the lane path, a few times faster per output: GoogLeNet's 832 x 7x7 pools
// otherwise made three tasks for two threads.
constexpr std::int64_t kLaneTaskOutputs = 1 << 12;
// Floats of slack after the phases: a vector block may read up to 64 past the last output.
constexpr std::int64_t kSlack = 64;

// out[t] = the window's max / sum over taps for t in [0, count): plain loops, tap-major.
void pool_flat_generic(bool max, const float* phases, const std::int64_t* offsets,
                       std::int64_t taps, float* out, std::int64_t count) {
  std::fill_n(out, static_cast<std::size_t>(count),
              max ? -std::numeric_limits<float>::infinity() : 0.0f);
  for (std::int64_t k = 0; k < taps; ++k) {
    const float* __restrict src = phases + offsets[k];
    float* __restrict acc = out;
    if (max) {
      for (std::int64_t t = 0; t < count; ++t)
        acc[t] = math::nan_max(acc[t], src[t]);
    } else {
      for (std::int64_t t = 0; t < count; ++t)
        acc[t] = acc[t] + src[t];
    }
  }
}

#if defined(CGR_POOL_X86)
// nan_max per lane: the candidate wins when greater or NaN.
__attribute__((target("avx512f"), always_inline)) inline __m512 max_step(__m512 acc, __m512 x) {
  const __mmask16 take =
      _mm512_cmp_ps_mask(x, acc, _CMP_GT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_mov_ps(acc, take, x);
}

template <bool Max, int V>
__attribute__((target("avx512f"), always_inline)) inline void pool_block_avx512(
    const float* phases, const std::int64_t* offsets, std::int64_t taps, float* out,
    std::int64_t t0, std::int64_t count) {
  __m512 acc[V];
  for (int v = 0; v < V; ++v)
    acc[v] = _mm512_set1_ps(Max ? -std::numeric_limits<float>::infinity() : 0.0f);
  for (std::int64_t k = 0; k < taps; ++k) {
    const float* src = phases + offsets[k] + t0;
    for (int v = 0; v < V; ++v) {
      const __m512 x = _mm512_loadu_ps(src + 16 * v);
      acc[v] = Max ? max_step(acc[v], x) : _mm512_add_ps(acc[v], x);
    }
  }
  for (int v = 0; v < V - 1; ++v)
    _mm512_storeu_ps(out + t0 + 16 * v, acc[v]);
  const std::int64_t last = t0 + 16 * (V - 1);
  const std::int64_t rest = std::min<std::int64_t>(16, count - last);
  _mm512_mask_storeu_ps(out + last, static_cast<__mmask16>((1u << rest) - 1u), acc[V - 1]);
}

template <bool Max>
__attribute__((target("avx512f"))) void pool_flat_avx512(const float* phases,
                                                         const std::int64_t* offsets,
                                                         std::int64_t taps, float* out,
                                                         std::int64_t count) {
  std::int64_t t0 = 0;
  for (; t0 + 64 <= count; t0 += 64)
    pool_block_avx512<Max, 4>(phases, offsets, taps, out, t0, count);
  const std::int64_t vectors = (count - t0 + 15) / 16;  // 0 to 4
  if (vectors == 4) pool_block_avx512<Max, 4>(phases, offsets, taps, out, t0, count);
  if (vectors == 3) pool_block_avx512<Max, 3>(phases, offsets, taps, out, t0, count);
  if (vectors == 2) pool_block_avx512<Max, 2>(phases, offsets, taps, out, t0, count);
  if (vectors == 1) pool_block_avx512<Max, 1>(phases, offsets, taps, out, t0, count);
}

// Output points per strip of the lane path: its buffer fills 16 KiB.
constexpr std::int64_t kStripPoints = 256;

// V outputs along a row, `step` floats apart in the padded copy from `at`, into `result`
// (V x 16 floats): the window's max / sum over the taps in order.
template <bool Max, int V>
__attribute__((target("avx512f"), always_inline)) inline void lane_pool_block(
    const float* at, std::int64_t step, const std::int64_t* offsets, std::int64_t taps,
    float* result) {
  __m512 acc[V];
  for (int v = 0; v < V; ++v)
    acc[v] = _mm512_set1_ps(Max ? -std::numeric_limits<float>::infinity() : 0.0f);
  for (std::int64_t k = 0; k < taps; ++k) {
    const float* p = at + offsets[k];
    for (int v = 0; v < V; ++v) {
      const __m512 x = _mm512_loadu_ps(p + v * step);
      acc[v] = Max ? max_step(acc[v], x) : _mm512_add_ps(acc[v], x);
    }
  }
  for (int v = 0; v < V; ++v)
    _mm512_storeu_ps(result + v * lanes::kLanes, acc[v]);
}

// Output rows [oh0, oh1) of a block: result[((oh - oh0) * out_w + ow) * 16 + lane].
template <bool Max>
__attribute__((target("avx512f"))) void lane_pool(const float* padded, std::int64_t padded_w,
                                                  const Pool2dGeometry& g,
                                                  const std::int64_t* offsets, std::int64_t taps,
                                                  std::int64_t oh0, std::int64_t oh1,
                                                  float* result) {
  constexpr std::int64_t L = lanes::kLanes;
  const std::int64_t step = g.stride_w * L;
  for (std::int64_t oh = oh0; oh < oh1; ++oh) {
    const float* row = padded + oh * g.stride_h * padded_w * L;
    float* out = result + (oh - oh0) * g.out_w * L;
    std::int64_t ow = 0;
    for (; ow + 8 <= g.out_w; ow += 8)
      lane_pool_block<Max, 8>(row + ow * step, step, offsets, taps, out + ow * L);
    if (ow + 4 <= g.out_w) {
      lane_pool_block<Max, 4>(row + ow * step, step, offsets, taps, out + ow * L);
      ow += 4;
    }
    if (ow + 2 <= g.out_w) {
      lane_pool_block<Max, 2>(row + ow * step, step, offsets, taps, out + ow * L);
      ow += 2;
    }
    if (ow < g.out_w) lane_pool_block<Max, 1>(row + ow * step, step, offsets, taps, out + ow * L);
  }
}

// A strip's `count` points out to `planes` planes `plane` floats apart, divided by the
// average's divisor per point (null: max).
CGR_LANES_INTRINSICS_BEGIN  // see lanes::transpose16
    __attribute__((target("avx512f"))) void
    lane_pool_out(const float* strip, std::int64_t count, std::int64_t planes, const float* divisor,
                  float* out, std::int64_t plane) {
  for (std::int64_t t0 = 0; t0 < count; t0 += lanes::kLanes) {
    const std::int64_t n = std::min(lanes::kLanes, count - t0);
    const auto mask = static_cast<__mmask16>((1u << n) - 1u);
    __m512 r[16];
    lanes::load_points(strip, t0, n, r);
    const __m512 d = divisor != nullptr
                         ? _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), mask, divisor + t0)
                         : _mm512_set1_ps(1.0f);
    for (std::int64_t c = 0; c < planes; ++c) {
      const __m512 v = divisor != nullptr ? _mm512_div_ps(r[c], d) : r[c];
      _mm512_mask_storeu_ps(out + c * plane + t0, mask, v);
    }
  }
}
CGR_LANES_INTRINSICS_END

// The same into an NHWC output: point t's lanes [0, planes) to out + t * stride, each divided
// by the point's divisor (the same division per element, so the same bits).
__attribute__((target("avx512f"))) void lane_pool_out_nhwc(const float* strip, std::int64_t count,
                                                           std::int64_t planes,
                                                           const float* divisor, float* out,
                                                           std::int64_t stride) {
  const __mmask16 mask = lanes::channel_mask(planes);
  for (std::int64_t t = 0; t < count; ++t) {
    __m512 v = _mm512_loadu_ps(strip + t * lanes::kLanes);
    if (divisor != nullptr) v = _mm512_div_ps(v, _mm512_set1_ps(divisor[t]));
    _mm512_mask_storeu_ps(out + t * stride, mask, v);
  }
}

// Output rows [oh0, oh1) of image n of an NHWC input, every channel: result[(point * channels
// + c)], point = (oh - oh0) * out_w + ow. The taps inside the image in (kh, kw) order, those in
// the padding skipped (the neutral value they would add changes no bit, see the top of
// pool_cpu.hpp); the average divided by its divisor per point, as lane_pool_out does.
template <bool Max>
__attribute__((target("avx512f"))) void nhwc_pool_rows(const float* image_nhwc,
                                                       std::int64_t channels,
                                                       const Pool2dGeometry& g,
                                                       const float* divisor, std::int64_t oh0,
                                                       std::int64_t oh1, float* result) {
  constexpr std::int64_t L = lanes::kLanes;
  // The taps k of a window starting at `first` that fall inside [0, size): [begin, end).
  auto inside = [](std::int64_t first, std::int64_t step, std::int64_t taps, std::int64_t size) {
    std::int64_t begin = 0, end = taps;
    while (begin < end && first + begin * step < 0)
      ++begin;
    while (end > begin && first + (end - 1) * step >= size)
      --end;
    return std::pair{begin, end};
  };
  // Per tap inside the window, floats from the window's first point; at most 64 taps here
  // (kernels larger than 8x8 take the generic loop below).
  std::int64_t offsets[64];
  for (std::int64_t oh = oh0; oh < oh1; ++oh) {
    const std::int64_t top = oh * g.stride_h - g.pad_top;
    const auto [kh0, kh1] = inside(top, g.dilation_h, g.kernel_h, g.in_h);
    for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
      const std::int64_t left = ow * g.stride_w - g.pad_left;
      const auto [kw0, kw1] = inside(left, g.dilation_w, g.kernel_w, g.in_w);
      float* out = result + ((oh - oh0) * g.out_w + ow) * channels;
      const __m512 d = _mm512_set1_ps(Max ? 1.0f : divisor[oh * g.out_w + ow]);
      const float* origin = image_nhwc + (top * g.in_w + left) * channels;
      std::int64_t taps = 0;
      const bool listed = (kh1 - kh0) * (kw1 - kw0) <= 64;
      for (std::int64_t kh = kh0; listed && kh < kh1; ++kh) {
        for (std::int64_t kw = kw0; kw < kw1; ++kw)
          offsets[taps++] = (kh * g.dilation_h * g.in_w + kw * g.dilation_w) * channels;
      }
      std::int64_t c0 = 0;
      // Four channel blocks at a time where the taps are listed: four independent chains of
      // max / add steps instead of one (a chain's steps wait on each other).
      for (; listed && c0 + 4 * L <= channels; c0 += 4 * L) {
        __m512 acc[4];
        for (auto& a : acc)
          a = _mm512_set1_ps(Max ? -std::numeric_limits<float>::infinity() : 0.0f);
        for (std::int64_t t = 0; t < taps; ++t) {
          const float* p = origin + offsets[t] + c0;
          for (int v = 0; v < 4; ++v) {
            const __m512 x = _mm512_loadu_ps(p + v * L);
            acc[v] = Max ? max_step(acc[v], x) : _mm512_add_ps(acc[v], x);
          }
        }
        for (int v = 0; v < 4; ++v)
          _mm512_storeu_ps(out + c0 + v * L, Max ? acc[v] : _mm512_div_ps(acc[v], d));
      }
      for (; c0 < channels; c0 += L) {
        const auto mask = static_cast<__mmask16>((1u << std::min(L, channels - c0)) - 1u);
        __m512 acc = _mm512_set1_ps(Max ? -std::numeric_limits<float>::infinity() : 0.0f);
        if (listed) {
          for (std::int64_t t = 0; t < taps; ++t) {
            const __m512 x = _mm512_maskz_loadu_ps(mask, origin + offsets[t] + c0);
            acc = Max ? max_step(acc, x) : _mm512_add_ps(acc, x);
          }
        } else {
          for (std::int64_t kh = kh0; kh < kh1; ++kh) {
            for (std::int64_t kw = kw0; kw < kw1; ++kw) {
              const __m512 x = _mm512_maskz_loadu_ps(
                  mask, origin + (kh * g.dilation_h * g.in_w + kw * g.dilation_w) * channels + c0);
              acc = Max ? max_step(acc, x) : _mm512_add_ps(acc, x);
            }
          }
        }
        _mm512_mask_storeu_ps(out + c0, mask, Max ? acc : _mm512_div_ps(acc, d));
      }
    }
  }
}
#endif

}  // namespace

PoolKernelCpu::PoolKernelCpu(const Pool2dGeometry& geometry, PoolKind kind)
    : g_(geometry), kind_(kind) {
  const Pool2dGeometry& g = g_;
  // Tall and wide enough for every window, ceil mode's past-the-end padding included.
  const std::int64_t padded_h =
      std::max(g.pad_top + g.in_h + g.pad_bottom,
               (g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1);
  const std::int64_t padded_w =
      std::max(g.pad_left + g.in_w + g.pad_right,
               (g.out_w - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1);
  phases_ = PhaseLayout::make(g.in_h, g.in_w, g.pad_top, g.pad_left, padded_h, padded_w, g.stride_h,
                              g.stride_w);
  flat_count_ = std::max<std::int64_t>(0, (g.out_h - 1) * phases_.phase_w + g.out_w);
  scratch_floats_ = phases_.floats() + kSlack + g.out_h * phases_.phase_w;
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    for (std::int64_t kw = 0; kw < g.kernel_w; ++kw)
      tap_offsets_.push_back(phases_.tap_offset(kh * g.dilation_h, kw * g.dilation_w));
  }
  if (kind_ == PoolKind::average) {
    auto lengths = [&](std::int64_t out, std::int64_t in, std::int64_t kernel, std::int64_t stride,
                       std::int64_t pad_begin, std::int64_t pad_end) {
      std::vector<std::int64_t> result(static_cast<std::size_t>(std::max<std::int64_t>(out, 0)));
      for (std::int64_t o = 0; o < out; ++o) {
        const math::WindowAxis w =
            math::pool_window_axis(o, in, kernel, stride, pad_begin, pad_end);
        result[static_cast<std::size_t>(o)] =
            g.count_include_pad ? w.padded_length : w.end - w.begin;
      }
      return result;
    };
    divisor_h_ = lengths(g.out_h, g.in_h, g.kernel_h, g.stride_h, g.pad_top, g.pad_bottom);
    divisor_w_ = lengths(g.out_w, g.in_w, g.kernel_w, g.stride_w, g.pad_left, g.pad_right);
  }
#if defined(CGR_POOL_X86)
  __builtin_cpu_init();
  avx512_ = __builtin_cpu_supports("avx512f");
  // Planes in lanes where the GEMM runs AVX-512 too (so the tests' kernel override, gemm.hpp,
  // also picks the flat path here).
  // Every input row and column has a cell, also those no window reads (a clipped last window).
  padded_h_ = std::max(padded_h, g.pad_top + g.in_h);
  padded_w_ = std::max(padded_w, g.pad_left + g.in_w);
  lanes_ = avx512_ && std::string_view(gemm::best_kernel().name) == "avx512" &&
           padded_h_ * padded_w_ * lanes::kLanes <= lanes::kMaxPaddedFloats;
#endif
  if (!lanes_) return;
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    for (std::int64_t kw = 0; kw < g.kernel_w; ++kw)
      lane_offsets_.push_back((kh * g.dilation_h * padded_w + kw * g.dilation_w) * lanes::kLanes);
  }
  if (kind_ == PoolKind::average) {
    // The flat path's divisor, float(dh * dw), per output point.
    divisor_.resize(static_cast<std::size_t>(std::max<std::int64_t>(0, g.out_h * g.out_w)));
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        divisor_[static_cast<std::size_t>(oh * g.out_w + ow)] = static_cast<float>(
            divisor_h_[static_cast<std::size_t>(oh)] * divisor_w_[static_cast<std::size_t>(ow)]);
      }
    }
  }
}

void PoolKernelCpu::set_channels_last_input(std::int64_t channels) {
  if (!lanes_ || channels <= 0 || g_.planes % channels != 0) {
    fail(
        "pool: a channels-last input needs the lane path and whole images ({} planes, {} "
        "channels)",
        g_.planes, channels);
  }
  nhwc_channels_ = channels;
}

bool PoolKernelCpu::can_write_channels_last(std::int64_t channels) const {
  return lanes_ && channels > 0 && g_.planes % channels == 0 &&
         (g_.planes == channels || channels % lanes::kLanes == 0);
}

void PoolKernelCpu::set_channels_last_output(std::int64_t channels) {
  if (!can_write_channels_last(channels) || (nhwc_channels_ != 0 && nhwc_channels_ != channels)) {
    fail(
        "pool: a channels-last output needs the lane path and blocks of 16 planes inside one "
        "image ({} planes, {} channels)",
        g_.planes, channels);
  }
  nhwc_output_channels_ = channels;
}

void PoolKernelCpu::run_nhwc(const float* x, float* y, ThreadPool& pool) const {
#if defined(CGR_POOL_X86)
  const Pool2dGeometry& g = g_;
  const std::int64_t channels = nhwc_channels_;
  const std::int64_t images = g.planes / channels;
  const std::int64_t out_plane = g.out_h * g.out_w;
  // Tasks of whole output rows over every channel: each reads its input rows once, each tap's
  // channels contiguous, and writes its strip out to the NCHW planes 16 channels at a time.
  const std::int64_t strip_rows = std::clamp<std::int64_t>(
      kLaneTaskOutputs / std::max<std::int64_t>(1, g.out_w * channels), 1, g.out_h);
  const std::int64_t strips = (g.out_h + strip_rows - 1) / strip_rows;
  pool.parallel_for(
      static_cast<std::size_t>(images * strips), 1, [&](std::size_t begin, std::size_t end) {
        const lanes::ThreadScratch scratch(
            nhwc_output_channels_ > 0 ? 0
                                      : static_cast<std::size_t>(strip_rows * g.out_w * channels));
        for (auto task = static_cast<std::int64_t>(begin); task < static_cast<std::int64_t>(end);
             ++task) {
          const std::int64_t n = task / strips;
          const std::int64_t oh0 = task % strips * strip_rows;
          const std::int64_t oh1 = std::min(g.out_h, oh0 + strip_rows);
          const float* image = x + n * g.in_h * g.in_w * channels;
          // An NHWC output: the strip is its rows [oh0, oh1).
          float* const strip = nhwc_output_channels_ > 0
                                   ? y + (n * out_plane + oh0 * g.out_w) * channels
                                   : scratch.data();
          if (kind_ == PoolKind::max) {
            nhwc_pool_rows<true>(image, channels, g, nullptr, oh0, oh1, strip);
          } else {
            nhwc_pool_rows<false>(image, channels, g, divisor_.data(), oh0, oh1, strip);
          }
          for (std::int64_t c0 = 0; nhwc_output_channels_ == 0 && c0 < channels;
               c0 += lanes::kLanes) {
            lanes::lanes_to_planes(
                strip + c0, (oh1 - oh0) * g.out_w, std::min(lanes::kLanes, channels - c0),
                y + (n * channels + c0) * out_plane + oh0 * g.out_w, out_plane, channels);
          }
        }
      });
#else
  (void)x, (void)y, (void)pool;
#endif
}

void PoolKernelCpu::run_lanes(const float* x, float* y, ThreadPool& pool) const {
#if defined(CGR_POOL_X86)
  const Pool2dGeometry& g = g_;
  constexpr std::int64_t L = lanes::kLanes;
  const bool max = kind_ == PoolKind::max;
  const std::int64_t blocks = (g.planes + L - 1) / L;
  const std::int64_t in_plane = g.in_h * g.in_w;
  const std::int64_t out_plane = g.out_h * g.out_w;
  const auto taps = static_cast<std::int64_t>(lane_offsets_.size());
  const std::int64_t padded_floats = padded_h_ * padded_w_ * L;
  const std::int64_t strip_rows = std::clamp<std::int64_t>(kStripPoints / g.out_w, 1, g.out_h);
  const lanes::PaddedImage image{g.in_h, g.in_w, g.pad_top, g.pad_left, padded_w_};
  const auto grain = static_cast<std::size_t>(
      std::max<std::int64_t>(1, kLaneTaskOutputs / (L * out_plane)));
  pool.parallel_for(
      static_cast<std::size_t>(blocks), grain, [&](std::size_t begin, std::size_t end) {
        // The padded copy, its padding cells at the neutral value for every block, then a
        // strip's result.
        const lanes::ThreadScratch scratch(
            static_cast<std::size_t>(padded_floats + strip_rows * g.out_w * L));
        float* const padded = scratch.data();
        float* const strip = padded + padded_floats;
        lanes::fill_padding(padded, padded_h_, image,
                            max ? -std::numeric_limits<float>::infinity() : 0.0f);
        for (auto block = static_cast<std::int64_t>(begin); block < static_cast<std::int64_t>(end);
             ++block) {
          const std::int64_t p0 = block * L;
          const std::int64_t planes = std::min(L, g.planes - p0);
          lanes::planes_to_lanes(x + p0 * in_plane, in_plane, planes, image, padded);
          for (std::int64_t oh0 = 0; oh0 < g.out_h; oh0 += strip_rows) {
            const std::int64_t rows = std::min(strip_rows, g.out_h - oh0);
            if (max) {
              lane_pool<true>(padded, padded_w_, g, lane_offsets_.data(), taps, oh0, oh0 + rows,
                              strip);
            } else {
              lane_pool<false>(padded, padded_w_, g, lane_offsets_.data(), taps, oh0, oh0 + rows,
                               strip);
            }
            const float* divisor = max ? nullptr : divisor_.data() + oh0 * g.out_w;
            if (const std::int64_t channels = nhwc_output_channels_; channels > 0) {
              // Image n's channels [c0, c0 + planes) of each point (the block lies in it).
              const std::int64_t n = p0 / channels, c0 = p0 % channels;
              lane_pool_out_nhwc(strip, rows * g.out_w, planes, divisor,
                                 y + (n * out_plane + oh0 * g.out_w) * channels + c0, channels);
              continue;
            }
            lane_pool_out(strip, rows * g.out_w, planes, divisor,
                          y + p0 * out_plane + oh0 * g.out_w, out_plane);
          }
        }
      });
#else
  (void)x, (void)y, (void)pool;
#endif
}

void PoolKernelCpu::run(const float* x, float* y, ThreadPool& pool) const {
  const Pool2dGeometry& g = g_;
  if (g.planes <= 0 || g.out_h <= 0 || g.out_w <= 0) return;
  if (nhwc_channels_ > 0) return run_nhwc(x, y, pool);
  if (lanes_) return run_lanes(x, y, pool);
  const auto plane_outputs = static_cast<std::size_t>(g.out_h * g.out_w);
  const std::size_t grain = std::max<std::size_t>(1, kTaskOutputs / plane_outputs);
  pool.parallel_for(static_cast<std::size_t>(g.planes), grain,
                    [&](std::size_t begin, std::size_t end) {
                      // The phases, their slack and the flat result; one allocation per task.
                      // Padding cells keep the neutral value for every plane.
                      std::vector<float> scratch(
                          static_cast<std::size_t>(scratch_floats_),
                          kind_ == PoolKind::max ? -std::numeric_limits<float>::infinity() : 0.0f);
                      for (std::size_t p = begin; p < end; ++p) {
                        plane(x + p * static_cast<std::size_t>(g.in_h * g.in_w),
                              y + p * plane_outputs, scratch.data());
                      }
                    });
}

void PoolKernelCpu::plane(const float* x, float* y, float* scratch) const {
  const Pool2dGeometry& g = g_;
  const bool max = kind_ == PoolKind::max;
  // The padding cells are the same in every plane and hold the neutral value from run() on.
  phases_.copy(x, scratch, false, 0.0f);
  float* flat = scratch + phases_.floats() + kSlack;
  const auto taps = static_cast<std::int64_t>(tap_offsets_.size());
#if defined(CGR_POOL_X86)
  if (avx512_) {
    if (max) {
      pool_flat_avx512<true>(scratch, tap_offsets_.data(), taps, flat, flat_count_);
    } else {
      pool_flat_avx512<false>(scratch, tap_offsets_.data(), taps, flat, flat_count_);
    }
  } else {
    pool_flat_generic(max, scratch, tap_offsets_.data(), taps, flat, flat_count_);
  }
#else
  pool_flat_generic(max, scratch, tap_offsets_.data(), taps, flat, flat_count_);
#endif
  for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
    const float* row = flat + oh * phases_.phase_w;
    float* out = y + oh * g.out_w;
    if (max) {
      for (std::int64_t ow = 0; ow < g.out_w; ++ow)
        out[ow] = row[ow];
      continue;
    }
    const std::int64_t dh = divisor_h_[static_cast<std::size_t>(oh)];
    for (std::int64_t ow = 0; ow < g.out_w; ++ow)
      out[ow] = row[ow] / static_cast<float>(dh * divisor_w_[static_cast<std::size_t>(ow)]);
  }
}

}  // namespace cgr::cpu
