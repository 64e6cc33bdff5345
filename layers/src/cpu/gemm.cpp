// The GEMM core: C = A B with an epilogue (bias, residual, ReLU) fused into the last store.
//
// Shape of the computation (Goto/BLIS blocking with the roles of A and B exchanged, minus the
// packing, which the callers do once or write directly):
//   for each pass of kKc over K            (partial sums are stored to C between passes)
//     for each panel of column strips      (a kKc x panel slice of B stays in L2)
//       for each row strip of mr           (a kKc x mr slice of A stays in L1)
//         for each column strip of nr      -> micro-kernel: mr x nr accumulators in registers
// Row strips outside column strips: C is stored along mr rows at a time, not along all m. A
// conv's C is channels x pixels, often larger than L2, and with a short K its stores are what
// costs; the other order (column strips outside) kept m rows' store streams open at once. Measured
// single-threaded (cgr-bench, alternating runs): 1x1 16->96 on 112x112 2.3x faster with cold
// caches, mobilenet_v2 7%, googlenet 5%, resnet18 2%.
// The micro-kernels are compiled per ISA with target attributes and chosen at run time, so
// the library itself needs no -march flag. They differ only in tile size: each output element
// is one FMA chain over k in the same order, so every kernel, every tile partition and every
// thread count gives the same bits (edge tiles go through full-size buffers for that reason:
// an element never takes a different code path because of where a partition cut).
// Packed weights are often not in any cache (a network's weights outgrow L3), so the driver
// tells each micro-kernel call which A tile comes next and the kernel prefetches it while it
// computes (TileArgs::a_next): the DRAM latency then overlaps the FMAs.
#include "cpu/gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "cgr/layers/element_math.hpp"
#include "cgr/thread_pool.hpp"

#if defined(__x86_64__) || defined(__i386__)
#define CGR_GEMM_X86 1
#include <immintrin.h>
#endif

