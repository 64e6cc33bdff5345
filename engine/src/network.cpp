// Network builder: owns the layers and the value table; every layer added is checked (handles
// from this network, unique names, a registered kind, inputs as the layer was built for). The
// per-kind builders are inline in network.hpp.
#include "cgr/network.hpp"

#include <map>

#include <fmt/format.h>

#include "cgr/error.hpp"

namespace cgr {

struct Network::State {
  struct ValueInfo {
    TensorDesc desc;
    int producer = -1;  // layer index; -1 for a network input
  };
  std::vector<ValueInfo> values;
  std::map<std::string, int, std::less<>> value_by_name;
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<std::vector<Value>> layer_inputs;
  std::vector<Value> layer_outputs;
  std::vector<Value> inputs;
  std::vector<std::pair<std::string, Value>> outputs;
  std::vector<Network::Exit> exits;
};

Network::Network() : state_(std::make_unique<State>()) {}
Network::~Network() = default;
Network::Network(Network&&) noexcept = default;
Network& Network::operator=(Network&&) noexcept = default;

void Network::check_new_name(const std::string& name) const {
  if (name.empty()) fail("every input and layer needs a non-empty name");
  if (state_->value_by_name.contains(name)) {
    fail("the name '{}' is used twice: layer and input names must be unique", name);
  }
}

void Network::check_value(Value value, std::string_view layer_name) const {
  if (value.id < 0 || value.id >= static_cast<int>(state_->values.size())) {
    fail("layer '{}': an input Value (id {}) does not belong to this network", layer_name,
         value.id);
  }
}

Value Network::make_value(TensorDesc desc, int producer) {
  const Value value{static_cast<int>(state_->values.size())};
  state_->value_by_name.emplace(desc.name, value.id);
  state_->values.push_back({std::move(desc), producer});
  return value;
}

Value Network::input(const std::string& name, Shape shape, DType dtype) {
  check_new_name(name);
  if (shape.rank() == 0) fail("input '{}': a shape needs at least one dimension", name);
  for (auto d : shape.dims()) {
    if (d <= 0) fail("input '{}': shape {} has a dimension <= 0", name, shape.to_string());
  }
  if (shape.numel() > (std::int64_t{1} << 40)) {
    fail("input '{}': shape {} has more than 2^40 elements", name, shape.to_string());
  }
  if (dtype != DType::f32) {
    fail("input '{}': dtype {} is not supported yet (only f32)", name, to_string(dtype));
  }
  const Value value = make_value(TensorDesc{name, std::move(shape), dtype}, -1);
  state_->inputs.push_back(value);
  return value;
}

void Network::output(const std::string& name, Value value) {
  check_value(value, name);
  if (name.empty()) fail("an output needs a non-empty name");
  for (const auto& [existing, v] : state_->outputs) {
    if (existing == name) fail("output '{}' is declared twice", name);
  }
  for (const auto& e : state_->exits) {
    if (e.name == name) fail("output '{}' has the name of an exit", name);
  }
  for (Value in : state_->inputs) {
    if (state_->values[in.id].desc.name == name && in.id != value.id) {
      fail("output '{}' has the name of an input", name);
    }
  }
  state_->outputs.emplace_back(name, value);
}

void Network::exit(const std::string& name, Value logits, Value speculate_until) {
  check_value(logits, name);
  if (speculate_until.valid()) check_value(speculate_until, name);
  if (name.empty()) fail("an exit needs a non-empty name");
  for (const auto& [existing, v] : state_->outputs) {
    if (existing == name) fail("exit '{}' has the name of an output", name);
  }
  for (const auto& e : state_->exits) {
    if (e.name == name) fail("exit '{}' is declared twice", name);
  }
  const Shape& shape = desc(logits).shape;
  if (shape.rank() != 2) {
    fail("exit '{}': logits '{}' have shape {}, expected N x classes", name, desc(logits).name,
         shape.to_string());
  }
  if (state_->exits.size() >= 32) fail("exit '{}': at most 32 exits are supported", name);
  state_->exits.push_back({name, logits, speculate_until});
}

const std::vector<Network::Exit>& Network::exits() const { return state_->exits; }

Value Network::add_layer(std::unique_ptr<Layer> layer, const std::vector<Value>& inputs) {
  CGR_ASSERT(layer != nullptr);
  check_new_name(layer->name());
  if (!is_registered_layer_kind(layer->kind())) {
    // Backends dispatch on the kind, and coverage tests enumerate the registered ones.
    fail("layer '{}': its kind '{}' is not registered (CGR_REGISTER_LAYER_KIND in its .cpp)",
         layer->name(), layer->kind());
  }
  if (inputs.size() != layer->inputs().size()) {
    fail("layer '{}': built for {} inputs but given {}", layer->name(), layer->inputs().size(),
         inputs.size());
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_value(inputs[i], layer->name());
    const TensorDesc& actual = state_->values[inputs[i].id].desc;
    const TensorDesc& expected = layer->inputs()[i];
    if (actual.shape != expected.shape || actual.dtype != expected.dtype) {
      fail("layer '{}': input {} is '{}' {} but the layer was built for {}", layer->name(), i,
           actual.name, actual.shape.to_string(), expected.shape.to_string());
    }
  }
  const int index = static_cast<int>(state_->layers.size());
  const Value out = make_value(layer->output(), index);
  state_->layers.push_back(std::move(layer));
  state_->layer_inputs.push_back(inputs);
  state_->layer_outputs.push_back(out);
  return out;
}

const TensorDesc& Network::desc(Value value) const {
  check_value(value, "?");
  return state_->values[value.id].desc;
}

Value Network::find_value(std::string_view name) const {
  const auto it = state_->value_by_name.find(name);
  return it == state_->value_by_name.end() ? Value{} : Value{it->second};
}

int Network::layer_count() const { return static_cast<int>(state_->layers.size()); }
const Layer& Network::layer(int index) const { return *state_->layers.at(index); }
const std::vector<Value>& Network::layer_inputs(int index) const {
  return state_->layer_inputs.at(index);
}
Value Network::layer_output(int index) const { return state_->layer_outputs.at(index); }
int Network::producer(Value value) const {
  check_value(value, "?");
  return state_->values[value.id].producer;
}
const std::vector<Value>& Network::inputs() const { return state_->inputs; }
const std::vector<std::pair<std::string, Value>>& Network::outputs() const {
  return state_->outputs;
}

Graph Network::graph() const {
  std::vector<OpAccess> ops;
  ops.reserve(state_->layers.size());
  for (std::size_t i = 0; i < state_->layers.size(); ++i) {
    OpAccess op;
    op.name = state_->layers[i]->name();
    op.label = std::string(state_->layers[i]->label());
    for (Value v : state_->layer_inputs[i]) op.reads.push_back(v.id);
    op.writes.push_back(state_->layer_outputs[i].id);
    ops.push_back(std::move(op));
  }
  return Graph(std::move(ops));
}

}  // namespace cgr
