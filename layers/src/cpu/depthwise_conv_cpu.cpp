// See depthwise_conv_cpu.hpp.
//
// Both paths read a zero-padded copy of the input, so every output element is the same chain
// of fma over (kh, kw) in order from zero, padding terms included (adding w * 0 leaves a sum
// unchanged), with no bounds checks in the inner loop; the epilogue then adds the bias and the
// residual and applies the activation, each on its own, in that order.
//
// Channels in lanes: the copy is channels-last (padded row, padded column, 16 lanes), so tap
// (kh, kw) of output (oh, ow) is the vector at (oh * sh + kh * dh, ow * sw + kw * dw): eight
// outputs of a row at a time, eight independent chains. A strip of output rows at a time is
// transposed back (16 x 16 blocks in registers) and finished on the way out.
//
// Channels-last in and out (the CPU layout plan's NHWC values, whole blocks of 16 channels):
// no copies. Each tap reads a point's 16 channels of the block in place, a zero vector where
// it falls in the padding (the fma with +0 the padded copy gives: the same bits); a 3-wide
// kernel at stride 1 or 2 loads each kernel row's inputs once for its three taps, and computes
// a chunk of eight outputs for every block before the next chunk, so the input is read point
// after point (block by block, MobileNet-v2's 96-channel stride-2 layer took 1.4x the time in
// the model, one thread). Each output row goes through a buffer of 16-lane blocks and out
// point by point with the activation. Measured on
// MobileNet-v2's shapes (one thread, between NHWC 1x1 convs): 32 channels at 112x112 0.11 ms
// against 0.20 through the lane copies, 144 at 56x56 0.13 against 0.22; ONNX Runtime's NCHWc
// kernels took 0.16 for each.
//
// Planes: the arithmetic reads a zero-padded copy of the input plane, so every output element is
// the same chain of fma over (kh, kw) in order, padding terms included (adding w * 0 leaves a sum
// unchanged), with no bounds checks in the inner loop. The copy is split into stride_h x
// stride_w phases (phase (py, px) holds padded rows py, py + sh, ... and columns px, px + sw,
// ...; at stride 1 the one phase is the padded plane) of row width Wq, so tap (kh, kw) of
// output t = oh * Wq + ow reads one phase at t plus a fixed offset: the plane is computed as
// one flat run of contiguous loads (the Wq - out_w columns between rows are computed and
// dropped), and small planes (MobileNet's 7x7 and 14x14) fill whole vectors instead of one
// short vector per row. With AVX-512 four registers hold 64 outputs (four independent fma
// chains hide the latency), with AVX2 + FMA 32, the same chains, so the same bits; the
// baseline loop is scalar, without fma. The epilogue (bias, residual, activation) runs over
// the plane as it copies the valid columns out.
#include "cpu/depthwise_conv_cpu.hpp"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/gemm.hpp"
#include "cpu/lanes.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define CGR_DEPTHWISE_X86 1
#include <immintrin.h>
#endif

namespace cgr::cpu {
namespace {

// Multiply-adds one task should at least carry (a few planes of a MobileNet layer).
constexpr std::int64_t kTaskMacs = std::int64_t{1} << 17;
// The same for the channel-lane path, which runs them 3-4x as fast: with the planes' figure a
// 960-channel 7x7 layer made three tasks of 20 blocks, two of them for one of two threads.
constexpr std::int64_t kLaneTaskMacs = std::int64_t{1} << 15;
// Output columns per vector.
constexpr std::int64_t kLanes = 16;
// Output points per strip of the channel-lane path: its two 16-lane buffers fill 32 KiB.
constexpr std::int64_t kStripPoints = 256;
constexpr std::int64_t kMaxNhwcTaps = DepthwiseConvCpu::kMaxNhwcTaps;
// Items the NHWC path makes at least (DepthwiseConvCpu::run_nhwc), for a few threads.
constexpr std::int64_t kMinNhwcItems = 16;

// out[t] = sum over taps k of weight[k] * base[offsets[k] + t], for t in [0, count), taps in
// (kh, kw) order. A vector step may read up to 2 * kLanes elements past the last one.
struct Taps {
  const float* base;            // the phases
  const std::int64_t* offsets;  // per tap, kernel_h x kernel_w
  const float* weight;          // kernel_h x kernel_w
  std::int64_t taps;
};

void taps_generic(const Taps& t, float* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    float acc = 0.0f;
    for (std::int64_t k = 0; k < t.taps; ++k)
      acc += t.weight[k] * t.base[t.offsets[k] + i];
    out[i] = acc;
  }
}

#if defined(CGR_DEPTHWISE_X86)
// V vectors of output from i0 on, V independent fma chains; the last vector stores only the
// elements below `count`.
template <int V>
__attribute__((target("avx512f"), always_inline)) inline void taps_block_avx512(
    const Taps& t, float* out, std::int64_t i0, std::int64_t count) {
  __m512 acc[V];
  for (int v = 0; v < V; ++v)
    acc[v] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < t.taps; ++k) {
    const float* p = t.base + t.offsets[k] + i0;
    const __m512 weight = _mm512_set1_ps(t.weight[k]);
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_fmadd_ps(weight, _mm512_loadu_ps(p + v * kLanes), acc[v]);
  }
  for (int v = 0; v < V - 1; ++v)
    _mm512_storeu_ps(out + i0 + v * kLanes, acc[v]);
  const std::int64_t last = i0 + (V - 1) * kLanes;
  const std::int64_t rest = std::min(kLanes, count - last);
  _mm512_mask_storeu_ps(out + last, static_cast<__mmask16>((1u << rest) - 1u), acc[V - 1]);
}

