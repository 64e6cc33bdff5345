// See phases.hpp.
#include "cpu/phases.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#define CGR_PHASES_X86 1
#include <immintrin.h>
#endif

namespace cgr::cpu {
namespace {

constexpr std::int64_t kLanes = 16;

void copy_row_generic(const float* src, float* dst, std::int64_t count) {
  std::memcpy(dst, src, static_cast<std::size_t>(count) * sizeof(float));
}

#if defined(CGR_PHASES_X86)
// Masked vector moves: MobileNet's and GoogLeNet's 7- to 14-wide rows without a memcpy call each.
__attribute__((target("avx512f"))) inline void copy_row_avx512(const float* src, float* dst,
                                                               std::int64_t count) {
  std::int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes)
    _mm512_storeu_ps(dst + i, _mm512_loadu_ps(src + i));
  if (i < count) {
    const auto mask = static_cast<__mmask16>((1u << (count - i)) - 1u);
    _mm512_mask_storeu_ps(dst + i, mask, _mm512_maskz_loadu_ps(mask, src + i));
  }
}

// Stride 2 across: input row `in` into the two column phases of its row phase at once:
// padded column x + pad_left goes to phase (x + pad_left) % 2, column (x + pad_left) / 2; 32
// inputs per step, split into even and odd lanes by two permutes.
__attribute__((target("avx512f"))) void deinterleave_row_avx512(const float* in, std::int64_t in_w,
                                                                std::int64_t pad_left,
                                                                float* phase0, float* phase1) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  std::int64_t x = 0;
  if (pad_left % 2 == 1 && in_w > 0) {
    // The first input lands in phase 1; from the second on, pairs start at an even column.
    phase1[pad_left / 2] = in[0];
    x = 1;
  }
  for (; x + 2 * kLanes <= in_w; x += 2 * kLanes) {
    const __m512 a = _mm512_loadu_ps(in + x);
    const __m512 b = _mm512_loadu_ps(in + x + kLanes);
    const std::int64_t j = (x + pad_left) / 2;
    _mm512_storeu_ps(phase0 + j, _mm512_permutex2var_ps(a, even, b));
    _mm512_storeu_ps(phase1 + j, _mm512_permutex2var_ps(a, odd, b));
  }
  for (; x < in_w; ++x) {
    const std::int64_t padded = x + pad_left;
    (padded % 2 == 0 ? phase0 : phase1)[padded / 2] = in[x];
  }
}

bool has_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return yes;
}
#endif

// flat_epilogue's loop over one run of an output row, for one activation: the bias and
// residual cases spelled out, so each is a plain vectorisable loop.
template <typename Fn>
__attribute__((always_inline)) inline void epilogue_run(const float* s, const float* res, float* d,
                                                        std::int64_t count, const float* bias,
                                                        Fn fn) {
  if (bias != nullptr) {
    const float b = *bias;
    if (res != nullptr) {
      for (std::int64_t i = 0; i < count; ++i)
        d[i] = fn(s[i] + b + res[i]);
    } else {
      for (std::int64_t i = 0; i < count; ++i)
        d[i] = fn(s[i] + b);
    }
  } else if (res != nullptr) {
    for (std::int64_t i = 0; i < count; ++i)
      d[i] = fn(s[i] + res[i]);
  } else {
    for (std::int64_t i = 0; i < count; ++i)
      d[i] = fn(s[i]);
  }
}

// Rows narrower than this (MobileNet's 7- to 28-wide planes) go through the epilogue as one
// flat run, in place, and are then copied out: row by row, most of each row fell into the
// vector loop's scalar remainder (measured: the depthwise epilogue cost 3x its taps).
constexpr std::int64_t kNarrowRow = 4 * kLanes;

template <typename Fn>
__attribute__((always_inline)) inline void epilogue_rows(
    float* src, std::int64_t src_stride, const float* residual, float* dst, std::int64_t rows,
    std::int64_t cols, const float* bias, Fn fn,
    void (*copy_row)(const float*, float*, std::int64_t)) {
  if (src_stride == cols) {  // no junk columns: one run
    epilogue_run(src, residual, dst, rows * cols, bias, fn);
    return;
  }
  if (residual == nullptr && rows > 1 && cols < kNarrowRow) {
    epilogue_run(src, nullptr, src, (rows - 1) * src_stride + cols, bias, fn);
    for (std::int64_t r = 0; r < rows; ++r)
      copy_row(src + r * src_stride, dst + r * cols, cols);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    epilogue_run(src + r * src_stride, residual != nullptr ? residual + r * cols : nullptr,
                 dst + r * cols, cols, bias, fn);
  }
}

