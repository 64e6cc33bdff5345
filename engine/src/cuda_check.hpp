// Checked CUDA runtime, cuDNN and cuBLAS calls: a failed call becomes a cgr::Error naming the call, file:line
// and the runtime's own message. Only for .cpp files (fmt does not compile under nvcc):
// .cu files return cudaError_t and their callers check it here. The non-throwing variant is
// for destructors, which must not throw.
#pragma once

#if defined(CGR_HAVE_CUDA)
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "cgr/error.hpp"

namespace cgr::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                          int line) {
  fail("{} failed at {}:{}: {} ({})", call, file, line, cudaGetErrorString(status),
       cudaGetErrorName(status));
}

inline void log_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  fmt::print(stderr, "cgr: {} failed at {}:{}: {} ({})\n", call, file, line,
             cudaGetErrorString(status), cudaGetErrorName(status));
}

}  // namespace cgr::detail

#define CGR_CUDA_CHECK(call)                                                          \
  do {                                                                                \
    const cudaError_t cgr_status_ = (call);                                           \
    if (cgr_status_ != cudaSuccess) {                                                 \
      ::cgr::detail::throw_cuda_error(cgr_status_, #call, __FILE__, __LINE__);        \
    }                                                                                 \
  } while (false)

#define CGR_CUDA_CHECK_NOTHROW(call)                                                  \
  do {                                                                                \
    const cudaError_t cgr_status_ = (call);                                           \
    if (cgr_status_ != cudaSuccess) {                                                 \
      ::cgr::detail::log_cuda_error(cgr_status_, #call, __FILE__, __LINE__);          \
    }                                                                                 \
  } while (false)

#if defined(CGR_HAVE_CUDNN)
#include <cudnn.h>
#endif
#include <cublas_v2.h>

namespace cgr::detail {

#if defined(CGR_HAVE_CUDNN)
[[noreturn]] inline void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file,
                                           int line) {
  fail("{} failed at {}:{}: {} (cuDNN status {})", call, file, line, cudnnGetErrorString(status),
       static_cast<int>(status));
}
#endif

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call,
                                            const char* file, int line) {
  fail("{} failed at {}:{}: {} (cuBLAS status {})", call, file, line,
       cublasGetStatusString(status), static_cast<int>(status));
}

}  // namespace cgr::detail

#if defined(CGR_HAVE_CUDNN)
#define CGR_CUDNN_CHECK(call)                                                    \
  do {                                                                           \
    const cudnnStatus_t cgr_status_ = (call);                                    \
    if (cgr_status_ != CUDNN_STATUS_SUCCESS) {                                   \
      ::cgr::detail::throw_cudnn_error(cgr_status_, #call, __FILE__, __LINE__);  \
    }                                                                            \
  } while (false)
#endif

#define CGR_CUBLAS_CHECK(call)                                                   \
  do {                                                                           \
    const cublasStatus_t cgr_status_ = (call);                                   \
    if (cgr_status_ != CUBLAS_STATUS_SUCCESS) {                                  \
      ::cgr::detail::throw_cublas_error(cgr_status_, #call, __FILE__, __LINE__); \
    }                                                                            \
  } while (false)

#endif  // CGR_HAVE_CUDA
