// The registry of GPU op factories by layer kind, and the default enqueue of kernel ops.
#include "gpu_op.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "cgr/capture/cuda_check.hpp"

namespace cgr::cuda {

void check_description(const KernelLaunch& launch, std::string_view op) {
  if (launch.status == cudaSuccess) return;
  fail("'{}': its CUDA kernel refused the launch: {} ({}: {}). This is a bug in cgr's lowering "
       "of the op; please report it with the model",
       op, launch.refusal != nullptr ? launch.refusal : "no reason given",
       cudaGetErrorName(launch.status), cudaGetErrorString(launch.status));
}

void GpuOp::enqueue(cudaStream_t stream, const GpuBuffers& buffers, const LibraryHandles&) const {
  const auto launches = kernel_launches(buffers);
  if (!launches) fail("internal error: a GPU op with neither kernels nor enqueue()");
  for (const KernelLaunch& description : *launches) {
    check_description(description, "a kernel op");
    CGR_CUDA_CHECK(launch(description, stream));
  }
}

namespace {

// Function-local: registrations run during static initialisation, in any order.
struct Registry {
  std::mutex mutex;
  std::map<std::string, GpuOpFactory, std::less<>> factories;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

bool register_gpu_op(std::string_view kind, GpuOpFactory factory) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (!r.factories.emplace(std::string(kind), std::move(factory)).second) {
    std::fprintf(stderr, "cgr: two CUDA ops are registered for layer kind '%.*s'\n",
                 static_cast<int>(kind.size()), kind.data());
    std::abort();
  }
  return true;
}

const GpuOpFactory* find_gpu_op(std::string_view kind) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto it = r.factories.find(kind);
  return it == r.factories.end() ? nullptr : &it->second;
}

std::vector<std::string> gpu_op_kinds() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> kinds;
  for (const auto& [kind, factory] : r.factories)
    kinds.push_back(kind);
  return kinds;
}

}  // namespace cgr::cuda
