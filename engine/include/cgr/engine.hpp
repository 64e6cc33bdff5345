// Engine: a Network compiled for one device and executor mode, owning its weights (bound,
// folded and packed once) and its plan (fused ops, dependency graph, memory arena layout).
// An Engine is immutable after build; inferences run on ExecutionContexts, each with its own
// activation arena, so several threads can infer at once, one context per thread, sharing
// the weights (TensorRT's IExecutionContext model).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cgr/error.hpp"
#include "cgr/graph.hpp"
#include "cgr/network.hpp"
#include "cgr/precision.hpp"
#include "cgr/tensor.hpp"
#include "cgr/weights.hpp"

namespace cgr {

enum class Device { cpu, cuda };
// dag: ops run as soon as their inputs are ready (branches overlap).
// eager: ops one at a time in topological order, each split across the threads.
// stream_graph: CUDA only (one stream captured into a graph).
enum class Mode { dag, eager, stream_graph };

// What happens to the exit heads a Network declares (Network::exit):
// off    heads pruned: the backbone alone (the reference latency);
// all    every head runs, concurrently with the backbone after it; all results returned;
// early  an exit that fires stops the rest: ops after its speculation point run only when it
//        does not fire (CPU: a host check between ops; CUDA: conditional graph nodes).
enum class ExitPolicy { off, all, early };

std::string_view to_string(Device device);
std::string_view to_string(ExitPolicy policy);
ExitPolicy parse_exit_policy(std::string_view text);  // "off" | "all" | "early"
std::string_view to_string(Mode mode);
Device parse_device(std::string_view text);  // "cpu" | "cuda"; Error otherwise
Mode parse_mode(std::string_view text);      // "dag" | "eager" | "stream-graph"; Error otherwise

// Empty when Device::cuda can be used here (a CUDA build and a usable device); otherwise why
// not, as "no CUDA device: ...". Checked once per process.
std::string cuda_unavailable_reason();

// The layer kinds (Layer::kind()) the backend of `device` implements, sorted; empty when this
// build has no backend for it. Every registered kind (cgr::registered_layer_kinds()) should be
// in it: tests/test_coverage.cpp checks.
std::vector<std::string> supported_layer_kinds(Device device);

struct EngineOptions {
  Device device = Device::cpu;
  Mode mode = Mode::dag;
  // CPU threads computing (caller included); 0: one per hardware thread. At most
  // ThreadPool::max_threads() (4 per hardware thread).
  int threads = 0;
  bool fuse = true;   // fold BatchNorm into convs, fuse residual Add and ReLU into them
  ExitPolicy exits = ExitPolicy::all;
  // An exit fires when every sample's confidence (a probability) is >= threshold, in [0, 1].
  float threshold = 0.9f;
  // The arithmetic (cgr/precision.hpp). cuda: fp32 (FMA), tf32 (cuDNN / cuBLAS on TF32 tensor
  // cores); fp16 and bf16 storage are not implemented on the GPU yet (an Error at build).
  // cpu: the precision's rounding emulated: weights rounded once at build, the inputs and every
  // op's output rounded to it, fp32 arithmetic inside each op; so its numerical effect on a
  // model can be measured anywhere. tf32 on the CPU rounds like that too, with TF32's 10-bit
  // mantissa: an upper bound on the GPU's TF32 error, where only conv and GEMM operands round.
  Precision precision = Precision::fp32;
  bool allow_tf32 = false;  // the same as precision tf32 (kept for existing callers)
  // cuda: how each convolution's cuDNN algorithm is chosen. false: cuDNN's heuristic among the
  // implicit-GEMM algorithms (no runs at build). true: cuDNN runs the candidates on the device
  // at build and the fastest is kept (torch.backends.cudnn.benchmark, TensorRT's tactic
  // timing): Winograd joins them, so results move within fp32 rounding of the heuristic's;
  // the build takes longer and the choice depends on the load then. The cpu ignores it.
  bool time_conv_algorithms = false;
  // The most memory one context's activation arena plus the weights may take; building a
  // larger engine is an Error, before anything that size is allocated. 0: the device's memory
  // (CPU: physical memory; CUDA: the GPU's).
  std::size_t memory_limit_bytes = 0;
};

// What the CUDA executor builds for an engine's graph mode (dag or stream-graph), computed
// from the IR without a device. Each planned node is a segment of the real cudaGraph_t: an
// op's captured work (one kernel node for a cgr kernel; one or more nodes for a cuDNN, cuBLAS
// or user op), the input copies, an op's output copies, or an exit's conditional IF node.
// Nodes are listed in construction order (a node's dependencies come before it).
struct CudaGraphPlan {
  enum class Kind { copy_in, op, copy_out, conditional };
  struct Node {
    Kind kind = Kind::op;
    std::string name;               // op name; "copy-in"; "copy-out:<op>"; "if:<exit>"
    int op = -1;                    // op: the op (Engine::graph() index); copy_out: whose results
    int exit = -1;                  // conditional: the exit; op: the exit whose IF node it sets
    int graph = 0;                  // 0: the top-level graph; k + 1: the body of exit k's IF node
    std::vector<int> dependencies;  // planned nodes of the same graph
    bool critical = false;          // op on the cost-weighted critical path: kernels prioritised
  };
  std::vector<Node> nodes;
  int graphs = 1;  // top level plus one body per conditional node
  std::size_t edge_count() const;
  // Nodes on the longest chain of the plan, where a body's nodes come after its IF node: the
  // sequential steps one inference takes at least (ExitPolicy::early: when no exit fires).
  int critical_path_nodes() const;
  // The same chain's length up to and including node `node`.
  int path_nodes_to(int node) const;
};

// The CUDA graph of an execution context checked against its plan and the IR.
struct CudaGraphReport {
  // The real graph, bodies of conditional nodes included.
  std::size_t nodes = 0, edges = 0, conditional_nodes = 0;
  // The plan, and what the real graph holds of it: real edges between different segments,
  // collapsed to segment pairs (equal to planned_edges when the graph is the plan).
  std::size_t planned_nodes = 0, planned_edges = 0, segment_edges_found = 0;
  // Node and edge counts predicted from the plan and the size of each captured segment: nodes
  // = Σ segment sizes; edges = Σ edges inside segments + Σ over planned edges a -> b of
  // (tail nodes of a) × (root nodes of b). Equal to nodes / edges when nothing else is there.
  std::size_t predicted_nodes = 0, predicted_edges = 0;
  // The IR's reduced edges between ops of the same graph, and those the real graph carries.
  std::size_t op_edges_expected = 0, op_edges_found = 0;
  std::vector<std::string> mismatches;  // empty: the real graph is the plan, the plan the IR
  int last_run_launches = 0;            // host work of the last run(): graph launches
  int last_run_synchronizations = 0;    // and stream synchronisations
};

// The template graph a CUDA context instantiated, for inspection with the CUDA graph API: the
// cudaGraph_t (owned by the context) and the planned node that owns each real node (bodies of
// conditional nodes included), by name.
struct CudaGraphNodes {
  void* graph = nullptr;
  std::vector<std::pair<void*, std::string>> owners;
};

using NamedInputs = std::vector<std::pair<std::string, TensorView>>;

// One exit head's part of a result.
struct ExitReport {
  std::string name;
  bool ran = false;                // its head was computed
  bool fired = false;              // every sample's confidence >= threshold
  std::vector<float> confidence;   // per sample: largest softmax probability
  std::vector<int> top1;           // per sample: argmax of the logits
};

struct Result {
  // The network's outputs that were computed (with ExitPolicy::early, a fired exit leaves the
  // final outputs out) and, unless exits are off, each head's logits under the exit's name.
  std::map<std::string, Tensor, std::less<>> outputs;
  std::vector<ExitReport> exits;
  // Which exit answered: its name, or "final" when the whole network ran to its outputs.
  std::string answered_by = "final";
  // The outputs (and exit logits) holding a NaN or an infinity, sorted: a finite input can
  // lead there (overflow), and a non-finite one does. Tools warn about them.
  std::vector<std::string> non_finite_outputs;
  // Error naming the available outputs when `name` is not one of them. On a temporary Result
  // the tensor is moved out, so `ctx.infer(...).output("y")` is safe to keep.
  const Tensor& output(std::string_view name) const&;
  Tensor output(std::string_view name) &&;
};

// Facts about a compiled engine (what cgr-bench --info prints).
// One op of an engine as profiles and traces describe it.
struct OpInfo {
  std::string name;                // "conv1+bn1+relu"
  std::string kind;                // "Conv2d+BatchNorm2d+ReLU"
  std::vector<Shape> input_shapes;  // the values it reads, in order
  Shape output_shape;
  double flops = 0, bytes = 0;     // its layers' work (Layer::cost)
  double estimated_us = 0;         // on the nominal device of the critical-path estimate
  bool critical = false;           // on a longest estimated-time chain
};

struct EngineInfo {
  int layers = 0;          // layers of the network that reach an output
  int ops = 0;             // ops after fusion
  int edges = 0;           // reduced dependency edges
  int critical_path = 0;   // ops on the longest chain
  double critical_path_us = 0;  // the longest chain by estimated op time (nominal device)
  int max_width = 0;       // most ops that can run at once
  std::size_t arena_bytes = 0;       // activation arena of one context
  std::size_t activation_bytes = 0;  // sum of all activations and workspaces (no reuse)
  std::size_t weight_bytes = 0;      // weights as the kernels hold them
  int channels_last_values = 0;      // CPU: values kept NHWC from one op to the next
};

namespace detail {
struct CompiledEngine;
struct ContextState;
}  // namespace detail

class ExecutionContext;

class Engine {
 public:
  static Engine build(const Network& network, const Weights& weights,
                      const EngineOptions& options = {});

