// CPU transposed convolution, the way Caffe and PyTorch's CPU path compute it: per image and
// group g,
//   columns_g (M x N) = W_gᵀ (M x K) * X_g (K x N)
// with K = in channels per group, M = out channels per group x kernel_h x kernel_w, N = in_h x
// in_w (one column per input pixel: what that pixel adds to every tap of its window), then
// col2im adds each column row (oc, kh, kw) into output channel oc, shifted to the tap's place:
//   y[oc, ih * stride_h + kh * dilation_h - pad_top, iw * stride_w + kw * dilation_w - pad_left]
//     += columns[(oc, kh, kw), (ih, iw)].
// The product is the costly part and runs on the GEMM core (register-blocked micro-kernels,
// packed operands); the weights are packed once, the input once per run. The scatter-add is
// one pass over the columns, split by output channel so that no two threads add into one
// plane: every output element sums its bias and contributions in one fixed order (kh, kw, ih,
// iw), so the result does not depend on the thread count.
#include "cpu/conv_transpose_cpu.hpp"

#include <algorithm>
#include <cstring>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/gemm.hpp"

namespace cgr::cpu {
namespace {

// Multiply-adds one GEMM task should at least carry (~20-40 us against a few us of overhead).
constexpr std::int64_t kTaskMacs = std::int64_t{1} << 20;
// Floats one packing or scatter task should at least move.
constexpr std::int64_t kTaskFloats = std::int64_t{1} << 15;

// Floor division for possibly negative numerators (positive divisor).
std::int64_t floor_div(std::int64_t x, std::int64_t d) {
  return x >= 0 ? x / d : -((-x + d - 1) / d);
}

// The input positions i in [0, in) whose output position i * stride + shift lies in [0, out).
std::pair<std::int64_t, std::int64_t> inside_range(std::int64_t in, std::int64_t out,
                                                   std::int64_t stride, std::int64_t shift) {
  const std::int64_t begin = std::clamp<std::int64_t>(-floor_div(shift, stride), 0, in);
  const std::int64_t end =
      std::clamp<std::int64_t>(floor_div(out - 1 - shift, stride) + 1, begin, in);
  return {begin, end};
}

// Packs A = Bᵀ, with B [k x m] row-major (row stride ldb), into the GEMM's row strips of mr:
// a[(strip * k + kk) * mr + r] = B[kk][strip * mr + r], zero past m. Each strip row is a
// contiguous run of B.
void pack_a_from_transposed(const float* b, std::int64_t ldb, std::int64_t m, std::int64_t k,
                            std::int64_t mr, float* dst) {
  for (std::int64_t row0 = 0; row0 < m; row0 += mr) {
    const std::int64_t rows = std::min(mr, m - row0);
    for (std::int64_t kk = 0; kk < k; ++kk) {
      float* out = dst + kk * mr;
      std::memcpy(out, b + kk * ldb + row0, static_cast<std::size_t>(rows) * sizeof(float));
      std::fill(out + rows, out + mr, 0.0f);
    }
    dst += k * mr;
  }
}

// Packs column strip `strip` of B [k x n] row-major (row stride ldb) into the GEMM's layout:
// dst[kk * nr + j] = B[kk][strip * nr + j], zero past n.
void pack_b_strip(const float* b, std::int64_t ldb, std::int64_t k, std::int64_t n, std::int64_t nr,
                  std::int64_t strip, float* dst) {
  const std::int64_t col0 = strip * nr;
  const std::int64_t cols = std::min(nr, n - col0);
  for (std::int64_t kk = 0; kk < k; ++kk) {
    float* out = dst + kk * nr;
    std::memcpy(out, b + kk * ldb + col0, static_cast<std::size_t>(cols) * sizeof(float));
    std::fill(out + cols, out + nr, 0.0f);
  }
}

}  // namespace

ConvTransposeKernelCpu::ConvTransposeKernelCpu(const ConvTranspose2dGeometry& geometry,
                                               std::span<const float> weight,
                                               std::span<const float> bias)
    : geometry_(geometry), kernel_(&gemm::best_kernel()) {
  const ConvTranspose2dGeometry& g = geometry_;
  if (g.batch < 0 || g.in_channels <= 0 || g.out_channels <= 0 || g.in_h <= 0 || g.in_w <= 0 ||
      g.kernel_h <= 0 || g.kernel_w <= 0 || g.stride_h <= 0 || g.stride_w <= 0 ||
      g.dilation_h <= 0 || g.dilation_w <= 0 || g.groups <= 0 || g.pad_top < 0 || g.pad_left < 0 ||
      g.pad_bottom < 0 || g.pad_right < 0 || g.output_padding_h < 0 || g.output_padding_w < 0) {
    fail(
        "conv transpose: invalid geometry (batch {}, channels {}->{}, input {}x{}, kernel {}x{}, "
        "stride {}x{}, dilation {}x{}, groups {}, pads {},{},{},{}, output padding {}x{})",
        g.batch, g.in_channels, g.out_channels, g.in_h, g.in_w, g.kernel_h, g.kernel_w, g.stride_h,
        g.stride_w, g.dilation_h, g.dilation_w, g.groups, g.pad_top, g.pad_left, g.pad_bottom,
        g.pad_right, g.output_padding_h, g.output_padding_w);
  }
  if (g.in_channels % g.groups != 0 || g.out_channels % g.groups != 0) {
    fail("conv transpose: groups {} must divide in_channels {} and out_channels {}", g.groups,
         g.in_channels, g.out_channels);
  }
  const std::int64_t expect_h = conv_transpose_output_size(
      g.in_h, g.kernel_h, g.stride_h, g.pad_top, g.pad_bottom, g.output_padding_h, g.dilation_h);
  const std::int64_t expect_w = conv_transpose_output_size(
      g.in_w, g.kernel_w, g.stride_w, g.pad_left, g.pad_right, g.output_padding_w, g.dilation_w);
  if (g.out_h != expect_h || g.out_w != expect_w || g.out_h <= 0 || g.out_w <= 0) {
    fail("conv transpose: output size {}x{} does not match the geometry, which gives {}x{}",
         g.out_h, g.out_w, expect_h, expect_w);
  }
  const std::int64_t out_per_group = g.out_channels / g.groups;
  group_m_ = out_per_group * g.kernel_h * g.kernel_w;
  group_k_ = g.in_channels / g.groups;
  const auto weight_size = static_cast<std::size_t>(g.in_channels * group_m_);
  if (weight.size() != weight_size) {
    fail("conv transpose: weight has {} values, expected {} ({}x{}x{}x{})", weight.size(),
         weight_size, g.in_channels, out_per_group, g.kernel_h, g.kernel_w);
  }
  if (!bias.empty() && bias.size() != static_cast<std::size_t>(g.out_channels)) {
    fail("conv transpose: bias has {} values, expected {}", bias.size(), g.out_channels);
  }

  const std::int64_t mr = kernel_->mr;
  m_padded_ = gemm::round_up(group_m_, mr);
  columns_ = g.in_h * g.in_w;
  col_strips_ = gemm::ceil_div(columns_, kernel_->nr);
  packed_weight_ = gemm::PackedBuffer(static_cast<std::size_t>(g.groups * m_padded_ * group_k_));
  // Group g's weights are the rows [g * K, (g + 1) * K) of the [in, M] weight: W_gᵀ is M x K.
  for (std::int64_t group = 0; group < g.groups; ++group) {
    pack_a_from_transposed(weight.data() + group * group_k_ * group_m_, group_m_, group_m_,
                           group_k_, mr, packed_weight_.data() + group * m_padded_ * group_k_);
  }
  bias_.assign(bias.begin(), bias.end());

  kh_begin_.resize(static_cast<std::size_t>(g.kernel_h));
  kh_end_.resize(static_cast<std::size_t>(g.kernel_h));
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    const auto [begin, end] =
        inside_range(g.in_h, g.out_h, g.stride_h, kh * g.dilation_h - g.pad_top);
    kh_begin_[static_cast<std::size_t>(kh)] = begin;
    kh_end_[static_cast<std::size_t>(kh)] = end;
  }
  kw_begin_.resize(static_cast<std::size_t>(g.kernel_w));
  kw_end_.resize(static_cast<std::size_t>(g.kernel_w));
  for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
    const auto [begin, end] =
        inside_range(g.in_w, g.out_w, g.stride_w, kw * g.dilation_w - g.pad_left);
    kw_begin_[static_cast<std::size_t>(kw)] = begin;
    kw_end_[static_cast<std::size_t>(kw)] = end;
  }
}

