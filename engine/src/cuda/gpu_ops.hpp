// Makes the GPU executable of a lowered op (see gpu_ops.cpp).
#pragma once

#if defined(CGR_HAVE_CUDA)

#include <memory>

#include "cuda/gpu_op.hpp"
#include "engine_impl.hpp"

namespace cgr::cuda {

struct GpuBuildOptions {
  bool allow_tf32 = false;
  cudnnHandle_t cudnn = nullptr;  // for algorithm selection at build time
};

std::shared_ptr<GpuOp> make_gpu_op(const detail::LoweredOp& op, const GpuBuildOptions& options);

}  // namespace cgr::cuda

#endif  // CGR_HAVE_CUDA
