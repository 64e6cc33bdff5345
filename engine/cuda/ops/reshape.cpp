// Flatten and Reshape on the GPU: the same bytes under another shape, copied (a memcpy node in
// the graph modes). A view aliasing the input would need no node at all (not done yet).
#include <memory>

#include "cgr/capture/cuda_check.hpp"
#include "cgr/layers/flatten.hpp"
#include "cgr/layers/reshape.hpp"
#include "gpu_op.hpp"

namespace cgr::cuda {
namespace {

class CopyOp final : public GpuOp {
 public:
  explicit CopyOp(std::size_t bytes) : bytes_(bytes) {}
  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles&) const override {
    CGR_CUDA_CHECK(
        cudaMemcpyAsync(b.output, b.inputs[0], bytes_, cudaMemcpyDeviceToDevice, stream));
  }

 private:
  std::size_t bytes_;
};

template <typename L>
std::unique_ptr<GpuOp> make_copy(const L& layer, const GpuOpBuild&) {
  return std::make_unique<CopyOp>(layer.output().bytes());
}

const GpuOpRegistration<Flatten> flatten_op(make_copy<Flatten>);
const GpuOpRegistration<Reshape> reshape_op(make_copy<Reshape>);

}  // namespace
}  // namespace cgr::cuda
