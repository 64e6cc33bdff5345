// CUDA executor: graph construction and replay (see cuda_executor.hpp for the modes).
#if defined(CGR_HAVE_CUDA)

#include "cuda/cuda_executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "cgr/error.hpp"
#include "cuda/gpu_op.hpp"
#include "cuda/kernels.hpp"
#include "cuda/resources.hpp"

namespace cgr::cuda {

struct CudaContext::State {
  std::shared_ptr<const detail::EngineImpl> engine;
  const detail::EngineImpl& impl() const { return *engine; }
  bool early = false;

  DeviceMemory arena;
  DeviceMemory fired_device;                       // int per exit
  PinnedMemory input_staging, output_staging;      // engine input/output order, packed
  PinnedMemory fired_host, confidence_host;        // int per exit; batch floats per exit
  std::vector<std::size_t> input_offsets, output_offsets, confidence_offsets;
  std::vector<float*> values;                      // device pointer per engine value
  std::vector<std::vector<const float*>> op_inputs;
  Stream stream;
  CudnnHandle cudnn;
  CublasHandle cublas;
  std::vector<bool> critical;                      // per op: on a longest dependency chain
  int greatest_priority = 0;

  GraphExec full_exec, compute_exec;
  std::vector<char> executed;
  int launches = 0, synchronizations = 0;  // of the last run
  Event start_event, end_event;
  // Recorded after each device-resident launch: the next launch of this context, on any
  // stream, waits for it (one inference at a time per arena), and so does the destructor.
  Event device_launch_done;
  bool device_launched = false;
  double gpu_ms = 0, enqueue_ms = 0;

  LibraryHandles handles() const { return {cudnn.get(), cublas.get()}; }
  int* fired_flag(std::size_t exit) const { return static_cast<int*>(fired_device.get()) + exit; }
  int* fired_host_flags() const { return static_cast<int*>(fired_host.get()); }
  float* confidence_copy(std::size_t exit) const {
    return static_cast<float*>(confidence_host.get()) + confidence_offsets[exit];
  }

  GpuBuffers buffers_of(int index) const {
    const auto& op = impl().ops[static_cast<std::size_t>(index)];
    GpuBuffers buffers;
    buffers.inputs = op_inputs[static_cast<std::size_t>(index)];
    buffers.output = values[static_cast<std::size_t>(op.output)];
    buffers.workspace = op.workspace >= 0 ? values[static_cast<std::size_t>(op.workspace)] : nullptr;
    return buffers;
  }

  // The kernel launches of one op: its own kernels, or the exit decision (the executor's own:
  // its flag and handle are per context); nullopt for library work.
  std::optional<std::vector<cuda_kernels::KernelLaunch>> kernel_launches(
      int index, bool set_condition, cudaGraphConditionalHandle handle) const {
    const auto& op = impl().ops[static_cast<std::size_t>(index)];
    const int exit = impl().decision_exit[static_cast<std::size_t>(index)];
    if (exit >= 0) {
      const auto& plan = impl().exits[static_cast<std::size_t>(exit)];
      return std::vector<cuda_kernels::KernelLaunch>{cuda_kernels::describe_exit_decision(
          values[static_cast<std::size_t>(plan.logits_value)], values[static_cast<std::size_t>(op.output)],
          fired_flag(static_cast<std::size_t>(exit)), plan.batch, plan.classes, impl().options.threshold,
          set_condition, handle)};
    }
    return op.gpu->kernel_launches(buffers_of(index));
  }

  // Per op, described once when the context is made (its buffers never move): the kernel
  // launches eager mode and stream captures replay, decisions without a condition to set.
  std::vector<std::optional<std::vector<cuda_kernels::KernelLaunch>>> described_launches;

  // Enqueues one op on `s` (eager, or under a capture).
  void enqueue_op(int index, cudaStream_t s, bool set_condition, cudaGraphConditionalHandle handle) const {
    const auto& described = described_launches[static_cast<std::size_t>(index)];
    if (set_condition) {
      const auto decision = kernel_launches(index, true, handle);  // a decision: always kernels
      for (const auto& launch : *decision) CGR_CUDA_CHECK(cuda_kernels::launch(launch, s));
    } else if (described) {
      for (const auto& launch : *described) CGR_CUDA_CHECK(cuda_kernels::launch(launch, s));
    } else {
      impl().ops[static_cast<std::size_t>(index)].gpu->enqueue(s, buffers_of(index), handles());
    }
  }

