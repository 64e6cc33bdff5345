// CPU batched matrix product: y[t] = alpha * op(A[ia(t)]) op(B[ib(t)]) for each output matrix t.
//
// Both operands go through the GEMM core's packed layouts. A computed operand is packed on
// every run into the workspace, each distinct matrix once (a broadcast operand is not packed
// again per output matrix); the packing reads it through element strides, which is how a
// transposed operand costs nothing extra. A constant operand is packed once, here. Then the
// work is split over (output matrix, row block, column strip) tiles, so each element is one
// FMA chain over k whatever the thread count: the result is the same bits for any pool.
// alpha scales each tile once it is complete (alpha * (A B), as ONNX defines Gemm).
#include "cpu/matmul_cpu.hpp"

#include <algorithm>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr::cpu {
namespace {

// Multiply-adds one task should at least carry (see conv_cpu.cpp).
constexpr std::int64_t kTaskMacs = std::int64_t{1} << 20;
// Floats one packing task should at least copy.
constexpr std::int64_t kTaskPackFloats = std::int64_t{1} << 15;
// Row strips one task covers at most (see linear_cpu.cpp).
constexpr std::int64_t kRowStripsPerBlock = 16;
// The packed B starts on a 64-byte boundary after the packed A in the workspace.
constexpr std::int64_t kAlignFloats = 16;

}  // namespace

MatMulKernelCpu::MatMulKernelCpu(const MatMulGeometry& g,
                                 std::optional<std::span<const float>> constant_a,
                                 std::optional<std::span<const float>> constant_b)
    : g_(g), kernel_(&gemm::best_kernel()) {
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0 || g.a_matrices < 0 || g.b_matrices < 0) {
    fail("matmul: invalid sizes m {} n {} k {} batch {}", g.m, g.n, g.k, g.batch);
  }
  m_strips_ = gemm::ceil_div(g.m, kernel_->mr);
  n_strips_ = gemm::ceil_div(g.n, kernel_->nr);
  const auto check = [](std::span<const float> values, std::int64_t expected, const char* what) {
    if (values.size() != static_cast<std::size_t>(expected)) {
      fail("matmul: constant {} has {} values, expected {}", what, values.size(), expected);
    }
  };
  if (constant_a) {
    check(*constant_a, g.a_matrices * g.m * g.k, "A");
    has_constant_a_ = true;
    constant_a_ = gemm::PackedBuffer(static_cast<std::size_t>(packed_a_floats()));
    pack_a(constant_a->data(), constant_a_.data(), nullptr);
  }
  if (constant_b) {
    check(*constant_b, g.b_matrices * g.k * g.n, "B");
    has_constant_b_ = true;
    constant_b_ = gemm::PackedBuffer(static_cast<std::size_t>(packed_b_floats()));
    pack_b(constant_b->data(), constant_b_.data(), nullptr);
  }
}

std::int64_t MatMulKernelCpu::packed_a_floats() const {
  return g_.a_matrices * m_strips_ * kernel_->mr * g_.k;
}

std::int64_t MatMulKernelCpu::packed_b_floats() const {
  return g_.b_matrices * n_strips_ * kernel_->nr * g_.k;
}

std::size_t MatMulKernelCpu::workspace_bytes() const {
  std::int64_t floats = 0;
  if (!has_constant_a_) floats += gemm::round_up(packed_a_floats(), kAlignFloats);
  if (!has_constant_b_) floats += packed_b_floats();
  return static_cast<std::size_t>(floats) * sizeof(float);
}

void MatMulKernelCpu::pack_a(const float* a, float* dst, ThreadPool* pool) const {
  const std::int64_t mr = kernel_->mr, k = g_.k;
  // Element (r, kk) of op(A): A stored [m, k], or [k, m] when transposed.
  const std::int64_t row_stride = g_.transpose_a ? 1 : k;
  const std::int64_t k_stride = g_.transpose_a ? g_.m : 1;
  const std::int64_t grain =
      std::max<std::int64_t>(1, kTaskPackFloats / std::max<std::int64_t>(1, k * mr));
  gemm::parallel_range(
      pool, g_.a_matrices * m_strips_, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t item = begin; item < end; ++item) {
          const std::int64_t matrix = item / m_strips_;
          const std::int64_t row0 = (item - matrix * m_strips_) * mr;
          gemm::pack_a_strided(a + matrix * g_.m * k + row0 * row_stride, row_stride, k_stride,
                               std::min(mr, g_.m - row0), k, mr, dst + item * k * mr);
        }
      });
}

