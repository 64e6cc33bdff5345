// 16 planes in the lanes of a vector: the AVX-512 layout the depthwise conv and the pooling
// kernels compute in when planes are small or strided (each tap of each output is then one
// operation on a full vector, whatever the plane's width or stride). Between NCHW values a
// block of 16 consecutive planes is transposed into a zero- (or otherwise) padded
// channels-last copy on the way in and back, 16 x 16 at a time, on the way out; an NHWC value
// of the CPU layout plan is copied (or stored) 16 channels of a point at a time instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cgr/layers/element_math.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define CGR_LANES_X86 1
#include <immintrin.h>
#endif

namespace cgr::cpu::gemm {
struct GemmActivation;
}

namespace cgr::cpu::lanes {

inline constexpr std::int64_t kLanes = 16;

// The largest padded copy (floats) a lane path takes: 8 MiB, a 360 x 360 plane. Its scratch
// stays with each thread (ThreadScratch), and wide planes gain little from lanes (0.94x the
// time at 112 x 112), so larger planes take the plane-at-a-time paths.
inline constexpr std::int64_t kMaxPaddedFloats = std::int64_t{2} << 20;

// Scratch memory a task borrows from its thread for the length of one call: reused across
// calls and ops, so a task neither allocates nor faults pages in (a fresh vector per task cost
// GoogLeNet 3% in page faults and fills, perf). It keeps the largest size asked for (at most
// kMaxPaddedFloats and a strip) until the thread ends. 64-byte aligned. A thread whose scratch is
// already borrowed (a nested call) gets a buffer of its own.
class ThreadScratch {
 public:
  explicit ThreadScratch(std::size_t floats);
  ~ThreadScratch();
  ThreadScratch(const ThreadScratch&) = delete;
  ThreadScratch& operator=(const ThreadScratch&) = delete;
  float* data() const { return data_; }

 private:
  float* data_ = nullptr;
  bool owns_thread_buffer_ = false;
  std::vector<float> own_;  // the nested case
};

// Where a block of planes lands: the interior (in_h x in_w) of a padded_h x padded_w image,
// kLanes floats per point, at (pad_top, pad_left).
struct PaddedImage {
  std::int64_t in_h = 0, in_w = 0, pad_top = 0, pad_left = 0, padded_w = 0;
};

#if defined(CGR_LANES_X86)
// GCC 12's unpack and shuffle intrinsics start from _mm512_undefined_ps(), which its
// -Wmaybe-uninitialized reports once inlined; the value is never read. (Clang has no such
// warning and rejects the unknown name under -Werror.)
#if defined(__GNUC__) && !defined(__clang__)
#define CGR_LANES_INTRINSICS_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define CGR_LANES_INTRINSICS_END _Pragma("GCC diagnostic pop")
#else
#define CGR_LANES_INTRINSICS_BEGIN
#define CGR_LANES_INTRINSICS_END
#endif
CGR_LANES_INTRINSICS_BEGIN
// r[i] lane j <- r[j] lane i.
__attribute__((target("avx512f"), always_inline)) inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  // r[4i + k] now holds, in each 128-bit quarter q, rows 4i..4i+3 of column 4q + k.
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 4; ++k) {
      t[8 * i + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0x88);
      t[8 * i + 4 + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0xdd);
    }
  }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
    r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
  }
}

// The lanes [0, channels) of a vector: the channels a block holds (the last block of a
// channel count that is no multiple of 16 holds fewer).
__attribute__((target("avx512f"), always_inline)) inline __mmask16 channel_mask(
    std::int64_t channels) {
  return channels >= kLanes ? __mmask16{0xffff}
                            : static_cast<__mmask16>((1u << static_cast<unsigned>(channels)) - 1u);
}

