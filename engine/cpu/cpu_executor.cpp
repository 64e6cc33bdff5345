// The CPU executor of one context. Both modes run the same kernels on the same arena; only the
// schedule differs:
//   eager  ops one at a time in topological order; each op splits its own work across the
//          pool (intra-op), the way PyTorch runs on the CPU;
//   dag    every op whose predecessors are done is queued at once (inter-op), so independent
//          branches overlap, and an op still splits its work over idle threads; queued ops
//          start longest estimated remaining chain first, and the thread that finishes an op
//          goes on with the most critical successor it made ready.
// Kernels split only over independent outputs, so both modes give bit-identical results.
// Early exits: a decision that fires sets its bit in `fired`; an op it gates is skipped, and
// its decision precedes it in the graph (a control edge), so the bit is set before the check.
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cpu_backend.hpp"

namespace cgr::cpu {
namespace {

class CpuContext final : public detail::BackendContext {
 public:
  explicit CpuContext(std::shared_ptr<const detail::CompiledEngine> engine)
      : engine_(std::move(engine)), program_(static_cast<const CpuProgram&>(*engine_->program)) {
    const detail::CompiledEngine& e = *engine_;
    // 64-byte alignment for the arena start; plan offsets are multiples of 64 too.
    const std::size_t floats = e.plan.arena_bytes / sizeof(float) + 16;
    arena_storage_ = std::make_unique<float[]>(floats);
    auto address = reinterpret_cast<std::uintptr_t>(arena_storage_.get());
    float* arena = reinterpret_cast<float*>((address + 63) & ~std::uintptr_t{63});
    value_pointers_.assign(e.values.size(), nullptr);
    for (std::size_t id = 0; id < e.values.size(); ++id) {
      const auto& value = e.values[id];
      if (value.has_storage()) {
        value_pointers_[id] =
            reinterpret_cast<float*>(reinterpret_cast<std::byte*>(arena) + value.offset);
      }
    }
    op_inputs_.resize(e.ops.size());
    for (std::size_t op = 0; op < e.ops.size(); ++op) {
      for (int in : e.ops[op].inputs)
        op_inputs_[op].push_back(value_pointers_[in]);
    }
  }

  float* host_value(int value) const override {
    return value_pointers_[static_cast<std::size_t>(value)];
  }

  void run(detail::RunRecord& record) override {
    record_ = &record;
    fired_.store(0, std::memory_order_relaxed);
    if (record.profiling) {
      record.op_start.assign(engine_->ops.size(), {});
      record.op_end.assign(engine_->ops.size(), {});
      record.op_thread.assign(engine_->ops.size(), 0);
      record.start = std::chrono::steady_clock::now();
    }
    // A reduced precision's storage: the inputs as it holds them (written by infer).
    for (const int input : engine_->input_values)
      round_value(input);
    if (engine_->options.mode == Mode::eager) {
      for (int op : engine_->graph.topological_order())
        run_op(op);
    } else {
      run_dag();
    }
    record_ = nullptr;
  }

 private:
  void run_op(int index) {
    const detail::CompiledEngine& e = *engine_;
    const auto i = static_cast<std::size_t>(index);
    if (e.skipped(index, fired_.load(std::memory_order_acquire))) return;
    const detail::CompiledOp& op = e.ops[i];
    KernelIo io;
    io.inputs = op_inputs_[i];
    io.output = value_pointers_[static_cast<std::size_t>(op.output)];
    io.workspace =
        op.workspace >= 0 ? value_pointers_[static_cast<std::size_t>(op.workspace)] : nullptr;
    io.pool = &program_.pool();
    detail::RunRecord& record = *record_;
    if (record.profiling) {
      record.op_thread[i] = ThreadPool::current_worker();
      record.op_start[i] = std::chrono::steady_clock::now();
    }
    program_.kernel(index).run(io);
    // The op's result as the precision stores it (a decision's confidence stays fp32).
    if (op.decides_exit < 0) round_value(op.output);
    if (record.profiling) record.op_end[i] = std::chrono::steady_clock::now();
    record.executed[i] = 1;
    if (const int exit = op.decides_exit; exit >= 0) {
      const auto& plan = e.exits[static_cast<std::size_t>(exit)];
      const bool fires = math::exit_fires(io.output, plan.batch, e.options.threshold);
      record.exit_fired[static_cast<std::size_t>(exit)] = fires ? 1 : 0;
      if (fires && e.early_exits()) fired_.fetch_or(1u << exit, std::memory_order_acq_rel);
    }
  }

