// See depthwise_conv_cpu.hpp.
//
// The arithmetic reads zero-padded copies of the input, so every output element is the same
// chain of fma over (kh, kw) in order, padding terms included (adding w * 0 leaves a sum
// unchanged), with no bounds checks in the inner loop:
// - stride 1: the whole plane is copied into a padded plane of row width Wp, and the output is
//   computed as one flat run, element t = oh * Wp + ow reading padded element t + kh * Wp + kw
//   (the Wp - out_w columns between rows are computed and dropped). Small planes (MobileNet's
//   7x7 and 14x14) then fill whole vectors instead of one short vector per row.
// - other strides: row by row, from a ring of the kernel's span of padded rows (each input row
//   copied once) and a shared zero row for the rows above and below the image.
// With AVX-512 four registers hold 64 output columns (four independent fma chains hide the
// latency; stride 2: two loads and a permute; other strides: a gather), with AVX2 + FMA 32
// columns, the same chains, so the same bits; the baseline loop is scalar, without fma. The
// epilogue (bias, residual, activation) runs over each finished row.
#include "cpu/depthwise_conv_cpu.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>

#include "cgr/thread_pool.hpp"
#include "cpu/gemm.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define CGR_DEPTHWISE_X86 1
#include <immintrin.h>
#endif

namespace cgr::cpu {
namespace {

// Multiply-adds one task should at least carry (a few planes of a MobileNet layer).
constexpr std::int64_t kTaskMacs = std::int64_t{1} << 17;
// Output columns per vector.
constexpr std::int64_t kLanes = 16;

// out[i] = sum over (kh, kw) of weight[kh][kw] * rows[kh][i * stride + kw * dilation], for i
// in [0, count). A vector step may read up to 2 * kLanes * stride elements past the last one.
struct Taps {
  const float* const* rows;  // kernel_h padded input rows
  const float* weight;       // kernel_h x kernel_w
  std::int64_t kernel_h, kernel_w, stride, dilation;
};

// dst[i] = fn(src[i] + bias (+ residual[i])): the GEMM's epilogue order.
template <typename Fn>
__attribute__((always_inline)) inline void epilogue(const float* src, const float* residual,
                                                    float* dst, std::int64_t count, float bias,
                                                    Fn fn) {
  if (residual != nullptr) {
    for (std::int64_t i = 0; i < count; ++i)
      dst[i] = fn(src[i] + bias + residual[i]);
  } else {
    for (std::int64_t i = 0; i < count; ++i)
      dst[i] = fn(src[i] + bias);
  }
}

void taps_generic(const Taps& t, float* out, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    float acc = 0.0f;
    for (std::int64_t kh = 0; kh < t.kernel_h; ++kh) {
      const float* row = t.rows[kh] + i * t.stride;
      const float* w = t.weight + kh * t.kernel_w;
      for (std::int64_t kw = 0; kw < t.kernel_w; ++kw)
        acc += w[kw] * row[kw * t.dilation];
    }
    out[i] = acc;
  }
}

void epilogue_generic(const float* src, const float* residual, float* dst, std::int64_t count,
                      float bias, const math::Activation& activation) {
  math::with_activation_fn(activation,
                           [&](auto fn) { epilogue(src, residual, dst, count, bias, fn); });
}

#if defined(CGR_DEPTHWISE_X86)
// V vectors of output from i0 on, V independent fma chains; the last vector stores only the
// elements below `count`.
template <int V>
__attribute__((target("avx512f"), always_inline)) inline void taps_block_avx512(
    const Taps& t, float* out, std::int64_t i0, std::int64_t count) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i lanes =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(t.stride)));
  const std::int64_t step = kLanes * t.stride;  // input elements between two vectors
  __m512 acc[V];
  for (int v = 0; v < V; ++v)
    acc[v] = _mm512_setzero_ps();
  for (std::int64_t kh = 0; kh < t.kernel_h; ++kh) {
    const float* row = t.rows[kh] + i0 * t.stride;
    const float* w = t.weight + kh * t.kernel_w;
    for (std::int64_t kw = 0; kw < t.kernel_w; ++kw) {
      const float* p = row + kw * t.dilation;
      const __m512 weight = _mm512_set1_ps(w[kw]);
      for (int v = 0; v < V; ++v) {
        const float* q = p + v * step;
        __m512 x;
        if (t.stride == 1) {
          x = _mm512_loadu_ps(q);
        } else if (t.stride == 2) {
          x = _mm512_permutex2var_ps(_mm512_loadu_ps(q), even, _mm512_loadu_ps(q + kLanes));
        } else {
          x = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xffff, lanes, q, 4);
        }
        acc[v] = _mm512_fmadd_ps(weight, x, acc[v]);
      }
    }
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
  const __m256i lanes = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32(static_cast<int>(t.stride)));
  const std::int64_t step = kWidth * t.stride;
  __m256 acc[V];
  for (int v = 0; v < V; ++v)
    acc[v] = _mm256_setzero_ps();
  for (std::int64_t kh = 0; kh < t.kernel_h; ++kh) {
    const float* row = t.rows[kh] + i0 * t.stride;
    const float* w = t.weight + kh * t.kernel_w;
    for (std::int64_t kw = 0; kw < t.kernel_w; ++kw) {
      const float* p = row + kw * t.dilation;
      const __m256 weight = _mm256_set1_ps(w[kw]);
      for (int v = 0; v < V; ++v) {
        const float* q = p + v * step;
        __m256 x;
        if (t.stride == 1) {
          x = _mm256_loadu_ps(q);
        } else if (t.stride == 2) {
          // Even elements of q[0..16): per 128-bit lane, then the lanes' halves in order.
          const __m256 even = _mm256_shuffle_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(q + kWidth),
                                                _MM_SHUFFLE(2, 0, 2, 0));
          x = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xd8));
        } else {
          x = _mm256_i32gather_ps(q, lanes, 4);
        }
        acc[v] = _mm256_fmadd_ps(weight, x, acc[v]);
      }
    }
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

