// RAII for the CUDA, cuDNN and cuBLAS objects an execution context holds. Constructors throw
// cgr::Error (checked calls); destructors never throw: a failed release is logged.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <utility>

#include "cgr/capture/cuda_check.hpp"

namespace cgr::cuda {

// Owns one handle; Release is a function object that frees it.
template <typename Handle, typename Release>
class Owned {
 public:
  Owned() = default;
  explicit Owned(Handle handle) : handle_(handle) {}
  ~Owned() { reset(); }
  Owned(Owned&& other) noexcept : handle_(std::exchange(other.handle_, Handle{})) {}
  Owned& operator=(Owned&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, Handle{});
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;

  Handle get() const { return handle_; }
  explicit operator bool() const { return handle_ != Handle{}; }
  void reset() {
    if (handle_ != Handle{}) Release{}(std::exchange(handle_, Handle{}));
  }

 private:
  Handle handle_{};
};

struct FreeDevice {
  void operator()(void* p) const { CGR_CUDA_CHECK_NOTHROW(cudaFree(p)); }
};
struct FreeHost {
  void operator()(void* p) const { CGR_CUDA_CHECK_NOTHROW(cudaFreeHost(p)); }
};
struct DestroyStream {
  void operator()(cudaStream_t s) const { CGR_CUDA_CHECK_NOTHROW(cudaStreamDestroy(s)); }
};
struct DestroyEvent {
  void operator()(cudaEvent_t e) const { CGR_CUDA_CHECK_NOTHROW(cudaEventDestroy(e)); }
};
struct DestroyGraphExec {
  void operator()(cudaGraphExec_t g) const { CGR_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(g)); }
};
struct DestroyCudnn {
  void operator()(cudnnHandle_t h) const { (void)cudnnDestroy(h); }
};
struct DestroyCublas {
  void operator()(cublasHandle_t h) const { (void)cublasDestroy(h); }
};

using DeviceMemory = Owned<void*, FreeDevice>;
// Page-locked host memory (cudaMallocHost): the staging buffers copies run from and to.
using PageLockedMemory = Owned<void*, FreeHost>;
using Stream = Owned<cudaStream_t, DestroyStream>;
using Event = Owned<cudaEvent_t, DestroyEvent>;
using GraphExec = Owned<cudaGraphExec_t, DestroyGraphExec>;
using CudnnHandle = Owned<cudnnHandle_t, DestroyCudnn>;
using CublasHandle = Owned<cublasHandle_t, DestroyCublas>;

inline DeviceMemory allocate_device(std::size_t bytes) {
  void* p = nullptr;
  if (bytes > 0) CGR_CUDA_CHECK(cudaMalloc(&p, bytes));
  return DeviceMemory(p);
}

inline PageLockedMemory allocate_page_locked(std::size_t bytes) {
  void* p = nullptr;
  if (bytes > 0) CGR_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return PageLockedMemory(p);
}

inline Stream create_stream() {
  cudaStream_t s = nullptr;
  CGR_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

inline Event create_event() {
  cudaEvent_t e = nullptr;
  CGR_CUDA_CHECK(cudaEventCreate(&e));
  return Event(e);
}

}  // namespace cgr::cuda
