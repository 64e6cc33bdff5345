// The CPU backend: what it makes of a compiled engine (a CPU kernel per op and the thread pool
// that runs them) and its execution context (cpu_executor.cpp).
#pragma once

#include <memory>
#include <vector>

#include "cgr/backend/backend.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr::cpu {

class CpuProgram final : public detail::Program {
 public:
  CpuProgram(int threads, std::vector<std::unique_ptr<CpuKernel>> kernels, int channels_last_values)
      : pool_(threads), kernels_(std::move(kernels)), channels_last_values_(channels_last_values) {}

  std::size_t workspace_bytes(int op) const override {
    return kernels_[static_cast<std::size_t>(op)]->workspace_bytes();
  }
  int channels_last_values() const override { return channels_last_values_; }
  std::unique_ptr<detail::BackendContext> create_context(
      std::shared_ptr<const detail::CompiledEngine> engine) const override;

  ThreadPool& pool() const { return pool_; }
  const CpuKernel& kernel(int op) const { return *kernels_[static_cast<std::size_t>(op)]; }

 private:
  // Shared by every context of the engine; parallel_for and the DAG scheduler are thread-safe.
  mutable ThreadPool pool_;
  std::vector<std::unique_ptr<CpuKernel>> kernels_;
  int channels_last_values_ = 0;
};

}  // namespace cgr::cpu
