// The CUDA context's resources, buffers and copies, run() of one inference and the
// device-resident launch (see context.hpp for the modes).
#include "context.hpp"

#include <algorithm>
#include <chrono>

#include "cgr/error.hpp"
#include "library_check.hpp"
#include "ops/exit_decision.hpp"

namespace cgr::cuda {

std::unique_ptr<detail::BackendContext> CudaProgram::create_context(
    std::shared_ptr<const detail::CompiledEngine> engine) const {
  return std::make_unique<CudaContext>(std::move(engine));
}

CudaContext::CudaContext(std::shared_ptr<const detail::CompiledEngine> engine)
    : engine_(std::move(engine)) {
  const detail::CompiledEngine& e = *engine_;
  stream_ = create_stream();
  start_event_ = create_event();
  end_event_ = create_event();
  device_launch_done_ = create_event();
  cudnnHandle_t cudnn = nullptr;
  CGR_CUDNN_CHECK(cudnnCreate(&cudnn));
  cudnn_ = CudnnHandle(cudnn);
  cublasHandle_t cublas = nullptr;
  CGR_CUBLAS_CHECK(cublasCreate(&cublas));
  cublas_ = CublasHandle(cublas);
  CGR_CUBLAS_CHECK(cublasSetMathMode(
      cublas, e.options.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
  int least = 0, greatest = 0;
  CGR_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  greatest_priority_ = greatest;

  arena_ = allocate_device(e.plan.arena_bytes);
  device_values_.assign(e.values.size(), nullptr);
  for (std::size_t v = 0; v < e.values.size(); ++v) {
    if (e.values[v].has_storage()) {
      device_values_[v] =
          reinterpret_cast<float*>(static_cast<char*>(arena_.get()) + e.values[v].offset);
    }
  }
  for (const auto& op : e.ops) {
    std::vector<const float*> inputs;
    for (int v : op.inputs)
      inputs.push_back(device_values_[static_cast<std::size_t>(v)]);
    op_inputs_.push_back(std::move(inputs));
  }
  // Staging: inputs and outputs packed in engine order, 64-byte aligned each.
  std::size_t in_bytes = 0, out_bytes = 0, confidence_floats = 0;
  for (int v : e.input_values) {
    input_offsets_.push_back(in_bytes);
    in_bytes += (e.values[static_cast<std::size_t>(v)].bytes + 63) / 64 * 64;
  }
  for (int v : e.output_values) {
    output_offsets_.push_back(out_bytes);
    out_bytes += (e.values[static_cast<std::size_t>(v)].bytes + 63) / 64 * 64;
  }
  std::vector<std::size_t> confidence_offsets;
  for (const auto& plan : e.exits) {
    confidence_offsets.push_back(confidence_floats);
    confidence_floats += static_cast<std::size_t>(plan.batch);
  }
  input_staging_ = allocate_page_locked(std::max<std::size_t>(in_bytes, 64));
  output_staging_ = allocate_page_locked(std::max<std::size_t>(out_bytes, 64));
  fired_host_ = allocate_page_locked(std::max<std::size_t>(e.exits.size(), 1) * sizeof(int));
  confidence_host_ =
      allocate_page_locked(std::max<std::size_t>(confidence_floats, 1) * sizeof(float));
  fired_device_ = allocate_device(std::max<std::size_t>(e.exits.size(), 1) * sizeof(int));

  // The host copy of each value a caller reads or writes; an input that is also an output is
  // read from the input's staging, as it is written there.
  host_values_.assign(e.values.size(), nullptr);
  for (std::size_t k = 0; k < e.exits.size(); ++k) {
    host_values_[static_cast<std::size_t>(e.exits[k].confidence_value)] =
        static_cast<float*>(confidence_host_.get()) + confidence_offsets[k];
  }
  for (std::size_t o = e.output_values.size(); o-- > 0;) {
    host_values_[static_cast<std::size_t>(e.output_values[o])] =
        reinterpret_cast<float*>(static_cast<char*>(output_staging_.get()) + output_offsets_[o]);
  }
  for (std::size_t i = e.input_values.size(); i-- > 0;) {
    host_values_[static_cast<std::size_t>(e.input_values[i])] =
        reinterpret_cast<float*>(static_cast<char*>(input_staging_.get()) + input_offsets_[i]);
  }

  for (std::size_t op = 0; op < e.ops.size(); ++op) {
    if (e.ops[op].decides_exit >= 0) {
      described_launches_.push_back(
          std::vector<KernelLaunch>{decision_launch(static_cast<int>(op), false, 0)});
    } else {
      described_launches_.push_back(
          program().op(static_cast<int>(op))->kernel_launches(buffers_of(static_cast<int>(op))));
    }
    // A refused description fails here, naming its op, not at some later launch.
    if (const auto& described = described_launches_.back()) {
      for (const KernelLaunch& launch : *described) check_description(launch, e.ops[op].name);
    }
  }

  // One eager run first: cuDNN and cuBLAS initialise lazily, which must not happen under capture.
  // It runs before any input arrived: zeros, not whatever the allocation held (compute-sanitizer
  // initcheck reported every read of the never-written input there).
  if (e.plan.arena_bytes > 0)
    CGR_CUDA_CHECK(cudaMemsetAsync(arena_.get(), 0, e.plan.arena_bytes, stream_.get()));
  std::vector<char> executed;
  run_eager(false, true, executed);
  CGR_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  if (e.options.mode != Mode::eager) ensure_graph(true);
}

CudaContext::~CudaContext() {
  // Nothing of this context may still run when its arena, graphs and handles go.
  if (device_launched_) CGR_CUDA_CHECK_NOTHROW(cudaEventSynchronize(device_launch_done_.get()));
  if (stream_) CGR_CUDA_CHECK_NOTHROW(cudaStreamSynchronize(stream_.get()));
}

float* CudaContext::host_value(int value) const {
  float* host = host_values_[static_cast<std::size_t>(value)];
  if (host == nullptr) fail("internal error: value {} has no host copy", value);
  return host;
}

void* CudaContext::device_value(int value) const {
  return device_values_[static_cast<std::size_t>(value)];
}

GpuBuffers CudaContext::buffers_of(int index) const {
  const auto& op = engine().ops[static_cast<std::size_t>(index)];
  GpuBuffers buffers;
  buffers.inputs = op_inputs_[static_cast<std::size_t>(index)];
  buffers.output = device_values_[static_cast<std::size_t>(op.output)];
  buffers.workspace =
      op.workspace >= 0 ? device_values_[static_cast<std::size_t>(op.workspace)] : nullptr;
  buffers.zeros = program().zeros();
  return buffers;
}

KernelLaunch CudaContext::decision_launch(int op, bool set_condition,
                                          cudaGraphConditionalHandle handle) const {
  const auto& compiled = engine().ops[static_cast<std::size_t>(op)];
  const auto exit = static_cast<std::size_t>(compiled.decides_exit);
  const auto& plan = engine().exits[exit];
  return describe_exit_decision(device_values_[static_cast<std::size_t>(plan.logits_value)],
                                device_values_[static_cast<std::size_t>(compiled.output)],
                                fired_flag(exit), plan.batch, plan.classes,
                                engine().options.threshold, set_condition, handle);
}

void CudaContext::enqueue_op(int index, cudaStream_t s, bool set_condition,
                             cudaGraphConditionalHandle handle) const {
  const auto& described = described_launches_[static_cast<std::size_t>(index)];
  if (set_condition) {
    const KernelLaunch decision = decision_launch(index, true, handle);
    check_description(decision, engine().ops[static_cast<std::size_t>(index)].name);
    CGR_CUDA_CHECK(launch(decision, s));
  } else if (described) {
    for (const auto& description : *described)
      CGR_CUDA_CHECK(launch(description, s));
  } else {
    program().op(index)->enqueue(s, buffers_of(index), handles());
  }
}

void CudaContext::copy_inputs(cudaStream_t s) const {
  for (std::size_t i = 0; i < engine().input_values.size(); ++i) {
    const auto v = static_cast<std::size_t>(engine().input_values[i]);
    CGR_CUDA_CHECK(cudaMemcpyAsync(device_values_[v],
                                   static_cast<char*>(input_staging_.get()) + input_offsets_[i],
                                   engine().values[v].bytes, cudaMemcpyHostToDevice, s));
  }
}

void CudaContext::copy_exit(std::size_t exit, cudaStream_t s) const {
  const auto& plan = engine().exits[exit];
  CGR_CUDA_CHECK(cudaMemcpyAsync(fired_host_flags() + exit, fired_flag(exit), sizeof(int),
                                 cudaMemcpyDeviceToHost, s));
  CGR_CUDA_CHECK(cudaMemcpyAsync(host_values_[static_cast<std::size_t>(plan.confidence_value)],
                                 device_values_[static_cast<std::size_t>(plan.confidence_value)],
                                 static_cast<std::size_t>(plan.batch) * sizeof(float),
                                 cudaMemcpyDeviceToHost, s));
}

void CudaContext::copies_after(int index, cudaStream_t s) const {
  const auto& op = engine().ops[static_cast<std::size_t>(index)];
  for (int o : op.copied_outputs) {
    const auto v = static_cast<std::size_t>(engine().output_values[static_cast<std::size_t>(o)]);
    CGR_CUDA_CHECK(cudaMemcpyAsync(
        static_cast<char*>(output_staging_.get()) + output_offsets_[static_cast<std::size_t>(o)],
        device_values_[v], engine().values[v].bytes, cudaMemcpyDeviceToHost, s));
  }
  if (op.decides_exit >= 0) copy_exit(static_cast<std::size_t>(op.decides_exit), s);
}

void CudaContext::reset_host_flags() const {
  for (std::size_t k = 0; k < engine().exits.size(); ++k)
    fired_host_flags()[k] = -1;  // did not run
}

std::vector<char> CudaContext::fired_exits() const {
  std::vector<char> fired;
  for (std::size_t k = 0; k < engine().exits.size(); ++k)
    fired.push_back(fired_host_flags()[k] == 1);
  return fired;
}

std::vector<char> CudaContext::executed_from_flags() const {
  // In the graph modes an op ran unless an exit that gates it fired; an exit whose decision
  // did not run left its host flag at -1.
  std::uint32_t fired = 0;
  for (std::size_t k = 0; k < engine().exits.size(); ++k) {
    if (engine().early_exits() && fired_host_flags()[k] == 1) fired |= 1u << k;
  }
  std::vector<char> executed(engine().ops.size());
  for (std::size_t op = 0; op < executed.size(); ++op) {
    executed[op] = engine().skipped(static_cast<int>(op), fired) ? 0 : 1;
  }
  return executed;
}

void CudaContext::run(detail::RunRecord& record) {
  launches_ = synchronizations_ = 0;
  const bool graph_mode = engine().options.mode != Mode::eager;
  if (graph_mode) ensure_graph(true);  // built once, outside the timing
  const auto host_start = std::chrono::steady_clock::now();
  if (device_launched_)
    CGR_CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), device_launch_done_.get(), 0));
  CGR_CUDA_CHECK(cudaEventRecord(start_event_.get(), stream_.get()));
  if (graph_mode) {
    reset_host_flags();
    CGR_CUDA_CHECK(cudaGraphLaunch(full_exec_.get(), stream_.get()));
    ++launches_;
  } else {
    run_eager(true, false, eager_executed_);
  }
  CGR_CUDA_CHECK(cudaEventRecord(end_event_.get(), stream_.get()));
  enqueue_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start)
          .count();
  // The one synchronisation of an inference, after the final copy-out.
  CGR_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  ++synchronizations_;
  float elapsed = 0;
  CGR_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start_event_.get(), end_event_.get()));
  gpu_ms_ = elapsed;
  record.executed = graph_mode ? executed_from_flags() : eager_executed_;
  record.exit_fired = fired_exits();
}

void CudaContext::launch_on_device(void* cuda_stream) {
  if (engine().options.mode == Mode::eager) {
    fail("the device-resident launch needs a graph mode (dag or stream-graph)");
  }
  auto stream = static_cast<cudaStream_t>(cuda_stream);
  ensure_graph(false);
  if (device_launched_) CGR_CUDA_CHECK(cudaStreamWaitEvent(stream, device_launch_done_.get(), 0));
  CGR_CUDA_CHECK(cudaGraphLaunch(compute_exec_.get(), stream));
  CGR_CUDA_CHECK(cudaEventRecord(device_launch_done_.get(), stream));
  device_launched_ = true;
}

}  // namespace cgr::cuda