__attribute__((target("avx512f"))) void taps_avx512(const Taps& t, float* out, std::int64_t count) {
  constexpr std::int64_t kBlock = 4 * kLanes;
  std::int64_t i0 = 0;
  for (; i0 + kBlock <= count; i0 += kBlock)
    taps_block_avx512<4>(t, out, i0, count);
  const std::int64_t vectors = gemm::ceil_div(count - i0, kLanes);  // 0 to 4
  if (vectors == 4) taps_block_avx512<4>(t, out, i0, count);
  if (vectors == 3) taps_block_avx512<3>(t, out, i0, count);
  if (vectors == 2) taps_block_avx512<2>(t, out, i0, count);
  if (vectors == 1) taps_block_avx512<1>(t, out, i0, count);
}

// The same with AVX2 and FMA, 8 output columns per vector: the same fma chain per element, so
// the same bits as AVX-512.
template <int V>
__attribute__((target("avx2,fma"), always_inline)) inline void taps_block_avx2(const Taps& t,
                                                                               float* out,
                                                                               std::int64_t i0,
                                                                               std::int64_t count) {
  constexpr std::int64_t kWidth = 8;
  __m256 acc[V];
  for (int v = 0; v < V; ++v)
    acc[v] = _mm256_setzero_ps();
  for (std::int64_t k = 0; k < t.taps; ++k) {
    const float* p = t.base + t.offsets[k] + i0;
    const __m256 weight = _mm256_set1_ps(t.weight[k]);
    for (int v = 0; v < V; ++v)
      acc[v] = _mm256_fmadd_ps(weight, _mm256_loadu_ps(p + v * kWidth), acc[v]);
  }
  alignas(32) float last[kWidth];
  for (int v = 0; v < V - 1; ++v)
    _mm256_storeu_ps(out + i0 + v * kWidth, acc[v]);
  const std::int64_t tail = i0 + (V - 1) * kWidth;
  _mm256_store_ps(last, acc[V - 1]);
  std::copy_n(last, std::min(kWidth, count - tail), out + tail);
}

__attribute__((target("avx2,fma"))) void taps_avx2(const Taps& t, float* out, std::int64_t count) {
  constexpr std::int64_t kBlock = 4 * 8;
  std::int64_t i0 = 0;
  for (; i0 + kBlock <= count; i0 += kBlock)
    taps_block_avx2<4>(t, out, i0, count);
  const std::int64_t vectors = gemm::ceil_div(count - i0, std::int64_t{8});  // 0 to 4
  if (vectors == 4) taps_block_avx2<4>(t, out, i0, count);
  if (vectors == 3) taps_block_avx2<3>(t, out, i0, count);
  if (vectors == 2) taps_block_avx2<2>(t, out, i0, count);
  if (vectors == 1) taps_block_avx2<1>(t, out, i0, count);
}

// The channel-lane path (DepthwiseConvCpu::run_channel_lanes): 16 channels of one image in
// the lanes of a vector, so every tap of every output is one full-vector fma whatever the
// plane's width, stride or dilation.

CGR_LANES_INTRINSICS_BEGIN  // see lanes::transpose16

    // V outputs along a row, `step` floats apart in the padded image from `at`, into `result`
    // (V x 16 floats): per output the fma chain over the taps in order, from zero, as in
    // taps_block_avx512.
    template <int V>
    __attribute__((target("avx512f"), always_inline)) inline void lane_taps_block(
        const float* at, std::int64_t step, const float* weight, const std::int64_t* offsets,
        std::int64_t taps, const float* bias, float* result) {
  __m512 acc[V];
  for (int v = 0; v < V; ++v)
    acc[v] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < taps; ++k) {
    const __m512 w = _mm512_loadu_ps(weight + k * kLanes);
    const float* p = at + offsets[k];
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(p + v * step), acc[v]);
  }
  if (bias != nullptr) {  // no "+ 0" without one: that would turn -0 into +0
    const __m512 b = _mm512_loadu_ps(bias);
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_add_ps(acc[v], b);
  }
  for (int v = 0; v < V; ++v)
    _mm512_storeu_ps(result + v * kLanes, acc[v]);
}

