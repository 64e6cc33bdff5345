// Makes the GPU executable of a lowered op (see gpu_ops.cpp).
#pragma once

#if defined(CGR_HAVE_CUDA)

#include <memory>

#include "cuda/gpu_op.hpp"
#include "cuda/kernels.hpp"
#include "engine_impl.hpp"

namespace cgr::cuda {

struct GpuBuildOptions {
  bool allow_tf32 = false;
  cudnnHandle_t cudnn = nullptr;  // for algorithm selection at build time
};

std::shared_ptr<GpuOp> make_gpu_op(const detail::LoweredOp& op, const GpuBuildOptions& options);

// The pooling kernels' geometry for a pool from NCHW `in` to `out` with PyTorch's window
// arguments (stride 0: the kernel size).
cuda_kernels::Pool2dGeometry pool2d_geometry(const Shape& in, const Shape& out, const Pool2dParams& p);

}  // namespace cgr::cuda

#endif  // CGR_HAVE_CUDA
