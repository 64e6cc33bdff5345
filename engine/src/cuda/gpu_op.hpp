// The CUDA executor's view of one op. An op only knows how to enqueue its work on a stream;
// the executor calls enqueue() directly (eager), under one whole-network capture
// (stream-graph), or under a capture into the explicit graph that starts from exactly the
// op's dependency nodes (dag). So kernels and library calls (cuDNN, cuBLAS, a user's stream
// work) go through one mechanism, and every captured launch becomes a node with the edges
// the data needs.
#pragma once

#if defined(CGR_HAVE_CUDA)

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <span>

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
};

}  // namespace cgr::cuda

#endif  // CGR_HAVE_CUDA