// Loads points [t0, t0 + n) of a channels-last result (a point's 16 lanes at `point_stride`
// floats from the last: kLanes for a dense block, C for a block of an NHWC tensor of C
// channels, of which the lanes [0, channels) are read) and transposes them: r[c] then holds
// plane c's n points (lanes past n, and planes past `channels`, are zero).
__attribute__((target("avx512f"), always_inline)) inline void load_points(
    const float* lanes, std::int64_t t0, std::int64_t n, __m512 r[16],
    std::int64_t point_stride = kLanes, std::int64_t channels = kLanes) {
  if (channels >= kLanes) {
    for (std::int64_t j = 0; j < 16; ++j)
      r[j] = j < n ? _mm512_loadu_ps(lanes + (t0 + j) * point_stride) : _mm512_setzero_ps();
  } else {
    const __mmask16 mask = channel_mask(channels);
    for (std::int64_t j = 0; j < 16; ++j)
      r[j] = j < n ? _mm512_maskz_loadu_ps(mask, lanes + (t0 + j) * point_stride)
                   : _mm512_setzero_ps();
  }
  transpose16(r);
}
CGR_LANES_INTRINSICS_END

// In the functions below a point's 16 lanes lie `point_stride` floats after the last point's:
// kLanes for a dense block (16 channels, nChw16c), C for 16 channels of an NHWC tensor of C
// channels (whose last block may hold fewer: only the lanes [0, channels) are then touched).

// Sets every padding cell of a padded_h x padded_w image around the interior `image`
// describes to `value`; the interior is left as it is. AVX-512 only.
void fill_padding(float* padded, std::int64_t padded_h, const PaddedImage& image, float value,
                  std::int64_t point_stride = kLanes, std::int64_t channels = kLanes);

// `planes` (<= 16) planes of in_h x in_w, `plane` floats apart, into the interior of `image`;
// in a dense block (point_stride kLanes) the lanes of missing planes get zeros, in a wider one
// they are not written. The padding cells are not written (the caller fills them once: they
// are the same for every block). AVX-512 only.
void planes_to_lanes(const float* in, std::int64_t plane, std::int64_t planes,
                     const PaddedImage& image, float* padded, std::int64_t point_stride = kLanes);

// The inverse for a channels-last result of `count` points: lanes [0, planes) out to planes
// `plane` floats apart. AVX-512 only.
void lanes_to_planes(const float* lanes, std::int64_t count, std::int64_t planes, float* out,
                     std::int64_t plane, std::int64_t point_stride = kLanes);

// `count` points of a dense channels-last block (kLanes floats each) into channels [c0, c0 +
// channels) of an NHWC output of `stride` channels (`out` at channel c0 of the first point),
// clamped on the way where the activation is a ReLU or a Clip (the GEMM micro-kernels' clamp:
// NaN passes, as in math::clip); any other activation is the caller's. AVX-512 only.
void lanes_to_nhwc(const float* lanes, std::int64_t count, std::int64_t channels, float* out,
                   std::int64_t stride, const gemm::GemmActivation& activation);

// `count` points of an nChw16c result of `channels` channels (block b's lanes of point t at
// (b * count + t) * kLanes) into NHWC points `stride` floats apart: one pass over the output,
// point by point, clamped on the way as lanes_to_nhwc does. AVX-512 only.
void blocked_to_nhwc(const float* blocked, std::int64_t count, std::int64_t channels, float* out,
                     std::int64_t stride, const gemm::GemmActivation& activation);

// The end of an epilogue on `count` points of a channels-last result (bias already in): lanes
// [0, channels) out to planes `plane` floats apart, plus the residual (the same offsets, or
// null), through the activation, with Activation's semantics to the bit.
using OutputFinish = void (*)(const float* lanes, std::int64_t point_stride, std::int64_t count,
                              std::int64_t channels, const float* residual, float* out,
                              std::int64_t plane, float alpha, float beta);
// The finish for an activation kind, or null for a Unary function (no vector form here: such
// an epilogue goes through lanes_to_planes and flat_epilogue). AVX-512 only.
OutputFinish output_finish(math::ActivationKind kind);
#endif

}  // namespace cgr::cpu::lanes
