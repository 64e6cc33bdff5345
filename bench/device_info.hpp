// What cgr-bench reports about the machine: CPU model and threads, or the GPU's name, SM count
// and driver/runtime versions. This header is free of CUDA so that cgr-bench compiles without
// the toolkit; device_info.cpp includes <cuda_runtime.h> only when cgr was built with CUDA
// (CGR_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <string>

#include <cgr/engine.hpp>

namespace cgr::bench {

struct DeviceInfo {
  Device device = Device::cpu;
  std::string name;              // CPU model name or GPU name
  int hardware_threads = 0;      // cpu: logical processors
  int threads = 0;               // cpu: threads the engine computes with
  int sm_count = 0;              // cuda: streaming multiprocessors
  std::size_t memory_bytes = 0;  // cuda: global memory
  std::string compute_capability, driver_version, runtime_version;  // cuda: "9.0", "12.4"
};

DeviceInfo describe_device(Device device, int threads);

}  // namespace cgr::bench
