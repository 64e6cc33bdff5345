// See lanes.hpp.
#include "cpu/lanes.hpp"

#include <algorithm>
#include <cstdint>

#include "cpu/gemm.hpp"

namespace cgr::cpu::lanes {
namespace {

struct ThreadBuffer {
  std::vector<float> floats;
  bool borrowed = false;
};
thread_local ThreadBuffer t_buffer;

float* aligned(std::vector<float>& v, std::size_t floats) {
  constexpr std::size_t kAlignFloats = 64 / sizeof(float);
  if (v.size() < floats + kAlignFloats) v.resize(floats + kAlignFloats);
  return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(v.data()) + 63) &
                                  ~std::uintptr_t{63});
}

}  // namespace

ThreadScratch::ThreadScratch(std::size_t floats) {
  if (!t_buffer.borrowed) {
    data_ = aligned(t_buffer.floats, floats);
    t_buffer.borrowed = true;
    owns_thread_buffer_ = true;
  } else {
    data_ = aligned(own_, floats);
  }
}

ThreadScratch::~ThreadScratch() {
  if (owns_thread_buffer_) t_buffer.borrowed = false;
}

#if defined(CGR_LANES_X86)
CGR_LANES_INTRINSICS_BEGIN  // see lanes::transpose16
    namespace {
  __attribute__((target("avx512f"))) void fill_points(float* padded, std::int64_t first,
                                                      std::int64_t count, __m512 value,
                                                      std::int64_t point_stride, __mmask16 mask) {
    if (mask == 0xffff) {
      for (std::int64_t i = 0; i < count; ++i)
        _mm512_storeu_ps(padded + (first + i) * point_stride, value);
    } else {
      for (std::int64_t i = 0; i < count; ++i)
        _mm512_mask_storeu_ps(padded + (first + i) * point_stride, mask, value);
    }
  }
}  // namespace

__attribute__((target("avx512f"))) void fill_padding(float* padded, std::int64_t padded_h,
                                                     const PaddedImage& image, float value,
                                                     std::int64_t point_stride,
                                                     std::int64_t channels) {
  const __m512 v = _mm512_set1_ps(value);
  const __mmask16 mask = channel_mask(channels);
  const std::int64_t w = image.padded_w, s = point_stride;
  const std::int64_t interior_end = std::min(padded_h, image.pad_top + image.in_h);
  fill_points(padded, 0, image.pad_top * w, v, s, mask);
  for (std::int64_t y = image.pad_top; y < interior_end; ++y) {
    fill_points(padded, y * w, image.pad_left, v, s, mask);
    fill_points(padded, y * w + image.pad_left + image.in_w, w - image.pad_left - image.in_w, v, s,
                mask);
  }
  fill_points(padded, interior_end * w, (padded_h - interior_end) * w, v, s, mask);
}

__attribute__((target("avx512f"))) void planes_to_lanes(const float* in, std::int64_t plane,
                                                        std::int64_t planes,
                                                        const PaddedImage& image, float* padded,
                                                        std::int64_t point_stride) {
  const std::int64_t count = image.in_h * image.in_w;
  // A dense block takes whole vectors (zeros in the lanes of missing planes); a block of a
  // wider point only its planes' lanes.
  const __mmask16 store_mask = point_stride == kLanes ? channel_mask(kLanes) : channel_mask(planes);
  std::int64_t ih = 0, iw = 0;
  for (std::int64_t i0 = 0; i0 < count; i0 += kLanes) {
    const std::int64_t n = std::min(kLanes, count - i0);
    const auto mask = static_cast<__mmask16>((1u << n) - 1u);
    __m512 r[16];
    for (std::int64_t c = 0; c < 16; ++c)
      r[c] = c < planes ? _mm512_maskz_loadu_ps(mask, in + c * plane + i0) : _mm512_setzero_ps();
    transpose16(r);
    for (std::int64_t j = 0; j < n; ++j) {
      float* at =
          padded + ((ih + image.pad_top) * image.padded_w + iw + image.pad_left) * point_stride;
      if (store_mask == 0xffff) {
        _mm512_storeu_ps(at, r[j]);
      } else {
        _mm512_mask_storeu_ps(at, store_mask, r[j]);
      }
      if (++iw == image.in_w) {
        iw = 0;
        ++ih;
      }
    }
  }
}

__attribute__((target("avx512f"))) void lanes_to_planes(const float* lanes, std::int64_t count,
                                                        std::int64_t planes, float* out,
                                                        std::int64_t plane,
                                                        std::int64_t point_stride) {
  for (std::int64_t t0 = 0; t0 < count; t0 += kLanes) {
    const std::int64_t n = std::min(kLanes, count - t0);
    const auto mask = static_cast<__mmask16>((1u << n) - 1u);
    __m512 r[16];
    load_points(lanes, t0, n, r, point_stride, planes);
    for (std::int64_t c = 0; c < planes; ++c)
      _mm512_mask_storeu_ps(out + c * plane + t0, mask, r[c]);
  }
}

