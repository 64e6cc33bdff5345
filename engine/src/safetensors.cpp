// safetensors reader and writer. The header is parsed with nlohmann::json and every field is
// checked when the file is opened, before a byte of tensor data is touched; offsets are
// compared in unsigned 64-bit arithmetic that cannot overflow (every value is first bounded by
// the buffer size), so a hostile header can make us fail but never read outside the file or
// allocate more than it holds. nlohmann's exceptions never escape: they become Errors naming
// the file.
#include "cgr/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "cgr/error.hpp"
#include "file_io.hpp"

namespace cgr {
namespace {

using nlohmann::json;

// The reference implementation refuses larger headers too; a bigger length is garbage.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;
constexpr std::string_view kMetadataKey = "__metadata__";

struct DTypeBits {
  std::string_view name;
  unsigned bits;
};
// Every dtype the reference implementation knows (sub-byte float types included), so that
// files holding them still open and can be inspected.
constexpr DTypeBits kDTypes[] = {
    {"BOOL", 8},    {"U8", 8},   {"I8", 8},   {"F8_E5M2", 8}, {"F8_E4M3", 8},
    {"F8_E8M0", 8}, {"I16", 16}, {"U16", 16}, {"F16", 16},    {"BF16", 16},
    {"I32", 32},    {"U32", 32}, {"F32", 32}, {"F64", 64},    {"I64", 64},
    {"U64", 64},    {"C64", 64}, {"F4", 4},   {"F6_E2M3", 6}, {"F6_E3M2", 6},
};

std::optional<unsigned> dtype_bits(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (d.name == name) return d.bits;
  }
  return std::nullopt;
}

[[noreturn]] void fail_too_short(std::string_view what, std::size_t size) {
  fail("{}: not a safetensors file ({} bytes; the header length alone takes 8)", what, size);
}

Shape parse_shape(const json& shape, std::string_view what, const std::string& name) {
  if (!shape.is_array()) fail("{}: tensor '{}': 'shape' is missing or not an array", what, name);
  std::vector<std::int64_t> dims;
  std::int64_t nonzero_product = 1;
  for (const json& d : shape) {
    if (!d.is_number_integer()) {
      fail("{}: tensor '{}': shape entry {} is not an integer", what, name, d.dump());
    }
    if (!d.is_number_unsigned()) {  // a signed JSON integer is a negative one
      fail("{}: tensor '{}': shape has a negative dimension ({})", what, name, d.dump());
    }
    const auto value = d.get<std::uint64_t>();
    // Bounding the product of the non-zero dimensions keeps every partial product of
    // Shape::numel() in range.
    if (value > 0) {
      if (value > static_cast<std::uint64_t>(kMaxElements / nonzero_product)) {
        fail("{}: tensor '{}': shape has more than 2^40 elements", what, name);
      }
      nonzero_product *= static_cast<std::int64_t>(value);
    }
    dims.push_back(static_cast<std::int64_t>(value));
  }
  return Shape(std::move(dims));
}

SafetensorsInfo parse_entry(const json& entry, std::string_view what, const std::string& name,
                            std::uint64_t buffer_size) {
  if (!entry.is_object()) fail("{}: entry '{}' is not an object", what, name);
  SafetensorsInfo info;
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    fail("{}: tensor '{}': 'dtype' is missing or not a string", what, name);
  }
  info.dtype = dtype->get<std::string>();
  const std::optional<unsigned> bits = dtype_bits(info.dtype);
  if (!bits) fail("{}: tensor '{}' has unknown dtype '{}'", what, name, info.dtype);

  const auto shape = entry.find("shape");
  info.shape = parse_shape(shape == entry.end() ? json() : *shape, what, name);

  const auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    fail("{}: tensor '{}': 'data_offsets' must be [begin, end] (two non-negative integers)", what,
         name);
  }
  info.begin = (*offsets)[0].get<std::uint64_t>();
  info.end = (*offsets)[1].get<std::uint64_t>();
  if (info.begin > info.end) {
    fail("{}: tensor '{}': data_offsets [{}, {}] end before they begin", what, name, info.begin,
         info.end);
  }
  if (info.end > buffer_size) {
    fail("{}: tensor '{}': data_offsets [{}, {}] run past the end of the data ({} bytes)", what,
         name, info.begin, info.end, buffer_size);
  }
  // numel <= 2^40 and bits <= 64: no overflow.
  const auto bit_count = static_cast<std::uint64_t>(info.shape.numel()) * *bits;
  if (bit_count % 8 != 0) {
    fail("{}: tensor '{}': {} elements of {} do not fill whole bytes", what, name,
         info.shape.numel(), info.dtype);
  }
  if (info.size() != bit_count / 8) {
    fail("{}: tensor '{}' is {} {} ({} bytes) but its data_offsets [{}, {}] span {} bytes", what,
         name, info.dtype, info.shape.to_string(), bit_count / 8, info.begin, info.end,
         info.size());
  }
  return info;
}

SafetensorsMetadata parse_metadata(const json& value, std::string_view what) {
  SafetensorsMetadata metadata;
  if (value.is_null()) return metadata;  // the reference reader accepts an explicit null
  if (!value.is_object()) fail("{}: '__metadata__' is not an object", what);
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      fail("{}: '__metadata__' value for '{}' is not a string", what, key);
    }
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}


}  // namespace

SafetensorsFile::SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile file;
  file.what_ = path.string();
  // Read, not mapped: a mapped file truncated by someone else faults the next access (SIGBUS);
  // a file in memory cannot change under us. The storage's heap buffer survives moves of the
  // SafetensorsFile, so the spans into it stay valid.
  file.storage_ = read_file(path, 8 + kMaxHeaderBytes + (std::uint64_t{8} << 40), "a safetensors file");
  file.parse(file.storage_);
  return file;
}

