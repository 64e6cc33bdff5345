// The CUDA backend's executable of one op, and the registry that makes one per layer kind.
//
// cgr's own kernels describe their launches (kernel_launches(): function, grid, block,
// arguments): eager mode and stream-graph launch the descriptions, dag adds them to the
// explicit graph as kernel nodes. Library and user work (cuDNN, cuBLAS, a CustomOp's callable)
// only knows how to enqueue itself on a stream: eager calls enqueue() directly, the graph modes
// capture it (cgr::capture::ExplicitGraph) against exactly the op's dependency nodes.
//
// Each file of engine/cuda/ops makes the ops of its layer kinds from the layer's geometry and
// registers the factory by kind (a GpuOpRegistration at namespace scope). Plain C++ over the
// CUDA headers, without fmt, so that .cu files can hold their registrations too.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cgr/layers/layer.hpp"
#include "kernel_launch.hpp"

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
  // zero_bytes() of zeros, read-only, shared by every op and context of the engine: an operand
  // a library call reads with a zero scale (cuDNN's z without a residual) must not alias a
  // buffer that may hold NaN, since 0 * NaN is NaN.
  const float* zeros = nullptr;
};

class GpuOp {
 public:
  virtual ~GpuOp() = default;
  virtual std::size_t workspace_bytes() const { return 0; }
  // Bytes of GpuBuffers::zeros this op reads.
  virtual std::size_t zero_bytes() const { return 0; }
  // cgr's own kernels: the launches of one run, independent of each other (they write
  // disjoint parts of the output). nullopt for library work.
  virtual std::optional<std::vector<KernelLaunch>> kernel_launches(const GpuBuffers&) const {
    return std::nullopt;
  }
  // Enqueues one run on `stream`. Must not synchronise or allocate: it may run under stream
  // capture. The default launches kernel_launches().
  virtual void enqueue(cudaStream_t stream, const GpuBuffers& buffers,
                       const LibraryHandles& handles) const;
};

// cgr::Error naming `op` and the refusal's reason when `launch` was refused (a description
// with invalid arguments); nothing otherwise.
void check_description(const KernelLaunch& launch, std::string_view op);

// A kernel op: `describe(buffers)` returns its launch (a KernelLaunch) or launches (a vector).
template <typename Describe>
class KernelOp final : public GpuOp {
 public:
  explicit KernelOp(Describe describe) : describe_(std::move(describe)) {}
  std::optional<std::vector<KernelLaunch>> kernel_launches(const GpuBuffers& b) const override {
    if constexpr (std::is_same_v<decltype(describe_(b)), KernelLaunch>) {
      return std::vector<KernelLaunch>{describe_(b)};
    } else {
      return describe_(b);
    }
  }

 private:
  Describe describe_;
};

template <typename Describe>
std::unique_ptr<GpuOp> kernel_op(Describe describe) {
  return std::make_unique<KernelOp<Describe>>(std::move(describe));
}

// What a factory makes an op from: the lowered op (its layer, bound and folded weights, the
// epilogue) and the engine's choices. Weights uploaded here are shared by every context.
struct GpuOpBuild {
  const LayerOp& op;
  bool allow_tf32 = false;
  cudnnHandle_t cudnn = nullptr;  // for algorithm selection, outside any capture
  bool time_algorithms = false;   // EngineOptions::time_conv_algorithms
};

using GpuOpFactory = std::function<std::unique_ptr<GpuOp>(const GpuOpBuild&)>;

// Registers the factory of one layer kind (once per kind; a second one aborts).
bool register_gpu_op(std::string_view kind, GpuOpFactory factory);
// The factory of `kind`, or null when the CUDA backend does not implement it.
const GpuOpFactory* find_gpu_op(std::string_view kind);
// Every kind with a factory, sorted.
std::vector<std::string> gpu_op_kinds();

// At namespace scope in an ops file: const GpuOpRegistration<Relu> relu_op(make_relu);
// where make_relu takes the layer as its own class.
template <typename L>
struct GpuOpRegistration {
  explicit GpuOpRegistration(std::unique_ptr<GpuOp> (*make)(const L&, const GpuOpBuild&)) {
    register_gpu_op(L::kKind, [make](const GpuOpBuild& build) {
      return make(static_cast<const L&>(*build.op.layer), build);
    });
  }
};

}  // namespace cgr::cuda
