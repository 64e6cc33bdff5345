// CPU fully connected layer: y = x Wᵀ + b, optionally followed by ReLU, on the GEMM core.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cpu/gemm.hpp"

namespace cgr {
class ThreadPool;
}

namespace cgr::cpu {

class LinearKernelCpu {
 public:
  // weight [out_features, in_features] (PyTorch layout); bias out_features values or empty.
  // Throws cgr::Error on a size mismatch.
  LinearKernelCpu(std::int64_t in_features, std::int64_t out_features,
                  std::span<const float> weight, std::span<const float> bias);

  std::int64_t in_features() const { return in_features_; }
  std::int64_t out_features() const { return out_features_; }

  // x: [rows, in_features] dense; y: [rows, out_features]. relu optional. The result is the
  // same, bit for bit, for every pool size (pool may be null).
  void run(const float* x, std::int64_t rows, float* y, bool relu, ThreadPool* pool) const;

 private:
  std::int64_t in_features_ = 0;
  std::int64_t out_features_ = 0;
  const gemm::MicroKernel* kernel_ = nullptr;
  gemm::PackedBuffer packed_weight_;  // Wᵀ in the GEMM's column strips
  std::vector<float> bias_;           // padded to whole strips, or empty
};

}  // namespace cgr::cpu
