// Engine::build: lower the network, derive the dependency graph of the lowered ops, plan the
// activation arena; and the ExecutionContext front end (input checks, copies in and out).
#include "cgr/engine.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "cgr/error.hpp"
#include "cuda_device.hpp"
#include "engine_impl.hpp"
#if defined(CGR_HAVE_CUDA)
#include "cuda/cuda_executor.hpp"
#include "cuda/gpu_op.hpp"
#endif

namespace cgr {

std::string_view to_string(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

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

const Tensor& Result::output(std::string_view name) const& {
  const auto it = outputs.find(name);
  if (it == outputs.end()) {
    std::vector<std::string> names;
    for (const auto& [n, t] : outputs) names.push_back(n);
    fail("no output named '{}' (outputs: {})", name, fmt::join(names, ", "));
  }
  return it->second;
}

Tensor Result::output(std::string_view name) && {
  return std::move(const_cast<Tensor&>(static_cast<const Result&>(*this).output(name)));
}

Engine::Engine(std::shared_ptr<const detail::EngineImpl> impl) : impl_(std::move(impl)) {}

Engine Engine::build(const Network& network, const Weights& weights, const EngineOptions& options) {
  if (options.device == Device::cuda) {
    // Says "no CUDA device: ..." on a machine without one.
    detail::require_cuda_device();
  } else if (options.mode == Mode::stream_graph) {
    fail("mode stream-graph exists only on the cuda device (cpu modes: dag, eager)");
  }
  if (network.outputs().empty()) fail("the network declares no output (call Network::output)");

  auto impl = std::make_shared<detail::EngineImpl>();
  impl->options = options;
  if (!(options.threshold == options.threshold)) fail("the exit threshold is NaN");
  detail::lower_network(network, weights, *impl);
  detail::plan_exits(network, *impl);
  std::vector<std::size_t> workspace_bytes;
  if (options.device == Device::cuda) {
#if defined(CGR_HAVE_CUDA)
    detail::make_gpu_ops(*impl);
    for (const auto& op : impl->ops) workspace_bytes.push_back(op.gpu ? op.gpu->workspace_bytes() : 0);
#endif
  } else {
    detail::make_cpu_kernels(*impl);
    for (const auto& op : impl->ops) workspace_bytes.push_back(op.kernel->workspace_bytes());
  }
  detail::add_workspaces(*impl, workspace_bytes);
  for (auto& op : impl->ops) {
    op.layer = nullptr;  // the Network and Weights need not outlive the engine
    op.weights.clear();
    op.conv_weight = {};  // the executables hold their own (packed) copies
    op.conv_bias = {};
  }

  for (Value v : network.inputs()) {
    impl->input_descs.push_back(network.desc(v));
    impl->input_values.push_back(v.id);
    impl->values[v.id].pinned = true;
  }
  for (const auto& [name, v] : network.outputs()) {
    TensorDesc desc = network.desc(v);
    desc.name = name;
    impl->output_descs.push_back(std::move(desc));
    impl->output_values.push_back(v.id);
    impl->values[v.id].pinned = true;
  }
  for (const auto& exit : impl->exits) {
    TensorDesc desc = network.desc(Value{exit.logits_value});
    desc.name = exit.name;
    impl->output_descs.push_back(std::move(desc));
    impl->output_values.push_back(exit.logits_value);
    impl->values[exit.logits_value].pinned = true;
  }

  // Exit k's decision writes the pseudo-resource gate_k and every op it gates reads it: the
  // hazard analysis turns that into the control edges of ExitPolicy::early.
  const int gate_resource = static_cast<int>(impl->values.size());
  std::vector<OpAccess> accesses;
  for (std::size_t i = 0; i < impl->ops.size(); ++i) {
    const auto& op = impl->ops[i];
    OpAccess access{op.name, op.kind, op.inputs, {op.output}};
    for (std::size_t k = 0; k < impl->exits.size(); ++k) {
      if (impl->gate_masks[i] & (1u << k)) access.reads.push_back(gate_resource + static_cast<int>(k));
    }
    if (impl->decision_exit[i] >= 0 && impl->options.exits == ExitPolicy::early) {
      access.writes.push_back(gate_resource + impl->decision_exit[i]);
    }
    accesses.push_back(std::move(access));
  }
  impl->graph = Graph(std::move(accesses));

  // Plan every value that exists at run time: inputs, op outputs, workspaces.
  std::vector<detail::EngineValue*> planned;
  std::vector<PlannedValue> plan_input;
  for (std::size_t id = 0; id < impl->values.size(); ++id) {
    auto& value = impl->values[id];
    if (value.producer < 0 && !value.pinned) continue;  // pruned or fused away
    PlannedValue pv{value.desc.name, value.bytes, value.producer, {}, value.pinned};
    planned.push_back(&value);
    plan_input.push_back(std::move(pv));
  }
  std::vector<int> plan_index(impl->values.size(), -1);
  for (std::size_t k = 0; k < planned.size(); ++k) {
    plan_index[static_cast<std::size_t>(planned[k] - impl->values.data())] = static_cast<int>(k);
  }
  for (std::size_t op = 0; op < impl->ops.size(); ++op) {
    for (int in : impl->ops[op].inputs) {
      auto& readers = plan_input[static_cast<std::size_t>(plan_index[in])].readers;
      if (readers.empty() || readers.back() != static_cast<int>(op)) {
        readers.push_back(static_cast<int>(op));
      }
    }
    if (impl->ops[op].workspace >= 0) {
      plan_input[static_cast<std::size_t>(plan_index[impl->ops[op].workspace])].readers.push_back(
          static_cast<int>(op));
    }
  }
  // CUDA: 256-byte offsets (cublasSetWorkspace requires 256-byte aligned workspaces; cudaMalloc's
  // base is 256-aligned). CPU: 64, a cache line.
  impl->plan = plan_memory(impl->graph, plan_input, impl->options.device == Device::cuda ? 256 : 64);
  for (std::size_t k = 0; k < planned.size(); ++k) planned[k]->offset = impl->plan.offsets[k];

  auto& info = impl->info;
  info.ops = impl->graph.op_count();
  info.edges = static_cast<int>(impl->graph.edges().size());
  info.critical_path = impl->graph.critical_path_length();
  info.max_width = impl->graph.max_width();
  info.arena_bytes = impl->plan.arena_bytes;
  info.activation_bytes = impl->plan.total_bytes;
  for (const auto& [name, tensor] : weights.tensors()) info.weight_bytes += tensor.bytes().size();

  impl->pool = std::make_shared<ThreadPool>(options.threads);
  return Engine(std::move(impl));
}

ExecutionContext Engine::create_context() const {
  return ExecutionContext(detail::make_context_state(impl_));
}

const EngineOptions& Engine::options() const { return impl_->options; }
const std::vector<TensorDesc>& Engine::inputs() const { return impl_->input_descs; }
const std::vector<TensorDesc>& Engine::outputs() const { return impl_->output_descs; }
const Graph& Engine::graph() const { return impl_->graph; }
EngineInfo Engine::info() const { return impl_->info; }

void Engine::dump_cuda_graph_dot(const std::string& path) const {
  if (impl_->options.device != Device::cuda) fail("dump_cuda_graph_dot: this engine runs on the cpu");
  create_context().dump_cuda_graph_dot(path);
}

std::string cuda_unavailable_reason() { return detail::cuda_unavailable_reason(); }

CudaGraphPlan Engine::cuda_graph_plan(Mode mode, bool with_copies) const {
  return detail::plan_cuda_graph(*impl_, mode, with_copies);
}

std::vector<std::string> Engine::op_names() const {
  std::vector<std::string> names;
  for (int op : impl_->graph.topological_order()) names.push_back(impl_->ops[op].name);
  return names;
}

// ---------------------------------------------------------------------------------------------

ExecutionContext::ExecutionContext(std::unique_ptr<detail::ContextState> state)
    : state_(std::move(state)) {}
ExecutionContext::~ExecutionContext() = default;
ExecutionContext::ExecutionContext(ExecutionContext&&) noexcept = default;
ExecutionContext& ExecutionContext::operator=(ExecutionContext&&) noexcept = default;

namespace {

template <typename Descs>
int find_named(const Descs& descs, std::string_view name) {
  for (std::size_t i = 0; i < descs.size(); ++i) {
    if (descs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string names_of(const std::vector<TensorDesc>& descs) {
  std::vector<std::string> names;
  for (const auto& d : descs) names.push_back(fmt::format("'{}' {}", d.name, d.shape.to_string()));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::span<float> ExecutionContext::input_buffer(std::string_view name) {
  const auto& engine = *state_->engine;
  const int index = find_named(engine.input_descs, name);
  if (index < 0) fail("no input named '{}' (inputs: {})", name, names_of(engine.input_descs));
  const int value = engine.input_values[index];
  return {detail::host_value(*state_, value),
          static_cast<std::size_t>(engine.input_descs[index].shape.numel())};
}

std::span<const float> ExecutionContext::output_buffer(std::string_view name) const {
  const auto& engine = *state_->engine;
  const int index = find_named(engine.output_descs, name);
  if (index < 0) fail("no output named '{}' (outputs: {})", name, names_of(engine.output_descs));
  const int value = engine.output_values[index];
  return {detail::host_value(*state_, value),
          static_cast<std::size_t>(engine.output_descs[index].shape.numel())};
}

void ExecutionContext::run() {
  if (state_->busy.exchange(true)) {
    fail("ExecutionContext used by two threads at once: create one context per thread");
  }
  try {
    if (state_->cuda != nullptr) {
#if defined(CGR_HAVE_CUDA)
      detail::run_cuda(*state_);
#endif
    } else {
      detail::run_cpu(*state_);
    }
  } catch (...) {
    state_->busy = false;
    throw;
  }
  state_->busy = false;
}

int ExecutionContext::ops_executed() const { return state_->ops_executed; }

namespace {

#if defined(CGR_HAVE_CUDA)
cuda::CudaContext& cuda_of(const detail::ContextState& state, std::string_view what) {
  if (state.cuda == nullptr) fail("{} needs an engine built for the cuda device", what);
  return *state.cuda;
}
#else
[[noreturn]] void no_cuda(std::string_view what) {
  fail("{} needs CUDA: this cgr was built without the CUDA toolkit", what);
}
#endif

}  // namespace

void* ExecutionContext::device_buffer(std::string_view name) const {
#if defined(CGR_HAVE_CUDA)
  auto& cuda = cuda_of(*state_, "device_buffer");
  const auto& engine = *state_->engine;
  if (const int i = find_named(engine.input_descs, name); i >= 0) return cuda.device_value(engine.input_values[i]);
  if (const int o = find_named(engine.output_descs, name); o >= 0) return cuda.device_value(engine.output_values[o]);
  fail("no input or output named '{}'", name);
#else
  (void)name;
  no_cuda("device_buffer");
#endif
}

void ExecutionContext::launch_on_device(void* cuda_stream) {
#if defined(CGR_HAVE_CUDA)
  cuda_of(*state_, "launch_on_device").launch_device(static_cast<cudaStream_t>(cuda_stream));
#else
  (void)cuda_stream;
  no_cuda("launch_on_device");
#endif
}

double ExecutionContext::last_gpu_time_ms() const {
#if defined(CGR_HAVE_CUDA)
  if (state_->cuda != nullptr) return state_->cuda->last_gpu_ms();
#endif
  return std::numeric_limits<double>::quiet_NaN();
}

double ExecutionContext::last_enqueue_time_ms() const {
#if defined(CGR_HAVE_CUDA)
  if (state_->cuda != nullptr) return state_->cuda->last_enqueue_ms();
#endif
  return std::numeric_limits<double>::quiet_NaN();
}

void ExecutionContext::dump_cuda_graph_dot(const std::string& path) {
#if defined(CGR_HAVE_CUDA)
  cuda_of(*state_, "dump_cuda_graph_dot").dump_graph_dot(path);
#else
  (void)path;
  no_cuda("dump_cuda_graph_dot");
#endif
}

CudaGraphReport ExecutionContext::cuda_graph_report() {
#if defined(CGR_HAVE_CUDA)
  const cuda::GraphReport r = cuda_of(*state_, "cuda_graph_report").graph_report();
  CudaGraphReport report;
  report.nodes = r.nodes;
  report.edges = r.edges;
  report.conditional_nodes = r.conditional_nodes;
  report.planned_nodes = r.planned_nodes;
  report.planned_edges = r.planned_edges;
  report.segment_edges_found = r.segment_edges_found;
  report.predicted_nodes = r.predicted_nodes;
  report.predicted_edges = r.predicted_edges;
  report.op_edges_expected = r.op_edges_expected;
  report.op_edges_found = r.op_edges_found;
  report.mismatches = r.mismatches;
  report.last_run_launches = r.last_run_launches;
  report.last_run_synchronizations = r.last_run_synchronizations;
  return report;
#else
  no_cuda("cuda_graph_report");
#endif
}

CudaGraphNodes ExecutionContext::cuda_graph_nodes() {
#if defined(CGR_HAVE_CUDA)
  const cuda::GraphNodes nodes = cuda_of(*state_, "cuda_graph_nodes").graph_nodes();
  CudaGraphNodes result;
  result.graph = nodes.graph;
  for (const auto& [node, owner] : nodes.owners) result.owners.emplace_back(node, owner);
  return result;
#else
  no_cuda("cuda_graph_nodes");
#endif
}

std::vector<std::string> ExecutionContext::executed_ops() const {
  std::vector<std::string> names;
  for (std::size_t op = 0; op < state_->executed.size(); ++op) {
    if (state_->executed[op]) names.push_back(state_->engine->ops[op].name);
  }
  return names;
}

std::vector<ExitReport> ExecutionContext::exit_reports() const {
  const auto& engine = *state_->engine;
  std::vector<ExitReport> reports;
  for (std::size_t k = 0; k < engine.exits.size(); ++k) {
    const auto& plan = engine.exits[k];
    ExitReport report;
    report.name = plan.name;
    report.ran = !state_->executed.empty() && state_->executed[static_cast<std::size_t>(plan.decision_op)];
    if (report.ran) {
      report.fired = state_->exit_fired[k] != 0;
      const float* confidence = detail::host_value(*state_, plan.confidence_value);
      const float* logits = detail::host_value(*state_, plan.logits_value);
      for (std::int64_t n = 0; n < plan.batch; ++n) {
        report.confidence.push_back(confidence[n]);
        const float* row = logits + n * plan.classes;
        report.top1.push_back(static_cast<int>(std::max_element(row, row + plan.classes) - row));
      }
    }
    reports.push_back(std::move(report));
  }
  return reports;
}

void ExecutionContext::set_profiling(bool enabled) { state_->profiling = enabled; }

std::vector<ExecutionContext::OpTiming> ExecutionContext::op_timings() const {
  std::vector<OpTiming> timings;
  if (state_->op_start.size() != state_->engine->ops.size()) return timings;
  auto ms = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - state_->run_start).count();
  };
  for (std::size_t op = 0; op < state_->engine->ops.size(); ++op) {
    timings.push_back({state_->engine->ops[op].name, ms(state_->op_start[op]), ms(state_->op_end[op])});
  }
  return timings;
}

Result ExecutionContext::infer(const NamedInputs& inputs) {
  const auto& engine = *state_->engine;
  // Validate everything before touching the buffers: a bad call leaves the context as it was.
  std::vector<int> given(engine.input_descs.size(), -1);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const auto& [name, view] = inputs[k];
    const int index = find_named(engine.input_descs, name);
    if (index < 0) fail("no input named '{}' (inputs: {})", name, names_of(engine.input_descs));
    if (given[index] >= 0) fail("input '{}' is given twice", name);
    given[index] = static_cast<int>(k);
    const TensorDesc& desc = engine.input_descs[index];
    if (view.dtype != desc.dtype) {
      fail("input '{}' is {} but the network expects {}", name, to_string(view.dtype),
           to_string(desc.dtype));
    }
    if (view.count != static_cast<std::size_t>(desc.shape.numel())) {
      fail("input '{}' has {} elements, expected {} ({})", name, view.count, desc.shape.numel(),
           desc.shape.to_string());
    }
    if (view.data == nullptr) fail("input '{}' points to no data", name);
  }
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (given[i] < 0) fail("input '{}' ({}) is missing", engine.input_descs[i].name,
                           engine.input_descs[i].shape.to_string());
  }
  for (std::size_t i = 0; i < given.size(); ++i) {
    const TensorView& view = inputs[static_cast<std::size_t>(given[i])].second;
    std::memcpy(detail::host_value(*state_, engine.input_values[i]), view.data,
                view.count * dtype_size(view.dtype));
  }
  run();
  Result result;
  for (std::size_t i = 0; i < engine.output_descs.size(); ++i) {
    const int value = engine.output_values[i];
    const int producer = engine.values[value].producer;
    if (producer >= 0 && !state_->executed[static_cast<std::size_t>(producer)]) continue;  // skipped
    const TensorDesc& desc = engine.output_descs[i];
    Tensor tensor(desc.shape, desc.dtype);
    std::memcpy(tensor.bytes().data(), detail::host_value(*state_, value), tensor.bytes().size());
    result.outputs.emplace(desc.name, std::move(tensor));
  }
  result.exits = exit_reports();
  if (engine.options.exits == ExitPolicy::early) {
    for (const auto& report : result.exits) {
      if (report.fired) {
        result.answered_by = report.name;
        break;
      }
    }
  }
  return result;
}

}  // namespace cgr
