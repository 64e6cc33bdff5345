// Checked cuDNN and cuBLAS calls, in the manner of CGR_CUDA_CHECK (cgr/capture/cuda_check.hpp):
// a failed call becomes a cgr::Error naming the call, file:line and the library's message.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include "cgr/capture/cuda_check.hpp"

namespace cgr::detail {

[[noreturn]] inline void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                           int line) {
  fail("{} failed at {}:{}: {} (cuDNN status {})", call, file, line, cudnnGetErrorString(status),
       static_cast<int>(status));
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call,
                                            const char* file, int line) {
  fail("{} failed at {}:{}: {} (cuBLAS status {})", call, file, line, cublasGetStatusString(status),
       static_cast<int>(status));
}

}  // namespace cgr::detail

#define CGR_CUDNN_CHECK(call)                                                   \
  do {                                                                          \
    const cudnnStatus_t cgr_status_ = (call);                                   \
    if (cgr_status_ != CUDNN_STATUS_SUCCESS) {                                  \
      ::cgr::detail::throw_cudnn_error(cgr_status_, #call, __FILE__, __LINE__); \
    }                                                                           \
  } while (false)

#define CGR_CUBLAS_CHECK(call)                                                   \
  do {                                                                           \
    const cublasStatus_t cgr_status_ = (call);                                   \
    if (cgr_status_ != CUBLAS_STATUS_SUCCESS) {                                  \
      ::cgr::detail::throw_cublas_error(cgr_status_, #call, __FILE__, __LINE__); \
    }                                                                            \
  } while (false)