std::size_t ConvTransposeKernelCpu::workspace_bytes() const {
  const std::int64_t panel = geometry_.groups * group_k_ * col_strips_ * kernel_->nr;
  const std::int64_t columns = geometry_.groups * group_m_ * columns_;
  return static_cast<std::size_t>(panel + columns) * sizeof(float);
}

void ConvTransposeKernelCpu::col2im_channel(const float* columns, std::int64_t channel,
                                            float* plane) const {
  const ConvTranspose2dGeometry& g = geometry_;
  const std::int64_t out_per_group = g.out_channels / g.groups;
  const std::int64_t group = channel / out_per_group;
  const std::int64_t local = channel % out_per_group;
  // Rows (local, kh, kw) of the group's M x N columns.
  const float* rows = columns + (group * group_m_ + local * g.kernel_h * g.kernel_w) * columns_;
  for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
    const std::int64_t row_shift = kh * g.dilation_h - g.pad_top;
    const std::int64_t ih_begin = kh_begin_[static_cast<std::size_t>(kh)];
    const std::int64_t ih_end = kh_end_[static_cast<std::size_t>(kh)];
    for (std::int64_t kw = 0; kw < g.kernel_w; ++kw, rows += columns_) {
      const std::int64_t col_shift = kw * g.dilation_w - g.pad_left;
      const std::int64_t iw_begin = kw_begin_[static_cast<std::size_t>(kw)];
      const std::int64_t iw_end = kw_end_[static_cast<std::size_t>(kw)];
      for (std::int64_t ih = ih_begin; ih < ih_end; ++ih) {
        float* out = plane + (ih * g.stride_h + row_shift) * g.out_w + col_shift;
        const float* in = rows + ih * g.in_w;
        if (g.stride_w == 1) {
          for (std::int64_t iw = iw_begin; iw < iw_end; ++iw)
            out[iw] += in[iw];
        } else {
          const std::int64_t stride = g.stride_w;
          for (std::int64_t iw = iw_begin; iw < iw_end; ++iw)
            out[iw * stride] += in[iw];
        }
      }
    }
  }
}

