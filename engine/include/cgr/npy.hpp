// .npy files: NumPy's single-array format, used for test inputs, reference outputs and
// single weights. Format versions 1.0, 2.0 and 3.0 are read; C order, little-endian float32
// ('<f4') and float16 ('<f2') only. Every problem with a file is an Error whose message starts
// with the file name (or the caller's `what`) and says what is wrong.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "cgr/tensor.hpp"

namespace cgr {

// Reads a .npy file. '<f4' (or '=f4') becomes an f32 Tensor, '<f2' an f16 Tensor holding the
// raw IEEE half bits. Shape () is a scalar. Errors: not a .npy file, unsupported version,
// malformed header, big-endian or non-float dtype, Fortran order, negative or absurd shape
// (more than 2^40 elements), data shorter or longer than the shape needs.
Tensor load_npy(const std::filesystem::path& path);

// The same from a file image in memory; `what` names it in error messages.
Tensor parse_npy(std::span<const std::byte> bytes, std::string_view what);

// The file image NumPy itself would write for `tensor` (np.save): version 1.0 (2.0 when the
// header does not fit 1.0), header padded with spaces to a multiple of 64 bytes.
std::vector<std::byte> serialize_npy(const Tensor& tensor);

// Writes serialize_npy(tensor) to `path`, replacing the file. Error if it cannot be written.
void save_npy(const std::filesystem::path& path, const Tensor& tensor);

}  // namespace cgr