  void copy_inputs(cudaStream_t s) const {
    for (std::size_t i = 0; i < impl().input_values.size(); ++i) {
      const int v = impl().input_values[i];
      CGR_CUDA_CHECK(cudaMemcpyAsync(values[static_cast<std::size_t>(v)],
                                     static_cast<char*>(input_staging.get()) + input_offsets[i],
                                     impl().values[static_cast<std::size_t>(v)].bytes,
                                     cudaMemcpyHostToDevice, s));
    }
  }

  void copy_output(std::size_t output, cudaStream_t s) const {
    const int v = impl().output_values[output];
    CGR_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(output_staging.get()) + output_offsets[output],
                                   values[static_cast<std::size_t>(v)],
                                   impl().values[static_cast<std::size_t>(v)].bytes,
                                   cudaMemcpyDeviceToHost, s));
  }

  void copy_exit(std::size_t exit, cudaStream_t s) const {
    const auto& plan = impl().exits[exit];
    CGR_CUDA_CHECK(cudaMemcpyAsync(fired_host_flags() + exit, fired_flag(exit), sizeof(int),
                                   cudaMemcpyDeviceToHost, s));
    CGR_CUDA_CHECK(cudaMemcpyAsync(confidence_copy(exit), values[static_cast<std::size_t>(plan.confidence_value)],
                                   static_cast<std::size_t>(plan.batch) * sizeof(float),
                                   cudaMemcpyDeviceToHost, s));
  }

  // Output copies that follow op `index` (its value is an output; its decision's flags).
  void copies_after(int index, cudaStream_t s) const {
    const auto& op = impl().ops[static_cast<std::size_t>(index)];
    for (std::size_t o = 0; o < impl().output_values.size(); ++o) {
      if (impl().output_values[o] == op.output) copy_output(o, s);
    }
    const int exit = impl().decision_exit[static_cast<std::size_t>(index)];
    if (exit >= 0) copy_exit(static_cast<std::size_t>(exit), s);
  }

  void reset_host_flags() const {
    for (std::size_t k = 0; k < impl().exits.size(); ++k) fired_host_flags()[k] = -1;  // did not run
  }

  // --- eager -------------------------------------------------------------------------------

  // `warm_up`: every op once, gates ignored, so each library op initialises (lazy kernel
  // loading, plans) outside any capture, whatever an exit decides on uninitialised data.
  void run_eager(bool copies, bool warm_up = false) {
    cudaStream_t s = stream.get();
    reset_host_flags();
    executed.assign(impl().ops.size(), 0);
    if (copies) copy_inputs(s);
    std::uint32_t fired = 0;
    for (int index : impl().graph.topological_order()) {
      const auto i = static_cast<std::size_t>(index);
      if (impl().gate_masks[i] & fired) continue;
      enqueue_op(index, s, false, 0);
      executed[i] = 1;
      if (copies) copies_after(index, s);
      const int exit = impl().decision_exit[i];
      if (early && exit >= 0 && !warm_up) {
        // The eager baseline decides on the host, as a Python `if confidence > t:` would.
        if (!copies) copy_exit(static_cast<std::size_t>(exit), s);
        CGR_CUDA_CHECK(cudaStreamSynchronize(s));
        ++synchronizations;
        if (fired_host_flags()[exit] == 1) fired |= 1u << exit;
      }
    }
  }

  // --- graphs ------------------------------------------------------------------------------

  // The real nodes of one planned node, as built.
  struct Segment {
    std::vector<cudaGraphNode_t> nodes;
    std::vector<cudaGraphNode_t> tails;  // what a dependent node waits for
    std::vector<cudaGraphEdgeData> tail_edges;  // the edge each tail gives it (capture's view)
  };

  // Dependencies of a node to be added: nodes and the data of the edges from them.
  struct Dependencies {
    std::vector<cudaGraphNode_t> nodes;
    std::vector<cudaGraphEdgeData> edges;
  };

  // A built graph: the template, its body graphs (index = plan graph), and each plan node's
  // segment.
  struct BuiltGraph {
    Graph owned;
    CudaGraphPlan plan;
    std::vector<cudaGraph_t> graphs;
    std::vector<Segment> segments;
  };

  // Builds the plan: each node is captured (cudaStreamBeginCaptureToGraph) into its graph
  // against exactly the tails of its planned dependencies, or added (IF nodes).
  struct Builder {
    State& s;
    bool copies;
    bool serialize;  // stream-graph
    BuiltGraph built;
    std::vector<std::set<cudaGraphNode_t>> known;     // nodes seen per graph
    std::vector<cudaGraphConditionalHandle> handles;  // per exit

    Dependencies dependency_tails(const CudaGraphPlan::Node& node) const {
      std::map<cudaGraphNode_t, cudaGraphEdgeData> unique;
      for (int d : node.dependencies) {
        const Segment& segment = built.segments[static_cast<std::size_t>(d)];
        for (std::size_t t = 0; t < segment.tails.size(); ++t) unique.emplace(segment.tails[t], segment.tail_edges[t]);
      }
      Dependencies deps;
      for (const auto& [tail, edge] : unique) {
        deps.nodes.push_back(tail);
        deps.edges.push_back(edge);
      }
      return deps;
    }

    // Captures `work` into graph `g` after `deps`; records the new nodes and the captured tail
    // nodes, and marks the kernel nodes of critical-path ops with the highest priority.
    template <typename Work>
    Segment capture(int graph, const Dependencies& deps, int op, Work work) {
      cudaGraph_t g = built.graphs[static_cast<std::size_t>(graph)];
      cudaStream_t st = s.stream.get();
      CGR_CUDA_CHECK(cudaStreamBeginCaptureToGraph(st, g, deps.nodes.data(), deps.edges.data(), deps.nodes.size(),
                                                   cudaStreamCaptureModeThreadLocal));
      Segment segment;
      try {
        work(st);
        // The tails, and the data of the edges a next node would get from them (non-default
        // for e.g. programmatic launches; asking without it would fail as a lossy query).
        cudaStreamCaptureStatus status{};
        const cudaGraphNode_t* tail = nullptr;
        const cudaGraphEdgeData* tail_edges = nullptr;
        std::size_t count = 0;
        CGR_CUDA_CHECK(cudaStreamGetCaptureInfo(st, &status, nullptr, nullptr, &tail, &tail_edges, &count));
        if (status != cudaStreamCaptureStatusActive) {
          fail("cuda graph: the capture of '{}' was invalidated (capture status {})",
               op >= 0 ? s.impl().ops[static_cast<std::size_t>(op)].name : std::string("a copy"), static_cast<int>(status));
        }
        segment.tails.assign(tail, tail + count);
        segment.tail_edges.resize(count);  // zero: default edges
        if (tail_edges != nullptr) segment.tail_edges.assign(tail_edges, tail_edges + count);
      } catch (...) {
        cudaGraph_t ignored = nullptr;
        (void)cudaStreamEndCapture(st, &ignored);
        throw;
      }
      cudaGraph_t captured = nullptr;
      CGR_CUDA_CHECK(cudaStreamEndCapture(st, &captured));
      std::size_t total = 0;
      CGR_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &total));
      std::vector<cudaGraphNode_t> nodes(total);
      CGR_CUDA_CHECK(cudaGraphGetNodes(g, nodes.data(), &total));
      auto& seen = known[static_cast<std::size_t>(graph)];
      for (cudaGraphNode_t node : nodes) {
        if (!seen.insert(node).second) continue;
        segment.nodes.push_back(node);
        prioritize(node, op);
      }
      // Work that captured nothing (e.g. an op with no elements) leaves its dependencies as
      // what comes after it waits for.
      if (segment.nodes.empty()) {
        segment.tails = deps.nodes;
        segment.tail_edges = deps.edges;
      }
      return segment;
    }

    // Kernel nodes of critical-path ops get the highest priority (the graph is instantiated
    // with cudaGraphInstantiateFlagUseNodePriority).
    void prioritize(cudaGraphNode_t node, int op) const {
      if (op < 0 || !s.critical[static_cast<std::size_t>(op)]) return;
      cudaGraphNodeType type{};
      CGR_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type != cudaGraphNodeTypeKernel) return;
      cudaLaunchAttributeValue value{};
      value.priority = s.greatest_priority;
      CGR_CUDA_CHECK(cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributePriority, &value));
    }

    // cgr's own kernels: one kernel node per launch (cudaGraphAddNode with the launch's
    // function, grid, block and arguments), each after exactly `deps`.
    Segment add_kernels(int graph, const Dependencies& deps, int op,
                        const std::vector<cuda_kernels::KernelLaunch>& launches) {
      Segment segment;
      for (const auto& launch : launches) {
        if (launch.status != cudaSuccess) {
          fail("cuda graph: the kernel of '{}' refused its arguments: {} ({})", s.impl().ops[static_cast<std::size_t>(op)].name,
               cudaGetErrorString(launch.status), cudaGetErrorName(launch.status));
        }
        if (launch.empty()) continue;
        auto arguments = launch.argument_pointers();
        cudaGraphNodeParams params{};  // unused bytes must be zero
        params.type = cudaGraphNodeTypeKernel;
        params.kernel.func = const_cast<void*>(launch.function);
        params.kernel.gridDim = launch.grid;
        params.kernel.blockDim = launch.block;
        params.kernel.sharedMemBytes = launch.shared_bytes;
        params.kernel.kernelParams = arguments.data();
        params.kernel.extra = nullptr;
        cudaGraphNode_t node = nullptr;
        CGR_CUDA_CHECK(cudaGraphAddNode(&node, built.graphs[static_cast<std::size_t>(graph)], deps.nodes.data(),
                                        deps.edges.data(), deps.nodes.size(), &params));
        known[static_cast<std::size_t>(graph)].insert(node);
        prioritize(node, op);
        segment.nodes.push_back(node);
        segment.tails.push_back(node);
        segment.tail_edges.push_back(cudaGraphEdgeData{});
      }
      if (segment.nodes.empty()) {
        segment.tails = deps.nodes;
        segment.tail_edges = deps.edges;
      }
      return segment;
    }

    // Exit k's IF node; its body becomes graph k + 1.
    Segment add_conditional(const CudaGraphPlan::Node& node, const Dependencies& deps) {
      cudaGraphNodeParams params{};  // unused bytes must be zero
      params.type = cudaGraphNodeTypeConditional;
      params.conditional.handle = handles[static_cast<std::size_t>(node.exit)];
      params.conditional.type = cudaGraphCondTypeIf;
      params.conditional.size = 1;
      cudaGraphNode_t added = nullptr;
      CGR_CUDA_CHECK(cudaGraphAddNode(&added, built.graphs[static_cast<std::size_t>(node.graph)], deps.nodes.data(),
                                      deps.edges.data(), deps.nodes.size(), &params));
      known[static_cast<std::size_t>(node.graph)].insert(added);
      if (built.graphs.size() != static_cast<std::size_t>(node.exit) + 1) {
        fail("cuda graph: IF node of exit {} built out of order", node.exit);
      }
      built.graphs.push_back(params.conditional.phGraph_out[0]);
      known.emplace_back();
      return {{added}, {added}, {cudaGraphEdgeData{}}};
    }

    BuiltGraph build() {
      const auto& impl = s.impl();
      built.plan = detail::plan_cuda_graph(impl, impl.options.mode, copies);
      cudaGraph_t root = nullptr;
      CGR_CUDA_CHECK(cudaGraphCreate(&root, 0));
      built.owned = Graph(root);
      built.graphs = {root};
      known = {{}};
      handles.assign(impl.exits.size(), 0);
      built.segments.reserve(built.plan.nodes.size());
      for (const CudaGraphPlan::Node& node : built.plan.nodes) {
        const Dependencies deps = dependency_tails(node);
        switch (node.kind) {
          case CudaGraphPlan::Kind::copy_in:
            built.segments.push_back(capture(node.graph, deps, -1, [&](cudaStream_t st) { s.copy_inputs(st); }));
            break;
          case CudaGraphPlan::Kind::copy_out:
            built.segments.push_back(capture(node.graph, deps, -1, [&](cudaStream_t st) { s.copies_after(node.op, st); }));
            break;
          case CudaGraphPlan::Kind::conditional:
            built.segments.push_back(add_conditional(node, deps));
            break;
          case CudaGraphPlan::Kind::op: {
            const bool sets_condition = node.exit >= 0;
            if (sets_condition) {
              // The handle belongs to the graph that holds the IF node (the decision's graph);
              // default 0 at every launch: the body runs only when the decision sets 1.
              CGR_CUDA_CHECK(cudaGraphConditionalHandleCreate(&handles[static_cast<std::size_t>(node.exit)],
                                                              built.graphs[static_cast<std::size_t>(node.graph)], 0,
                                                              cudaGraphCondAssignDefault));
            }
            const cudaGraphConditionalHandle handle = sets_condition ? handles[static_cast<std::size_t>(node.exit)] : 0;
            // dag: cgr's kernels become kernel nodes; library work is captured. stream-graph
            // captures everything, as a capture of the whole network on one stream would.
            const auto& described = s.described_launches[static_cast<std::size_t>(node.op)];
            if (described && !serialize) {
              built.segments.push_back(add_kernels(node.graph, deps, node.op,
                                                   sets_condition ? *s.kernel_launches(node.op, true, handle) : *described));
            } else {
              built.segments.push_back(capture(node.graph, deps, node.op, [&](cudaStream_t st) {
                s.enqueue_op(node.op, st, sets_condition, handle);
              }));
            }
            break;
          }
        }
      }
      return std::move(built);
    }
  };

  // Builds (once) and instantiates the graph of this mode, with or without the copies.
  void ensure_graph(bool copies) {
    GraphExec& exec = copies ? full_exec : compute_exec;
    if (exec) return;
    // stream-graph is the plan's one chain per graph: the topology a capture of the whole
    // network on one stream records (what torch.cuda.graph gives), built by the same code.
    BuiltGraph built = Builder{*this, copies, impl().options.mode == Mode::stream_graph, {}, {}, {}}.build();
    cudaGraphExec_t instance = nullptr;
    CGR_CUDA_CHECK(cudaGraphInstantiate(&instance, built.owned.get(), cudaGraphInstantiateFlagUseNodePriority));
    exec = GraphExec(instance);
    (copies ? full_graph : compute_graph) = std::move(built);
  }

  BuiltGraph full_graph, compute_graph;  // the templates of full_exec and compute_exec
};