void ConvTransposeKernelCpu::run(const float* input, float* output, float* workspace,
                                 ThreadPool* pool) const {
  const ConvTranspose2dGeometry& g = geometry_;
  if (g.batch == 0) return;
  const std::int64_t mr = kernel_->mr;
  const std::int64_t nr = kernel_->nr;
  const std::int64_t groups = g.groups;
  const std::int64_t strips = col_strips_;
  const std::int64_t m_strips = m_padded_ / mr;
  const std::int64_t panel = group_k_ * strips * nr;  // floats of one group's packed input
  float* const packed_input = workspace;
  float* const columns = workspace + groups * panel;
  const std::int64_t threads = pool ? pool->size() : 1;

  // GEMM tasks: (group, block of row strips, block of column strips). Halve the longer side
  // of the blocks until there are a few tasks per thread or a task would get too little work.
  std::int64_t task_m = m_strips, task_n = strips;
  const auto tasks = [&](std::int64_t m, std::int64_t n) {
    return groups * gemm::ceil_div(m_strips, m) * gemm::ceil_div(strips, n);
  };
  while (threads > 1 && tasks(task_m, task_n) < 4 * threads) {
    const bool split_n = task_n > 1 && (task_n * nr >= task_m * mr || task_m == 1);
    const std::int64_t m = split_n ? task_m : gemm::ceil_div(task_m, 2);
    const std::int64_t n = split_n ? gemm::ceil_div(task_n, 2) : task_n;
    if ((m == task_m && n == task_n) || m * mr * group_k_ * n * nr < kTaskMacs) break;
    task_m = m;
    task_n = n;
  }
  const std::int64_t m_blocks = gemm::ceil_div(m_strips, task_m);
  const std::int64_t n_blocks = gemm::ceil_div(strips, task_n);
  const std::int64_t pack_grain = std::max<std::int64_t>(1, kTaskFloats / (group_k_ * nr));
  const std::int64_t plane = g.out_h * g.out_w;
  const std::int64_t scatter_grain =
      std::max<std::int64_t>(1, kTaskFloats / (g.kernel_h * g.kernel_w * columns_ + plane));

  const std::int64_t in_image = g.in_channels * columns_;
  const std::int64_t out_image = g.out_channels * plane;
  for (std::int64_t n = 0; n < g.batch; ++n) {
    const float* image = input + n * in_image;
    float* out = output + n * out_image;

    // The input of each group (K x N, row-major) into the GEMM's column strips.
    gemm::parallel_range(
        pool, groups * strips, pack_grain, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t item = begin; item < end; ++item) {
            const std::int64_t group = item / strips;
            const std::int64_t strip = item % strips;
            pack_b_strip(image + group * group_k_ * columns_, columns_, group_k_, columns_, nr,
                         strip, packed_input + group * panel + strip * group_k_ * nr);
          }
        });
    gemm::parallel_range(pool, groups * m_blocks * n_blocks, 1,
                         [&](std::int64_t begin, std::int64_t end) {
                           for (std::int64_t item = begin; item < end; ++item) {
                             const std::int64_t group = item / (m_blocks * n_blocks);
                             const std::int64_t m0 = (item / n_blocks % m_blocks) * task_m;
                             const std::int64_t n0 = (item % n_blocks) * task_n;
                             gemm::PackedProduct p;
                             p.kernel = kernel_;
                             p.m = group_m_;
                             p.n = columns_;
                             p.k = group_k_;
                             p.a = packed_weight_.data() + group * m_padded_ * group_k_;
                             p.b = packed_input + group * panel;
                             p.c = columns + group * group_m_ * columns_;
                             p.ldc = columns_;
                             gemm::gemm_packed(p, m0, std::min(m_strips, m0 + task_m), n0,
                                               std::min(strips, n0 + task_n));
                           }
                         });
    gemm::parallel_range(
        pool, g.out_channels, scatter_grain, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t channel = begin; channel < end; ++channel) {
            float* channel_plane = out + channel * plane;
            std::fill_n(channel_plane, plane,
                        bias_.empty() ? 0.0f : bias_[static_cast<std::size_t>(channel)]);
            col2im_channel(columns, channel, channel_plane);
          }
        });
  }
}

}  // namespace cgr::cpu
