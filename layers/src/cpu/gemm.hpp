// Internal single-precision GEMM core of the CPU conv and linear kernels: C = A B (+ epilogue)
// over operands packed for a register-blocked micro-kernel chosen once from the CPU's ISA.
//
// Layouts (mr, nr: the micro-kernel's tile):
//   packed A: row strips of mr rows, each k-major: a[(strip * k + kk) * mr + r]; rows past m
//             are zero.
//   packed B: column strips of nr columns, each k-major: b[(strip * k + kk) * nr + j];
//             columns past n are zero.
// Every output element is summed as one chain k = 0..K-1, in passes of kKc (partial sums go
// through C between passes), whatever the tile ranges a caller hands to one call: splitting a
// product over threads by tiles never changes a bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <type_traits>

#include "cgr/layers/element_math.hpp"

namespace cgr {
class ThreadPool;
}

namespace cgr::cpu::gemm {

// Bounds of every micro-kernel's tile (edge tiles are staged in buffers this big).
inline constexpr std::int64_t kMaxMr = 16;
inline constexpr std::int64_t kMaxNr = 32;
// Depth of one pass over K: a kKc x nr slice of B stays in L1 while the row strips stream by.
// One value for every ISA, so all micro-kernels produce the same bits.
inline constexpr std::int64_t kKc = 256;

// One micro-kernel call: an mr x nr tile over kc steps of k.
struct TileArgs {
  std::int64_t kc = 0;
  const float* a = nullptr;  // packed A strip, already offset to this pass
  // The A tile the caller runs next (null: none known). The SIMD micro-kernels prefetch it a
  // line every other k step while this tile computes: when the packed weights do not fit in
  // the caches (a whole network's do not), each tile would otherwise wait on DRAM latency,
  // and the hardware prefetcher, which stops at 4 KiB pages and restarts on every jump to
  // the next row strip, hides little of it.
  const float* a_next = nullptr;
  // A read in place (tile_rows): element (r, kk) of the tile at a[r * a_row + kk * a_k]
  // (a_next unused); 0: a is packed.
  std::int64_t a_row = 0, a_k = 0;
  const float* b = nullptr;  // packed B strip, already offset to this pass
  // Direct B (tile_direct): row kk of the strip is the nr floats at b + b_offsets[kk] (offsets
  // already advanced to this pass); null: b is packed.
  const std::int64_t* b_offsets = nullptr;
  float* c = nullptr;
  std::int64_t ldc = 0;
  bool load_c = false;  // continue from the partial sums in c instead of zero
  bool last = false;    // last pass over K: apply the epilogue below before storing
  // Epilogue, in this order: + row_bias[r] + col_bias[j] + residual[r][j], then a clamp to
  // [clamp_low, clamp_high] in the micro-kernel's registers (ReLU is [0, +inf), Clip its
  // bounds: math::clip's arithmetic, NaN passes) or another activation (over the stored tile,
  // by run_tile).
  const float* row_bias = nullptr;  // mr values or null
  const float* col_bias = nullptr;  // nr values or null
  const float* residual = nullptr;  // mr x nr with row stride ldr, or null
  std::int64_t ldr = 0;
  bool clamp = false;
  float clamp_low = 0.0f, clamp_high = 0.0f;
  const math::Activation* activation = nullptr;  // neither ReLU nor Clip; null: none
};

// How an activation runs in a GEMM's epilogue: ReLU and Clip as the registers' clamp, any
// other over the stored tile.
struct GemmActivation {
  bool clamp = false;
  float clamp_low = 0.0f, clamp_high = 0.0f;
  const math::Activation* other = nullptr;
};
GemmActivation gemm_activation(const math::Activation& activation);

struct MicroKernel {
  const char* name;
  std::int64_t mr;
  std::int64_t nr;
  void (*tile)(const TileArgs&);  // reads and writes the full mr x nr tile
  // The same arithmetic (the same bits) with B read in place (TileArgs::b_offsets).
  void (*tile_direct)(const TileArgs&);
  // The same with A read in place (TileArgs::a_row, a_k; B packed); null where the kernel
  // has none (then A is packed).
  void (*tile_rows)(const TileArgs&) = nullptr;
};

// The fastest micro-kernel this CPU runs (or the test override).
const MicroKernel& best_kernel();
// AVX-512's 16 x 16 tile, for products whose columns are few and no multiple of 32 (a 1x1
// conv's 16 or 24 output channels on channels-last data, where the 8 x 32 tile would compute
// 50% or 25% padding): the same arithmetic, so the same bits. Only where best_kernel() is
// AVX-512's.
const MicroKernel& narrow_avx512_kernel();
// For a product of `columns` columns (a 1x1 conv's output channels on channels-last data):
// AVX-512's 8 x 32 tile, or its 16 x 16 one where that computes fewer padding columns. Only
// where best_kernel() is AVX-512's.
const MicroKernel& avx512_rows_kernel(std::int64_t columns);
// Every micro-kernel this CPU runs, fastest first.
std::span<const MicroKernel* const> supported_kernels();
// Tests only: makes best_kernel() return `kernel` (nullptr restores the real choice). Kernels
// pick their micro-kernel at construction, so set it before constructing them.
void set_kernel_override(const MicroKernel* kernel);

// A zero-filled float array for packed weights, 64-byte aligned. Arrays of 2 MiB or more are
// 2 MiB aligned and (on Linux) asked to use transparent huge pages: a network's weights do
// not fit in the caches, so every run streams them from memory, and with 4 KiB pages a 9 MB
// conv weight spans 2300 pages, more than the L2 TLB covers along with everything else.
// (Measured on ResNet-18: 1-3% of a forward pass, on top of the prefetching.)
struct AlignedFree {
  std::size_t align = 64;
  void operator()(float* p) const { ::operator delete (p, std::align_val_t{align}); }
};
class PackedBuffer {
 public:
  PackedBuffer() = default;
  explicit PackedBuffer(std::size_t count);
  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  std::unique_ptr<float[], AlignedFree> data_;
  std::size_t size_ = 0;
};

inline std::int64_t ceil_div(std::int64_t x, std::int64_t d) {
  return (x + d - 1) / d;
}
inline std::int64_t round_up(std::int64_t x, std::int64_t m) {
  return ceil_div(x, m) * m;
}

// Packs A[m x k] (row stride lda) into row strips; dst holds round_up(m, mr) * k floats.
void pack_a(const float* a, std::int64_t lda, std::int64_t m, std::int64_t k, std::int64_t mr,
            float* dst);
// Packs B = Wᵀ for W[n x k] (row stride ldw) into column strips; dst holds
// k * round_up(n, nr) floats. (A linear layer's weight is W.)
void pack_b_transposed(const float* w, std::int64_t ldw, std::int64_t n, std::int64_t k,
                       std::int64_t nr, float* dst);

// The same layouts from operands with any element strides (a computed operand, transposed or
// not): A's element (r, kk) at a[r * row_stride + kk * k_stride], B's element (kk, j) at
// b[kk * k_stride + j * col_stride]. pack_a / pack_b_transposed are the unit-stride cases.
void pack_a_strided(const float* a, std::int64_t row_stride, std::int64_t k_stride, std::int64_t m,
                    std::int64_t k, std::int64_t mr, float* dst);
void pack_b_strided(const float* b, std::int64_t k_stride, std::int64_t col_stride, std::int64_t n,
                    std::int64_t k, std::int64_t nr, float* dst);

// Where a product's finished tiles go instead of C (the direct conv's flat result, whose valid
// columns are scattered to the output): scatter(context, tile, ld, row0, col0, rows, cols) gets
// the tile's rows x cols values (row stride ld) for C's rows from row0 and columns from col0,
// epilogue applied. gather (null: no residual) copies the same block of the residual into C's
// layout over a zeroed tile (junk columns stay zero).
struct TileSink {
  using Block = void (*)(const void* context, float* tile, std::int64_t ld, std::int64_t row0,
                         std::int64_t col0, std::int64_t rows, std::int64_t cols);
  Block scatter = nullptr;
  Block gather = nullptr;
  const void* context = nullptr;
};

// C[m x n] = A B + epilogue, both operands packed.
struct PackedProduct {
  const MicroKernel* kernel = nullptr;
  std::int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  const float* b = nullptr;  // column strip b_first; strip js at b + (js - b_first) * k * nr
  std::int64_t b_first = 0;
  // Direct B: element (kk, j) at b[b_offsets[kk] + j], read in place (no packing); b must be
  // readable up to nr - 1 elements past the last column of every row (edge strips read the
  // full width and drop the rest). b_first is then unused.
  const std::int64_t* b_offsets = nullptr;
  float* c = nullptr;
  std::int64_t ldc = 0;
  const float* row_bias = nullptr;  // round_up(m, mr) values or null
  const float* residual = nullptr;  // like C, row stride ldr, or null
  std::int64_t ldr = 0;
  GemmActivation activation;  // see TileArgs
  // Set: the last pass over K computes each tile, epilogue included, in a stack buffer and
  // hands it to the sink instead of storing it to c, which then holds only the earlier passes'
  // partial sums; the residual comes from sink.gather (residual must be null).
  TileSink sink;
};
// Computes the tiles of row strips [ms0, ms1) x column strips [ns0, ns1).
void gemm_packed(const PackedProduct& p, std::int64_t ms0, std::int64_t ms1, std::int64_t ns0,
                 std::int64_t ns1);

// C[m x n] = A B + epilogue with A read in place (a linear layer's input, a 1x1 conv's
// channels-last or NCHW input): element (r, kk) at a[r * lda + kk * a_k_stride]; A is packed on
// the fly, one strip and pass at a time, into a stack buffer.
struct RowsProduct {
  const MicroKernel* kernel = nullptr;
  std::int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  std::int64_t lda = 0;
  std::int64_t a_k_stride = 1;
  // Full row strips read A in place where the kernel has tile_rows (a 1x1 conv's input, whose
  // packing would cost about what the product does), else packed.
  bool a_in_place = false;
  const float* b = nullptr;  // packed
  float* c = nullptr;
  std::int64_t ldc = 0;
  const float* col_bias = nullptr;  // round_up(n, nr) values or null
  const float* residual = nullptr;  // like C, row stride ldr, or null
  std::int64_t ldr = 0;
  GemmActivation activation;  // see TileArgs
  TileSink sink;              // see PackedProduct
};
void gemm_rows(const RowsProduct& p, std::int64_t ms0, std::int64_t ms1, std::int64_t ns0,
               std::int64_t ns1);

// A non-owning reference to a callable body(begin, end). Unlike a std::function made from a
// lambda with many captures, it never allocates, so a run allocates nothing of its own.
class RangeBody {
 public:
  template <typename F,
            typename = std::enable_if_t<!std::is_same_v<std::remove_cvref_t<F>, RangeBody>>>
  RangeBody(F&& body)  // NOLINT(google-explicit-constructor): used like a function parameter
      : object_(static_cast<const void*>(&body)),
        call_([](const void* object, std::int64_t begin, std::int64_t end) {
          (*static_cast<std::remove_reference_t<F>*>(const_cast<void*>(object)))(begin, end);
        }) {}
  void operator()(std::int64_t begin, std::int64_t end) const { call_(object_, begin, end); }

 private:
  const void* object_;
  void (*call_)(const void*, std::int64_t, std::int64_t);
};

// body(begin, end) over [0, n) on the pool in ranges of at least `grain`, or inline without
// a pool. `body` must outlive the call (a lambda written in the call does).
void parallel_range(ThreadPool* pool, std::int64_t n, std::int64_t grain, RangeBody body);

}  // namespace cgr::cpu::gemm