__attribute__((target("avx512f"))) void epilogue_avx512(const float* src, const float* residual,
                                                        float* dst, std::int64_t count, float bias,
                                                        const math::Activation& activation) {
  // Each activation spelled out: a generic lambda's body would be compiled for the baseline.
  switch (activation.kind) {
    case math::ActivationKind::none:
      return epilogue(src, residual, dst, count, bias, math::IdentityFn{});
    case math::ActivationKind::relu:
      return epilogue(src, residual, dst, count, bias, math::ReluFn{});
    case math::ActivationKind::leaky_relu:
      return epilogue(src, residual, dst, count, bias, math::LeakyReluFn{activation.alpha});
    case math::ActivationKind::clip:
      return epilogue(src, residual, dst, count, bias,
                      math::ClipFn{activation.alpha, activation.beta});
    case math::ActivationKind::unary:
      return epilogue(src, residual, dst, count, bias,
                      math::UnaryFn{activation.unary, activation.alpha, activation.beta});
  }
}
#endif

}  // namespace

DepthwiseConvCpu::DepthwiseConvCpu(const Conv2dGeometry& geometry, std::span<const float> weight,
                                   std::span<const float> bias)
    : geometry_(geometry), weight_(weight.begin(), weight.end()), bias_(bias.begin(), bias.end()) {
  const Conv2dGeometry& g = geometry_;
  const std::int64_t span = (g.kernel_h - 1) * g.dilation_h + 1;  // input rows per output row
  const std::int64_t reach =
      (g.kernel_w - 1) * g.dilation_w;  // padded columns past ow*s
                                        // Elements a vector step may read past its last output's
                                        // first tap: the rest of its vector
  // and, at stride 2, the second load.
  const std::int64_t overread = 2 * kLanes * g.stride_w;
  flat_ = g.stride_h == 1 && g.stride_w == 1;
  if (flat_) {
    padded_w_ = g.pad_left + g.in_w + g.pad_right;
    const std::int64_t padded_h = g.pad_top + g.in_h + g.pad_bottom;
    const std::int64_t count = (g.out_h - 1) * padded_w_ + g.out_w;
    plane_floats_ =
        std::max(padded_h * padded_w_, count + (span - 1) * padded_w_ + reach + overread);
    scratch_floats_ = plane_floats_ + count;
  } else {
    // A power of two, so the slot of row ih is ih & (ring_rows_ - 1) (a division per row
    // costs as much as the arithmetic of a small row).
    ring_rows_ = static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(span)));
    padded_w_ = gemm::round_up(
        std::max((g.out_w - 1) * g.stride_w + reach + 1 + overread, g.pad_left + g.in_w), kLanes);
    scratch_floats_ = (ring_rows_ + 1) * padded_w_;  // the ring, then the zero row
  }
#if defined(CGR_DEPTHWISE_X86)
  // AVX-512 when the GEMM runs it too, so the tests' kernel override (gemm.hpp) also picks the
  // baseline loop here.
  __builtin_cpu_init();
  const std::string_view gemm_kernel = gemm::best_kernel().name;
  avx512_ = __builtin_cpu_supports("avx512f") && gemm_kernel == "avx512";
  avx2_ = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
          (gemm_kernel == "avx512" || gemm_kernel == "avx2");
#endif
}