// V outputs of a 3-wide kernel (dilation 1) at column stride S, the first output's first
// input column iw0: each kernel row's (V - 1) * S + 3 input vectors are loaded once and serve
// its three taps, where nhwc_taps_block loads 3 V (2.4x fewer loads at stride 1); a vector is
// zero where its row (`rows`, the kernel rows' inputs at column 0, null in the padding) or,
// with Check, its column lies in the padding. The same fma chains in the same order.
template <int V, int S, bool Check>
__attribute__((target("avx512f"), always_inline)) inline void taps_block3(
    const float* const* rows, std::int64_t point, std::int64_t iw0, std::int64_t in_w,
    const float* weight, std::int64_t kernel_h, const float* bias, float* result) {
  constexpr int kInputs = (V - 1) * S + 3;
  __m512 acc[V];
  for (int v = 0; v < V; ++v)
    acc[v] = _mm512_setzero_ps();
  for (std::int64_t kh = 0; kh < kernel_h; ++kh) {
    const float* row = rows[kh];
    if (row == nullptr) {
      const __m512 zero = _mm512_setzero_ps();
      for (int kw = 0; kw < 3; ++kw) {
        const __m512 w = _mm512_loadu_ps(weight + (kh * 3 + kw) * kLanes);
        for (int v = 0; v < V; ++v)
          acc[v] = _mm512_fmadd_ps(w, zero, acc[v]);
      }
      continue;
    }
    __m512 x[kInputs];
    for (int j = 0; j < kInputs; ++j) {
      if (Check && (iw0 + j < 0 || iw0 + j >= in_w)) {
        x[j] = _mm512_setzero_ps();
      } else {
        x[j] = _mm512_loadu_ps(row + (iw0 + j) * point);
      }
    }
    for (int kw = 0; kw < 3; ++kw) {
      const __m512 w = _mm512_loadu_ps(weight + (kh * 3 + kw) * kLanes);
      for (int v = 0; v < V; ++v)
        acc[v] = _mm512_fmadd_ps(w, x[v * S + kw], acc[v]);
    }
  }
  if (bias != nullptr) {  // no "+ 0" without one, as in lane_taps_block
    const __m512 b = _mm512_loadu_ps(bias);
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_add_ps(acc[v], b);
  }
  for (int v = 0; v < V; ++v)
    _mm512_storeu_ps(result + v * kLanes, acc[v]);
}

// A row of a 3-wide kernel's outputs (see taps_block3), eight at a time, then four, two
// and one, for `blocks` blocks of 16 channels (block b's outputs at result + b * out_w * 16,
// its weights at weight + b * kernel_h * 48); the blocks that reach into the padding check
// their columns. Each chunk of columns computes every block before the next chunk, so the
// input is read point after point, each point's channels at once (block by block over whole
// rows, each pass read 64 of every point's 4 C bytes: MobileNet-v2's 96-channel stride-2
// layer took 1.6x the time inside the model).
// `rows`: each kernel row's input at column 0, channel 0 of the first block (null: in the
// padding), `point` floats from one column to the next, in_w columns, of which column
// pad_left is output 0's first.
template <int S>
__attribute__((target("avx512f"))) void taps_row3(const float* const* rows, std::int64_t point,
                                                  std::int64_t in_w, std::int64_t pad_left,
                                                  std::int64_t out_w, std::int64_t kernel_h,
                                                  std::int64_t blocks, const float* weight,
                                                  const float* bias, float* result) {
  const float* block_rows[kMaxNhwcTaps];
  for (std::int64_t ow = 0; ow < out_w;) {
    const std::int64_t left = out_w - ow;
    const std::int64_t outputs = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
    const std::int64_t iw0 = ow * S - pad_left;
    const bool check = iw0 < 0 || iw0 + (outputs - 1) * S + 2 >= in_w;
    for (std::int64_t b = 0; b < blocks; ++b) {
      for (std::int64_t kh = 0; kh < kernel_h; ++kh)
        block_rows[kh] = rows[kh] != nullptr ? rows[kh] + b * kLanes : nullptr;
      const float* block_weight = weight + b * kernel_h * 3 * kLanes;
      const float* block_bias = bias != nullptr ? bias + b * kLanes : nullptr;
      float* out = result + (b * out_w + ow) * kLanes;
#define CGR_TAPS3(V)                                                                      \
  (check ? taps_block3<V, S, true>(block_rows, point, iw0, in_w, block_weight, kernel_h,  \
                                   block_bias, out)                                       \
         : taps_block3<V, S, false>(block_rows, point, iw0, in_w, block_weight, kernel_h, \
                                    block_bias, out))
      if (outputs == 8) {
        CGR_TAPS3(8);
      } else if (outputs == 4) {
        CGR_TAPS3(4);
      } else if (outputs == 2) {
        CGR_TAPS3(2);
      } else {
        CGR_TAPS3(1);
      }
#undef CGR_TAPS3
    }
    ow += outputs;
  }
}

