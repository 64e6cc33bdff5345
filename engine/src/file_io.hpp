// The system-call side of cgr/files.hpp, shared by its readers and writers.
#pragma once

#include <string>

#include "cgr/files.hpp"

namespace cgr::detail {

// strerror(errno), for messages about a failed system call.
std::string errno_message();

}  // namespace cgr::detail
