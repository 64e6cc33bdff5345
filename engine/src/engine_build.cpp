// Engine::build: lower the network into ops, plan the exits, declare the inputs and outputs,
// derive the dependency graph and the op facts, have the device's backend make the ops'
// executables, then plan the activation arena (workspaces included). The Network and Weights
// are not needed after it returns.
#include <algorithm>

#include "build_steps.hpp"
#include "cgr/backend/backend.hpp"
#include "cgr/engine.hpp"
#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {
namespace detail {
namespace {

// "1.5 GiB", "820.0 KiB", "12 bytes".
std::string readable_bytes(std::size_t bytes) {
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

void declare_inputs_outputs(const Network& network, CompiledEngine& engine) {
  for (Value v : network.inputs()) {
    engine.input_descs.push_back(network.desc(v));
    engine.input_values.push_back(v.id);
    engine.values[v.id].persistent = true;
  }
  for (const auto& [name, v] : network.outputs()) {
    TensorDesc desc = network.desc(v);
    desc.name = name;
    engine.output_descs.push_back(std::move(desc));
    engine.output_values.push_back(v.id);
    engine.values[v.id].persistent = true;
  }
  for (const auto& exit : engine.exits) {
    TensorDesc desc = network.desc(Value{exit.logits_value});
    desc.name = exit.name;
    engine.output_descs.push_back(std::move(desc));
    engine.output_values.push_back(exit.logits_value);
    engine.values[exit.logits_value].persistent = true;
  }
  // Which outputs each op produces: what is copied out after it.
  for (std::size_t o = 0; o < engine.output_values.size(); ++o) {
    const int producer = engine.values[static_cast<std::size_t>(engine.output_values[o])].producer;
    if (producer >= 0)
      engine.ops[static_cast<std::size_t>(producer)].copied_outputs.push_back(static_cast<int>(o));
  }
}

// The hazard analysis of the ops. Exit k's decision writes the pseudo-resource gate_k and
// every op it gates reads it: that turns into the control edges of ExitPolicy::early.
Graph dependency_graph(const CompiledEngine& engine) {
  const int gate_resource = static_cast<int>(engine.values.size());
  std::vector<OpAccess> accesses;
  for (int index = 0; index < static_cast<int>(engine.ops.size()); ++index) {
    const CompiledOp& op = engine.ops[static_cast<std::size_t>(index)];
    OpAccess access = engine.data_access(index);
    for (std::size_t k = 0; k < engine.exits.size(); ++k) {
      if (op.gated_by & (1u << k)) access.reads.push_back(gate_resource + static_cast<int>(k));
    }
    if (op.decides_exit >= 0 && engine.early_exits()) {
      access.writes.push_back(gate_resource + op.decides_exit);
    }
    accesses.push_back(std::move(access));
  }
  return Graph(std::move(accesses));
}

// One workspace value per op whose executable needs scratch.
void add_workspaces(CompiledEngine& engine) {
  for (std::size_t index = 0; index < engine.ops.size(); ++index) {
    const std::size_t bytes = engine.program->workspace_bytes(static_cast<int>(index));
    if (bytes == 0) continue;
    auto& op = engine.ops[index];
    EngineValue workspace;
    workspace.desc = TensorDesc{op.name + ".workspace",
                                Shape{static_cast<std::int64_t>((bytes + 3) / 4)}, DType::f32};
    workspace.bytes = bytes;
    workspace.producer = static_cast<int>(index);
    op.workspace = static_cast<int>(engine.values.size());
    engine.values.push_back(std::move(workspace));
  }
}

// Every value that exists at run time gets its offset: inputs, op outputs, workspaces. A value
// aliasing another (a view, an in-place slice) is planned as part of the value owning its bytes:
// that block's writers are the producers of everything in it, its readers everything's readers.
void plan_arena(CompiledEngine& engine, std::size_t alignment) {
  const std::size_t count = engine.values.size();
  std::vector<int> root(count, -1);
  std::vector<int> plan_index(count, -1);
  std::vector<PlannedValue> plan_input;
  for (std::size_t v = 0; v < count; ++v) {
    if (!engine.values[v].has_storage()) continue;  // pruned or fused away
    storage_offset(engine, static_cast<int>(v), &root[v]);
    if (root[v] != static_cast<int>(v)) continue;
    plan_index[v] = static_cast<int>(plan_input.size());
    const EngineValue& value = engine.values[v];
    plan_input.push_back({value.desc.name, value.bytes, -1, {}, value.persistent, {}});
  }
  auto block_of = [&](int v) -> PlannedValue& {
    return plan_input[static_cast<std::size_t>(
        plan_index[static_cast<std::size_t>(root[static_cast<std::size_t>(v)])])];
  };
  for (std::size_t v = 0; v < count; ++v) {
    const int producer = engine.values[v].producer;
    if (root[v] < 0 || producer < 0) continue;
    PlannedValue& block = block_of(static_cast<int>(v));
    if (block.producer < 0) {
      block.producer = producer;
    } else {
      block.other_writers.push_back(producer);
    }
  }
  for (std::size_t op = 0; op < engine.ops.size(); ++op) {
    for (int in : engine.ops[op].inputs) {
      auto& readers = block_of(in).readers;
      if (std::find(readers.begin(), readers.end(), static_cast<int>(op)) == readers.end()) {
        readers.push_back(static_cast<int>(op));
      }
    }
    if (engine.ops[op].workspace >= 0)
      block_of(engine.ops[op].workspace).readers.push_back(static_cast<int>(op));
  }
  engine.plan = plan_memory(engine.graph, plan_input, alignment);
  for (std::size_t v = 0; v < count; ++v) {
    if (root[v] < 0) continue;
    const std::size_t inside = storage_offset(engine, static_cast<int>(v), nullptr);
    engine.values[v].offset =
        engine.plan
            .offsets[static_cast<std::size_t>(plan_index[static_cast<std::size_t>(root[v])])] +
        inside;
  }
}

}  // namespace
}  // namespace detail

Engine Engine::build(const Network& network, const Weights& weights, const EngineOptions& options) {
  if (options.device == Device::cuda) {
    // Says "no CUDA device: ..." on a machine without one or in a build without CUDA.
    if (std::string reason = cuda_unavailable_reason(); !reason.empty()) throw Error(reason);
  } else if (options.mode == Mode::stream_graph) {
    fail("mode stream-graph exists only on the cuda device (cpu modes: dag, eager)");
  }
  const detail::Backend* backend = detail::find_backend(options.device);
  if (backend == nullptr) fail("this cgr has no backend for device {}", to_string(options.device));
  if (network.outputs().empty()) fail("the network declares no output (call Network::output)");
  if (!(options.threshold >= 0.0f && options.threshold <= 1.0f)) {
    fail("the exit threshold {} is not in [0, 1]: it is compared with a confidence, a probability",
         options.threshold);
  }
  if (options.threads < 0 || options.threads > ThreadPool::max_threads()) {
    fail(
        "{} threads: give 0 (one per hardware thread) or 1 to {} ({} per hardware thread, {} here)",
        options.threads, ThreadPool::max_threads(), ThreadPool::kMaxThreadsPerHardwareThread,
        ThreadPool::hardware_threads());
  }

  auto engine = std::make_shared<detail::CompiledEngine>();
  engine->options = options;
  // allow_tf32 is precision tf32; from here on both say the same.
  if (options.allow_tf32 && options.precision == Precision::fp32) {
    engine->options.precision = Precision::tf32;
  }
  engine->options.allow_tf32 = engine->options.precision == Precision::tf32;
  if (options.device == Device::cuda && (engine->options.precision == Precision::fp16 ||
                                         engine->options.precision == Precision::bf16)) {
    fail(
        "precision {} is not implemented on the cuda device yet (its kernels store fp32): use "
        "fp32 or tf32 there, or build the engine on the cpu device, which emulates {}'s "
        "rounding, to measure its effect on the model",
        to_string(engine->options.precision), to_string(engine->options.precision));
  }
  std::vector<LayerOp> layer_ops = detail::lower_network(network, weights, *engine);
  detail::elide_copies(network, *engine, layer_ops);
  detail::plan_exits(network, *engine, layer_ops);
  detail::declare_inputs_outputs(network, *engine);
  engine->graph = detail::dependency_graph(*engine);
  detail::estimate_costs(network, *engine);
  engine->program = backend->compile(*engine, layer_ops);
  detail::add_workspaces(*engine);
  detail::plan_arena(*engine, backend->arena_alignment());
  // Contexts allocate their arena later: refuse here what could never fit.
  std::size_t weight_bytes = 0;
  for (const auto& [name, tensor] : weights.tensors())
    weight_bytes += tensor.bytes().size();
  const std::size_t limit =
      options.memory_limit_bytes > 0 ? options.memory_limit_bytes : backend->memory_bytes();
  if (engine->plan.arena_bytes > limit || weight_bytes > limit - engine->plan.arena_bytes) {
    fail(
        "the engine needs {} per context for activations and {} of weights, more than the {} "
        "{} (EngineOptions::memory_limit_bytes); use smaller inputs",
        detail::readable_bytes(engine->plan.arena_bytes), detail::readable_bytes(weight_bytes),
        detail::readable_bytes(limit), options.memory_limit_bytes > 0 ? "limit" : "the device has");
  }

  auto& info = engine->info;
  info.ops = engine->graph.op_count();
  info.edges = static_cast<int>(engine->graph.edges().size());
  info.critical_path = engine->graph.critical_path_length();
  info.critical_path_us = engine->critical_path_us;
  info.max_width = engine->graph.max_width();
  info.arena_bytes = engine->plan.arena_bytes;
  info.activation_bytes = engine->plan.total_bytes;
  for (const auto& [name, tensor] : weights.tensors())
    info.weight_bytes += tensor.bytes().size();
  info.channels_last_values = engine->program->channels_last_values();
  return Engine(std::move(engine));
}

}  // namespace cgr