// Output rows [oh0, oh1) of one channel block: result[((oh - oh0) * out_w + ow) * 16 + lane],
// the bias (16 lanes, or null) added.
__attribute__((target("avx512f"))) void lane_taps(const float* padded, std::int64_t padded_w,
                                                  const Conv2dGeometry& g, const float* weight,
                                                  const std::int64_t* offsets, std::int64_t taps,
                                                  const float* bias, std::int64_t oh0,
                                                  std::int64_t oh1, float* result) {
  const std::int64_t step = g.stride_w * kLanes;
  for (std::int64_t oh = oh0; oh < oh1; ++oh) {
    const float* row = padded + oh * g.stride_h * padded_w * kLanes;
    float* out = result + (oh - oh0) * g.out_w * kLanes;
    std::int64_t ow = 0;
    for (; ow + 8 <= g.out_w; ow += 8)
      lane_taps_block<8>(row + ow * step, step, weight, offsets, taps, bias, out + ow * kLanes);
    if (ow + 4 <= g.out_w) {
      lane_taps_block<4>(row + ow * step, step, weight, offsets, taps, bias, out + ow * kLanes);
      ow += 4;
    }
    if (ow + 2 <= g.out_w) {
      lane_taps_block<2>(row + ow * step, step, weight, offsets, taps, bias, out + ow * kLanes);
      ow += 2;
    }
    if (ow < g.out_w)
      lane_taps_block<1>(row + ow * step, step, weight, offsets, taps, bias, out + ow * kLanes);
  }
}
// NHWC to NHWC without copies (DepthwiseConvCpu::run_nhwc): V outputs along a row from the
// input in place, tap k of output v at taps[k] + v * step, or a zero vector where taps[k] is
// null (a tap in the padding: the same fma with +0 the padded copy gives the other paths, so
// the same bits); the bias (16 lanes, or null) added; into `result` (V x 16 floats).
template <int V, bool AnyPadding>
__attribute__((target("avx512f"), always_inline)) inline void nhwc_taps_block(
    const float* const* taps, std::int64_t step, const float* weight, std::int64_t tap_count,
    const float* bias, float* result) {
  __m512 acc[V];
  for (int v = 0; v < V; ++v)
    acc[v] = _mm512_setzero_ps();
  const __m512 zero = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < tap_count; ++k) {
    const __m512 w = _mm512_loadu_ps(weight + k * kLanes);
    const float* p = taps[k];
    if (AnyPadding && p == nullptr) {
      for (int v = 0; v < V; ++v)
        acc[v] = _mm512_fmadd_ps(w, zero, acc[v]);
      continue;
    }
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_fmadd_ps(w, _mm512_loadu_ps(p + v * step), acc[v]);
  }
  if (bias != nullptr) {  // no "+ 0" without one, as in lane_taps_block
    const __m512 b = _mm512_loadu_ps(bias);
    for (int v = 0; v < V; ++v)
      acc[v] = _mm512_add_ps(acc[v], b);
  }
  for (int v = 0; v < V; ++v)
    _mm512_storeu_ps(result + v * kLanes, acc[v]);
}

// Outputs [ow, ow_end) of a row, eight at a time, from the taps of output ow (advanced past
// them on return; null taps stay null).
template <bool AnyPadding>
__attribute__((target("avx512f"))) void nhwc_taps_run(const float** taps, std::int64_t tap_count,
                                                      std::int64_t step, const float* weight,
                                                      const float* bias, std::int64_t ow,
                                                      std::int64_t ow_end, float* result) {
  while (ow < ow_end) {
    const std::int64_t outputs = ow + 8 <= ow_end ? 8 : 1;
    if (outputs == 8) {
      nhwc_taps_block<8, AnyPadding>(taps, step, weight, tap_count, bias, result + ow * kLanes);
    } else {
      nhwc_taps_block<1, AnyPadding>(taps, step, weight, tap_count, bias, result + ow * kLanes);
    }
    for (std::int64_t k = 0; k < tap_count; ++k)
      if (!AnyPadding || taps[k] != nullptr) taps[k] += outputs * step;
    ow += outputs;
  }
}

