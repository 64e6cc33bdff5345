// Reading ONNX protobuf messages safely: attributes with defaults and a check that a node
// carries no attribute the importer does not understand, and TensorProto data (raw or typed
// fields) decoded into floats or int64s with every size validated.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "cgr/tensor.hpp"

namespace cgr::onnx_import {

// Names a node in messages: "model.onnx: node 'Conv_3' (Conv)".
std::string node_label(std::string_view what, const ::onnx::NodeProto& node);

// A constant tensor: an initializer or the output of a Constant node.
struct ConstantTensor {
  Shape shape;
  bool is_float = true;
  std::vector<float> floats;        // when is_float
  std::vector<std::int64_t> ints;   // otherwise
};

// Decodes FLOAT, DOUBLE (converted), INT64 and INT32 tensors; `label` prefixes errors.
ConstantTensor decode_tensor(const ::onnx::TensorProto& tensor, const std::string& label);

class Attributes {
 public:
  Attributes(const ::onnx::NodeProto& node, std::string label,
             std::initializer_list<std::string_view> known);

  bool has(std::string_view name) const { return find(name) != nullptr; }
  std::int64_t get_int(std::string_view name, std::int64_t fallback) const;
  float get_float(std::string_view name, float fallback) const;
  std::string get_string(std::string_view name, std::string fallback) const;
  std::vector<std::int64_t> get_ints(std::string_view name,
                                     std::vector<std::int64_t> fallback) const;
  std::vector<float> get_floats(std::string_view name, std::vector<float> fallback = {}) const;
  const ::onnx::TensorProto* get_tensor(std::string_view name) const;
  [[noreturn]] void unsupported(std::string_view attribute, std::string_view why) const;
  const std::string& label() const { return label_; }

 private:
  const ::onnx::AttributeProto* find(std::string_view name) const;
  const ::onnx::AttributeProto& expect(std::string_view name,
                                       ::onnx::AttributeProto::AttributeType type) const;
  const ::onnx::NodeProto& node_;
  std::string label_;
};

}  // namespace cgr::onnx_import
