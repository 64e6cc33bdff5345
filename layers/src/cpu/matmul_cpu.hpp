// CPU batched matrix product (the MatMul layer) on the GEMM core: y = alpha * op(A) op(B) for
// every output matrix of a MatMulGeometry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "cgr/layers/matmul.hpp"
#include "cpu/gemm.hpp"

namespace cgr {
class ThreadPool;
}

namespace cgr::cpu {

class MatMulKernelCpu {
 public:
  // constant_a / constant_b: the values of a constant operand (all its matrices), packed once
  // here; nullopt for a computed one, which every run packs into the workspace.
  MatMulKernelCpu(const MatMulGeometry& g, std::optional<std::span<const float>> constant_a,
                  std::optional<std::span<const float>> constant_b);

  // Bytes of the computed operands' packed copies.
  std::size_t workspace_bytes() const;

  // a and b: the computed operands (ignored where a constant was given); y: batch x m x n.
  // The same bits for every pool size (pool may be null).
  void run(const float* a, const float* b, float* y, float* workspace, ThreadPool* pool) const;

 private:
  std::int64_t packed_a_floats() const;  // one operand's packed size: all its matrices
  std::int64_t packed_b_floats() const;
  void pack_a(const float* a, float* dst, ThreadPool* pool) const;
  void pack_b(const float* b, float* dst, ThreadPool* pool) const;

  MatMulGeometry g_;
  const gemm::MicroKernel* kernel_ = nullptr;
  std::int64_t m_strips_ = 0, n_strips_ = 0;
  gemm::PackedBuffer constant_a_, constant_b_;  // packed constants, or empty
  bool has_constant_a_ = false, has_constant_b_ = false;
};

}  // namespace cgr::cpu