// One output row of `blocks` blocks of 16 channels from c0 of NHWC input rows (`rows`: per
// kernel row, the input row's first point at channel c0, or null for a row in the padding)
// into result[(b * out_w + ow) * 16 + lane] (block b's weights and bias 16 taps and 16 floats
// after the last block's): with a 3-wide kernel through taps_row3; otherwise block by block,
// the columns whose every tap lies inside the image ([ow_lo, ow_hi), ow_lo <= ow_hi <= out_w)
// eight at a time, the others one at a time with their padding taps zero.
__attribute__((target("avx512f"))) void nhwc_taps_row(const float* const* rows,
                                                      const Conv2dGeometry& g, std::int64_t ow_lo,
                                                      std::int64_t ow_hi, std::int64_t blocks,
                                                      const float* weight, const float* bias,
                                                      float* result) {
  const std::int64_t c = g.in_channels;
  const std::int64_t step = g.stride_w * c;
  const std::int64_t tap_count = g.kernel_h * g.kernel_w;
  bool any_padding_row = false;
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh)
    any_padding_row = any_padding_row || rows[kh] == nullptr;
  // A 3-wide kernel at column stride 1 or 2 (MobileNet's and most depthwise layers).
  if (g.kernel_w == 3 && g.dilation_w == 1 && (g.stride_w == 1 || g.stride_w == 2)) {
    if (g.stride_w == 1) {
      return taps_row3<1>(rows, c, g.in_w, g.pad_left, g.out_w, g.kernel_h, blocks, weight, bias,
                          result);
    }
    return taps_row3<2>(rows, c, g.in_w, g.pad_left, g.out_w, g.kernel_h, blocks, weight, bias,
                        result);
  }
  for (std::int64_t b = 1; b < blocks; ++b) {
    const float* block_rows[kMaxNhwcTaps];
    for (std::int64_t kh = 0; kh < g.kernel_h; ++kh)
      block_rows[kh] = rows[kh] != nullptr ? rows[kh] + b * kLanes : nullptr;
    nhwc_taps_row(block_rows, g, ow_lo, ow_hi, 1, weight + b * tap_count * kLanes,
                  bias != nullptr ? bias + b * kLanes : nullptr, result + b * g.out_w * kLanes);
  }
  const float* taps[kMaxNhwcTaps];
  // The taps of output ow; with check_columns, null where a column is in the padding.
  const auto set_taps = [&](std::int64_t ow, bool check_columns) {
    for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
      for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
        const bool inside = rows[kh] != nullptr && (!check_columns || (iw >= 0 && iw < g.in_w));
        taps[kh * g.kernel_w + kw] = inside ? rows[kh] + iw * c : nullptr;
      }
    }
  };
  for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
    if (ow == ow_lo && ow_lo < ow_hi) {
      set_taps(ow, false);
      if (any_padding_row) {
        nhwc_taps_run<true>(taps, tap_count, step, weight, bias, ow, ow_hi, result);
      } else {
        nhwc_taps_run<false>(taps, tap_count, step, weight, bias, ow, ow_hi, result);
      }
      ow = ow_hi - 1;
      continue;
    }
    set_taps(ow, true);
    nhwc_taps_run<true>(taps, tap_count, step, weight, bias, ow, ow + 1, result);
  }
}

// Channels [c0, c0 + channels) of an NHWC image of `stride` channels into the interior of
// `image` (the lanes past `channels` zero); the padding cells are left as they are.
__attribute__((target("avx512f"))) void nhwc_to_lanes(const float* in, std::int64_t stride,
                                                      std::int64_t channels,
                                                      const lanes::PaddedImage& image,
                                                      float* padded) {
  const __mmask16 mask = lanes::channel_mask(channels);
  for (std::int64_t y = 0; y < image.in_h; ++y) {
    const float* src = in + y * image.in_w * stride;
    float* dst = padded + ((image.pad_top + y) * image.padded_w + image.pad_left) * kLanes;
    for (std::int64_t x = 0; x < image.in_w; ++x)
      _mm512_storeu_ps(dst + x * kLanes, _mm512_maskz_loadu_ps(mask, src + x * stride));
  }
}
CGR_LANES_INTRINSICS_END
#endif

}  // namespace

DepthwiseConvCpu::DepthwiseConvCpu(const Conv2dGeometry& geometry, std::span<const float> weight,
                                   std::span<const float> bias)
    : geometry_(geometry), weight_(weight.begin(), weight.end()), bias_(bias.begin(), bias.end()) {
  const Conv2dGeometry& g = geometry_;
  phases_ =
      PhaseLayout::make(g.in_h, g.in_w, g.pad_top, g.pad_left, g.pad_top + g.in_h + g.pad_bottom,
                        g.pad_left + g.in_w + g.pad_right, g.stride_h, g.stride_w);
  flat_count_ = (g.out_h - 1) * phases_.phase_w + g.out_w;
  // Every read of an output that exists lies in its phase (the conv's output size says so).
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    for (std::int64_t kw = 0; kw < g.kernel_w; ++kw)
      tap_offsets_.push_back(phases_.tap_offset(kh * g.dilation_h, kw * g.dilation_w));
  }
  // The phases, then slack for a vector's reads past the last output, then the flat result.
  phases_floats_ = phases_.floats() + 2 * kLanes;
  scratch_floats_ = phases_floats_ + flat_count_ + kLanes;
