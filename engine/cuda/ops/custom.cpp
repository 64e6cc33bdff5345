// CustomOp on the GPU: the user's stream callable, enqueued like a library op, so the graph
// modes capture it against exactly the nodes of the ops that produce its inputs.
#include <memory>

#include "cgr/capture/cuda_check.hpp"
#include "cgr/capture/custom_op.hpp"
#include "gpu_op.hpp"

namespace cgr::cuda {
namespace {

class UserWorkOp final : public GpuOp {
 public:
  explicit UserWorkOp(decltype(CustomOpParams::cuda) work) : work_(std::move(work)) {}
  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles&) const override {
    work_(static_cast<void*>(stream), b.inputs, b.output);
    CGR_CUDA_CHECK(cudaGetLastError());
  }

 private:
  decltype(CustomOpParams::cuda) work_;
};

std::unique_ptr<GpuOp> make_custom(const CustomOp& layer, const GpuOpBuild&) {
  if (!layer.params().cuda) {
    fail("{} '{}' has no CUDA implementation (CustomOpParams::cuda)", layer.label(), layer.name());
  }
  return std::make_unique<UserWorkOp>(layer.params().cuda);
}

const GpuOpRegistration<CustomOp> custom_op(make_custom);

}  // namespace
}  // namespace cgr::cuda