CudaContext::CudaContext(std::shared_ptr<const detail::EngineImpl> engine) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.engine = std::move(engine);
  const auto& impl = s.impl();
  s.early = impl.options.exits == ExitPolicy::early;
  s.stream = create_stream();
  s.start_event = create_event();
  s.end_event = create_event();
  s.device_launch_done = create_event();
  cudnnHandle_t cudnn = nullptr;
  CGR_CUDNN_CHECK(cudnnCreate(&cudnn));
  s.cudnn = CudnnHandle(cudnn);
  cublasHandle_t cublas = nullptr;
  CGR_CUBLAS_CHECK(cublasCreate(&cublas));
  s.cublas = CublasHandle(cublas);
  CGR_CUBLAS_CHECK(cublasSetMathMode(cublas, impl.options.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                     : CUBLAS_PEDANTIC_MATH));
  int least = 0, greatest = 0;
  CGR_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  s.greatest_priority = greatest;

  s.arena = allocate_device(impl.plan.arena_bytes);
  s.values.assign(impl.values.size(), nullptr);
  for (std::size_t v = 0; v < impl.values.size(); ++v) {
    if (impl.values[v].producer >= 0 || impl.values[v].pinned) {
      s.values[v] = reinterpret_cast<float*>(static_cast<char*>(s.arena.get()) + impl.values[v].offset);
    }
  }
  for (const auto& op : impl.ops) {
    std::vector<const float*> inputs;
    for (int v : op.inputs) inputs.push_back(s.values[static_cast<std::size_t>(v)]);
    s.op_inputs.push_back(std::move(inputs));
  }
  std::size_t in_bytes = 0, out_bytes = 0, conf_floats = 0;
  for (int v : impl.input_values) {
    s.input_offsets.push_back(in_bytes);
    in_bytes += (impl.values[static_cast<std::size_t>(v)].bytes + 63) / 64 * 64;
  }
  for (int v : impl.output_values) {
    s.output_offsets.push_back(out_bytes);
    out_bytes += (impl.values[static_cast<std::size_t>(v)].bytes + 63) / 64 * 64;
  }
  for (const auto& plan : impl.exits) {
    s.confidence_offsets.push_back(conf_floats);
    conf_floats += static_cast<std::size_t>(plan.batch);
  }
  s.input_staging = allocate_pinned(std::max<std::size_t>(in_bytes, 64));
  s.output_staging = allocate_pinned(std::max<std::size_t>(out_bytes, 64));
  s.fired_host = allocate_pinned(std::max<std::size_t>(impl.exits.size(), 1) * sizeof(int));
  s.confidence_host = allocate_pinned(std::max<std::size_t>(conf_floats, 1) * sizeof(float));
  s.fired_device = allocate_device(std::max<std::size_t>(impl.exits.size(), 1) * sizeof(int));

  // Critical path: ops whose longest chain through them is the graph's longest.
  const int n = impl.graph.op_count();
  std::vector<int> top(static_cast<std::size_t>(n), 1), bottom(static_cast<std::size_t>(n), 1);
  const auto& order = impl.graph.topological_order();
  for (int op : order)
    for (int succ : impl.graph.successors(op)) top[static_cast<std::size_t>(succ)] = std::max(top[static_cast<std::size_t>(succ)], top[static_cast<std::size_t>(op)] + 1);
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    for (int succ : impl.graph.successors(*it)) bottom[static_cast<std::size_t>(*it)] = std::max(bottom[static_cast<std::size_t>(*it)], bottom[static_cast<std::size_t>(succ)] + 1);
  s.critical.resize(static_cast<std::size_t>(n));
  for (int op = 0; op < n; ++op) s.critical[static_cast<std::size_t>(op)] = top[static_cast<std::size_t>(op)] + bottom[static_cast<std::size_t>(op)] - 1 == impl.graph.critical_path_length();

  for (std::size_t op = 0; op < impl.ops.size(); ++op) s.described_launches.push_back(s.kernel_launches(static_cast<int>(op), false, 0));

  // One eager run first: cuDNN and cuBLAS initialise lazily, which must not happen under capture.
  s.run_eager(false, true);
  CGR_CUDA_CHECK(cudaStreamSynchronize(s.stream.get()));
  if (impl.options.mode != Mode::eager) s.ensure_graph(true);
}

