// Whole-file reads and writes, as cgr's readers (npy, safetensors, ONNX) and tools do them.
//   A read refuses anything but a regular file before it can block (a FIFO, a device, a
//   folder), checks the size against the format's limit before allocating, and reads the file
//   into memory: nothing stays mapped, so a file someone truncates later cannot fault the
//   process, and one truncated while it is read is an Error.
//   A write goes to a temporary file next to the target and is renamed over it, so a failed
//   write leaves no partial file behind.
// Every problem is an Error naming the file and, for a failed system call, the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cgr {

// The bytes of a regular file of at most `max_bytes`; `format` names what the file should be
// in the message about a larger one ("an ONNX model").
std::vector<std::byte> read_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                 std::string_view format);

void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes);
void write_text_file(const std::filesystem::path& path, std::string_view text);

// The folder outputs go to: created when missing. Error when it is not a folder or a file
// cannot be created in it. Tools call it before they run anything, so that no work is spent
// on results that could not be written.
void prepare_output_folder(const std::filesystem::path& folder);

// A file a tool will write (a report, a picture): its folder must exist and take new files,
// and the path must not be a folder. `option` names it in the message ("--export-json").
void prepare_output_file(std::string_view option, const std::filesystem::path& path);

// The files `names` (tensor names: outputs, exits) are written to, folder / stem + extension.
// A name becomes a stem through this function only: every character outside [A-Za-z0-9._-]
// becomes '_', and so does a leading '.', so no stem is a path, "..", hidden or absolute
// ("/relu/Relu_output_0" -> "_relu_Relu_output_0"). Error when two names give the same
// stem or a name is empty.
std::vector<std::filesystem::path> output_file_paths(const std::filesystem::path& folder,
                                                     const std::vector<std::string>& names,
                                                     std::string_view extension);

}  // namespace cgr