void DepthwiseConvCpu::run(const float* input, const float* residual, float* output,
                           const math::Activation& activation, ThreadPool* pool) const {
  const Conv2dGeometry& g = geometry_;
  const std::int64_t planes = g.batch * g.out_channels;
  const std::int64_t out_plane = g.out_h * g.out_w;
  const std::int64_t in_plane = g.in_h * g.in_w;
  if (planes == 0 || out_plane == 0) return;
  const std::int64_t multiplier = g.out_channels / g.in_channels;
  const std::int64_t taps_per_output = g.kernel_h * g.kernel_w;
  const std::int64_t grain =
      std::max<std::int64_t>(1, gemm::ceil_div(kTaskMacs, out_plane * taps_per_output));
  auto compute = [&](const Taps& t, float* out, std::int64_t count) {
#if defined(CGR_DEPTHWISE_X86)
    if (avx512_) return taps_avx512(t, out, count);
    if (avx2_) return taps_avx2(t, out, count);
#endif
    taps_generic(t, out, count);
  };
  auto finish = [&](const float* src, const float* res, float* dst, float bias) {
#if defined(CGR_DEPTHWISE_X86)
    if (avx512_) return epilogue_avx512(src, res, dst, g.out_w, bias, activation);
#endif
    epilogue_generic(src, res, dst, g.out_w, bias, activation);
  };

  gemm::parallel_range(pool, planes, grain, [&](std::int64_t begin, std::int64_t end) {
    // The task's padded input (and flat output) scratch; one allocation per task, which
    // carries tens of microseconds of work at least. Padding cells stay zero throughout.
    std::vector<float> scratch(static_cast<std::size_t>(scratch_floats_), 0.0f);
    std::vector<const float*> rows(static_cast<std::size_t>(g.kernel_h));
    Taps taps{rows.data(), nullptr, g.kernel_h, g.kernel_w, g.stride_w, g.dilation_w};
    for (std::int64_t plane = begin; plane < end; ++plane) {
      const std::int64_t n = plane / g.out_channels;
      const std::int64_t oc = plane % g.out_channels;
      const float* in = input + (n * g.in_channels + oc / multiplier) * in_plane;
      const float bias = bias_.empty() ? 0.0f : bias_[static_cast<std::size_t>(oc)];
      const float* res = residual != nullptr ? residual + plane * out_plane : nullptr;
      float* out = output + plane * out_plane;
      taps.weight = weight_.data() + oc * taps_per_output;

      if (flat_) {
        float* padded = scratch.data();
        float* flat_out = padded + plane_floats_;
        for (std::int64_t ih = 0; ih < g.in_h; ++ih) {
          std::memcpy(padded + (g.pad_top + ih) * padded_w_ + g.pad_left, in + ih * g.in_w,
                      static_cast<std::size_t>(g.in_w) * sizeof(float));
        }
        for (std::int64_t kh = 0; kh < g.kernel_h; ++kh)
          rows[static_cast<std::size_t>(kh)] = padded + kh * g.dilation_h * padded_w_;
        compute(taps, flat_out, (g.out_h - 1) * padded_w_ + g.out_w);
        for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
          finish(flat_out + oh * padded_w_, res != nullptr ? res + oh * g.out_w : nullptr,
                 out + oh * g.out_w, bias);
        }
        continue;
      }

      const std::int64_t ring_mask = ring_rows_ - 1;
      const float* zero_row = scratch.data() + ring_rows_ * padded_w_;
      std::int64_t loaded_end = 0;  // input rows [0, loaded_end) have been copied to the ring
      for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
        const std::int64_t ih0 = oh * g.stride_h - g.pad_top;
        // Copy the rows of this output row's span not in the ring yet (rows arrive in order;
        // rows a stride skips are never copied).
        const std::int64_t span_end = std::min(g.in_h, ih0 + (g.kernel_h - 1) * g.dilation_h + 1);
        for (std::int64_t ih = std::max({loaded_end, ih0, std::int64_t{0}}); ih < span_end; ++ih) {
          std::memcpy(scratch.data() + (ih & ring_mask) * padded_w_ + g.pad_left, in + ih * g.in_w,
                      static_cast<std::size_t>(g.in_w) * sizeof(float));
        }
        loaded_end = std::max(loaded_end, span_end);
        for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
          const std::int64_t ih = ih0 + kh * g.dilation_h;
          rows[static_cast<std::size_t>(kh)] =
              ih < 0 || ih >= g.in_h ? zero_row : scratch.data() + (ih & ring_mask) * padded_w_;
        }
        float* out_row = out + oh * g.out_w;
        compute(taps, out_row, g.out_w);
        finish(out_row, res != nullptr ? res + oh * g.out_w : nullptr, out_row, bias);
      }
    }
  });
}

}  // namespace cgr::cpu