  ExecutionContext create_context() const;

  const EngineOptions& options() const;
  const std::vector<TensorDesc>& inputs() const;   // named as declared by Network::input
  const std::vector<TensorDesc>& outputs() const;  // named as declared by Network::output
  // The dependency graph of the ops as they execute (after fusion).
  const Graph& graph() const;
  EngineInfo info() const;
  // Names of the ops in execution order, e.g. "layer1.0.conv1+layer1.0.bn1+layer1.0.relu".
  std::vector<std::string> op_names() const;
  // What each op is, in execution-graph op order (Engine::graph()): for profiles and traces.
  std::vector<OpInfo> op_infos() const;
  // The ops as Graphviz DOT (what cgr-bench --export-dot and the samples' --dot write): a
  // short label per op (its first layer, how many more it fused, its output shape), the full
  // fused name and input shapes as the tooltip, the shape each edge carries.
  std::string to_dot(const std::string& title) const;
  // CUDA: writes the instantiated graph of a fresh context (cudaGraphDebugDotPrint, verbose).
  void dump_cuda_graph_dot(const std::string& path) const;
  // The graph the CUDA executor builds in `mode` (dag or stream-graph; Error for eager, which
  // builds no graph) for this engine's ops and exit policy, on any device. `with_copies`: the
  // graph infer() launches (copy-in and copy-out inside); without, the device-resident one.
  CudaGraphPlan cuda_graph_plan(Mode mode, bool with_copies = true) const;

