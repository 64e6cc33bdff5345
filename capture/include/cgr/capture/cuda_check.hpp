// Checked CUDA runtime calls: a failed call becomes a cgr::Error naming the call, file:line
// and the runtime's own message; the non-throwing variant (for destructors) logs it. For code
// compiled by g++ against <cuda_runtime.h> (fmt does not compile under nvcc: .cu files return
// cudaError_t and their callers check it). A CustomOp's callable may use them too.
#pragma once

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

#define CGR_CUDA_CHECK(call)                                                   \
  do {                                                                         \
    const cudaError_t cgr_status_ = (call);                                    \
    if (cgr_status_ != cudaSuccess) {                                          \
      ::cgr::detail::throw_cuda_error(cgr_status_, #call, __FILE__, __LINE__); \
    }                                                                          \
  } while (false)

#define CGR_CUDA_CHECK_NOTHROW(call)                                         \
  do {                                                                       \
    const cudaError_t cgr_status_ = (call);                                  \
    if (cgr_status_ != cudaSuccess) {                                        \
      ::cgr::detail::log_cuda_error(cgr_status_, #call, __FILE__, __LINE__); \
    }                                                                        \
  } while (false)
