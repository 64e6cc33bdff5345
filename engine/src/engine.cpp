// The Engine's accessors and the names of its options.
#include "cgr/engine.hpp"

#include "cgr/backend/backend.hpp"
#include "cgr/error.hpp"

namespace cgr {

std::string_view to_string(Device device) {
  return device == Device::cpu ? "cpu" : "cuda";
}

std::string_view to_string(ExitPolicy policy) {
  switch (policy) {
    case ExitPolicy::off:
      return "off";
    case ExitPolicy::all:
      return "all";
    case ExitPolicy::early:
      return "early";
  }
  return "?";
}

ExitPolicy parse_exit_policy(std::string_view text) {
  if (text == "off") return ExitPolicy::off;
  if (text == "all") return ExitPolicy::all;
  if (text == "early") return ExitPolicy::early;
  fail("unknown exit policy '{}' (expected off, all or early)", text);
}

std::string_view to_string(Mode mode) {
  switch (mode) {
    case Mode::dag:
      return "dag";
    case Mode::eager:
      return "eager";
    case Mode::stream_graph:
      return "stream-graph";
  }
  return "?";
}

Device parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu;
  if (text == "cuda") return Device::cuda;
  fail("unknown device '{}' (expected cpu or cuda)", text);
}

Mode parse_mode(std::string_view text) {
  if (text == "dag") return Mode::dag;
  if (text == "eager") return Mode::eager;
  if (text == "stream-graph") return Mode::stream_graph;
  fail("unknown mode '{}' (expected dag, eager or stream-graph)", text);
}

std::string cuda_unavailable_reason() {
  const detail::Backend* backend = detail::find_backend(Device::cuda);
  if (backend == nullptr) return "no CUDA device: this cgr was built without the CUDA toolkit";
  return backend->unavailable_reason();
}

std::vector<std::string> supported_layer_kinds(Device device) {
  const detail::Backend* backend = detail::find_backend(device);
  return backend == nullptr ? std::vector<std::string>{} : backend->layer_kinds();
}

const Tensor& Result::output(std::string_view name) const& {
  const auto it = outputs.find(name);
  if (it == outputs.end()) {
    std::vector<std::string> names;
    for (const auto& [n, t] : outputs)
      names.push_back(n);
    fail("no output named '{}' (outputs: {})", name, fmt::join(names, ", "));
  }
  return it->second;
}

Tensor Result::output(std::string_view name) && {
  return std::move(const_cast<Tensor&>(static_cast<const Result&>(*this).output(name)));
}

Engine::Engine(std::shared_ptr<const detail::CompiledEngine> compiled)
    : compiled_(std::move(compiled)) {}

const EngineOptions& Engine::options() const {
  return compiled_->options;
}
const std::vector<TensorDesc>& Engine::inputs() const {
  return compiled_->input_descs;
}
const std::vector<TensorDesc>& Engine::outputs() const {
  return compiled_->output_descs;
}
const Graph& Engine::graph() const {
  return compiled_->graph;
}
EngineInfo Engine::info() const {
  return compiled_->info;
}

void Engine::dump_cuda_graph_dot(const std::string& path) const {
  if (compiled_->options.device != Device::cuda) {
    fail("dump_cuda_graph_dot: this engine runs on the cpu");
  }
  create_context().dump_cuda_graph_dot(path);
}

CudaGraphPlan Engine::cuda_graph_plan(Mode mode, bool with_copies) const {
  return detail::plan_cuda_graph(*compiled_, mode, with_copies);
}

std::vector<OpInfo> Engine::op_infos() const {
  std::vector<OpInfo> infos;
  for (const auto& op : compiled_->ops) {
    OpInfo info{op.name,
                op.kind,
                {},
                compiled_->values[static_cast<std::size_t>(op.output)].desc.shape,
                op.cost.flops,
                op.cost.bytes,
                op.estimated_us,
                op.critical};
    for (const int in : op.inputs)
      info.input_shapes.push_back(compiled_->values[static_cast<std::size_t>(in)].desc.shape);
    infos.push_back(std::move(info));
  }
  return infos;
}

std::string Engine::to_dot(const std::string& title) const {
  const Graph& graph = compiled_->graph;
  Graph::DotText text;
  for (const auto& op : compiled_->ops) {
    const std::size_t plus = op.name.find('+');
    std::string label = op.name.substr(0, plus);
    if (op.layers.size() > 1) label += fmt::format(" (+{} fused)", op.layers.size() - 1);
    const Shape& out = compiled_->values[static_cast<std::size_t>(op.output)].desc.shape;
    label += fmt::format("\n{}\n{}", op.kind, out.to_string());
    text.labels.push_back(std::move(label));
    std::vector<std::string> inputs;
    for (const int in : op.inputs) {
      inputs.push_back(compiled_->values[static_cast<std::size_t>(in)].desc.shape.to_string());
    }
    text.tooltips.push_back(fmt::format("{} [{}]: {} -> {}", op.name, op.kind,
                                        fmt::join(inputs, ", "), out.to_string()));
  }
  for (const Edge& edge : graph.edges()) {
    // An op writes one value: the edge carries it (or, for a gate, orders a decision).
    const auto& from = compiled_->ops[static_cast<std::size_t>(edge.from)];
    text.edge_labels.push_back(
        (edge.hazards & kRaw) != 0 && from.decides_exit < 0
            ? compiled_->values[static_cast<std::size_t>(from.output)].desc.shape.to_string()
            : std::string());
  }
  return graph.to_dot(title, text);
}

std::vector<std::string> Engine::op_names() const {
  std::vector<std::string> names;
  for (int op : compiled_->graph.topological_order())
    names.push_back(compiled_->ops[op].name);
  return names;
}

}  // namespace cgr