namespace cgr::cpu::gemm {
namespace {

// Floats of B per panel (see the top of this file): 512 KiB, a quarter of a 2 MiB L2.
constexpr std::int64_t kPanelFloats = std::int64_t{128} << 10;

// Portable fallback (and the reference shape of every kernel below). Plain loops; the
// compiler vectorises them for whatever baseline it targets.
constexpr std::int64_t kGenericMr = 4;
constexpr std::int64_t kGenericNr = 16;

template <bool Direct>
void tile_generic_impl(const TileArgs& t) {
  float acc[kGenericMr][kGenericNr];
  for (std::int64_t r = 0; r < kGenericMr; ++r) {
    for (std::int64_t j = 0; j < kGenericNr; ++j)
      acc[r][j] = t.load_c ? t.c[r * t.ldc + j] : 0.0f;
  }
  const float* a = t.a;
  const float* b = t.b;
  for (std::int64_t k = 0; k < t.kc; ++k) {
    const float* bk = Direct ? t.b + t.b_offsets[k] : b;
    for (std::int64_t r = 0; r < kGenericMr; ++r) {
      for (std::int64_t j = 0; j < kGenericNr; ++j)
        acc[r][j] += a[r] * bk[j];
    }
    a += kGenericMr;
    b += kGenericNr;
  }
  for (std::int64_t r = 0; r < kGenericMr; ++r) {
    for (std::int64_t j = 0; j < kGenericNr; ++j) {
      float v = acc[r][j];
      if (t.last) {
        if (t.row_bias) v += t.row_bias[r];
        if (t.col_bias) v += t.col_bias[j];
        if (t.residual) v += t.residual[r * t.ldr + j];
        if (t.clamp) v = math::clip(v, t.clamp_low, t.clamp_high);
      }
      t.c[r * t.ldc + j] = v;
    }
  }
}

#if defined(CGR_GEMM_X86)

// AVX2 + FMA: 6 x 16 tile, 12 ymm accumulators + 2 B vectors + 1 broadcast of 16 registers.
constexpr int kAvx2Mr = 6;
constexpr int kAvx2Nr = 16;

template <bool Direct>
__attribute__((target("avx2,fma"))) void tile_avx2_impl(const TileArgs& t) {
  __m256 acc[kAvx2Mr][2];
  if (t.load_c) {
#pragma GCC unroll 6
    for (int r = 0; r < kAvx2Mr; ++r) {
      acc[r][0] = _mm256_loadu_ps(t.c + r * t.ldc);
      acc[r][1] = _mm256_loadu_ps(t.c + r * t.ldc + 8);
    }
  } else {
#pragma GCC unroll 6
    for (int r = 0; r < kAvx2Mr; ++r)
      acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  }
  const float* a = t.a;
  const float* b = t.b;
  const std::int64_t kc = t.kc;
  // See TileArgs::a_next. One prefetch per 2 k steps (48 bytes of A) misses no 64-byte line.
  const char* prefetch = reinterpret_cast<const char*>(t.a_next ? t.a_next : t.a);
  for (std::int64_t k = 0; k < kc; ++k) {
    if ((k & 1) == 0) _mm_prefetch(prefetch + k * kAvx2Mr * sizeof(float), _MM_HINT_T0);
    const float* bk = Direct ? t.b + t.b_offsets[k] : b;
    const __m256 b0 = _mm256_loadu_ps(bk);
    const __m256 b1 = _mm256_loadu_ps(bk + 8);
#pragma GCC unroll 6
    for (int r = 0; r < kAvx2Mr; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r);
      acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
    }
    a += kAvx2Mr;
    b += kAvx2Nr;
  }
  if (t.last) {
    const __m256 low = _mm256_set1_ps(t.clamp_low);
    const __m256 high = _mm256_set1_ps(t.clamp_high);
#pragma GCC unroll 6
    for (int r = 0; r < kAvx2Mr; ++r) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256 v = acc[r][h];
        if (t.row_bias) v = _mm256_add_ps(v, _mm256_set1_ps(t.row_bias[r]));
        if (t.col_bias) v = _mm256_add_ps(v, _mm256_loadu_ps(t.col_bias + 8 * h));
        if (t.residual) v = _mm256_add_ps(v, _mm256_loadu_ps(t.residual + r * t.ldr + 8 * h));
        // Lanes below low become low, then lanes above high become high; NaN compares false
        // both times and passes, as in math::clip().
        if (t.clamp) {
          v = _mm256_blendv_ps(v, low, _mm256_cmp_ps(v, low, _CMP_LT_OQ));
          v = _mm256_blendv_ps(v, high, _mm256_cmp_ps(v, high, _CMP_GT_OQ));
        }
        acc[r][h] = v;
      }
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < kAvx2Mr; ++r) {
    _mm256_storeu_ps(t.c + r * t.ldc, acc[r][0]);
    _mm256_storeu_ps(t.c + r * t.ldc + 8, acc[r][1]);
  }
}

// AVX-512: Mr rows x Vectors zmm columns. The 8 x 32 tile (16 accumulators) is the main one:
// eight rows divide the usual channel counts (64, 128, ...) exactly, and 16 independent FMA
// chains cover the FMA latency of two pipes. The 16 x 16 one (16 accumulators, one B vector
// and 16 broadcasts per k) serves products whose columns are few and no multiple of 32 (see
// narrow_avx512_kernel). Both run the same chains, so the same bits.
constexpr int kAvx512Mr = 8;
constexpr int kAvx512Nr = 32;
constexpr int kAvx512NarrowMr = 16;
constexpr int kAvx512NarrowNr = 16;