#if defined(CGR_DEPTHWISE_X86)
  // AVX-512 when the GEMM runs it too, so the tests' kernel override (gemm.hpp) also picks the
  // baseline loop here.
  __builtin_cpu_init();
  const std::string_view gemm_kernel = gemm::best_kernel().name;
  avx512_ = __builtin_cpu_supports("avx512f") && gemm_kernel == "avx512";
  avx2_ = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
          (gemm_kernel == "avx512" || gemm_kernel == "avx2");
  // Channels in lanes for a multiplier of 1 (every depthwise layer of MobileNet): measured on
  // MobileNet-v2's shapes against the planes, 0.25x the time at 7x7, 0.4x at 14x14, 0.5-0.7x
  // at 28x28 to 112x112 with stride 2, 0.7x at 56x56 and 0.94x at 112x112 with stride 1.
  channel_lanes_ =
      avx512_ && g.out_channels == g.in_channels &&
      (g.pad_top + g.in_h + g.pad_bottom) * (g.pad_left + g.in_w + g.pad_right) * kLanes <=
          lanes::kMaxPaddedFloats;
#endif
  if (!channel_lanes_) return;
  // Whole blocks of 16 channels (every load a point's 16 channels of one block) and a bounded
  // tap count: an NHWC input and output then need no copies.
  nhwc_direct_ = g.in_channels % kLanes == 0 && g.kernel_h * g.kernel_w <= kMaxNhwcTaps;
  // Columns whose taps all lie inside the image: ow * stride - pad_left >= 0 and the last
  // tap's column below in_w.
  const std::int64_t last_tap = (g.kernel_w - 1) * g.dilation_w;
  ow_lo_ = std::min(g.out_w, gemm::ceil_div(g.pad_left, g.stride_w));
  ow_hi_ = g.in_w - 1 - last_tap + g.pad_left < 0
               ? ow_lo_
               : std::clamp<std::int64_t>((g.in_w - 1 - last_tap + g.pad_left) / g.stride_w + 1,
                                          ow_lo_, g.out_w);
  padded_h_ = g.pad_top + g.in_h + g.pad_bottom;
  padded_w_ = g.pad_left + g.in_w + g.pad_right;
  const auto taps = static_cast<std::int64_t>(tap_offsets_.size());
  lane_weight_.assign(
      static_cast<std::size_t>(gemm::ceil_div(g.out_channels, kLanes) * taps * kLanes), 0.0f);
  for (std::int64_t c = 0; c < g.out_channels; ++c) {
    for (std::int64_t k = 0; k < taps; ++k)
      lane_weight_[static_cast<std::size_t>(((c / kLanes) * taps + k) * kLanes + c % kLanes)] =
          weight_[static_cast<std::size_t>(c * taps + k)];
  }
  if (!bias_.empty()) {
    lane_bias_.assign(static_cast<std::size_t>(gemm::ceil_div(g.out_channels, kLanes) * kLanes),
                      0.0f);
    std::copy(bias_.begin(), bias_.end(), lane_bias_.begin());
  }
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    for (std::int64_t kw = 0; kw < g.kernel_w; ++kw)
      lane_tap_offsets_.push_back((kh * g.dilation_h * padded_w_ + kw * g.dilation_w) * kLanes);
  }
}

void DepthwiseConvCpu::set_channels_last(bool input, bool output) {
  if ((input || output) && !channel_lanes_) {
    fail("conv: this depthwise convolution computes plane by plane: no channels-last value");
  }
  input_nhwc_ = input;
  output_nhwc_ = output;
}

