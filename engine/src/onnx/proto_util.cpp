// ONNX protobuf helpers: attribute access with type checks, TensorProto decoding.
#include "onnx/proto_util.hpp"

#include <cstring>
#include <limits>

#include "cgr/error.hpp"

namespace cgr::onnx_import {

std::string node_label(std::string_view what, const ::onnx::NodeProto& node) {
  return fmt::format("{}: node '{}' ({})", what, node.name(), node.op_type());
}

namespace {

std::int64_t checked_numel(const ::onnx::TensorProto& tensor, const std::string& label) {
  std::int64_t count = 1;
  for (auto d : tensor.dims()) {
    if (d < 0 || d > (std::int64_t{1} << 40) || count > (std::int64_t{1} << 40) / std::max<std::int64_t>(d, 1)) {
      fail("{}: tensor '{}' has an invalid dimension {}", label, tensor.name(), d);
    }
    count *= d;
  }
  return count;
}

template <typename T>
std::vector<T> from_raw(const std::string& raw, std::int64_t count, const std::string& label,
                        const std::string& name) {
  if (raw.size() != static_cast<std::size_t>(count) * sizeof(T)) {
    fail("{}: tensor '{}' holds {} bytes of data, expected {}", label, name, raw.size(),
         static_cast<std::size_t>(count) * sizeof(T));
  }
  std::vector<T> values(static_cast<std::size_t>(count));
  if (count > 0) std::memcpy(values.data(), raw.data(), raw.size());  // ONNX raw data is little-endian
  return values;
}

template <typename T, typename Field>
std::vector<T> from_field(const Field& field, std::int64_t count, const std::string& label,
                          const std::string& name) {
  if (field.size() != count) {
    fail("{}: tensor '{}' holds {} values, expected {}", label, name, field.size(), count);
  }
  return std::vector<T>(field.begin(), field.end());
}

}  // namespace

ConstantTensor decode_tensor(const ::onnx::TensorProto& tensor, const std::string& label) {
  if (tensor.has_data_location() &&
      tensor.data_location() == ::onnx::TensorProto::EXTERNAL) {
    fail("{}: tensor '{}' keeps its data in an external file, which is not supported", label,
         tensor.name());
  }
  if (tensor.has_segment()) fail("{}: tensor '{}' is segmented, which is not supported", label, tensor.name());
  const std::int64_t count = checked_numel(tensor, label);
  ConstantTensor result;
  result.shape = Shape(std::vector<std::int64_t>(tensor.dims().begin(), tensor.dims().end()));
  const bool raw = tensor.has_raw_data();
  switch (tensor.data_type()) {
    case ::onnx::TensorProto::FLOAT:
      result.floats = raw ? from_raw<float>(tensor.raw_data(), count, label, tensor.name())
                          : from_field<float>(tensor.float_data(), count, label, tensor.name());
      break;
    case ::onnx::TensorProto::DOUBLE: {
      const auto doubles = raw ? from_raw<double>(tensor.raw_data(), count, label, tensor.name())
                               : from_field<double>(tensor.double_data(), count, label, tensor.name());
      result.floats.assign(doubles.begin(), doubles.end());
      break;
    }
    case ::onnx::TensorProto::INT64:
      result.is_float = false;
      result.ints = raw ? from_raw<std::int64_t>(tensor.raw_data(), count, label, tensor.name())
                        : from_field<std::int64_t>(tensor.int64_data(), count, label, tensor.name());
      break;
    case ::onnx::TensorProto::INT32: {
      result.is_float = false;
      const auto ints = raw ? from_raw<std::int32_t>(tensor.raw_data(), count, label, tensor.name())
                            : from_field<std::int32_t>(tensor.int32_data(), count, label, tensor.name());
      result.ints.assign(ints.begin(), ints.end());
      break;
    }
    default:
      fail("{}: tensor '{}' has data type {} ({}); supported: FLOAT, DOUBLE, INT64, INT32", label,
           tensor.name(), ::onnx::TensorProto::DataType_Name(
                              static_cast<::onnx::TensorProto::DataType>(tensor.data_type())),
           tensor.data_type());
  }
  return result;
}

Attributes::Attributes(const ::onnx::NodeProto& node, std::string label,
                       std::initializer_list<std::string_view> known)
    : node_(node), label_(std::move(label)) {
  for (const auto& attribute : node.attribute()) {
    bool listed = false;
    for (auto name : known) listed = listed || attribute.name() == name;
    if (!listed) fail("{}: attribute '{}' is not supported", label_, attribute.name());
  }
}

const ::onnx::AttributeProto* Attributes::find(std::string_view name) const {
  for (const auto& attribute : node_.attribute()) {
    if (attribute.name() == name) return &attribute;
  }
  return nullptr;
}

const ::onnx::AttributeProto& Attributes::expect(std::string_view name,
                                                 ::onnx::AttributeProto::AttributeType type) const {
  const auto* attribute = find(name);
  CGR_ASSERT(attribute != nullptr);
  // Old exporters leave `type` unset (UNDEFINED); trust the field then.
  if (attribute->type() != type && attribute->type() != ::onnx::AttributeProto::UNDEFINED) {
    fail("{}: attribute '{}' has type {}, expected {}", label_, name,
         ::onnx::AttributeProto::AttributeType_Name(attribute->type()),
         ::onnx::AttributeProto::AttributeType_Name(type));
  }
  return *attribute;
}

// Integer attributes are sizes, axes and flags: anything beyond 2^31 is corrupt, and refusing
// it keeps every product of two attributes inside int64.
constexpr std::int64_t kAttributeLimit = std::int64_t{1} << 31;

std::int64_t Attributes::get_int(std::string_view name, std::int64_t fallback) const {
  if (!has(name)) return fallback;
  const std::int64_t value = expect(name, ::onnx::AttributeProto::INT).i();
  if (value > kAttributeLimit || value < -kAttributeLimit) unsupported(name, fmt::format("value {} is out of range", value));
  return value;
}

float Attributes::get_float(std::string_view name, float fallback) const {
  return has(name) ? expect(name, ::onnx::AttributeProto::FLOAT).f() : fallback;
}

std::string Attributes::get_string(std::string_view name, std::string fallback) const {
  return has(name) ? expect(name, ::onnx::AttributeProto::STRING).s() : fallback;
}

std::vector<std::int64_t> Attributes::get_ints(std::string_view name,
                                               std::vector<std::int64_t> fallback) const {
  if (!has(name)) return fallback;
  const auto& ints = expect(name, ::onnx::AttributeProto::INTS).ints();
  for (auto value : ints) {
    if (value > kAttributeLimit || value < -kAttributeLimit) unsupported(name, fmt::format("value {} is out of range", value));
  }
  return {ints.begin(), ints.end()};
}

std::vector<float> Attributes::get_floats(std::string_view name, std::vector<float> fallback) const {
  if (!has(name)) return fallback;
  const auto& floats = expect(name, ::onnx::AttributeProto::FLOATS).floats();
  return {floats.begin(), floats.end()};
}

const ::onnx::TensorProto* Attributes::get_tensor(std::string_view name) const {
  return has(name) ? &expect(name, ::onnx::AttributeProto::TENSOR).t() : nullptr;
}

void Attributes::unsupported(std::string_view attribute, std::string_view why) const {
  fail("{}: attribute '{}' {}", label_, attribute, why);
}

}  // namespace cgr::onnx_import