template <int Mr, int Vectors, bool Direct, bool InPlaceA = false>
__attribute__((target("avx512f"))) void tile_avx512_impl(const TileArgs& t) {
  __m512 acc[Mr][Vectors];
  if (t.load_c) {
#pragma GCC unroll 16
    for (int r = 0; r < Mr; ++r) {
      for (int h = 0; h < Vectors; ++h)
        acc[r][h] = _mm512_loadu_ps(t.c + r * t.ldc + 16 * h);
    }
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < Mr; ++r) {
      for (int h = 0; h < Vectors; ++h)
        acc[r][h] = _mm512_setzero_ps();
    }
  }
  const float* a = t.a;
  const float* b = t.b;
  const std::int64_t kc = t.kc;
  // See TileArgs::a_next: one prefetch per 64-byte line of packed A (16 floats).
  const char* prefetch = reinterpret_cast<const char*>(t.a_next ? t.a_next : t.a);
  const std::int64_t a_row = InPlaceA ? t.a_row : 1;
  const std::int64_t a_k = InPlaceA ? t.a_k : Mr;
  for (std::int64_t k = 0; k < kc; ++k) {
    if (!InPlaceA && (k * Mr) % 16 == 0) {
      _mm_prefetch(prefetch + k * Mr * sizeof(float), _MM_HINT_T0);
    }
    const float* bk = Direct ? t.b + t.b_offsets[k] : b;
    __m512 bv[Vectors];
    for (int h = 0; h < Vectors; ++h)
      bv[h] = _mm512_loadu_ps(bk + 16 * h);
#pragma GCC unroll 16
    for (int r = 0; r < Mr; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r * a_row]);
      for (int h = 0; h < Vectors; ++h)
        acc[r][h] = _mm512_fmadd_ps(ar, bv[h], acc[r][h]);
    }
    a += a_k;
    b += 16 * Vectors;
  }
  if (t.last) {
    const __m512 low = _mm512_set1_ps(t.clamp_low);
    const __m512 high = _mm512_set1_ps(t.clamp_high);
#pragma GCC unroll 16
    for (int r = 0; r < Mr; ++r) {
      for (int h = 0; h < Vectors; ++h) {
        __m512 v = acc[r][h];
        if (t.row_bias) v = _mm512_add_ps(v, _mm512_set1_ps(t.row_bias[r]));
        if (t.col_bias) v = _mm512_add_ps(v, _mm512_loadu_ps(t.col_bias + 16 * h));
        if (t.residual) v = _mm512_add_ps(v, _mm512_loadu_ps(t.residual + r * t.ldr + 16 * h));
        // As in the AVX2 kernel: NaN passes both compares, as in math::clip().
        if (t.clamp) {
          v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, low, _CMP_LT_OQ), low);
          v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, high, _CMP_GT_OQ), high);
        }
        acc[r][h] = v;
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < Mr; ++r) {
    for (int h = 0; h < Vectors; ++h)
      _mm512_storeu_ps(t.c + r * t.ldc + 16 * h, acc[r][h]);
  }
}

#endif  // CGR_GEMM_X86

const MicroKernel kGeneric{"generic", kGenericMr, kGenericNr, tile_generic_impl<false>,
                           tile_generic_impl<true>};
#if defined(CGR_GEMM_X86)
const MicroKernel kAvx2{"avx2", kAvx2Mr, kAvx2Nr, tile_avx2_impl<false>, tile_avx2_impl<true>};
const MicroKernel kAvx512{"avx512",
                          kAvx512Mr,
                          kAvx512Nr,
                          tile_avx512_impl<8, 2, false>,
                          tile_avx512_impl<8, 2, true>,
                          tile_avx512_impl<8, 2, false, true>};
const MicroKernel kAvx512Narrow{"avx512-16x16",
                                kAvx512NarrowMr,
                                kAvx512NarrowNr,
                                tile_avx512_impl<16, 1, false>,
                                tile_avx512_impl<16, 1, true>,
                                tile_avx512_impl<16, 1, false, true>};
#endif

