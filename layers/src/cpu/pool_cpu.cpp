// See pool_cpu.hpp.
#include "cpu/pool_cpu.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr::cpu {
namespace {

// Outputs per task, at least: planes of a few thousand elements each.
constexpr std::size_t kTaskOutputs = 1 << 14;

struct MaxStep {
  float operator()(float acc, float x) const { return math::nan_max(acc, x); }
};
struct SumStep {
  float operator()(float acc, float x) const { return acc + x; }
};

// Taps k in [begin, end) of a window starting at `start` (dilation d) that land inside
// [0, size).
std::pair<std::int64_t, std::int64_t> valid_taps(std::int64_t start, std::int64_t d,
                                                 std::int64_t kernel, std::int64_t size) {
  // Undilated windows (nearly all) need no division.
  if (d == 1) {
    return {std::max<std::int64_t>(0, -start), std::clamp<std::int64_t>(size - start, 0, kernel)};
  }
  std::int64_t begin = start < 0 ? (-start + d - 1) / d : 0;
  std::int64_t end = start + (kernel - 1) * d < size ? kernel : (size - start + d - 1) / d;
  if (end < begin) end = begin;
  return {begin, end};
}

// acc[i] = step(acc[i], src[i]) over [0, n): the loop every path runs, kept simple so it
// vectorises.
template <typename Step>
void combine(float* __restrict acc, const float* __restrict src, std::int64_t n, Step step) {
  for (std::int64_t i = 0; i < n; ++i)
    acc[i] = step(acc[i], src[i]);
}

}  // namespace

PoolKernelCpu::PoolKernelCpu(const Pool2dGeometry& geometry, PoolKind kind)
    : g_(geometry), kind_(kind) {
  const Pool2dGeometry& g = g_;
  flat_ = g.stride_h == 1 && g.stride_w == 1;
  if (flat_) {
    // Wide and tall enough for every window, ceil mode's past the end padding included.
    padded_w_ =
        std::max(g.pad_left + g.in_w + g.pad_right, g.out_w + (g.kernel_w - 1) * g.dilation_w);
    padded_h_ =
        std::max(g.pad_top + g.in_h + g.pad_bottom, g.out_h + (g.kernel_h - 1) * g.dilation_h);
  }
  if (kind_ == PoolKind::average) {
    auto lengths = [&](std::int64_t out, std::int64_t in, std::int64_t kernel, std::int64_t stride,
                       std::int64_t pad_begin, std::int64_t pad_end) {
      std::vector<std::int64_t> result(static_cast<std::size_t>(out));
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
}

void PoolKernelCpu::run(const float* x, float* y, ThreadPool& pool) const {
  const Pool2dGeometry& g = g_;
  if (g.planes <= 0 || g.out_h <= 0 || g.out_w <= 0) return;
  const std::size_t plane_outputs =
      static_cast<std::size_t>(std::max<std::int64_t>(1, g.out_h * g.out_w));
  const std::size_t grain = std::max<std::size_t>(1, kTaskOutputs / plane_outputs);
  pool.parallel_for(
      static_cast<std::size_t>(g.planes), grain, [&](std::size_t begin, std::size_t end) {
        std::vector<float> scratch;
        if (flat_) {
          // The padded plane, then the flat output; padding cells keep the neutral value.
          const float neutral =
              kind_ == PoolKind::max ? -std::numeric_limits<float>::infinity() : 0.0f;
          const auto padded = static_cast<std::size_t>(padded_h_ * padded_w_);
      scratch = std::vector<float>(padded + static_cast<std::size_t>(g.out_h * padded_w_), neutral);
        }
        for (std::size_t plane = begin; plane < end; ++plane) {
          const float* xp = x + plane * static_cast<std::size_t>(g.in_h * g.in_w);
          float* yp = y + plane * static_cast<std::size_t>(g.out_h * g.out_w);
          if (flat_) {
            plane_flat(xp, yp, scratch.data());
          } else {
            plane_rows(xp, yp);
          }
        }
      });
}

void PoolKernelCpu::plane_flat(const float* x, float* y, float* scratch) const {
  const Pool2dGeometry& g = g_;
  float* padded = scratch;
  float* flat = scratch + padded_h_ * padded_w_;
  for (std::int64_t ih = 0; ih < g.in_h; ++ih) {
    std::memcpy(padded + (g.pad_top + ih) * padded_w_ + g.pad_left, x + ih * g.in_w,
                static_cast<std::size_t>(g.in_w) * sizeof(float));
  }
  const std::int64_t count = (g.out_h - 1) * padded_w_ + g.out_w;
  const bool max = kind_ == PoolKind::max;
  std::fill_n(flat, static_cast<std::size_t>(count),
              max ? -std::numeric_limits<float>::infinity() : 0.0f);
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
      const float* src = padded + kh * g.dilation_h * padded_w_ + kw * g.dilation_w;
      if (max) {
        combine(flat, src, count, MaxStep{});
      } else {
        combine(flat, src, count, SumStep{});
      }
    }
  }
  for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
    const float* row = flat + oh * padded_w_;
    float* out = y + oh * g.out_w;
    if (max) {
      std::copy_n(row, g.out_w, out);
      continue;
    }
    const std::int64_t dh = divisor_h_[static_cast<std::size_t>(oh)];
    for (std::int64_t ow = 0; ow < g.out_w; ++ow)
      out[ow] = row[ow] / static_cast<float>(dh * divisor_w_[static_cast<std::size_t>(ow)]);
  }
}

void PoolKernelCpu::plane_rows(const float* x, float* y) const {
  const Pool2dGeometry& g = g_;
  const bool max = kind_ == PoolKind::max;
  const std::int64_t sw = g.stride_w;
  for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
    const std::int64_t h0 = oh * g.stride_h - g.pad_top;
    const auto [kh_begin, kh_end] = valid_taps(h0, g.dilation_h, g.kernel_h, g.in_h);
    float* out = y + oh * g.out_w;
    std::fill_n(out, static_cast<std::size_t>(g.out_w),
                max ? -std::numeric_limits<float>::infinity() : 0.0f);
    // Tap-major, output-minor: the inner loop runs along the row with a fixed tap; each output
    // still sees its taps in (kh, kw) order.
    for (std::int64_t kh = kh_begin; kh < kh_end; ++kh) {
      const float* row = x + (h0 + kh * g.dilation_h) * g.in_w;
      for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const std::int64_t offset = kw * g.dilation_w - g.pad_left;
        // Outputs whose tap kw lands inside the row: 0 <= ow * stride + offset < in_w.
        const std::int64_t first = offset >= 0 ? 0 : (-offset + sw - 1) / sw;
        const std::int64_t last =
            std::min(g.out_w, g.in_w - offset <= 0 ? 0 : (g.in_w - offset + sw - 1) / sw);
        if (max) {
          for (std::int64_t ow = first; ow < last; ++ow)
            out[ow] = math::nan_max(out[ow], row[ow * sw + offset]);
        } else {
          for (std::int64_t ow = first; ow < last; ++ow)
            out[ow] += row[ow * sw + offset];
        }
      }
    }
    if (!max) {
      const std::int64_t dh = divisor_h_[static_cast<std::size_t>(oh)];
      for (std::int64_t ow = 0; ow < g.out_w; ++ow)
        out[ow] = out[ow] / static_cast<float>(dh * divisor_w_[static_cast<std::size_t>(ow)]);
    }
  }
}

}  // namespace cgr::cpu