SafetensorsFile SafetensorsFile::view(std::span<const std::byte> bytes, std::string_view what) {
  SafetensorsFile file;
  file.what_ = what;
  file.parse(bytes);
  return file;
}

void SafetensorsFile::parse(std::span<const std::byte> bytes) {
  const std::string_view what = what_;
  if (bytes.size() < 8) fail_too_short(what, bytes.size());
  std::uint64_t header_length = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    header_length |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
  }
  if (header_length > kMaxHeaderBytes) {
    fail("{}: header length {} is over the 100 MB limit (not a safetensors file?)", what,
         header_length);
  }
  if (header_length > bytes.size() - 8) {
    fail("{}: header length {} runs past the end of the file ({} bytes)", what, header_length,
         bytes.size());
  }
  const char* text = reinterpret_cast<const char*>(bytes.data()) + 8;
  // nlohmann keeps the last of duplicate keys silently; a tensor named twice is ambiguous.
  std::set<std::string> seen;
  std::optional<std::string> duplicate;
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event,
                                                json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !duplicate &&
        !seen.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, text + header_length, note_keys);
  } catch (const json::exception& e) {
    fail("{}: header is not valid JSON ({})", what, e.what());
  }
  if (!header.is_object()) fail("{}: header is not a JSON object", what);
  if (duplicate) fail("{}: header names '{}' twice", what, *duplicate);

  buffer_ = bytes.subspan(8 + header_length);
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      metadata_ = parse_metadata(entry, what);
    } else {
      tensors_.emplace(name, parse_entry(entry, what, name, buffer_.size()));
    }
  }

  // Sorted by begin, two non-empty tensors overlap only if neighbours do.
  std::vector<std::pair<const std::string*, const SafetensorsInfo*>> placed;
  for (const auto& [name, info] : tensors_) {
    if (info.size() > 0) placed.emplace_back(&name, &info);
  }
  std::sort(placed.begin(), placed.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (std::size_t i = 1; i < placed.size(); ++i) {
    const auto& [prev_name, prev] = placed[i - 1];
    const auto& [name, info] = placed[i];
    if (info->begin < prev->end) {
      fail("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", what, *prev_name, prev->begin,
           prev->end, *name, info->begin, info->end);
    }
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> result;
  result.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_)
    result.push_back(name);
  return result;
}

const SafetensorsInfo& SafetensorsFile::info(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("{}: no tensor named '{}'", what_, name);
  return it->second;
}

std::span<const std::byte> SafetensorsFile::raw(std::string_view name) const {
  const SafetensorsInfo& i = info(name);
  return buffer_.subspan(i.begin, i.size());
}

Tensor SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsInfo& i = info(name);
  DType dtype = DType::f32;
  if (i.dtype == "F16") {
    dtype = DType::f16;
  } else if (i.dtype != "F32") {
    fail("{}: tensor '{}' has dtype {}, which cgr does not load (F32 and F16 only)", what_, name,
         i.dtype);
  }
  Tensor tensor(i.shape, dtype);
  const auto bytes = raw(name);
  CGR_ASSERT(bytes.size() == tensor.bytes().size());
  if (!bytes.empty()) std::memcpy(tensor.bytes().data(), bytes.data(), bytes.size());
  return tensor;
}

Weights SafetensorsFile::weights() const {
  Weights weights;
  for (const auto& [name, info] : tensors_) {
    if (name.empty()) fail("{}: a tensor has an empty name", what_);
    weights.add(name, tensor(name));
  }
  return weights;
}

Weights load_safetensors(const std::filesystem::path& path) {
  return SafetensorsFile::open(path).weights();
}

Weights parse_safetensors(std::span<const std::byte> bytes, std::string_view what) {
  return SafetensorsFile::view(bytes, what).weights();
}

std::vector<std::byte> serialize_safetensors(const Weights& weights,
                                             const SafetensorsMetadata& metadata) {
  std::vector<std::pair<const std::string*, const Tensor*>> order;
  for (const auto& [name, tensor] : weights.tensors()) {
    if (name == kMetadataKey) fail("a safetensors tensor cannot be named '{}'", kMetadataKey);
    order.emplace_back(&name, &tensor);
  }
  // Larger elements first keeps every tensor aligned to its element size (the reference
  // writer does the same); std::map already gives name order within a dtype.
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second->dtype()) > dtype_size(b.second->dtype());
  });

  // ordered_json keeps insertion order, so the header reads like the reference's.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : order) {
    const std::uint64_t size = tensor->bytes().size();
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = tensor->dtype() == DType::f32 ? "F32" : "F16";
    entry["shape"] = tensor->shape().dims();
    entry["data_offsets"] = {offset, offset + size};
    header[*name] = std::move(entry);
    offset += size;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    // Invalid UTF-8 in a name or a metadata string.
    fail("cannot write safetensors header: {}", e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  std::vector<std::byte> out(8 + text.size() + offset);
  for (std::size_t i = 0; i < 8; ++i) {
    out[i] = std::byte{static_cast<unsigned char>((text.size() >> (8 * i)) & 0xFF)};
  }
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::byte* data = out.data() + 8 + text.size();
  for (const auto& [name, tensor] : order) {
    const auto bytes = tensor->bytes();
    if (!bytes.empty()) std::memcpy(data, bytes.data(), bytes.size());
    data += bytes.size();
  }
  return out;
}

void save_safetensors(const std::filesystem::path& path, const Weights& weights,
                      const SafetensorsMetadata& metadata) {
  write_file(path, serialize_safetensors(weights, metadata));
}

}  // namespace cgr
