// Whole-file writes shared by the .npy and safetensors writers.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

namespace cgr::detail {

// strerror(errno), for messages about a failed system call.
std::string errno_message();

// Writes `bytes` to `path`, replacing it. On failure no partial file is left behind (it would
// load later as a confusing "truncated" file) and an Error names the file.
void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes);

}  // namespace cgr::detail
