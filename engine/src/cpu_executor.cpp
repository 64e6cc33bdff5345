// CPU executor. Both modes run the same kernels on the same arena; only the schedule differs:
//   eager  ops one at a time in topological order; each op splits its own work across the
//          pool (intra-op), the way PyTorch runs on the CPU;
//   dag    every op whose predecessors are done is queued at once (inter-op), so independent
//          branches overlap, and an op still splits its work over idle threads.
// Kernels split only over independent outputs, so both modes give bit-identical results.
#include <exception>
#include <mutex>

#include <algorithm>

#include "cgr/error.hpp"
#if defined(CGR_HAVE_CUDA)
#include "cuda/cuda_executor.hpp"
#endif
#include "cgr/layers/element_math.hpp"
#include "engine_impl.hpp"

namespace cgr::detail {

std::unique_ptr<ContextState> make_context_state(std::shared_ptr<const EngineImpl> engine) {
  auto state = std::make_unique<ContextState>();
  state->engine = std::move(engine);
  const EngineImpl& impl = *state->engine;
  if (impl.options.device == Device::cuda) {
#if defined(CGR_HAVE_CUDA)
    state->cuda = make_cuda_context(state->engine);
#endif
    return state;
  }
  // 64-byte alignment for the arena start; plan offsets are multiples of 64 too.
  const std::size_t floats = impl.plan.arena_bytes / sizeof(float) + 16;
  state->arena_storage = std::make_unique<float[]>(floats);
  auto address = reinterpret_cast<std::uintptr_t>(state->arena_storage.get());
  state->arena = reinterpret_cast<float*>((address + 63) & ~std::uintptr_t{63});
  state->value_pointers.assign(impl.values.size(), nullptr);
  for (std::size_t id = 0; id < impl.values.size(); ++id) {
    const auto& value = impl.values[id];
    if (value.producer >= 0 || value.pinned) {
      state->value_pointers[id] =
          reinterpret_cast<float*>(reinterpret_cast<std::byte*>(state->arena) + value.offset);
    }
  }
  state->op_inputs.resize(impl.ops.size());
  for (std::size_t op = 0; op < impl.ops.size(); ++op) {
    for (int in : impl.ops[op].inputs) state->op_inputs[op].push_back(state->value_pointers[in]);
  }
  state->remaining.assign(impl.ops.size(), 0);
  return state;
}

float* host_value(const ContextState& state, int value) {
#if defined(CGR_HAVE_CUDA)
  if (state.cuda != nullptr) {
    const EngineImpl& impl = *state.engine;
    for (std::size_t i = 0; i < impl.input_values.size(); ++i) {
      if (impl.input_values[i] == value) return state.cuda->host_input(i);
    }
    for (std::size_t o = 0; o < impl.output_values.size(); ++o) {
      if (impl.output_values[o] == value) return state.cuda->host_output(o);
    }
    for (std::size_t k = 0; k < impl.exits.size(); ++k) {
      if (impl.exits[k].confidence_value == value) return const_cast<float*>(state.cuda->exit_confidence(k));
    }
    fail("internal error: value {} has no host copy", value);
  }
#endif
  return state.value_pointers[static_cast<std::size_t>(value)];
}

namespace {

void run_op(ContextState& state, int index) {
  const EngineImpl& impl = *state.engine;
  const auto i = static_cast<std::size_t>(index);
  // A fired exit skips what it gates. Its decision ran before any gated op (control edge).
  if (impl.gate_masks[i] & state.fired.load(std::memory_order_acquire)) return;
  const LoweredOp& op = impl.ops[i];
  KernelIo io;
  io.inputs = state.op_inputs[static_cast<std::size_t>(index)];
  io.output = state.value_pointers[op.output];
  io.workspace = op.workspace >= 0 ? state.value_pointers[op.workspace] : nullptr;
  io.pool = impl.pool.get();
  if (state.profiling) state.op_start[static_cast<std::size_t>(index)] = std::chrono::steady_clock::now();
  op.kernel->run(io);
  if (state.profiling) state.op_end[static_cast<std::size_t>(index)] = std::chrono::steady_clock::now();
  state.executed[i] = 1;
  if (const int exit = impl.decision_exit[i]; exit >= 0) {
    const ExitPlan& plan = impl.exits[static_cast<std::size_t>(exit)];
    const bool fires = math::exit_fires(io.output, plan.batch, impl.options.threshold);
    state.exit_fired[static_cast<std::size_t>(exit)] = fires ? 1 : 0;
    if (fires && impl.options.exits == ExitPolicy::early) {
      state.fired.fetch_or(1u << exit, std::memory_order_acq_rel);
    }
  }
}

void run_eager(ContextState& state) {
  for (int op : state.engine->graph.topological_order()) run_op(state, op);
}

// Shared between the op tasks of one dag run.
struct DagRun {
  ContextState* state = nullptr;
  std::vector<std::atomic<int>> remaining;
  std::atomic<int> unfinished{0};
  std::atomic<bool> done{false};
  std::mutex error_mutex;
  std::exception_ptr error;
};

void run_dag_op(DagRun& run, int index) {
  const EngineImpl& impl = *run.state->engine;
  bool skip = false;
  {
    std::lock_guard lock(run.error_mutex);
    skip = run.error != nullptr;  // after a failure, drain without running more kernels
  }
  if (!skip) {
    try {
      run_op(*run.state, index);
    } catch (...) {
      std::lock_guard lock(run.error_mutex);
      if (!run.error) run.error = std::current_exception();
    }
  }
  for (int next : impl.graph.successors(index)) {
    if (run.remaining[static_cast<std::size_t>(next)].fetch_sub(1, std::memory_order_acq_rel) ==
        1) {
      impl.pool->submit([&run, next] { run_dag_op(run, next); });
    }
  }
  if (run.unfinished.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    run.done.store(true, std::memory_order_release);
    impl.pool->notify_waiters();
  }
}

void run_dag(ContextState& state) {
  const EngineImpl& impl = *state.engine;
  const int ops = impl.graph.op_count();
  if (ops == 0) return;
  DagRun run;
  run.state = &state;
  run.remaining = std::vector<std::atomic<int>>(static_cast<std::size_t>(ops));
  for (int op = 0; op < ops; ++op) {
    run.remaining[static_cast<std::size_t>(op)].store(
        static_cast<int>(impl.graph.predecessors(op).size()), std::memory_order_relaxed);
  }
  run.unfinished.store(ops, std::memory_order_relaxed);
  for (int op = 0; op < ops; ++op) {
    if (impl.graph.predecessors(op).empty()) {
      impl.pool->submit([&run, op] { run_dag_op(run, op); });
    }
  }
  // The calling thread works too, until the last op is done.
  impl.pool->help_until([&run] { return run.done.load(std::memory_order_acquire); });
  if (run.error) std::rethrow_exception(run.error);
}

}  // namespace

void run_cpu(ContextState& state) {
  state.executed.assign(state.engine->ops.size(), 0);
  state.exit_fired.assign(state.engine->exits.size(), 0);
  state.fired.store(0, std::memory_order_relaxed);
  if (state.profiling) {
    state.op_start.assign(state.engine->ops.size(), {});
    state.op_end.assign(state.engine->ops.size(), {});
    state.run_start = std::chrono::steady_clock::now();
  }
  if (state.engine->options.mode == Mode::eager) {
    run_eager(state);
  } else {
    run_dag(state);
  }
  state.ops_executed = static_cast<int>(std::count(state.executed.begin(), state.executed.end(), 1));
}

}  // namespace cgr::detail
