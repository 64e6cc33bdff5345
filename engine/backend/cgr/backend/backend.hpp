// The interface every backend implements (engine/cpu, engine/cuda), and the one place the
// engine learns which backends exist: each registers itself once per process
// (CGR_REGISTER_BACKEND in its backend file), so the device-neutral engine never names one,
// and a build without the CUDA toolkit simply has no cuda backend.
//
//   Backend         per process: is the device usable, which layer kinds it implements, and
//                   compile(): the executables of an engine's ops (a Program).
//   Program         per engine: the executables, their workspace sizes, and contexts.
//   BackendContext  per execution context: the buffers, and run() of one inference.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cgr/backend/compiled_engine.hpp"

namespace cgr::detail {

// What the last run did, for the context's reports (the front end owns it).
struct RunRecord {
  std::vector<char> executed;    // per op
  std::vector<char> exit_fired;  // per exit: its decision ran and it fired (any policy)
  // Per-op host clock reads, when profiling (the CPU executor).
  bool profiling = false;
  std::chrono::steady_clock::time_point start;
  std::vector<std::chrono::steady_clock::time_point> op_start, op_end;
  std::vector<int> op_thread;  // ThreadPool::current_worker() of the thread that ran it
};

class BackendContext {
 public:
  virtual ~BackendContext() = default;
  // Host memory of a value the caller writes or reads: the inputs, the outputs, the exits'
  // confidences (CPU: the arena itself; CUDA: pinned staging).
  virtual float* host_value(int value) const = 0;
  // One inference from the host inputs to the host outputs. Fills `record` (sized by the
  // caller: one entry per op and per exit, cleared).
  virtual void run(RunRecord& record) = 0;

  // Device capabilities. The defaults refuse with "<what> needs an engine built for the cuda
  // device".
  virtual void* device_value(int value) const;
  virtual void launch_on_device(void* cuda_stream);
  virtual double last_gpu_time_ms() const;      // NaN unless the device timed it
  virtual double last_enqueue_time_ms() const;  // NaN unless the device timed it
  virtual void dump_graph_dot(const std::string& path);
  virtual CudaGraphReport graph_report();
  virtual CudaGraphNodes graph_nodes();
};

class Program {
 public:
  virtual ~Program() = default;
  // Bytes of private scratch op `op` needs per run (becomes a workspace value in the arena).
  virtual std::size_t workspace_bytes(int op) const = 0;
  // Values the backend keeps channels-last between ops (the CPU layout plan), for EngineInfo.
  virtual int channels_last_values() const { return 0; }
  // A context for `engine` (whose program is this one), with its arena laid out by the plan.
  virtual std::unique_ptr<BackendContext> create_context(
      std::shared_ptr<const CompiledEngine> engine) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Empty when the device can be used here; else why not, starting "no CUDA device: ...".
  virtual std::string unavailable_reason() const = 0;
  // Arena offsets are multiples of this (a power of two).
  virtual std::size_t arena_alignment() const = 0;
  // The memory engines of this device may use at most (EngineOptions::memory_limit_bytes 0).
  virtual std::size_t memory_bytes() const = 0;
  // The layer kinds it implements (tests/test_coverage.cpp compares them with every
  // registered kind).
  virtual std::vector<std::string> layer_kinds() const = 0;
  // The executables of the engine's ops. `layer_ops[op]` describes op `op` (no layer for the
  // engine's own ops, the exit decisions); it and the layers it points to live only during
  // this call. The engine's values, exits and facts are final except workspaces and offsets.
  virtual std::unique_ptr<Program> compile(const CompiledEngine& engine,
                                           const std::vector<LayerOp>& layer_ops) const = 0;
};

// The graph the CUDA backend builds for `engine` in a graph mode, with or without the copies in
// and out (engine/src/cuda_graph_plan.cpp: device-neutral, so CI tests it without a GPU).
CudaGraphPlan plan_cuda_graph(const CompiledEngine& engine, Mode mode, bool copies);

// The registered backend of `device`, or null when this build has none.
const Backend* find_backend(Device device);
bool register_backend(Device device, const Backend& backend);

}  // namespace cgr::detail

// In a backend's .cpp at namespace scope: CGR_REGISTER_BACKEND(Device::cuda, CudaBackend);
#define CGR_REGISTER_BACKEND(device, Type)                                    \
  namespace {                                                                 \
  const Type cgr_registered_backend_object{};                                 \
  [[maybe_unused]] const bool cgr_backend_registered =                        \
      ::cgr::detail::register_backend(device, cgr_registered_backend_object); \
  }
