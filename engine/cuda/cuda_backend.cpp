// The CUDA backend: the device check, and the GPU op of every op of an engine, made once at
// engine build (weights uploaded, cuDNN algorithms and workspace sizes chosen outside any
// capture) and shared by every context.
#include "cuda_backend.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "cgr/error.hpp"
#include "library_check.hpp"
#include "resources.hpp"

namespace cgr::cuda {

std::string device_unavailable_reason() {
  static const std::string reason = [] {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      return fmt::format("no CUDA device: cudaGetDeviceCount failed with {} ({}): {}",
                         static_cast<int>(status), cudaGetErrorName(status),
                         cudaGetErrorString(status));
    }
    if (count == 0) return std::string("no CUDA device: the driver reports 0 devices");
    return std::string();
  }();
  return reason;
}

CudaProgram::CudaProgram(std::vector<std::unique_ptr<GpuOp>> ops) : ops_(std::move(ops)) {
  std::size_t zero_bytes = 0;
  for (const auto& op : ops_) {
    if (op != nullptr) zero_bytes = std::max(zero_bytes, op->zero_bytes());
  }
  if (zero_bytes > 0) zeros_ = std::make_unique<DeviceFloats>((zero_bytes + 3) / 4);
}

namespace {

class CudaBackend final : public detail::Backend {
 public:
  std::string unavailable_reason() const override { return device_unavailable_reason(); }
  // cublasSetWorkspace requires 256-byte aligned workspaces; cudaMalloc's base is 256-aligned.
  std::size_t arena_alignment() const override { return 256; }
  std::size_t memory_bytes() const override {
    std::size_t free = 0, total = 0;
    CGR_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return total;
  }
  std::vector<std::string> layer_kinds() const override { return gpu_op_kinds(); }

  std::unique_ptr<detail::Program> compile(const detail::CompiledEngine& engine,
                                           const std::vector<LayerOp>& layer_ops) const override {
    cudnnHandle_t cudnn = nullptr;
    CGR_CUDNN_CHECK(cudnnCreate(&cudnn));
    const CudnnHandle owned(cudnn);
    std::vector<std::unique_ptr<GpuOp>> ops;
    for (std::size_t index = 0; index < engine.ops.size(); ++index) {
      const LayerOp& op = layer_ops[index];
      if (op.layer == nullptr) {  // an exit decision: the executor's own kernel
        ops.emplace_back();
        continue;
      }
      const GpuOpFactory* factory = find_gpu_op(op.layer->kind());
      if (factory == nullptr) {
        fail("{} '{}': no CUDA implementation of layer kind '{}'", op.layer->label(),
             op.layer->name(), op.layer->kind());
      }
      ops.push_back((*factory)(
          GpuOpBuild{op, engine.options.allow_tf32, cudnn, engine.options.time_conv_algorithms}));
    }
    auto program = std::make_unique<CudaProgram>(std::move(ops));
    // The ops uploaded their weights and the program its zeros on the legacy default stream;
    // the contexts' streams are non-blocking and would not wait for those copies.
    CGR_CUDA_CHECK(cudaDeviceSynchronize());
    return program;
  }
};

}  // namespace
}  // namespace cgr::cuda

CGR_REGISTER_BACKEND(cgr::Device::cuda, cgr::cuda::CudaBackend)