void DepthwiseConvCpu::run_channel_lanes(const float* input, const float* residual, float* output,
                                         const math::Activation& activation,
                                         ThreadPool* pool) const {
#if defined(CGR_DEPTHWISE_X86)
  const Conv2dGeometry& g = geometry_;
  const std::int64_t blocks = gemm::ceil_div(g.out_channels, kLanes);
  const std::int64_t out_plane = g.out_h * g.out_w;
  const std::int64_t in_plane = g.in_h * g.in_w;
  const auto taps = static_cast<std::int64_t>(lane_tap_offsets_.size());
  const std::int64_t grain =
      std::max<std::int64_t>(1, gemm::ceil_div(kLaneTaskMacs, kLanes * out_plane * taps));
  const std::int64_t padded_floats = padded_h_ * padded_w_ * kLanes;
  const lanes::PaddedImage image{g.in_h, g.in_w, g.pad_top, g.pad_left, padded_w_};
  // Output rows go through the taps, the transpose and the epilogue a strip at a time, so the
  // strip's buffers stay in L1 next to the rows of the padded image they read.
  const std::int64_t strip_rows = std::clamp<std::int64_t>(kStripPoints / g.out_w, 1, g.out_h);
  const std::int64_t strip_points = strip_rows * g.out_w;
  // The activation in vector form, or (a Unary function) the planes through flat_epilogue.
  const lanes::OutputFinish finish = lanes::output_finish(activation.kind);
  const gemm::GemmActivation clamp = gemm::gemm_activation(activation);
  gemm::parallel_range(pool, g.batch * blocks, grain, [&](std::int64_t begin, std::int64_t end) {
    // The padded image (its padding zero for every block: blocks write only the interior), a
    // strip's result with channels in lanes and, without a vector activation, the same as
    // planes.
    const lanes::ThreadScratch scratch(
        static_cast<std::size_t>(padded_floats + 2 * strip_points * kLanes));
    float* const padded = scratch.data();
    lanes::fill_padding(padded, padded_h_, image, 0.0f);
    float* const strip = padded + padded_floats;
    float* const planes = strip + strip_points * kLanes;
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t n = task / blocks;
      const std::int64_t block = task % blocks;
      const std::int64_t c0 = block * kLanes;
      const std::int64_t channels = std::min(kLanes, g.out_channels - c0);
      if (input_nhwc_) {
        nhwc_to_lanes(input + n * g.in_channels * in_plane + c0, g.in_channels, channels, image,
                      padded);
      } else {
        lanes::planes_to_lanes(input + (n * g.in_channels + c0) * in_plane, in_plane, channels,
                               image, padded);
      }
      for (std::int64_t oh0 = 0; oh0 < g.out_h; oh0 += strip_rows) {
        const std::int64_t rows = std::min(strip_rows, g.out_h - oh0);
        lane_taps(padded, padded_w_, g, lane_weight_.data() + block * taps * kLanes,
                  lane_tap_offsets_.data(), taps,
                  lane_bias_.empty() ? nullptr : lane_bias_.data() + c0, oh0, oh0 + rows, strip);
        if (output_nhwc_) {
          // The block's channels of each point (the bias is in; no residual here), through a
          // ReLU or Clip on the way; another activation in place over the strip first.
          const std::int64_t floats = rows * g.out_w * kLanes;
          if (clamp.other != nullptr) {
            flat_epilogue(strip, floats, nullptr, strip, 1, floats, nullptr, activation, true);
          }
          lanes::lanes_to_nhwc(strip, rows * g.out_w, channels,
                               output + (n * out_plane + oh0 * g.out_w) * g.out_channels + c0,
                               g.out_channels, clamp);
          continue;
        }
        const std::int64_t at = (n * g.out_channels + c0) * out_plane + oh0 * g.out_w;
        const float* res = residual != nullptr ? residual + at : nullptr;
        if (finish != nullptr) {
          finish(strip, kLanes, rows * g.out_w, channels, res, output + at, out_plane,
                 activation.alpha, activation.beta);
          continue;
        }
        lanes::lanes_to_planes(strip, rows * g.out_w, channels, planes, strip_points);
        for (std::int64_t c = 0; c < channels; ++c) {
          flat_epilogue(planes + c * strip_points, g.out_w,
                        res != nullptr ? res + c * out_plane : nullptr, output + at + c * out_plane,
                        rows, g.out_w, nullptr, activation, true);
        }
      }
    }
  });
#else
  (void)input, (void)residual, (void)output, (void)activation, (void)pool;
#endif
}

void DepthwiseConvCpu::input_rows(const float* image, std::int64_t oh, const float** rows) const {
  const Conv2dGeometry& g = geometry_;
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
    rows[kh] = ih >= 0 && ih < g.in_h ? image + ih * g.in_w * g.in_channels : nullptr;
  }
}

void DepthwiseConvCpu::nhwc_row(const float* const* rows, std::int64_t point_stride,
                                std::int64_t c0, std::int64_t channels, float* result) const {
#if defined(CGR_DEPTHWISE_X86)
  // The row kernels step from point to point by the geometry's in_channels.
  Conv2dGeometry g = geometry_;
  g.in_channels = point_stride;
  const std::int64_t taps = g.kernel_h * g.kernel_w;
  nhwc_taps_row(rows, g, ow_lo_, ow_hi_, channels / kLanes, lane_weight_.data() + c0 * taps,
                lane_bias_.empty() ? nullptr : lane_bias_.data() + c0, result);
#else
  (void)rows, (void)point_stride, (void)c0, (void)channels, (void)result;
#endif
}