CudaContext::~CudaContext() {
  // Nothing of this context may still run when its arena, graphs and handles go.
  State& s = *state_;
  if (s.device_launched) CGR_CUDA_CHECK_NOTHROW(cudaEventSynchronize(s.device_launch_done.get()));
  if (s.stream) CGR_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(s.stream.get()));
}

float* CudaContext::host_input(std::size_t input) const {
  return reinterpret_cast<float*>(static_cast<char*>(state_->input_staging.get()) + state_->input_offsets[input]);
}

float* CudaContext::host_output(std::size_t output) const {
  return reinterpret_cast<float*>(static_cast<char*>(state_->output_staging.get()) + state_->output_offsets[output]);
}

void* CudaContext::device_value(int value) const { return state_->values[static_cast<std::size_t>(value)]; }

void CudaContext::run() {
  State& s = *state_;
  s.launches = s.synchronizations = 0;
  if (s.impl().options.mode != Mode::eager) s.ensure_graph(true);  // built once, outside the timing
  const auto host_start = std::chrono::steady_clock::now();
  if (s.device_launched) CGR_CUDA_CHECK(cudaStreamWaitEvent(s.stream.get(), s.device_launch_done.get(), 0));
  CGR_CUDA_CHECK(cudaEventRecord(s.start_event.get(), s.stream.get()));
  if (s.impl().options.mode == Mode::eager) {
    s.run_eager(true);
  } else {
    s.reset_host_flags();
    CGR_CUDA_CHECK(cudaGraphLaunch(s.full_exec.get(), s.stream.get()));
    ++s.launches;
  }
  CGR_CUDA_CHECK(cudaEventRecord(s.end_event.get(), s.stream.get()));
  s.enqueue_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count();
  // The one synchronisation of an inference, after the final copy-out.
  CGR_CUDA_CHECK(cudaStreamSynchronize(s.stream.get()));
  ++s.synchronizations;
  float elapsed = 0;
  CGR_CUDA_CHECK(cudaEventElapsedTime(&elapsed, s.start_event.get(), s.end_event.get()));
  s.gpu_ms = elapsed;
  if (s.impl().options.mode != Mode::eager) s.executed = executed_ops();
}

