// The CUDA backend: what it makes of a compiled engine (a GpuOp per op, from the registry of
// engine/cuda/ops; the exit decisions are the executor's own) and its execution context
// (context.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cgr/backend/backend.hpp"
#include "device_memory.hpp"
#include "gpu_op.hpp"

namespace cgr::cuda {

class CudaProgram final : public detail::Program {
 public:
  // One op per engine op; null for the exit decisions. Allocates the zeros the ops read.
  explicit CudaProgram(std::vector<std::unique_ptr<GpuOp>> ops);

  std::size_t workspace_bytes(int op) const override {
    const GpuOp* gpu = ops_[static_cast<std::size_t>(op)].get();
    return gpu == nullptr ? 0 : gpu->workspace_bytes();
  }
  std::unique_ptr<detail::BackendContext> create_context(
      std::shared_ptr<const detail::CompiledEngine> engine) const override;

  const GpuOp* op(int index) const { return ops_[static_cast<std::size_t>(index)].get(); }
  // GpuBuffers::zeros: as many as the op that reads the most needs (null when none does).
  const float* zeros() const { return zeros_ ? zeros_->get() : nullptr; }

 private:
  std::vector<std::unique_ptr<GpuOp>> ops_;
  std::unique_ptr<DeviceFloats> zeros_;
};

// Empty when a CUDA device can be used; otherwise why not ("no CUDA device: ..."). Decided by
// the first call: without a driver every runtime call fails alike.
std::string device_unavailable_reason();

}  // namespace cgr::cuda
