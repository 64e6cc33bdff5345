// Detects once whether the CUDA runtime has a usable device. Without a driver every runtime
// call fails (error 35, "CUDA driver version is insufficient"), so the first call decides.
#include "cuda_device.hpp"

#include <fmt/format.h>

#include "cgr/error.hpp"

#if defined(CGR_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

namespace cgr::detail {

std::string cuda_unavailable_reason() {
#if defined(CGR_HAVE_CUDA)
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
#else
  return "no CUDA device: this cgr was built without the CUDA toolkit";
#endif
}

void require_cuda_device() {
  if (std::string reason = cuda_unavailable_reason(); !reason.empty()) throw Error(reason);
}

}  // namespace cgr::detail
