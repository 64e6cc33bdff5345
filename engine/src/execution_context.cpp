// The ExecutionContext front end, the same for every device: checks what the caller hands in,
// copies inputs into the backend context's host buffers and outputs out of them, and turns the
// backend's record of a run into the reports (which ops ran, which exits fired, op timings).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "cgr/backend/backend.hpp"
#include "cgr/engine.hpp"
#include "cgr/error.hpp"

namespace cgr {
namespace detail {

struct ContextState {
  std::shared_ptr<const CompiledEngine> engine;
  std::unique_ptr<BackendContext> backend;
  RunRecord record;
  int ops_executed = 0;
  std::atomic<bool> busy{false};  // one inference at a time per context
};

}  // namespace detail

ExecutionContext Engine::create_context() const {
  auto state = std::make_unique<detail::ContextState>();
  state->engine = compiled_;
  state->backend = compiled_->program->create_context(compiled_);
  return ExecutionContext(std::move(state));
}

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
  for (const auto& d : descs)
    names.push_back(fmt::format("'{}' {}", d.name, d.shape.to_string()));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::span<float> ExecutionContext::input_buffer(std::string_view name) {
  const auto& engine = *state_->engine;
  const int index = find_named(engine.input_descs, name);
  if (index < 0) fail("no input named '{}' (inputs: {})", name, names_of(engine.input_descs));
  return {state_->backend->host_value(engine.input_values[index]),
          static_cast<std::size_t>(engine.input_descs[index].shape.numel())};
}

std::span<const float> ExecutionContext::output_buffer(std::string_view name) const {
  const auto& engine = *state_->engine;
  const int index = find_named(engine.output_descs, name);
  if (index < 0) fail("no output named '{}' (outputs: {})", name, names_of(engine.output_descs));
  return {state_->backend->host_value(engine.output_values[index]),
          static_cast<std::size_t>(engine.output_descs[index].shape.numel())};
}

void ExecutionContext::run() {
  if (state_->busy.exchange(true)) {
    fail("ExecutionContext used by two threads at once: create one context per thread");
  }
  try {
    detail::RunRecord& record = state_->record;
    record.executed.assign(state_->engine->ops.size(), 0);
    record.exit_fired.assign(state_->engine->exits.size(), 0);
    state_->backend->run(record);
    state_->ops_executed =
        static_cast<int>(std::count(record.executed.begin(), record.executed.end(), 1));
  } catch (...) {
    state_->busy = false;
    throw;
  }
  state_->busy = false;
}

int ExecutionContext::ops_executed() const {
  return state_->ops_executed;
}

void* ExecutionContext::device_buffer(std::string_view name) const {
  const auto& engine = *state_->engine;
  if (engine.options.device != Device::cuda) {
    fail("device_buffer needs an engine built for the cuda device");
  }
  if (const int i = find_named(engine.input_descs, name); i >= 0) {
    return state_->backend->device_value(engine.input_values[i]);
  }
  if (const int o = find_named(engine.output_descs, name); o >= 0) {
    return state_->backend->device_value(engine.output_values[o]);
  }
  fail("no input or output named '{}'", name);
}

void ExecutionContext::launch_on_device(void* cuda_stream) {
  state_->backend->launch_on_device(cuda_stream);
}

double ExecutionContext::last_gpu_time_ms() const {
  return state_->backend->last_gpu_time_ms();
}

double ExecutionContext::last_enqueue_time_ms() const {
  return state_->backend->last_enqueue_time_ms();
}

void ExecutionContext::dump_cuda_graph_dot(const std::string& path) {
  state_->backend->dump_graph_dot(path);
}

CudaGraphReport ExecutionContext::cuda_graph_report() {
  return state_->backend->graph_report();
}

CudaGraphNodes ExecutionContext::cuda_graph_nodes() {
  return state_->backend->graph_nodes();
}

std::vector<std::string> ExecutionContext::executed_ops() const {
  std::vector<std::string> names;
  const auto& executed = state_->record.executed;
  for (std::size_t op = 0; op < executed.size(); ++op) {
    if (executed[op]) names.push_back(state_->engine->ops[op].name);
  }
  return names;
}

std::vector<ExitReport> ExecutionContext::exit_reports() const {
  const auto& engine = *state_->engine;
  const auto& record = state_->record;
  std::vector<ExitReport> reports;
  for (std::size_t k = 0; k < engine.exits.size(); ++k) {
    const auto& plan = engine.exits[k];
    ExitReport report;
    report.name = plan.name;
    report.ran =
        !record.executed.empty() && record.executed[static_cast<std::size_t>(plan.decision_op)];
    if (report.ran) {
      report.fired = record.exit_fired[k] != 0;
      const float* confidence = state_->backend->host_value(plan.confidence_value);
      const float* logits = state_->backend->host_value(plan.logits_value);
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

void ExecutionContext::set_profiling(bool enabled) {
  state_->record.profiling = enabled;
}

std::vector<ExecutionContext::OpTiming> ExecutionContext::op_timings() const {
  const auto& record = state_->record;
  const auto& ops = state_->engine->ops;
  std::vector<OpTiming> timings;
  if (record.op_start.size() != ops.size()) return timings;
  auto ms = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - record.start).count();
  };
  for (std::size_t op = 0; op < ops.size(); ++op) {
    timings.push_back({ops[op].name, ms(record.op_start[op]), ms(record.op_end[op]),
                       op < record.op_thread.size() ? record.op_thread[op] : 0});
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
    if (view.shape_known && !std::equal(view.dims.begin(), view.dims.end(),
                                        desc.shape.dims().begin(), desc.shape.dims().end())) {
      fail("input '{}' has shape {}, expected {}", name,
           Shape(std::vector<std::int64_t>(view.dims.begin(), view.dims.end())).to_string(),
           desc.shape.to_string());
    }
    if (view.count != static_cast<std::size_t>(desc.shape.numel())) {
      fail("input '{}' has {} elements, expected {} ({})", name, view.count, desc.shape.numel(),
           desc.shape.to_string());
    }
    if (view.data == nullptr) fail("input '{}' points to no data", name);
  }
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (given[i] < 0)
      fail("input '{}' ({}) is missing", engine.input_descs[i].name,
           engine.input_descs[i].shape.to_string());
  }
  for (std::size_t i = 0; i < given.size(); ++i) {
    const TensorView& view = inputs[static_cast<std::size_t>(given[i])].second;
    // memcpy must not be given the null pointers an empty tensor may have.
    if (view.count > 0)
      std::memcpy(state_->backend->host_value(engine.input_values[i]), view.data,
                  view.count * dtype_size(view.dtype));
  }
  run();
  Result result;
  const auto& executed = state_->record.executed;
  for (std::size_t i = 0; i < engine.output_descs.size(); ++i) {
    const int value = engine.output_values[i];
    const int producer = engine.values[value].producer;
    if (producer >= 0 && !executed[static_cast<std::size_t>(producer)]) continue;  // skipped
    const TensorDesc& desc = engine.output_descs[i];
    Tensor tensor(desc.shape, desc.dtype);
    if (!tensor.bytes().empty())
      std::memcpy(tensor.bytes().data(), state_->backend->host_value(value), tensor.bytes().size());
    const auto values = tensor.f32();
    if (!std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); })) {
      result.non_finite_outputs.push_back(desc.name);
    }
    result.outputs.emplace(desc.name, std::move(tensor));
  }
  std::sort(result.non_finite_outputs.begin(), result.non_finite_outputs.end());
  result.exits = exit_reports();
  if (engine.early_exits()) {
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
