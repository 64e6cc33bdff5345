#include "device_memory.hpp"

#include <cuda_runtime.h>

#include "cgr/capture/cuda_check.hpp"

namespace cgr::cuda {

DeviceFloats::DeviceFloats(std::span<const float> host) : size_(host.size()) {
  if (host.empty()) return;
  void* memory = nullptr;
  CGR_CUDA_CHECK(cudaMalloc(&memory, host.size_bytes()));
  data_ = static_cast<float*>(memory);
  const cudaError_t status =
      cudaMemcpy(data_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice);
  if (status != cudaSuccess) {
    CGR_CUDA_CHECK_NOTHROW(cudaFree(data_));
    detail::throw_cuda_error(status, "cudaMemcpy(weights, host -> device)", __FILE__, __LINE__);
  }
}

DeviceFloats::DeviceFloats(std::size_t count) : size_(count) {
  if (count == 0) return;
  void* memory = nullptr;
  CGR_CUDA_CHECK(cudaMalloc(&memory, count * sizeof(float)));
  data_ = static_cast<float*>(memory);
  const cudaError_t status = cudaMemset(data_, 0, count * sizeof(float));
  if (status != cudaSuccess) {
    CGR_CUDA_CHECK_NOTHROW(cudaFree(data_));
    detail::throw_cuda_error(status, "cudaMemset(zeros)", __FILE__, __LINE__);
  }
}

DeviceFloats::~DeviceFloats() {
  if (data_ != nullptr) CGR_CUDA_CHECK_NOTHROW(cudaFree(data_));
}

}  // namespace cgr::cuda