void CudaContext::launch_device(cudaStream_t stream) {
  State& s = *state_;
  if (s.impl().options.mode == Mode::eager) fail("the device-resident launch needs a graph mode (dag or stream-graph)");
  s.ensure_graph(false);
  if (s.device_launched) CGR_CUDA_CHECK(cudaStreamWaitEvent(stream, s.device_launch_done.get(), 0));
  CGR_CUDA_CHECK(cudaGraphLaunch(s.compute_exec.get(), stream));
  CGR_CUDA_CHECK(cudaEventRecord(s.device_launch_done.get(), stream));
  s.device_launched = true;
}

std::vector<char> CudaContext::fired_exits() const {
  std::vector<char> fired;
  for (std::size_t k = 0; k < state_->impl().exits.size(); ++k) fired.push_back(state_->fired_host_flags()[k] == 1);
  return fired;
}

std::vector<char> CudaContext::executed_ops() const {
  const State& s = *state_;
  if (s.impl().options.mode == Mode::eager) return s.executed;
  // In the graph modes an op ran unless an exit that gates it fired; an exit whose decision
  // did not run left its host flag at -1.
  std::uint32_t fired = 0;
  for (std::size_t k = 0; k < s.impl().exits.size(); ++k) {
    if (s.early && s.fired_host_flags()[k] == 1) fired |= 1u << k;
  }
  std::vector<char> executed(s.impl().ops.size());
  for (std::size_t op = 0; op < executed.size(); ++op) executed[op] = (s.impl().gate_masks[op] & fired) == 0;
  return executed;
}

