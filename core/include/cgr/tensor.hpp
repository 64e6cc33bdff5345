// Shapes, element types, tensor descriptors and the owning host tensor used for weights and
// results. Layout is always dense row-major (NCHW for images).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cgr {

// f32 is what every executor runs today; f16 is reserved for the half-precision work.
enum class DType : std::uint8_t { f32, f16 };

std::size_t dtype_size(DType dtype);
std::string_view to_string(DType dtype);

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}

  std::size_t rank() const { return dims_.size(); }
  std::int64_t operator[](std::size_t axis) const { return dims_[axis]; }
  std::int64_t& operator[](std::size_t axis) { return dims_[axis]; }
  const std::vector<std::int64_t>& dims() const { return dims_; }
  // Product of all dimensions (1 for a scalar shape).
  std::int64_t numel() const;
  // "1x3x224x224"; "scalar" for rank 0.
  std::string to_string() const;
  bool operator==(const Shape&) const = default;

 private:
  std::vector<std::int64_t> dims_;
};

struct TensorDesc {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;

  std::size_t bytes() const { return static_cast<std::size_t>(shape.numel()) * dtype_size(dtype); }
};

// Owning, dense host tensor. f32 data is accessed through f32(); other dtypes through bytes().
class Tensor {
 public:
  Tensor() = default;
  Tensor(Shape shape, DType dtype = DType::f32);
  Tensor(Shape shape, std::vector<float> values);

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  std::int64_t numel() const { return shape_.numel(); }
  // Views of the data. Not on temporaries: the view would outlive the tensor.
  std::span<float> f32() &;
  std::span<const float> f32() const&;
  std::span<const float> f32() const&& = delete;
  std::span<std::byte> bytes() & { return bytes_; }
  std::span<const std::byte> bytes() const& { return bytes_; }
  std::span<const std::byte> bytes() const&& = delete;
  // A copy of the f32 data.
  std::vector<float> to_vector() const;

 private:
  Shape shape_;
  DType dtype_ = DType::f32;
  std::vector<std::byte> bytes_;
};

// Non-owning view of caller data handed to infer(): the dtype and the element count are
// checked against the engine's input descriptor, and so is the shape when the view knows it
// (a view of a Tensor does): data of the right size in the wrong layout is refused.
struct TensorView {
  DType dtype = DType::f32;
  const void* data = nullptr;
  std::size_t count = 0;  // elements
  std::span<const std::int64_t> dims;  // the viewed tensor's shape, when shape_known
  bool shape_known = false;

  TensorView() = default;
  TensorView(std::span<const float> values)  // NOLINT: implicit on purpose
      : dtype(DType::f32), data(values.data()), count(values.size()) {}
  TensorView(const std::vector<float>& values)  // NOLINT: implicit on purpose
      : dtype(DType::f32), data(values.data()), count(values.size()) {}
  TensorView(const Tensor& tensor)  // NOLINT: implicit on purpose
      : dtype(tensor.dtype()), data(tensor.bytes().data()),
        count(static_cast<std::size_t>(tensor.numel())), dims(tensor.shape().dims()),
        shape_known(true) {}
  TensorView(DType type, const void* pointer, std::size_t elements)
      : dtype(type), data(pointer), count(elements) {}
};

}  // namespace cgr