std::vector<const MicroKernel*> detect_kernels() {
  std::vector<const MicroKernel*> kernels;
#if defined(CGR_GEMM_X86)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the wider registers (XGETBV).
  if (__builtin_cpu_supports("avx512f")) kernels.push_back(&kAvx512);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) kernels.push_back(&kAvx2);
#endif
  kernels.push_back(&kGeneric);
  return kernels;
}

std::atomic<const MicroKernel*> g_override{nullptr};

// A fused activation other than ReLU over a finished tile, still in L1: the same function
// object the standalone layer runs, so fusing never changes a bit.
void apply_activation(const math::Activation& activation, float* c, std::int64_t ldc,
                      std::int64_t rows, std::int64_t cols) {
  math::with_activation_fn(activation, [&](auto fn) {
    for (std::int64_t r = 0; r < rows; ++r) {
      float* row = c + r * ldc;
      for (std::int64_t j = 0; j < cols; ++j)
        row[j] = fn(row[j]);
    }
  });
}

// The fields of a TileArgs that staging a tile through stack buffers changes; restored after,
// so the caller's TileArgs is passed by reference and never copied. (A copy per tile, made
// right after the driver stores the tile's fields, stalled on store forwarding: 12% of
// MobileNet-v2's time at one thread went to gemm_packed itself, perf.)
struct StagedFields {
  explicit StagedFields(TileArgs& t)
      : t_(t), c_(t.c), residual_(t.residual), ldc_(t.ldc), ldr_(t.ldr) {}
  ~StagedFields() {
    t_.c = c_;
    t_.residual = residual_;
    t_.ldc = ldc_;
    t_.ldr = ldr_;
  }
  StagedFields(const StagedFields&) = delete;
  StagedFields& operator=(const StagedFields&) = delete;

 private:
  TileArgs& t_;
  float* c_;
  const float* residual_;
  std::int64_t ldc_, ldr_;
};

