// RAII for cuDNN's legacy descriptors: created by the caller through `&descriptor.handle`
// (inside CGR_CUDNN_CHECK) and destroyed with the object, so a failure halfway through an op's
// setup leaks nothing.
#pragma once

#include <cudnn.h>

namespace cgr::cuda {

template <typename Handle, cudnnStatus_t (*Destroy)(Handle)>
struct CudnnDescriptor {
  Handle handle = nullptr;
  CudnnDescriptor() = default;
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  ~CudnnDescriptor() { reset(); }
  // Destroys the descriptor, if any, so that the object can hold a new one.
  void reset() {
    if (handle != nullptr) (void)Destroy(handle);
    handle = nullptr;
  }
};

using CudnnTensorDescriptor =
    CudnnDescriptor<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using CudnnFilterDescriptor =
    CudnnDescriptor<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using CudnnConvolutionDescriptor =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;

}  // namespace cgr::cuda
