// See depthwise_conv_cpu.hpp.
//
// The arithmetic reads a zero-padded copy of the input plane, so every output element is the
// same chain of fma over (kh, kw) in order, padding terms included (adding w * 0 leaves a sum
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
