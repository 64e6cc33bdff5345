#include "cgr/tensor.hpp"

#include <algorithm>
#include <cstring>

#include "cgr/error.hpp"

namespace cgr {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
  }
  return 0;
}

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
  }
  return "?";
}

std::int64_t Shape::numel() const {
  // Shapes come from files too: an overflowing product is an error, not undefined behaviour.
  // A zero dim makes the shape empty whatever the other dims are, in any order.
  if (std::find(dims_.begin(), dims_.end(), 0) != dims_.end()) return 0;
  std::int64_t count = 1;
  for (auto d : dims_) {
    if (__builtin_mul_overflow(count, d, &count)) fail("shape {} has too many elements", to_string());
  }
  return count;
}

std::string Shape::to_string() const {
  if (dims_.empty()) return "scalar";
  return fmt::format("{}", fmt::join(dims_, "x"));
}

Tensor::Tensor(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {
  for (auto d : shape_.dims()) {
    if (d < 0) fail("tensor shape {} has a negative dimension", shape_.to_string());
  }
  bytes_.resize(static_cast<std::size_t>(shape_.numel()) * dtype_size(dtype_));
}

Tensor::Tensor(Shape shape, std::vector<float> values) : Tensor(std::move(shape), DType::f32) {
  if (values.size() != static_cast<std::size_t>(numel())) {
    fail("tensor of shape {} needs {} values, got {}", shape_.to_string(), numel(), values.size());
  }
  // An empty tensor's vectors may hold null pointers, which memcpy must not be given.
  if (!values.empty()) std::memcpy(bytes_.data(), values.data(), values.size() * sizeof(float));
}

std::span<float> Tensor::f32() & {
  if (dtype_ != DType::f32) fail("tensor of dtype {} read as f32", to_string(dtype_));
  return {reinterpret_cast<float*>(bytes_.data()), static_cast<std::size_t>(numel())};
}

std::span<const float> Tensor::f32() const& {
  if (dtype_ != DType::f32) fail("tensor of dtype {} read as f32", to_string(dtype_));
  return {reinterpret_cast<const float*>(bytes_.data()), static_cast<std::size_t>(numel())};
}

std::vector<float> Tensor::to_vector() const {
  const auto values = f32();
  return {values.begin(), values.end()};
}

}  // namespace cgr