void DepthwiseConvCpu::run_nhwc(const float* input, float* output,
                                const math::Activation& activation, ThreadPool* pool) const {
#if defined(CGR_DEPTHWISE_X86)
  const Conv2dGeometry& g = geometry_;
  const std::int64_t blocks = g.out_channels / kLanes;
  const std::int64_t taps = g.kernel_h * g.kernel_w;
  // Items (image, output row, group of blocks): all blocks, where that leaves kMinNhwcItems
  // items (the input is then read point after point, see taps_row3, and the output written
  // so), else groups of fewer (a 7x7 map's few rows).
  const std::int64_t groups =
      std::clamp<std::int64_t>(gemm::ceil_div(kMinNhwcItems, g.batch * g.out_h), 1, blocks);
  const std::int64_t group_blocks = gemm::ceil_div(blocks, groups);
  const std::int64_t items_per_image = g.out_h * groups;
  const std::int64_t grain = std::max<std::int64_t>(
      1, gemm::ceil_div(kLaneTaskMacs, g.out_w * taps * kLanes * group_blocks));
  const gemm::GemmActivation clamp = gemm::gemm_activation(activation);
  gemm::parallel_range(
      pool, g.batch * items_per_image, grain, [&](std::int64_t begin, std::int64_t end) {
        // One output row of a group's blocks, channels in lanes, finished on the way out.
        const lanes::ThreadScratch scratch(
            static_cast<std::size_t>(group_blocks * g.out_w * kLanes));
        float* const row = scratch.data();
        for (std::int64_t item = begin; item < end; ++item) {
          const std::int64_t n = item / items_per_image;
          const std::int64_t oh = item % items_per_image / groups;
          const std::int64_t first = item % groups * group_blocks;
          const std::int64_t count = std::min(group_blocks, blocks - first);
          const std::int64_t c0 = first * kLanes;
          const float* rows[kMaxNhwcTaps];
          input_rows(input + n * g.in_h * g.in_w * g.in_channels + c0, oh, rows);
          nhwc_taps_row(rows, g, ow_lo_, ow_hi_, count, lane_weight_.data() + c0 * taps,
                        lane_bias_.empty() ? nullptr : lane_bias_.data() + c0, row);
          if (clamp.other != nullptr) {
            const std::int64_t floats = count * g.out_w * kLanes;
            flat_epilogue(row, floats, nullptr, row, 1, floats, nullptr, activation, true);
          }
          lanes::blocked_to_nhwc(row, g.out_w, count * kLanes,
                                 output + ((n * g.out_h + oh) * g.out_w) * g.out_channels + c0,
                                 g.out_channels, clamp);
        }
      });
#else
  (void)input, (void)output, (void)activation, (void)pool;
#endif
}

void DepthwiseConvCpu::run(const float* input, const float* residual, float* output,
                           const math::Activation& activation, ThreadPool* pool) const {
  const Conv2dGeometry& g = geometry_;
  const std::int64_t planes = g.batch * g.out_channels;
  const std::int64_t out_plane = g.out_h * g.out_w;
  const std::int64_t in_plane = g.in_h * g.in_w;
  if (planes == 0 || out_plane == 0) return;
  if (nhwc_direct_ && input_nhwc_ && output_nhwc_) return run_nhwc(input, output, activation, pool);
  if (channel_lanes_) return run_channel_lanes(input, residual, output, activation, pool);
  const std::int64_t multiplier = g.out_channels / g.in_channels;
  const auto taps_per_output = static_cast<std::int64_t>(tap_offsets_.size());
  const std::int64_t grain =
      std::max<std::int64_t>(1, gemm::ceil_div(kTaskMacs, out_plane * taps_per_output));
  auto compute = [&](const Taps& t, float* out, std::int64_t count) {
#if defined(CGR_DEPTHWISE_X86)
    if (avx512_) return taps_avx512(t, out, count);
    if (avx2_) return taps_avx2(t, out, count);
#endif
    taps_generic(t, out, count);
  };
  auto finish = [&](float* src, const float* res, float* dst, const float* bias) {
    flat_epilogue(src, phases_.phase_w, res, dst, g.out_h, g.out_w, bias, activation, avx512_);
  };

  gemm::parallel_range(pool, planes, grain, [&](std::int64_t begin, std::int64_t end) {
    // The task's phases and flat result; one allocation per task, which carries tens of
    // microseconds of work at least. Padding cells are the same for every plane and stay zero;
    // each plane writes only the input's cells.
    std::vector<float> scratch(static_cast<std::size_t>(scratch_floats_), 0.0f);
    float* const flat_out = scratch.data() + phases_floats_;
    const Taps taps_base{scratch.data(), tap_offsets_.data(), nullptr, taps_per_output};
    for (std::int64_t plane = begin; plane < end; ++plane) {
      const std::int64_t n = plane / g.out_channels;
      const std::int64_t oc = plane % g.out_channels;
      const float* in = input + (n * g.in_channels + oc / multiplier) * in_plane;
      phases_.copy(in, scratch.data(), false, 0.0f);
      Taps taps = taps_base;
      taps.weight = weight_.data() + oc * taps_per_output;
      compute(taps, flat_out, flat_count_);
      finish(flat_out, residual != nullptr ? residual + plane * out_plane : nullptr,
             output + plane * out_plane, bias_.empty() ? nullptr : bias_.data() + oc);
    }
  });
}

}  // namespace cgr::cpu