 private:
  explicit Engine(std::shared_ptr<const detail::CompiledEngine> compiled);
  std::shared_ptr<const detail::CompiledEngine> compiled_;
};

// One inference at a time per context; use one context per thread. Contexts keep the engine
// alive.
class ExecutionContext {
 public:
  ~ExecutionContext();
  ExecutionContext(ExecutionContext&&) noexcept;
  ExecutionContext& operator=(ExecutionContext&&) noexcept;

  // Copies the named inputs in, runs, returns copies of every output. Each input must have the
  // declared dtype and element count and, when its view knows a shape (a view of a Tensor),
  // exactly the declared shape. (The tools' .npy inputs may also omit a leading batch of 1.)
  Result infer(const NamedInputs& inputs);

  // Zero-copy use: write inputs into input_buffer(), call run(), read output_buffer().
  // On the CPU these are the activation arena; on CUDA, pinned host staging that run() copies
  // from and to inside the same graph launch.
  std::span<float> input_buffer(std::string_view name);
  std::span<const float> output_buffer(std::string_view name) const;
  void run();

  // CUDA device-resident path: the static device buffers of an input or output, and a launch
  // of the compute-only graph on the caller's cudaStream_t (passed as void*), without copies
  // or synchronisation. Exits' outcomes are not reported on this path.
  void* device_buffer(std::string_view name) const;
  void launch_on_device(void* cuda_stream);
  // CUDA, of the last run(): device time between events recorded around the work (copies
  // included), and host time spent enqueuing it. NaN on the CPU.
  double last_gpu_time_ms() const;
  double last_enqueue_time_ms() const;
  // CUDA: this context's graph, as DOT, and checked against the IR.
  void dump_cuda_graph_dot(const std::string& path);
  CudaGraphReport cuda_graph_report();
  CudaGraphNodes cuda_graph_nodes();

  // Ops executed by the last run (fused ops count once; skipped ops do not count).
  int ops_executed() const;
  // Names of the ops the last run executed, in execution-graph op order.
  std::vector<std::string> executed_ops() const;
  // The exits of the last run (for run(); infer() returns them in its Result).
  std::vector<ExitReport> exit_reports() const;

  // Per-op timing of each following run (off by default; costs two clock reads per op).
  struct OpTiming {
    std::string op;
    double start_ms = 0;  // since the start of the run
    double end_ms = 0;
    int thread = 0;  // the CPU thread that ran it: 0 the caller, 1.. the pool's workers
  };
  void set_profiling(bool enabled);
  // Timings of the last run, in execution-graph op order (Engine::graph()).
  std::vector<OpTiming> op_timings() const;

 private:
  friend class Engine;
  explicit ExecutionContext(std::unique_ptr<detail::ContextState> state);
  std::unique_ptr<detail::ContextState> state_;
};

}  // namespace cgr
