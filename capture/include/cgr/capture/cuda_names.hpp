// Names of the CUDA graph API's enumerations, for messages: "capture status Invalidated" says
// what "capture status 2" does not. CUDA builds only.
#pragma once

#include <cuda_runtime.h>

#include <string_view>

namespace cgr::capture {

std::string_view capture_status_name(cudaStreamCaptureStatus status);
std::string_view instantiate_result_name(cudaGraphInstantiateResult result);
std::string_view node_type_name(cudaGraphNodeType type);

}  // namespace cgr::capture