namespace {
// The epilogue's activations that have a vector form here, with Activation's semantics to the
// bit (NaN passes through every one: the comparisons are ordered, so false for NaN).
enum class LaneActivation { none, relu, clip, leaky_relu };

template <LaneActivation A>
__attribute__((target("avx512f"), always_inline)) inline __m512 lane_activation(__m512 x,
                                                                                __m512 alpha,
                                                                                __m512 beta) {
  if constexpr (A == LaneActivation::relu) {  // x < 0 ? 0 : x
    return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ),
                              _mm512_setzero_ps());
  } else if constexpr (A == LaneActivation::clip) {  // x < low ? low : (x > high ? high : x)
    const __m512 high = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, beta, _CMP_GT_OQ), beta);
    return _mm512_mask_mov_ps(high, _mm512_cmp_ps_mask(x, alpha, _CMP_LT_OQ), alpha);
  } else if constexpr (A == LaneActivation::leaky_relu) {  // x > 0 ? x : x * slope
    return _mm512_mask_mov_ps(_mm512_mul_ps(x, alpha),
                              _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ), x);
  } else {
    (void)alpha, (void)beta;
    return x;
  }
}

template <LaneActivation A>
__attribute__((target("avx512f"))) void lanes_to_output(
    const float* lanes, std::int64_t point_stride, std::int64_t count, std::int64_t channels,
    const float* residual, float* out, std::int64_t plane, float alpha, float beta) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (std::int64_t t0 = 0; t0 < count; t0 += kLanes) {
    const std::int64_t n = std::min(kLanes, count - t0);
    const auto mask = static_cast<__mmask16>((1u << n) - 1u);
    __m512 r[16];
    load_points(lanes, t0, n, r, point_stride, channels);
    for (std::int64_t c = 0; c < channels; ++c) {
      __m512 x = r[c];
      if (residual != nullptr)
        x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask, residual + c * plane + t0));
      _mm512_mask_storeu_ps(out + c * plane + t0, mask, lane_activation<A>(x, va, vb));
    }
  }
}
}  // namespace

OutputFinish output_finish(math::ActivationKind kind) {
  switch (kind) {
    case math::ActivationKind::none:
      return lanes_to_output<LaneActivation::none>;
    case math::ActivationKind::relu:
      return lanes_to_output<LaneActivation::relu>;
    case math::ActivationKind::clip:
      return lanes_to_output<LaneActivation::clip>;
    case math::ActivationKind::leaky_relu:
      return lanes_to_output<LaneActivation::leaky_relu>;
    case math::ActivationKind::unary:
      break;
  }
  return nullptr;
}

__attribute__((target("avx512f"))) void lanes_to_nhwc(const float* lanes, std::int64_t count,
                                                      std::int64_t channels, float* out,
                                                      std::int64_t stride,
                                                      const gemm::GemmActivation& activation) {
  const __mmask16 mask = channel_mask(channels);
  if (!activation.clamp) {
    for (std::int64_t t = 0; t < count; ++t)
      _mm512_mask_storeu_ps(out + t * stride, mask, _mm512_loadu_ps(lanes + t * kLanes));
    return;
  }
  const __m512 low = _mm512_set1_ps(activation.clamp_low);
  const __m512 high = _mm512_set1_ps(activation.clamp_high);
  for (std::int64_t t = 0; t < count; ++t) {
    __m512 v = _mm512_loadu_ps(lanes + t * kLanes);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, low, _CMP_LT_OQ), low);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, high, _CMP_GT_OQ), high);
    _mm512_mask_storeu_ps(out + t * stride, mask, v);
  }
}
CGR_LANES_INTRINSICS_END
CGR_LANES_INTRINSICS_BEGIN
__attribute__((target("avx512f"))) void blocked_to_nhwc(const float* blocked, std::int64_t count,
                                                        std::int64_t channels, float* out,
                                                        std::int64_t stride,
                                                        const gemm::GemmActivation& activation) {
  const __m512 low = _mm512_set1_ps(activation.clamp ? activation.clamp_low : 0.0f);
  const __m512 high = _mm512_set1_ps(activation.clamp ? activation.clamp_high : 0.0f);
  const std::int64_t block_floats = count * kLanes;
  for (std::int64_t t = 0; t < count; ++t) {
    const float* src = blocked + t * kLanes;
    float* dst = out + t * stride;
    for (std::int64_t c0 = 0; c0 < channels; c0 += kLanes, src += block_floats) {
      __m512 v = _mm512_loadu_ps(src);
      if (activation.clamp) {
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, low, _CMP_LT_OQ), low);
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, high, _CMP_GT_OQ), high);
      }
      _mm512_mask_storeu_ps(dst + c0, channel_mask(channels - c0), v);
    }
  }
}
CGR_LANES_INTRINSICS_END
#endif

}  // namespace cgr::cpu::lanes