// Calls body(offset in the block, offset in the output plane, count) for each run of valid
// columns of flat columns [first, first + cols).
template <typename Body>
__attribute__((always_inline)) inline void for_each_valid_run(const FlatTarget& f,
                                                              std::int64_t first, std::int64_t cols,
                                                              Body body) {
  const std::int64_t end = first + cols;
  for (std::int64_t t = first; t < end;) {
    const std::int64_t oh = t / f.phase_w;
    const std::int64_t ow = t % f.phase_w;
    if (ow >= f.out_w) {  // junk: on to the next output row
      t += f.phase_w - ow;
      continue;
    }
    const std::int64_t count = std::min(f.out_w - ow, end - t);
    body(t - first, oh * f.out_w + ow, count);
    t += count;
  }
}

void flat_epilogue_generic(float* src, std::int64_t src_stride, const float* residual, float* dst,
                           std::int64_t rows, std::int64_t cols, const float* bias,
                           const math::Activation& activation) {
  math::with_activation_fn(activation, [&](auto fn) {
    epilogue_rows(src, src_stride, residual, dst, rows, cols, bias, fn, copy_row_generic);
  });
}

#if defined(CGR_PHASES_X86)
__attribute__((target("avx512f"))) void flat_epilogue_avx512(float* src, std::int64_t src_stride,
                                                             const float* residual, float* dst,
                                                             std::int64_t rows, std::int64_t cols,
                                                             const float* bias,
                                                             const math::Activation& activation) {
  // Each activation spelled out: a generic lambda's body would be compiled for the baseline
  // (measured: the baseline's 4-wide loop was a third of a 3x3 stride-2 conv's time).
  switch (activation.kind) {
    case math::ActivationKind::none:
      return epilogue_rows(src, src_stride, residual, dst, rows, cols, bias, math::IdentityFn{},
                           copy_row_avx512);
    case math::ActivationKind::relu:
      return epilogue_rows(src, src_stride, residual, dst, rows, cols, bias, math::ReluFn{},
                           copy_row_avx512);
    case math::ActivationKind::leaky_relu:
      return epilogue_rows(src, src_stride, residual, dst, rows, cols, bias,
                           math::LeakyReluFn{activation.alpha}, copy_row_avx512);
    case math::ActivationKind::clip:
      return epilogue_rows(src, src_stride, residual, dst, rows, cols, bias,
                           math::ClipFn{activation.alpha, activation.beta}, copy_row_avx512);
    case math::ActivationKind::unary:
      return epilogue_rows(src, src_stride, residual, dst, rows, cols, bias,
                           math::UnaryFn{activation.unary, activation.alpha, activation.beta},
                           copy_row_avx512);
  }
}
#endif

// Copies the valid runs of a block of a flat result (row stride ld) to the output planes at
// `plane` (ToPlane: a scatter) or from them (a gather).
template <bool ToPlane, typename Plane, typename Copy>
__attribute__((always_inline)) inline void move_valid_runs(const FlatTarget& f, float* block,
                                                           std::int64_t ld, Plane* plane,
                                                           std::int64_t row0, std::int64_t rows,
                                                           std::int64_t first, std::int64_t cols,
                                                           Copy copy) {
  for_each_valid_run(f, first, cols, [&](std::int64_t at_block, std::int64_t at, std::int64_t n) {
    for (std::int64_t r = 0; r < rows; ++r) {
      float* b = block + r * ld + at_block;
      Plane* o = plane + (row0 + r) * f.plane + at;
      if constexpr (ToPlane) {
        copy(b, o, n);
      } else {
        copy(o, b, n);
      }
    }
  });
}

template <bool ToPlane, typename Plane>
void move_block(const FlatTarget& f, float* block, std::int64_t ld, Plane* plane, std::int64_t row0,
                std::int64_t rows, std::int64_t first, std::int64_t cols) {
#if defined(CGR_PHASES_X86)
  if (f.avx512 && has_avx512()) {
    return move_valid_runs<ToPlane>(f, block, ld, plane, row0, rows, first, cols, copy_row_avx512);
  }
#endif
  move_valid_runs<ToPlane>(f, block, ld, plane, row0, rows, first, cols, copy_row_generic);
}

// The valid range [begin, end) of phase indices k whose input index k * stride + first lies
// in [0, size), clamped to [0, count).
void valid_range(std::int64_t first, std::int64_t stride, std::int64_t size, std::int64_t count,
                 std::int64_t& begin, std::int64_t& end) {
  begin = std::clamp<std::int64_t>(first >= 0 ? 0 : (-first + stride - 1) / stride, 0, count);
  end = std::clamp<std::int64_t>(size - first <= 0 ? 0 : (size - first + stride - 1) / stride,
                                 begin, count);
}

}  // namespace

void PhaseLayout::read_by(std::int64_t kernel_h, std::int64_t dilation_h, std::int64_t kernel_w,
                          std::int64_t dilation_w) {
  auto mask = [](std::int64_t kernel, std::int64_t dilation, std::int64_t stride) {
    if (stride > 64) return ~std::uint64_t{0};
    std::uint64_t bits = 0;
    for (std::int64_t k = 0; k < kernel; ++k)
      bits |= std::uint64_t{1} << ((k * dilation) % stride);
    return bits;
  };
  rows_read = mask(kernel_h, dilation_h, stride_h);
  cols_read = mask(kernel_w, dilation_w, stride_w);
}

