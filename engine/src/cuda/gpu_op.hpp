// The CUDA executor's view of one op. Library work (cuDNN, cuBLAS, copies, a user's stream
// work) only knows how to enqueue itself on a stream: the executor calls enqueue() directly
// (eager), under a whole-network capture on one stream (stream-graph), or under a capture into
// the explicit graph that starts from exactly the op's dependency nodes (dag). cgr's own
// kernels also describe their launches (kernel_launches()), which dag adds to the graph as
// kernel nodes with cudaGraphAddNode; their enqueue() launches the same descriptions.
#pragma once

#if defined(CGR_HAVE_CUDA)

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "cuda/kernel_launch.hpp"

namespace cgr::cuda {

// Library handles of one execution context, already bound to the stream being enqueued on.
struct LibraryHandles {
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
};

// Device buffers of one run of one op (the context's arena).
struct GpuBuffers {
  std::span<const float* const> inputs;
  float* output = nullptr;
  void* workspace = nullptr;  // workspace_bytes(); private to this op, even among concurrent ops
};

class GpuOp {
 public:
  virtual ~GpuOp() = default;
  virtual std::size_t workspace_bytes() const { return 0; }
  // Must not synchronise or allocate: it may run under stream capture.
  virtual void enqueue(cudaStream_t stream, const GpuBuffers& buffers,
                       const LibraryHandles& handles) const = 0;
  // cgr's own kernels: the launches of one run, independent of each other (they write
  // disjoint parts of the output). nullopt for library work, which dag captures.
  virtual std::optional<std::vector<cuda_kernels::KernelLaunch>> kernel_launches(
      const GpuBuffers& /*buffers*/) const {
    return std::nullopt;
  }
};

}  // namespace cgr::cuda

#endif  // CGR_HAVE_CUDA
