// Builds ONNX models with the protobuf API for the importer's tests: inputs, initializers,
// nodes with attributes, and the import of the result as "test.onnx".
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <cgr/onnx.hpp>

namespace cgr::test {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int opset = 13) {
    model_.set_ir_version(8);
    model_.set_producer_name("cgr-test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
  }
  ::onnx::GraphProto& graph() { return *model_.mutable_graph(); }
  void add_opset(int version, const std::string& domain = "") {
    auto* op = model_.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }

  void input(const std::string& name, const std::vector<std::int64_t>& dims,
             const std::string& symbolic_dim = {}) {
    auto* in = graph().add_input();
    in->set_name(name);
    auto* t = in->mutable_type()->mutable_tensor_type();
    t->set_elem_type(::onnx::TensorProto::FLOAT);
    for (auto d : dims)
      t->mutable_shape()->add_dim()->set_dim_value(d);
    if (!symbolic_dim.empty()) t->mutable_shape()->add_dim()->set_dim_param(symbolic_dim);
  }
  // An input whose dims are each a number ("3") or a symbol ("N"), in any order.
  void symbolic_input(const std::string& name, const std::vector<std::string>& dims) {
    auto* t = graph().add_input();
    t->set_name(name);
    auto* type = t->mutable_type()->mutable_tensor_type();
    type->set_elem_type(::onnx::TensorProto::FLOAT);
    for (const auto& d : dims) {
      auto* dim = type->mutable_shape()->add_dim();
      if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos) {
        dim->set_dim_value(std::stoll(d));
      } else {
        dim->set_dim_param(d);
      }
    }
  }
  void output(const std::string& name) { graph().add_output()->set_name(name); }

  ::onnx::TensorProto& floats(const std::string& name, const std::vector<std::int64_t>& dims,
                              const std::vector<float>& values) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (auto d : dims)
      t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
    return *t;
  }
  void ints(const std::string& name, const std::vector<std::int64_t>& values) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(values.size()));
    for (auto v : values)
      t->add_int64_data(v);
  }

  ::onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name = {}) {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + std::to_string(graph().node_size()) : name);
    for (const auto& i : inputs)
      n->add_input(i);
    for (const auto& o : outputs)
      n->add_output(o);
    return *n;
  }
  static void attr(::onnx::NodeProto& n, const std::string& name, std::int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(::onnx::NodeProto& n, const std::string& name,
                   const std::vector<std::int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (auto x : v)
      a->add_ints(x);
  }
  static void attr(::onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(::onnx::NodeProto& n, const std::string& name, const std::vector<float>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOATS);
    for (auto x : v)
      a->add_floats(x);
  }
  static void attr(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  std::string bytes() const { return model_.SerializeAsString(); }
  OnnxModel import(const OnnxImportOptions& options = {}) const {
    const std::string data = bytes();
    return import_onnx(std::as_bytes(std::span(data.data(), data.size())), "test.onnx", options);
  }

 private:
  ::onnx::ModelProto model_;
};

}  // namespace cgr::test