  // Rounds value `id` to the engine's precision in place; nothing for fp32. Each element's
  // rounding depends on it alone, so the split over the pool changes no bit.
  void round_value(int id) {
    const Precision precision = engine_->options.precision;
    if (precision == Precision::fp32) return;
    const auto& value = engine_->values[static_cast<std::size_t>(id)];
    if (value.desc.dtype != DType::f32) return;
    float* data = value_pointers_[static_cast<std::size_t>(id)];
    const std::size_t count = value.bytes / sizeof(float);
    program_.pool().parallel_for(count, 16384, [&](std::size_t begin, std::size_t end) {
      round_in_place(precision, std::span<float>(data + begin, end - begin));
    });
  }

  // Shared between the op tasks of one dag run.
  struct DagRun {
    std::vector<std::atomic<int>> remaining;  // unfinished predecessors per op
    std::atomic<int> unfinished{0};
    std::atomic<bool> done{false};
    std::mutex error_mutex;
    std::exception_ptr error;
  };

  // Runs op `index`, then, on the same thread, the successor it made ready that starts the
  // longest estimated chain (the others are queued), and so on: a chain of ops goes on where
  // its last output is still in cache, without a trip through the queue. (MobileNet-v2, a chain
  // of 53 small ops, at two threads: 4.09 ms against 4.40 with every successor queued.)
  void run_dag_op(DagRun& run, int index) {
    for (int next = index; next >= 0;)
      next = run_dag_step(run, next);
  }

  // Runs one op; returns the successor to run next on this thread, or -1.
  int run_dag_step(DagRun& run, int index) {
    const Graph& graph = engine_->graph;
    bool skip = false;
    {
      std::lock_guard lock(run.error_mutex);
      skip = run.error != nullptr;  // after a failure, drain without running more kernels
    }
    if (!skip) {
      try {
        run_op(index);
      } catch (...) {
        std::lock_guard lock(run.error_mutex);
        if (!run.error) run.error = std::current_exception();
      }
    }
    int inline_next = -1;
    for (int next : graph.successors(index)) {
      if (run.remaining[static_cast<std::size_t>(next)].fetch_sub(1, std::memory_order_acq_rel) ==
          1) {
        if (inline_next < 0) {
          inline_next = next;
        } else if (engine_->ops[static_cast<std::size_t>(next)].remaining_us >
                   engine_->ops[static_cast<std::size_t>(inline_next)].remaining_us) {
          submit_op(run, inline_next);
          inline_next = next;
        } else {
          submit_op(run, next);
        }
      }
    }
    if (run.unfinished.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      run.done.store(true, std::memory_order_release);
      program_.pool().notify_waiters();
    }
    return inline_next;
  }

  void submit_op(DagRun& run, int index) {
    program_.pool().submit([this, &run, index] { run_dag_op(run, index); },
                           engine_->ops[static_cast<std::size_t>(index)].remaining_us);
  }

  void run_dag() {
    const Graph& graph = engine_->graph;
    const int ops = graph.op_count();
    if (ops == 0) return;
    DagRun run;
    run.remaining = std::vector<std::atomic<int>>(static_cast<std::size_t>(ops));
    for (int op = 0; op < ops; ++op) {
      run.remaining[static_cast<std::size_t>(op)].store(
          static_cast<int>(graph.predecessors(op).size()), std::memory_order_relaxed);
    }
    run.unfinished.store(ops, std::memory_order_relaxed);
    for (int op = 0; op < ops; ++op) {
      if (graph.predecessors(op).empty()) {
        submit_op(run, op);
      }
    }
    // The calling thread works too, until the last op is done.
    program_.pool().help_until([&run] { return run.done.load(std::memory_order_acquire); });
    if (run.error) std::rethrow_exception(run.error);
  }

  std::shared_ptr<const detail::CompiledEngine> engine_;
  const CpuProgram& program_;
  std::unique_ptr<float[]> arena_storage_;
  std::vector<float*> value_pointers_;  // per engine value, inside the arena
  std::vector<std::vector<const float*>> op_inputs_;
  std::atomic<std::uint32_t> fired_{0};  // exits that fired and stop what they gate (early)
  detail::RunRecord* record_ = nullptr;  // of the run in progress
};

}  // namespace

std::unique_ptr<detail::BackendContext> CpuProgram::create_context(
    std::shared_ptr<const detail::CompiledEngine> engine) const {
  return std::make_unique<CpuContext>(std::move(engine));
}

}  // namespace cgr::cpu
