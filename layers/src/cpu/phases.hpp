// A padded plane split into stride phases: the layout the CPU's direct conv, depthwise conv and
// pooling kernels read, so that a window tap at any stride is a contiguous run.
//
// Phase (py, px) of a plane padded by (pad_top, pad_left) holds the padded rows py, py + sh, ...
// and columns px, px + sw, ...: phase row i, column j is padded (i * sh + py, j * sw + px). An
// output (oh, ow) of a window with stride (sh, sw) reads tap (r, q) (padded offsets from the
// window's corner) in phase (r % sh, q % sw) at (oh + r / sh, ow + q / sw): over the flat index
// t = oh * phase_w + ow every tap is base + tap_offset(r, q) + t. At stride 1 the one phase is
// the padded plane.
#pragma once

#include <cstdint>

#include "cgr/layers/element_math.hpp"

namespace cgr::cpu {

struct PhaseLayout {
  std::int64_t in_h = 0, in_w = 0, pad_top = 0, pad_left = 0, stride_h = 1, stride_w = 1;
  std::int64_t phase_h = 0, phase_w = 0;  // one phase's rows and row width
  // Bit p set: some tap reads row (column) phase p; copy() fills only those. All by default;
  // read_by() narrows them to a window's taps (a 1x1 stride-2 conv reads one phase of four).
  std::uint64_t rows_read = ~std::uint64_t{0}, cols_read = ~std::uint64_t{0};

  // padded_h / padded_w: the padded plane's size, at least as large as every window reaches.
  static PhaseLayout make(std::int64_t in_h, std::int64_t in_w, std::int64_t pad_top,
                          std::int64_t pad_left, std::int64_t padded_h, std::int64_t padded_w,
                          std::int64_t stride_h, std::int64_t stride_w);
  // Only the phases the taps r = kh * dilation_h (q = kw * dilation_w) of a kernel_h x
  // kernel_w window read are filled from then on.
  void read_by(std::int64_t kernel_h, std::int64_t dilation_h, std::int64_t kernel_w,
               std::int64_t dilation_w);
  bool row_read(std::int64_t py) const { return py >= 64 || ((rows_read >> py) & 1u) != 0; }
  bool col_read(std::int64_t px) const { return px >= 64 || ((cols_read >> px) & 1u) != 0; }
  std::int64_t phases() const { return stride_h * stride_w; }
  std::int64_t phase_plane() const { return phase_h * phase_w; }
  std::int64_t floats() const { return phases() * phase_plane(); }
  // Where tap (r, q) of output t = 0 lies, from the first phase's start.
  std::int64_t tap_offset(std::int64_t r, std::int64_t q) const {
    return ((r % stride_h) * stride_w + q % stride_w) * phase_plane() + (r / stride_h) * phase_w +
           q / stride_w;
  }
  // Copies the in_h x in_w plane `in` into its phases at `dst` (floats() floats; the phases
  // no tap reads, see read_by, are left as they are). With
  // write_padding every padding cell is set to `pad` too (dst holds other data); without, the
  // padding cells are left as they are (the caller filled them once: they are the same cells
  // for every plane).
  void copy(const float* in, float* dst, bool write_padding, float pad) const;
};

// The flat result of a kernel over phases (t = oh * phase_w + ow: rows src_stride apart, the
// junk columns between them dropped) out to a dense rows x cols plane, with the GEMM's
// epilogue in its order: dst[r][i] = activation(src[r][i] (+ *bias) (+ residual[r][i])); bias
// and residual may be null; src is scratch (narrow rows are finished in place, then copied).
// Each element on its own, so the AVX-512 loops (avx512: the caller's micro-kernel runs
// AVX-512) give the baseline loops' bits.
void flat_epilogue(float* src, std::int64_t src_stride, const float* residual, float* dst,
                   std::int64_t rows, std::int64_t cols, const float* bias,
                   const math::Activation& activation, bool avx512);

// A block of a flat result and its place in a dense output: output row r (a channel) is the
// plane dst + r * plane (residual likewise); flat column t lands at (t / phase_w, t % phase_w)
// of its plane unless it is one of the junk columns past out_w. avx512: AVX-512 copies.
struct FlatTarget {
  float* dst = nullptr;
  const float* residual = nullptr;
  std::int64_t plane = 0;
  std::int64_t phase_w = 0, out_w = 0;
  bool avx512 = false;
};
// Copies the valid columns of rows [row0, row0 + rows) x flat columns [first, first + cols) of
// a flat result (src, row stride ld) to target.dst.
void flat_scatter_block(const FlatTarget& target, float* src, std::int64_t ld, std::int64_t row0,
                        std::int64_t rows, std::int64_t first, std::int64_t cols);
// The inverse, from target.residual: the same block in flat layout into dst (row stride ld);
// junk columns are left as they are (the caller zeroes dst first).
void flat_gather_block(const FlatTarget& target, float* dst, std::int64_t ld, std::int64_t row0,
                       std::int64_t rows, std::int64_t first, std::int64_t cols);

}  // namespace cgr::cpu