PhaseLayout PhaseLayout::make(std::int64_t in_h, std::int64_t in_w, std::int64_t pad_top,
                              std::int64_t pad_left, std::int64_t padded_h, std::int64_t padded_w,
                              std::int64_t stride_h, std::int64_t stride_w) {
  PhaseLayout l;
  l.in_h = in_h;
  l.in_w = in_w;
  l.pad_top = pad_top;
  l.pad_left = pad_left;
  l.stride_h = stride_h;
  l.stride_w = stride_w;
  l.phase_h = (padded_h + stride_h - 1) / stride_h;
  l.phase_w = (padded_w + stride_w - 1) / stride_w;
  return l;
}

void PhaseLayout::copy(const float* in, float* dst, bool write_padding, float pad) const {
#if defined(CGR_PHASES_X86)
  const bool avx512 = has_avx512();
  const auto copy_row = avx512 ? copy_row_avx512 : copy_row_generic;
#else
  const bool avx512 = false;
  const auto copy_row = copy_row_generic;
#endif
  if (write_padding) {
    for (std::int64_t py = 0; py < stride_h; ++py) {
      if (!row_read(py)) continue;
      std::int64_t i0 = 0, i1 = 0;
      valid_range(py - pad_top, stride_h, in_h, phase_h, i0, i1);
      for (std::int64_t px = 0; px < stride_w; ++px) {
        if (!col_read(px)) continue;
        std::int64_t j0 = 0, j1 = 0;
        valid_range(px - pad_left, stride_w, in_w, phase_w, j0, j1);
        float* phase = dst + (py * stride_w + px) * phase_plane();
        std::fill(phase, phase + i0 * phase_w, pad);
        for (std::int64_t i = i0; i < i1; ++i) {
          std::fill(phase + i * phase_w, phase + i * phase_w + j0, pad);
          std::fill(phase + i * phase_w + j1, phase + (i + 1) * phase_w, pad);
        }
        std::fill(phase + i1 * phase_w, phase + phase_plane(), pad);
      }
    }
  }
  // The input rows in memory order, each into its row phase: sequential reads let the hardware
  // prefetcher run ahead of a plane that comes from DRAM (reading every stride_h-th row per
  // phase did not, and a stride-2 depthwise conv spent half its time there).
  for (std::int64_t y = 0; y < in_h; ++y) {
    const std::int64_t py = (y + pad_top) % stride_h;
    const std::int64_t i = (y + pad_top) / stride_h;
    if (i >= phase_h || !row_read(py)) continue;  // no window reads the row
    const float* in_row = in + y * in_w;
    float* row_phase = dst + py * stride_w * phase_plane() + i * phase_w;
#if defined(CGR_PHASES_X86)
    if (avx512 && stride_w == 2) {
      // Both column phases at once.
      deinterleave_row_avx512(in_row, in_w, pad_left, row_phase, row_phase + phase_plane());
      continue;
    }
#endif
    for (std::int64_t px = 0; px < stride_w; ++px) {
      if (!col_read(px)) continue;
      const std::int64_t x0 = px - pad_left;  // input column of phase column 0
      std::int64_t j0 = 0, j1 = 0;
      valid_range(x0, stride_w, in_w, phase_w, j0, j1);
      float* row = row_phase + px * phase_plane();
      if (stride_w == 1) {
        copy_row(in_row + (j0 + x0), row + j0, j1 - j0);
      } else {
        for (std::int64_t j = j0; j < j1; ++j)
          row[j] = in_row[j * stride_w + x0];
      }
    }
  }
}

void flat_epilogue(float* src, std::int64_t src_stride, const float* residual, float* dst,
                   std::int64_t rows, std::int64_t cols, const float* bias,
                   const math::Activation& activation, bool avx512) {
#if defined(CGR_PHASES_X86)
  if (avx512 && has_avx512()) {
    return flat_epilogue_avx512(src, src_stride, residual, dst, rows, cols, bias, activation);
  }
#else
  (void)avx512;
#endif
  flat_epilogue_generic(src, src_stride, residual, dst, rows, cols, bias, activation);
}

void flat_scatter_block(const FlatTarget& target, float* src, std::int64_t ld, std::int64_t row0,
                        std::int64_t rows, std::int64_t first, std::int64_t cols) {
  move_block<true>(target, src, ld, target.dst, row0, rows, first, cols);
}

void flat_gather_block(const FlatTarget& target, float* dst, std::int64_t ld, std::int64_t row0,
                       std::int64_t rows, std::int64_t first, std::int64_t cols) {
  move_block<false>(target, dst, ld, target.residual, row0, rows, first, cols);
}

}  // namespace cgr::cpu
