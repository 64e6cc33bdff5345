// Machine description (see device_info.hpp). The CUDA part compiles only when cgr itself was
// built with CUDA; otherwise describing a cuda device is an Error.
#include "device_info.hpp"

#include <fstream>
#include <thread>

#include <fmt/format.h>

#if defined(CGR_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

namespace cgr::bench {
namespace {

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    // x86: "model name\t: AMD EPYC ..."; some ARM kernels only give "Hardware" or nothing.
    if (line.starts_with("model name") || line.starts_with("Hardware")) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        const auto first = line.find_first_not_of(" \t", colon + 1);
        if (first != std::string::npos) return line.substr(first);
      }
    }
  }
  return "unknown CPU";
}

#if defined(CGR_HAVE_CUDA)
void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    fail("{} failed: {} ({})", what, cudaGetErrorName(status), cudaGetErrorString(status));
}

std::string cuda_version(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}
#endif

}  // namespace

DeviceInfo describe_device(Device device, int threads) {
  DeviceInfo info;
  info.device = device;
  info.hardware_threads = static_cast<int>(std::thread::hardware_concurrency());
  info.threads = threads > 0 ? threads : info.hardware_threads;
  if (device == Device::cpu) {
    info.name = cpu_model_name();
    return info;
  }
#if defined(CGR_HAVE_CUDA)
  int index = 0;
  check(cudaGetDevice(&index), "cudaGetDevice");
  cudaDeviceProp props{};
  check(cudaGetDeviceProperties(&props, index), "cudaGetDeviceProperties");
  info.name = props.name;
  info.sm_count = props.multiProcessorCount;
  info.memory_bytes = props.totalGlobalMem;
  info.compute_capability = fmt::format("{}.{}", props.major, props.minor);
  int driver = 0, runtime = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  info.driver_version = cuda_version(driver);
  info.runtime_version = cuda_version(runtime);
#else
  fail("no CUDA device: this cgr-bench was built without the CUDA toolkit");
#endif
  return info;
}

}  // namespace cgr::bench
