// safetensors files (the Hugging Face weight format): an 8-byte little-endian header length N,
// N bytes of JSON describing every tensor ({"name": {"dtype", "shape", "data_offsets"}} plus
// an optional "__metadata__" map of strings), then the tensor bytes. The reader maps the file
// and validates the whole header when it opens it; every problem is an Error whose message
// starts with the file name and says what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cgr/tensor.hpp"
#include "cgr/weights.hpp"

namespace cgr {

using SafetensorsMetadata = std::map<std::string, std::string>;

// One tensor's header entry.
struct SafetensorsInfo {
  std::string dtype;  // as the file spells it: "F32", "F16", "BF16", "I64", ...
  Shape shape;
  std::uint64_t begin = 0;  // byte offsets into the data buffer that follows the header
  std::uint64_t end = 0;

  std::uint64_t size() const { return end - begin; }
};

// A validated safetensors file, read into memory (open) or viewing caller memory (view). Opening
// checks the whole header: JSON syntax, entry types, known dtype names, non-negative shapes,
// data_offsets [begin, end] with begin <= end inside the buffer, size = elements x dtype size,
// no two tensors overlapping, string-valued metadata. It accepts tensors of every safetensors
// dtype (BF16, F64, I64, ...) so that a file can be inspected; only tensor() refuses those
// cgr cannot hold. Unlike the reference reader, gaps between tensors and bytes after the last
// one are tolerated.
//
// open() reads the whole file (cgr::read_file: regular files only, no mapping), so a file
// truncated or rewritten by someone else afterwards cannot fault or change what this holds.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);
  // Parses a file image in memory without copying it: `bytes` must outlive the object.
  static SafetensorsFile view(std::span<const std::byte> bytes, std::string_view what);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  // The file name (or `what`) that error messages start with.
  const std::string& what() const { return what_; }
  // Tensor names, sorted.
  std::vector<std::string> names() const;
  std::size_t size() const { return tensors_.size(); }
  bool contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }
  // Error if there is no tensor `name`.
  const SafetensorsInfo& info(std::string_view name) const;
  // The tensor's bytes inside the file (little-endian, any dtype); valid while this lives.
  std::span<const std::byte> raw(std::string_view name) const;
  // A copy: F32 -> f32 Tensor, F16 -> f16 Tensor (raw IEEE half bits). Error naming the
  // tensor and its dtype for every other dtype.
  Tensor tensor(std::string_view name) const;
  // All tensors, as tensor() converts them: the first unsupported dtype is an Error.
  Weights weights() const;
  // "__metadata__" (empty when the file has none).
  const SafetensorsMetadata& metadata() const { return metadata_; }

 private:
  SafetensorsFile();
  void parse(std::span<const std::byte> bytes);

  std::vector<std::byte> storage_;  // the file's bytes (empty for view())
  std::string what_;
  std::span<const std::byte> buffer_;  // the data buffer after the header
  std::map<std::string, SafetensorsInfo, std::less<>> tensors_;
  SafetensorsMetadata metadata_;
};

// Every tensor of a file, as SafetensorsFile::weights(). A tensor of a dtype cgr does not
// hold (BF16, F64, I64, ...) makes the whole load fail, naming the tensor and its dtype; use
// SafetensorsFile to read the other tensors of such a file.
Weights load_safetensors(const std::filesystem::path& path);

// The same from a file image in memory; `what` names it in error messages.
Weights parse_safetensors(std::span<const std::byte> bytes, std::string_view what);

// The file image the reference implementation writes: compact JSON header ("__metadata__"
// first, when not empty), padded with spaces to a multiple of 8 bytes; tensors laid out
// back to back, larger dtypes first (so every tensor is aligned to its element size), then by
// name. Weights may hold f32 and f16 tensors.
std::vector<std::byte> serialize_safetensors(const Weights& weights,
                                             const SafetensorsMetadata& metadata = {});

// Writes serialize_safetensors(...) to `path`, replacing the file. Error if it cannot be
// written.
void save_safetensors(const std::filesystem::path& path, const Weights& weights,
                      const SafetensorsMetadata& metadata = {});

}  // namespace cgr