const float* CudaContext::exit_confidence(std::size_t exit) const { return state_->confidence_copy(exit); }
double CudaContext::last_gpu_ms() const { return state_->gpu_ms; }
double CudaContext::last_enqueue_ms() const { return state_->enqueue_ms; }

void CudaContext::dump_graph_dot(const std::string& path) {
  State& s = *state_;
  if (s.impl().options.mode == Mode::eager) fail("mode eager has no CUDA graph to dump");
  s.ensure_graph(true);
  CGR_CUDA_CHECK(cudaGraphDebugDotPrint(s.full_graph.owned.get(), path.c_str(), cudaGraphDebugDotFlagsVerbose));
}

namespace {

std::vector<cudaGraphNode_t> nodes_of(cudaGraph_t graph) {
  std::size_t count = 0;
  CGR_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CGR_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  nodes.resize(count);
  return nodes;
}

std::vector<std::pair<cudaGraphNode_t, cudaGraphNode_t>> edges_of(cudaGraph_t graph) {
  std::size_t count = 0;
  CGR_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count), to(count);
  std::vector<cudaGraphEdgeData> data(count);  // without it, non-default edges make the query fail
  CGR_CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &count));
  std::vector<std::pair<cudaGraphNode_t, cudaGraphNode_t>> edges;
  for (std::size_t e = 0; e < count; ++e) edges.emplace_back(from[e], to[e]);
  return edges;
}

}  // namespace