// Runs one tile; an edge tile (fewer than mr rows or nr columns valid) is staged through
// full-size buffers so the micro-kernel does exactly the arithmetic of a full tile.
void run_tile(const MicroKernel& kernel, TileArgs& t, std::int64_t rows, std::int64_t cols) {
  const auto tile = t.b_offsets != nullptr ? kernel.tile_direct
                    : t.a_row != 0         ? kernel.tile_rows
                                           : kernel.tile;
  if (rows == kernel.mr && cols == kernel.nr) {
    tile(t);
    if (t.last && t.activation != nullptr) apply_activation(*t.activation, t.c, t.ldc, rows, cols);
    return;
  }
  const std::int64_t nr = kernel.nr;
  alignas(64) float c_buf[kMaxMr * kMaxNr];
  alignas(64) float r_buf[kMaxMr * kMaxNr];
  const StagedFields restore(t);
  float* const c = t.c;
  const std::int64_t ldc = t.ldc;
  if (t.load_c) {
    std::fill_n(c_buf, kMaxMr * kMaxNr, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(c_buf + r * nr, c + r * ldc, cols * 4);
  }
  if (t.last && t.residual) {
    std::fill_n(r_buf, kMaxMr * kMaxNr, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::memcpy(r_buf + r * nr, t.residual + r * t.ldr, cols * 4);
    }
    t.residual = r_buf;
    t.ldr = nr;
  }
  t.c = c_buf;
  t.ldc = nr;
  tile(t);
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(c + r * ldc, c_buf + r * nr, cols * 4);
  if (t.last && t.activation != nullptr) apply_activation(*t.activation, c, ldc, rows, cols);
}

// The last pass of a tile whose product has a sink: the full tile, epilogue included, into a
// stack buffer (from C's partial sums when earlier passes left some; the residual gathered
// into the C layout), then to the sink.
void sink_tile(const MicroKernel& kernel, TileArgs& t, const TileSink& sink, std::int64_t row0,
               std::int64_t col0, std::int64_t rows, std::int64_t cols) {
  const std::int64_t nr = kernel.nr;
  const bool partial = rows < kernel.mr || cols < nr;
  alignas(64) float c_buf[kMaxMr * kMaxNr];
  alignas(64) float r_buf[kMaxMr * kMaxNr];
  const StagedFields restore(t);
  if (t.load_c) {
    if (partial) std::fill_n(c_buf, kMaxMr * kMaxNr, 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(c_buf + r * nr, t.c + r * t.ldc, cols * 4);
  }
  if (sink.gather != nullptr) {
    std::fill_n(r_buf, kMaxMr * kMaxNr, 0.0f);  // junk columns and rows past m: zero
    sink.gather(sink.context, r_buf, nr, row0, col0, rows, cols);
    t.residual = r_buf;
    t.ldr = nr;
  }
  t.c = c_buf;
  t.ldc = nr;
  (t.b_offsets != nullptr ? kernel.tile_direct : t.a_row != 0 ? kernel.tile_rows : kernel.tile)(t);
  if (t.activation != nullptr) apply_activation(*t.activation, c_buf, nr, rows, cols);
  sink.scatter(sink.context, c_buf, nr, row0, col0, rows, cols);
}

}  // namespace

GemmActivation gemm_activation(const math::Activation& activation) {
  switch (activation.kind) {
    case math::ActivationKind::none:
      return {};
    case math::ActivationKind::relu:
      // relu(x) is clip(x, 0, +inf), bit for bit (NaN and -0 pass).
      return {
          .clamp = true, .clamp_low = 0.0f, .clamp_high = std::numeric_limits<float>::infinity()};
    case math::ActivationKind::clip:
      return {.clamp = true, .clamp_low = activation.alpha, .clamp_high = activation.beta};
    case math::ActivationKind::leaky_relu:
    case math::ActivationKind::unary:
      break;
  }
  return {.other = &activation};
}

std::span<const MicroKernel* const> supported_kernels() {
  static const std::vector<const MicroKernel*> kernels = detect_kernels();
  return kernels;
}

const MicroKernel& best_kernel() {
  const MicroKernel* chosen = g_override.load(std::memory_order_acquire);
  return chosen ? *chosen : *supported_kernels().front();
}

const MicroKernel& narrow_avx512_kernel() {
#if defined(CGR_GEMM_X86)
  return kAvx512Narrow;
#else
  return kGeneric;  // never asked for: best_kernel() is no AVX-512 kernel here
#endif
}

const MicroKernel& avx512_rows_kernel(std::int64_t columns) {
  const MicroKernel& best = best_kernel();
  const MicroKernel& narrow = narrow_avx512_kernel();
  return round_up(columns, narrow.nr) < round_up(columns, best.nr) ? narrow : best;
}

void set_kernel_override(const MicroKernel* kernel) {
  g_override.store(kernel, std::memory_order_release);
}

PackedBuffer::PackedBuffer(std::size_t count) : size_(count) {
  if (count == 0) return;
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  const std::size_t bytes = count * sizeof(float);
  const std::size_t align = bytes >= kHugePage ? kHugePage : 64;
  data_ = std::unique_ptr<float[], AlignedFree>(
      static_cast<float*>(::operator new (bytes, std::align_val_t{align})), AlignedFree{align});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice only: without THP (or with it off) the pages stay small. Only whole huge pages
  // are advised; a partial last one stays as it is.
  if (align == kHugePage) madvise(data_.get(), bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  // Touches the pages after the advice, so they are faulted in huge.
  std::memset(data_.get(), 0, bytes);
}

void pack_a(const float* a, std::int64_t lda, std::int64_t m, std::int64_t k, std::int64_t mr,
            float* dst) {
  for (std::int64_t row0 = 0; row0 < m; row0 += mr) {
    const std::int64_t rows = std::min(mr, m - row0);
    for (std::int64_t kk = 0; kk < k; ++kk) {
      for (std::int64_t r = 0; r < mr; ++r) {
        dst[kk * mr + r] = r < rows ? a[(row0 + r) * lda + kk] : 0.0f;
      }
    }
    dst += k * mr;
  }
}

void pack_b_transposed(const float* w, std::int64_t ldw, std::int64_t n, std::int64_t k,
                       std::int64_t nr, float* dst) {
  for (std::int64_t col0 = 0; col0 < n; col0 += nr) {
    const std::int64_t cols = std::min(nr, n - col0);
    for (std::int64_t kk = 0; kk < k; ++kk) {
      for (std::int64_t j = 0; j < nr; ++j) {
        dst[kk * nr + j] = j < cols ? w[(col0 + j) * ldw + kk] : 0.0f;
      }
    }
    dst += k * nr;
  }
}

void pack_a_strided(const float* a, std::int64_t row_stride, std::int64_t k_stride, std::int64_t m,
                    std::int64_t k, std::int64_t mr, float* dst) {
  for (std::int64_t row0 = 0; row0 < m; row0 += mr) {
    const std::int64_t rows = std::min(mr, m - row0);
    for (std::int64_t kk = 0; kk < k; ++kk) {
      for (std::int64_t r = 0; r < mr; ++r) {
        dst[kk * mr + r] = r < rows ? a[(row0 + r) * row_stride + kk * k_stride] : 0.0f;
      }
    }
    dst += k * mr;
  }
}

void pack_b_strided(const float* b, std::int64_t k_stride, std::int64_t col_stride, std::int64_t n,
                    std::int64_t k, std::int64_t nr, float* dst) {
  for (std::int64_t col0 = 0; col0 < n; col0 += nr) {
    const std::int64_t cols = std::min(nr, n - col0);
    for (std::int64_t kk = 0; kk < k; ++kk) {
      for (std::int64_t j = 0; j < nr; ++j) {
        dst[kk * nr + j] = j < cols ? b[kk * k_stride + (col0 + j) * col_stride] : 0.0f;
      }
    }
    dst += k * nr;
  }
}

void gemm_packed(const PackedProduct& p, std::int64_t ms0, std::int64_t ms1, std::int64_t ns0,
                 std::int64_t ns1) {
  const MicroKernel& kernel = *p.kernel;
  const std::int64_t mr = kernel.mr;
  const std::int64_t nr = kernel.nr;
  for (std::int64_t pc = 0; pc < p.k; pc += kKc) {
    TileArgs t;
    t.kc = std::min(kKc, p.k - pc);
    t.load_c = pc > 0;
    t.last = pc + t.kc == p.k;
    t.ldc = p.ldc;
    t.ldr = p.ldr;
    t.clamp = p.activation.clamp;
    t.clamp_low = p.activation.clamp_low;
    t.clamp_high = p.activation.clamp_high;
    t.activation = p.activation.other;
    const auto a_tile = [&](std::int64_t is) { return p.a + (is * p.k + pc) * mr; };
    const std::int64_t panel = std::max<std::int64_t>(1, kPanelFloats / (t.kc * nr));
    for (std::int64_t jp = ns0; jp < ns1; jp += panel) {
      const std::int64_t jp_end = std::min(ns1, jp + panel);
      for (std::int64_t is = ms0; is < ms1; ++is) {
        const std::int64_t row0 = is * mr;
        t.a = a_tile(is);
        t.row_bias = p.row_bias ? p.row_bias + row0 : nullptr;
        // The A tile that runs after this strip's (see TileArgs::a_next): the next strip, or
        // the first one again for the next panel, or the next pass's first.
        const float* next = is + 1 < ms1     ? a_tile(is + 1)
                            : jp_end < ns1   ? a_tile(ms0)
                            : pc + kKc < p.k ? p.a + (ms0 * p.k + pc + kKc) * mr
                                             : nullptr;
        for (std::int64_t js = jp; js < jp_end; ++js) {
          const std::int64_t col0 = js * nr;
          if (p.b_offsets != nullptr) {
            t.b = p.b + col0;
            t.b_offsets = p.b_offsets + pc;
          } else {
            t.b = p.b + ((js - p.b_first) * p.k + pc) * nr;
          }
          // Until the strip's last tile, its own A again (in L1 already).
          t.a_next = js + 1 < jp_end ? t.a : next;
          t.c = p.c + row0 * p.ldc + col0;
          t.residual = p.residual ? p.residual + row0 * p.ldr + col0 : nullptr;
          if (t.last && p.sink.scatter != nullptr) {
            sink_tile(kernel, t, p.sink, row0, col0, std::min(mr, p.m - row0),
                      std::min(nr, p.n - col0));
          } else {
            run_tile(kernel, t, std::min(mr, p.m - row0), std::min(nr, p.n - col0));
          }
        }
      }
    }
  }
}

#if defined(CGR_GEMM_X86)
namespace {
// One row of A times column strips [ns0, ns1) of the AVX-512 kernel's packed B (32 columns a
// strip, k-major), the whole of K at once: a batch-1 Linear layer. The micro-kernel would run
// its 8-row tile through stack buffers for the one row, in passes over K; here the two
// accumulators per strip run the same fma chain (from zero, k in order) and the same
// epilogue (+ bias, then the clamp), so the same bits.
__attribute__((target("avx512f"))) void single_row_avx512(const RowsProduct& p, std::int64_t row,
                                                          std::int64_t ns0, std::int64_t ns1) {
  const float* a = p.a + row * p.lda;
  const __m512 low = _mm512_set1_ps(p.activation.clamp_low);
  const __m512 high = _mm512_set1_ps(p.activation.clamp_high);
  for (std::int64_t js = ns0; js < ns1; ++js) {
    const float* b = p.b + js * p.k * kAvx512Nr;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < p.k; ++k) {
      const __m512 ak = _mm512_set1_ps(a[k]);
      acc0 = _mm512_fmadd_ps(ak, _mm512_loadu_ps(b + k * kAvx512Nr), acc0);
      acc1 = _mm512_fmadd_ps(ak, _mm512_loadu_ps(b + k * kAvx512Nr + 16), acc1);
    }
    const std::int64_t col0 = js * kAvx512Nr;
    if (p.col_bias != nullptr) {
      acc0 = _mm512_add_ps(acc0, _mm512_loadu_ps(p.col_bias + col0));
      acc1 = _mm512_add_ps(acc1, _mm512_loadu_ps(p.col_bias + col0 + 16));
    }
    if (p.activation.clamp) {  // the micro-kernel's clamp
      acc0 = _mm512_mask_mov_ps(acc0, _mm512_cmp_ps_mask(acc0, low, _CMP_LT_OQ), low);
      acc0 = _mm512_mask_mov_ps(acc0, _mm512_cmp_ps_mask(acc0, high, _CMP_GT_OQ), high);
      acc1 = _mm512_mask_mov_ps(acc1, _mm512_cmp_ps_mask(acc1, low, _CMP_LT_OQ), low);
      acc1 = _mm512_mask_mov_ps(acc1, _mm512_cmp_ps_mask(acc1, high, _CMP_GT_OQ), high);
    }
    const std::int64_t cols = std::min<std::int64_t>(kAvx512Nr, p.n - col0);
    float* c = p.c + row * p.ldc + col0;
    const auto low = static_cast<__mmask16>(cols >= 16 ? 0xffffu : (1u << cols) - 1u);
    const auto high = static_cast<__mmask16>(cols <= 16 ? 0u : (1u << (cols - 16)) - 1u);
    _mm512_mask_storeu_ps(c, low, acc0);
    _mm512_mask_storeu_ps(c + 16, high, acc1);
  }
}
}  // namespace
#endif

void gemm_rows(const RowsProduct& p, std::int64_t ms0, std::int64_t ms1, std::int64_t ns0,
               std::int64_t ns1) {
  const MicroKernel& kernel = *p.kernel;
  const std::int64_t mr = kernel.mr;
  const std::int64_t nr = kernel.nr;
#if defined(CGR_GEMM_X86)
  if (&kernel == &kAvx512 && ms1 == ms0 + 1 && p.m - ms0 * mr == 1 && p.a_k_stride == 1 &&
      p.residual == nullptr && p.activation.other == nullptr && p.sink.scatter == nullptr) {
    single_row_avx512(p, ms0 * mr, ns0, ns1);
    return;
  }
#endif
  alignas(64) float a_buf[kMaxMr * kKc];
  for (std::int64_t pc = 0; pc < p.k; pc += kKc) {
    TileArgs t;
    t.kc = std::min(kKc, p.k - pc);
    t.load_c = pc > 0;
    t.last = pc + t.kc == p.k;
    t.ldc = p.ldc;
    t.ldr = p.ldr;
    t.clamp = p.activation.clamp;
    t.clamp_low = p.activation.clamp_low;
    t.clamp_high = p.activation.clamp_high;
    t.activation = p.activation.other;
    for (std::int64_t is = ms0; is < ms1; ++is) {
      const std::int64_t row0 = is * mr;
      const std::int64_t rows = std::min(mr, p.m - row0);
      const float* a = p.a + row0 * p.lda + pc * p.a_k_stride;
      // A full strip is read in place where the kernel can (a_in_place); the last, partial one
      // is packed (the micro-kernel reads all mr rows).
      if (p.a_in_place && kernel.tile_rows != nullptr && rows == mr) {
        t.a = a;
        t.a_row = p.lda;
        t.a_k = p.a_k_stride;
      } else {
        pack_a_strided(a, p.lda, p.a_k_stride, rows, t.kc, mr, a_buf);
        t.a = a_buf;
        t.a_row = t.a_k = 0;
      }
      for (std::int64_t js = ns0; js < ns1; ++js) {
        const std::int64_t col0 = js * nr;
        const std::int64_t cols = std::min(nr, p.n - col0);
        t.b = p.b + (js * p.k + pc) * nr;
        t.c = p.c != nullptr ? p.c + row0 * p.ldc + col0 : nullptr;  // null: a sink, one pass
        t.col_bias = p.col_bias ? p.col_bias + col0 : nullptr;
        t.residual = p.residual ? p.residual + row0 * p.ldr + col0 : nullptr;
        if (t.last && p.sink.scatter != nullptr) {
          sink_tile(kernel, t, p.sink, row0, col0, rows, cols);
        } else {
          run_tile(kernel, t, rows, cols);
        }
      }
    }
  }
}

void parallel_range(ThreadPool* pool, std::int64_t n, std::int64_t grain, RangeBody body) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  if (pool == nullptr || pool->size() <= 1 || n <= grain) {
    body(0, n);
    return;
  }
  // Our own near-equal ranges, a few per thread: handing the pool `n` items would cut them
  // into equal chunks plus a short last one, which for a dozen big items leaves one thread
  // with a whole extra chunk.
  struct Split {
    RangeBody body;
    std::int64_t n;
    std::int64_t tasks;
  };
  const Split split{body, n, std::min<std::int64_t>(n / grain, 4 * std::int64_t{pool->size()})};
  // Captures one pointer, so the std::function the pool takes stores it without allocating.
  pool->parallel_for(static_cast<std::size_t>(split.tasks), 1,
                     [&split](std::size_t first, std::size_t last) {
                       split.body(static_cast<std::int64_t>(first) * split.n / split.tasks,
                                  static_cast<std::int64_t>(last) * split.n / split.tasks);
                     });
}

}  // namespace cgr::cpu::gemm
