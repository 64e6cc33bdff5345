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

namespace cgr::cuda {
class GpuOp;
class CudaContext;
}  // namespace cgr::cuda

namespace cgr::detail {

// One executable op: one layer, or a chain of layers the lowering fused. The lowering decides
// the structure (and folds weights); each backend then makes its executable from it.
struct LoweredOp {
  std::string name;               // "conv1+bn1+relu"
  std::string kind;               // "Conv2d+BatchNorm2d+ReLU"
  std::vector<int> inputs;        // engine value ids
  int output = -1;                // engine value id
  int workspace = -1;             // engine value id of its private scratch, or -1
  std::vector<int> layers;        // network layer indices it executes

  // Build-time description (the Network and Weights outlive Engine::build, not the engine).
  const Layer* layer = nullptr;   // the first layer; null for engine ops (exit decisions)
  LayerWeights weights;           // that layer's bound weights
  std::vector<float> conv_weight, conv_bias;  // Conv2d: BatchNorm folded in
  ConvEpilogue epilogue;          // Conv2d: fused residual / ReLU
  bool add_relu = false;          // Add: fused ReLU

  // Executables.
  std::unique_ptr<CpuKernel> kernel;
  std::shared_ptr<cuda::GpuOp> gpu;
};

struct EngineValue {
  TensorDesc desc;
  std::size_t bytes = 0;
  int producer = -1;  // op index; -1 for a network input
  bool pinned = false;
  std::size_t offset = 0;  // in the arena
};

// An exit head as the engine runs it: a decision op reads the head's logits and writes the
// per-sample confidence; with ExitPolicy::early its firing skips the ops it gates.
struct ExitPlan {
  std::string name;
  int logits_value = -1;
  int decision_op = -1;
  int confidence_value = -1;
  std::int64_t batch = 0;
  std::int64_t classes = 0;
};

struct EngineImpl {
  EngineOptions options;
  std::vector<LoweredOp> ops;  // in a valid sequential order
  std::vector<EngineValue> values;
  std::vector<TensorDesc> input_descs;   // as declared (input names)
  std::vector<int> input_values;         // engine value per input
  std::vector<TensorDesc> output_descs;  // named by the output names
  std::vector<int> output_values;        // engine value per output
  std::vector<ExitPlan> exits;
  std::vector<std::uint32_t> gate_masks;  // per op: the exits whose firing skips it (early)
  std::vector<int> decision_exit;         // per op: the exit it decides, or -1
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
  std::atomic<std::uint32_t> fired{0};  // exits that fired and stop what they gate (early)
  std::vector<char> executed;           // per op, this run
  std::vector<char> exit_fired;         // per exit, this run (reported for every policy)
  std::shared_ptr<cuda::CudaContext> cuda;  // CUDA device: the executor of this context
  bool profiling = false;
  std::chrono::steady_clock::time_point run_start;
  std::vector<std::chrono::steady_clock::time_point> op_start, op_end;  // when profiling
  std::atomic<bool> busy{false};  // one inference at a time per context
};

// Lowering steps (lowering.cpp, exits.cpp).
void lower_network(const Network& net, const Weights& weights, EngineImpl& impl);
void make_cpu_kernels(EngineImpl& impl);
// One workspace value per op with bytes[op] > 0.
void add_workspaces(EngineImpl& impl, const std::vector<std::size_t>& bytes);
// Adds the decision ops, gates the ops after each exit (early), and puts the ops in an order
// where every decision precedes what it gates.
void plan_exits(const Network& net, EngineImpl& impl);

std::unique_ptr<ContextState> make_context_state(std::shared_ptr<const EngineImpl> engine);
void run_cpu(ContextState& state);

// The CUDA graph's construction plan (cuda_graph_plan.cpp; no CUDA calls) and the graph level
// of an op: -1 top level, k the body of exit k's IF node.
CudaGraphPlan plan_cuda_graph(const EngineImpl& impl, Mode mode, bool copies);
int cuda_graph_level(std::uint32_t gate_mask);

// CUDA backend (cuda/cuda_glue.cpp; only in builds with CUDA).
void make_gpu_ops(EngineImpl& impl);  // also selects the device and checks it exists
std::shared_ptr<cuda::CudaContext> make_cuda_context(std::shared_ptr<const EngineImpl> engine);
void run_cuda(ContextState& state);
// Host copy of a value the caller reads or writes (inputs, outputs, exit confidences).
float* host_value(const ContextState& state, int value);

}  // namespace cgr::detail
