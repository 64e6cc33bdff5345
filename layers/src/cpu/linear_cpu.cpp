// CPU fully connected layer: y[rows x out] = x[rows x in] Wᵀ + b, then ReLU if asked.
//
// Shaped as the GEMM C = A B with A = x (rows, packed on the fly one strip at a time, so a
// run needs no workspace) and B = Wᵀ (packed once into column strips), which makes y's rows
// the GEMM's contiguous output rows and the bias a per-column epilogue. Work is split over
// (row strip, column strip) tiles only, so the result does not depend on the thread count.
#include "cpu/linear_cpu.hpp"

#include <algorithm>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/gemm.hpp"

namespace cgr::cpu {
namespace {

// Multiply-adds one task should at least carry (see conv_cpu.cpp).
constexpr std::int64_t kTaskMacs = std::int64_t{1} << 20;
// Row strips one task covers at most: bounds how often a task re-streams its column strips
// of W against how often x strips get re-packed.
constexpr std::int64_t kRowStripsPerBlock = 16;

}  // namespace

LinearKernelCpu::LinearKernelCpu(std::int64_t in_features, std::int64_t out_features,
                                 std::span<const float> weight, std::span<const float> bias)
    : in_features_(in_features), out_features_(out_features), kernel_(&gemm::best_kernel()) {
  if (in_features <= 0 || out_features <= 0) {
    fail("linear: invalid size {} -> {}", in_features, out_features);
  }
  if (weight.size() != static_cast<std::size_t>(in_features * out_features)) {
    fail("linear: weight has {} values, expected {} ({}x{})", weight.size(),
         in_features * out_features, out_features, in_features);
  }
  if (!bias.empty() && bias.size() != static_cast<std::size_t>(out_features)) {
    fail("linear: bias has {} values, expected {}", bias.size(), out_features);
  }
  const std::int64_t padded = gemm::round_up(out_features, kernel_->nr);
  packed_weight_ = gemm::PackedBuffer(static_cast<std::size_t>(in_features * padded));
  gemm::pack_b_transposed(weight.data(), in_features, out_features, in_features, kernel_->nr,
                          packed_weight_.data());
  if (!bias.empty()) {
    bias_.assign(static_cast<std::size_t>(padded), 0.0f);
    std::copy(bias.begin(), bias.end(), bias_.begin());
  }
}

void LinearKernelCpu::run(const float* x, std::int64_t rows, float* y, bool relu,
                          ThreadPool* pool) const {
  if (rows <= 0) return;
  gemm::RowsProduct p;
  p.kernel = kernel_;
  p.m = rows;
  p.n = out_features_;
  p.k = in_features_;
  p.a = x;
  p.lda = in_features_;
  p.b = packed_weight_.data();
  p.c = y;
  p.ldc = out_features_;
  p.col_bias = bias_.empty() ? nullptr : bias_.data();
  static const math::Activation kRelu{math::ActivationKind::relu};
  if (relu) p.activation = gemm::gemm_activation(kRelu);

  const std::int64_t m_strips = gemm::ceil_div(rows, kernel_->mr);
  const std::int64_t n_strips = gemm::ceil_div(out_features_, kernel_->nr);
  const std::int64_t block = std::min(m_strips, kRowStripsPerBlock);
  const std::int64_t m_blocks = gemm::ceil_div(m_strips, block);
  const std::int64_t item_macs = block * kernel_->mr * in_features_ * kernel_->nr;
  const std::int64_t grain = std::max<std::int64_t>(1, gemm::ceil_div(kTaskMacs, item_macs));
  // Items: (row block, column strip), column strips innermost.
  gemm::parallel_range(pool, m_blocks * n_strips, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t item = begin; item < end;) {
      const std::int64_t mb = item / n_strips;
      const std::int64_t s_end = std::min(end - mb * n_strips, n_strips);
      gemm::gemm_rows(p, mb * block, std::min(m_strips, (mb + 1) * block), item - mb * n_strips,
                      s_end);
      item = mb * n_strips + s_end;
    }
  });
}

}  // namespace cgr::cpu