void MatMulKernelCpu::pack_b(const float* b, float* dst, ThreadPool* pool) const {
  const std::int64_t nr = kernel_->nr, k = g_.k;
  // Element (kk, j) of op(B): B stored [k, n], or [n, k] when transposed.
  const std::int64_t k_stride = g_.transpose_b ? 1 : g_.n;
  const std::int64_t col_stride = g_.transpose_b ? k : 1;
  const std::int64_t grain =
      std::max<std::int64_t>(1, kTaskPackFloats / std::max<std::int64_t>(1, k * nr));
  gemm::parallel_range(
      pool, g_.b_matrices * n_strips_, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t item = begin; item < end; ++item) {
          const std::int64_t matrix = item / n_strips_;
          const std::int64_t col0 = (item - matrix * n_strips_) * nr;
          gemm::pack_b_strided(b + matrix * k * g_.n + col0 * col_stride, k_stride, col_stride,
                               std::min(nr, g_.n - col0), k, nr, dst + item * k * nr);
        }
      });
}

void MatMulKernelCpu::run(const float* a, const float* b, float* y, float* workspace,
                          ThreadPool* pool) const {
  const std::int64_t m = g_.m, n = g_.n, k = g_.k;
  if (g_.batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: every element is 0
    std::fill_n(y, g_.batch * m * n, 0.0f);
    return;
  }
  const float* packed_a = constant_a_.data();
  const float* packed_b = constant_b_.data();
  float* free_space = workspace;
  if (!has_constant_a_) {
    pack_a(a, free_space, pool);
    packed_a = free_space;
    free_space += gemm::round_up(packed_a_floats(), kAlignFloats);
  }
  if (!has_constant_b_) {
    pack_b(b, free_space, pool);
    packed_b = free_space;
  }

  const std::int64_t mr = kernel_->mr, nr = kernel_->nr;
  const std::int64_t block = std::min(m_strips_, kRowStripsPerBlock);
  const std::int64_t m_blocks = gemm::ceil_div(m_strips_, block);
  const std::int64_t per_matrix = m_blocks * n_strips_;
  const std::int64_t item_macs = block * mr * k * nr;
  const std::int64_t grain = std::max<std::int64_t>(1, gemm::ceil_div(kTaskMacs, item_macs));
  const BroadcastGeometry& bg = g_.batches;
  // Items: (output matrix, row block, column strip), column strips innermost.
  gemm::parallel_range(
      pool, g_.batch * per_matrix, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t item = begin; item < end;) {
          const std::int64_t t = item / per_matrix;
          const std::int64_t local = item - t * per_matrix;
          const std::int64_t mb = local / n_strips_;
          const std::int64_t js = local - mb * n_strips_;
          const std::int64_t js_end = std::min(n_strips_, js + (end - item));
          std::int64_t rest = t, ia = 0, ib = 0;
          for (int d = bg.rank - 1; d >= 0; --d) {
            const std::int64_t i = rest % bg.out_dims[d];
            rest /= bg.out_dims[d];
            ia += i * bg.a_strides[d];
            ib += i * bg.b_strides[d];
          }
          gemm::PackedProduct p;
          p.kernel = kernel_;
          p.m = m;
          p.n = n;
          p.k = k;
          p.a = packed_a + ia * m_strips_ * mr * k;
          p.b = packed_b + ib * n_strips_ * nr * k;
          p.c = y + t * m * n;
          p.ldc = n;
          const std::int64_t ms0 = mb * block, ms1 = std::min(m_strips_, ms0 + block);
          gemm::gemm_packed(p, ms0, ms1, js, js_end);
          if (g_.alpha != 1.0f) {
            const std::int64_t r1 = std::min(m, ms1 * mr), c0 = js * nr,
                               c1 = std::min(n, js_end * nr);
            for (std::int64_t r = ms0 * mr; r < r1; ++r) {
              float* row = p.c + r * n;
              for (std::int64_t c = c0; c < c1; ++c)
                row[c] *= g_.alpha;
            }
          }
          item += js_end - js;
        }
      });
}

}  // namespace cgr::cpu
