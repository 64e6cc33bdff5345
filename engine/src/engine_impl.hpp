// What an Engine holds after build, shared (read-only) by its execution contexts.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cgr/engine.hpp"
#include "cgr/layers/layer.hpp"
#include "cgr/memory_plan.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr::detail {

// One executable op: one layer, or a chain of layers the lowering fused.
struct LoweredOp {
  std::string name;               // "conv1+bn1+relu"
  std::string kind;               // "Conv2d+BatchNorm2d+ReLU"
  std::vector<int> inputs;        // engine value ids
  int output = -1;                // engine value id
  int workspace = -1;             // engine value id of its private scratch, or -1
  std::vector<int> layers;        // network layer indices it executes
  std::unique_ptr<CpuKernel> kernel;
};

struct EngineValue {
  TensorDesc desc;
  std::size_t bytes = 0;
  int producer = -1;  // op index; -1 for a network input
  bool pinned = false;
  std::size_t offset = 0;  // in the arena
};

struct EngineImpl {
  EngineOptions options;
  std::vector<LoweredOp> ops;  // in a valid sequential order
  std::vector<EngineValue> values;
  std::vector<TensorDesc> input_descs;   // as declared (input names)
  std::vector<int> input_values;         // engine value per input
  std::vector<TensorDesc> output_descs;  // named by the output names
  std::vector<int> output_values;        // engine value per output
  Graph graph;
  MemoryPlan plan;
  EngineInfo info;
  std::shared_ptr<ThreadPool> pool;
};

// The executors of a context.
struct ContextState {
  std::shared_ptr<const EngineImpl> engine;
  std::unique_ptr<float[]> arena_storage;
  float* arena = nullptr;
  std::vector<float*> value_pointers;  // per engine value
  std::vector<std::vector<const float*>> op_inputs;
  std::vector<int> remaining;  // dag scheduler: unfinished predecessors per op
  int ops_executed = 0;
  bool profiling = false;
  std::chrono::steady_clock::time_point run_start;
  std::vector<std::chrono::steady_clock::time_point> op_start, op_end;  // when profiling
  std::atomic<bool> busy{false};  // one inference at a time per context
};

std::unique_ptr<ContextState> make_context_state(std::shared_ptr<const EngineImpl> engine);
void run_cpu(ContextState& state);

}  // namespace cgr::detail