GraphReport CudaContext::graph_report() {
  State& s = *state_;
  GraphReport report;
  report.last_run_launches = s.launches;
  report.last_run_synchronizations = s.synchronizations;
  if (s.impl().options.mode == Mode::eager) return report;
  s.ensure_graph(true);
  const auto& built = s.full_graph;
  const CudaGraphPlan& plan = built.plan;
  report.planned_nodes = plan.nodes.size();
  report.planned_edges = plan.edge_count();

  std::map<cudaGraphNode_t, int> owner;  // real node -> planned node
  for (std::size_t i = 0; i < built.segments.size(); ++i) {
    for (cudaGraphNode_t node : built.segments[i].nodes) owner[node] = static_cast<int>(i);
    report.predicted_nodes += built.segments[i].nodes.size();
  }
  std::set<std::pair<int, int>> found_segment_edges;
  std::set<cudaGraphNode_t> entered_from_own_segment;
  for (std::size_t g = 0; g < built.graphs.size(); ++g) {
    cudaGraph_t graph = built.graphs[g];
    for (cudaGraphNode_t node : nodes_of(graph)) {
      ++report.nodes;
      cudaGraphNodeType type{};
      CGR_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type == cudaGraphNodeTypeConditional) ++report.conditional_nodes;
      // A conditional body may hold kernel, empty, child graph, memset, memcpy and
      // conditional nodes only (what a library captured there must keep to).
      const bool allowed_in_body = type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeEmpty ||
                                   type == cudaGraphNodeTypeGraph || type == cudaGraphNodeTypeMemset ||
                                   type == cudaGraphNodeTypeMemcpy || type == cudaGraphNodeTypeConditional;
      if (g > 0 && !allowed_in_body) {
        const auto it = owner.find(node);
        report.mismatches.push_back(fmt::format("node of type {} ({}) in the body of {}: not allowed in a conditional body",
                                                static_cast<int>(type), it == owner.end() ? std::string("unowned") : plan.nodes[static_cast<std::size_t>(it->second)].name,
                                                "if:" + s.impl().exits[g - 1].name));
      }
      if (!owner.contains(node)) report.mismatches.push_back(fmt::format("a node of type {} that no planned node owns", static_cast<int>(type)));
    }
    for (const auto& [from, to] : edges_of(graph)) {
      ++report.edges;
      const auto a = owner.find(from), b = owner.find(to);
      if (a == owner.end() || b == owner.end()) continue;
      if (a->second == b->second) {
        ++report.predicted_edges;  // inside a segment: what its capture recorded
        entered_from_own_segment.insert(to);
      } else {
        found_segment_edges.insert({a->second, b->second});
      }
    }
  }
  // A planned node whose work was empty (no real node) passes its dependencies through: its
  // dependents wait for those instead.
  std::function<void(int, std::set<int>&)> real_dependencies = [&](int a, std::set<int>& out) {
    if (!built.segments[static_cast<std::size_t>(a)].nodes.empty()) {
      out.insert(a);
      return;
    }
    for (int d : plan.nodes[static_cast<std::size_t>(a)].dependencies) real_dependencies(d, out);
  };
  std::set<std::pair<int, int>> expected_segment_edges;
  for (std::size_t b = 0; b < plan.nodes.size(); ++b) {
    if (built.segments[b].nodes.empty()) continue;
    std::set<cudaGraphNode_t> tails;
    std::set<int> deps;
    for (int a : plan.nodes[b].dependencies) real_dependencies(a, deps);
    for (int a : deps) {
      expected_segment_edges.insert({a, static_cast<int>(b)});
      tails.insert(built.segments[static_cast<std::size_t>(a)].tails.begin(), built.segments[static_cast<std::size_t>(a)].tails.end());
    }
    std::size_t roots = 0;
    for (cudaGraphNode_t node : built.segments[b].nodes) roots += entered_from_own_segment.contains(node) ? 0 : 1;
    report.predicted_edges += tails.size() * roots;
  }
  report.segment_edges_found = found_segment_edges.size();
  const auto name = [&](int node) { return plan.nodes[static_cast<std::size_t>(node)].name; };
  for (const auto& [a, b] : expected_segment_edges) {
    if (!found_segment_edges.contains({a, b})) report.mismatches.push_back(fmt::format("{} -> {} planned, not in the graph", name(a), name(b)));
  }
  for (const auto& [a, b] : found_segment_edges) {
    if (!expected_segment_edges.contains({a, b})) report.mismatches.push_back(fmt::format("{} -> {} in the graph, not planned", name(a), name(b)));
  }
  if (report.nodes != report.predicted_nodes) report.mismatches.push_back(fmt::format("{} nodes, {} predicted", report.nodes, report.predicted_nodes));
  if (report.edges != report.predicted_edges) report.mismatches.push_back(fmt::format("{} edges, {} predicted", report.edges, report.predicted_edges));

  // dag: the op-to-op edges are the IR's reduced edges between ops of the same graph.
  if (s.impl().options.mode == Mode::dag) {
    const auto level = [&](int op) { return s.early ? detail::cuda_graph_level(s.impl().gate_masks[static_cast<std::size_t>(op)]) : -1; };
    std::set<std::pair<int, int>> expected, found;
    for (const Edge& edge : s.impl().graph.edges()) {
      if (level(edge.from) == level(edge.to)) expected.insert({edge.from, edge.to});
    }
    for (const auto& [a, b] : found_segment_edges) {
      const auto& na = plan.nodes[static_cast<std::size_t>(a)];
      const auto& nb = plan.nodes[static_cast<std::size_t>(b)];
      if (na.kind == CudaGraphPlan::Kind::op && nb.kind == CudaGraphPlan::Kind::op) found.insert({na.op, nb.op});
    }
    report.op_edges_expected = expected.size();
    report.op_edges_found = found.size();
    const auto& ops = s.impl().ops;
    for (const auto& [a, b] : expected) {
      if (!found.contains({a, b})) report.mismatches.push_back(fmt::format("IR edge {} -> {} missing", ops[static_cast<std::size_t>(a)].name, ops[static_cast<std::size_t>(b)].name));
    }
    for (const auto& [a, b] : found) {
      if (!expected.contains({a, b})) report.mismatches.push_back(fmt::format("{} -> {} is not an IR edge", ops[static_cast<std::size_t>(a)].name, ops[static_cast<std::size_t>(b)].name));
    }
  }
  return report;
}

GraphNodes CudaContext::graph_nodes() {
  State& s = *state_;
  if (s.impl().options.mode == Mode::eager) fail("mode eager has no CUDA graph");
  s.ensure_graph(true);
  GraphNodes result;
  result.graph = s.full_graph.owned.get();
  for (std::size_t i = 0; i < s.full_graph.segments.size(); ++i) {
    for (cudaGraphNode_t node : s.full_graph.segments[i].nodes) result.owners.emplace_back(node, s.full_graph.plan.nodes[i].name);
  }
  return result;
}

}  // namespace cgr::cuda

#endif  // CGR_HAVE_CUDA
