// CUDA device detection, usable from builds with and without the CUDA toolkit.
#pragma once

#include <string>

namespace cgr::detail {

// Empty when a CUDA device can be used; otherwise why not ("no CUDA device: ...").
std::string cuda_unavailable_reason();
// Throws Error("no CUDA device: ...") unless a device can be used.
void require_cuda_device();

}  // namespace cgr::detail
