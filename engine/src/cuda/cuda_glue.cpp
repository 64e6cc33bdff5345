// The CUDA backend's entry points for the engine: GPU ops at build, a CudaContext per
// execution context, and runs that report which ops and exits ran like the CPU executor.
#if defined(CGR_HAVE_CUDA)

#include <algorithm>

#include "cgr/error.hpp"
#include "cuda/cuda_executor.hpp"
#include "cuda/gpu_ops.hpp"
#include "cuda/resources.hpp"
#include "cuda_device.hpp"
#include "engine_impl.hpp"

namespace cgr::detail {

void make_gpu_ops(EngineImpl& impl) {
  require_cuda_device();
  cudnnHandle_t cudnn = nullptr;
  CGR_CUDNN_CHECK(cudnnCreate(&cudnn));
  const cuda::CudnnHandle owned(cudnn);
  const cuda::GpuBuildOptions options{impl.options.allow_tf32, cudnn};
  for (auto& op : impl.ops) {
    if (op.layer == nullptr) continue;  // exit decisions: the executor's own kernel
    op.gpu = cuda::make_gpu_op(op, options);
  }
}

std::shared_ptr<cuda::CudaContext> make_cuda_context(std::shared_ptr<const EngineImpl> engine) {
  return std::make_shared<cuda::CudaContext>(std::move(engine));
}

void run_cuda(ContextState& state) {
  state.cuda->run();
  state.executed = state.cuda->executed_ops();
  state.exit_fired = state.cuda->fired_exits();
  state.ops_executed = static_cast<int>(std::count(state.executed.begin(), state.executed.end(), 1));
}

}  // namespace cgr::detail

#endif  // CGR_HAVE_CUDA
