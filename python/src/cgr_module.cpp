// cgr._cgr: the C++ half of the Python package cgr (python/cgr holds the other half, which turns
// NumPy arrays and torch tensors into the calls below and back). Arrays arrive through nanobind's
// ndarray (the buffer protocol or DLPack), are checked here so that each refusal names the input,
// and are handed to the engine without a copy. Every cgr::Error becomes cgr.Error (a
// RuntimeError) with the C++ message; the GIL is released while an engine builds or infers.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <cgr/batch_buckets.hpp>
#include <cgr/engine.hpp>
#include <cgr/error.hpp>
#include <cgr/onnx.hpp>

#include "measure.hpp"  // bench/: cgr-bench's timing loop and statistics, shared verbatim

#ifdef CGR_HAVE_CUDA
#include <cuda_runtime.h>

#include <cgr/capture/cuda_check.hpp>
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace cgr::python {
namespace {

// Any array nanobind can import: its dtype, device and layout are checked here, so that a
// refusal names the input instead of being a bare "incompatible function arguments".
using AnyArray = nb::ndarray<nb::ro>;
using WritableArray = nb::ndarray<>;
using NumpyArray = nb::ndarray<nb::numpy, float>;

std::string dtype_name(nb::dlpack::dtype dtype) {
  const char* kind = "unknown";
  switch (static_cast<nb::dlpack::dtype_code>(dtype.code)) {
    case nb::dlpack::dtype_code::Int:
      kind = "int";
      break;
    case nb::dlpack::dtype_code::UInt:
      kind = "uint";
      break;
    case nb::dlpack::dtype_code::Float:
      kind = "float";
      break;
    case nb::dlpack::dtype_code::Bfloat:
      kind = "bfloat";
      break;
    case nb::dlpack::dtype_code::Complex:
      kind = "complex";
      break;
    case nb::dlpack::dtype_code::Bool:
      return "bool";
  }
  return fmt::format("{}{}", kind, dtype.bits);
}

std::string device_name(int device_type, int device_id) {
  if (device_type == nb::device::cpu::value) return "cpu";
  if (device_type == nb::device::cuda::value) return fmt::format("cuda:{}", device_id);
  if (device_type == nb::device::cuda_host::value) return "cuda pinned host memory";
  return fmt::format("DLPack device type {}", device_type);
}

std::string shape_of(const AnyArray& array) {
  return Shape(std::vector<std::int64_t>(array.shape_ptr(), array.shape_ptr() + array.ndim()))
      .to_string();
}

// Row-major and dense: the only layout the engine copies from (the Python side makes an array
// contiguous before it gets here; this guards the promise).
bool c_contiguous(const AnyArray& array) {
  if (array.stride_ptr() == nullptr) return true;  // DLPack: null strides mean row-major
  std::int64_t expected = 1;
  for (std::size_t i = array.ndim(); i-- > 0;) {
    if (array.shape(i) != 1 && array.stride(i) != expected) return false;
    expected *= static_cast<std::int64_t>(array.shape(i));
  }
  return true;
}

void check_float32(const std::string& name, const AnyArray& array) {
  if (array.dtype() != nb::dtype<float>()) {
    fail(
        "input '{}' has dtype {}; cgr engines take float32 (convert it: x.astype(numpy.float32) or "
        "x.float())",
        name, dtype_name(array.dtype()));
  }
  if (!c_contiguous(array)) {
    fail(
        "input '{}' (shape {}) is not C-contiguous; pass numpy.ascontiguousarray(x) or "
        "x.contiguous()",
        name, shape_of(array));
  }
}

// An input for infer(): host memory, float32, row-major; its shape goes along so that the
// engine checks it against the declared one.
TensorView host_view(const std::string& name, const AnyArray& array, Device engine_device) {
  if (array.device_type() != nb::device::cpu::value) {
    if (engine_device == Device::cpu) {
      fail(
          "input '{}' is on {}, but this engine runs on the cpu: move it there (x.cpu()) or build "
          "the engine with device='cuda'",
          name, device_name(array.device_type(), array.device_id()));
    }
    fail("input '{}' is on {}; infer() takes host arrays (CUDA tensors take the device path)", name,
         device_name(array.device_type(), array.device_id()));
  }
  check_float32(name, array);
  TensorView view(DType::f32, array.data(), array.size());
  view.dims = std::span<const std::int64_t>(array.shape_ptr(), array.ndim());
  view.shape_known = true;
  return view;
}

// A result tensor as a NumPy array that owns it (no copy: the array's capsule frees it).
nb::object to_numpy(Tensor&& tensor) {
  auto* owned = new Tensor(std::move(tensor));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<std::size_t> shape(owned->shape().dims().begin(), owned->shape().dims().end());
  // The owner makes the export a view of the tensor, not a copy.
  return nb::cast(NumpyArray(owned->f32().data(), shape.size(), shape.data(), owner));
}

std::vector<std::int64_t> dims_of(const Shape& shape) {
  return shape.dims();
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> described(
    const std::vector<TensorDesc>& descs) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  for (const auto& d : descs)
    out.emplace_back(d.name, dims_of(d.shape));
  return out;
}

// One inference at a time per context: a second thread is refused with a clear message
// instead of racing on the context's buffers (ExecutionContext::run checks too, but infer()
// copies the inputs in before it gets there).
class Exclusive {
 public:
  explicit Exclusive(std::atomic<bool>& busy) : busy_(busy) {
    if (busy_.exchange(true)) {
      fail(
          "this context is running an inference on another thread: use one context per thread "
          "(engine.create_context())");
    }
  }
  ~Exclusive() { busy_ = false; }
  Exclusive(const Exclusive&) = delete;
  Exclusive& operator=(const Exclusive&) = delete;

 private:
  std::atomic<bool>& busy_;
};

struct BuildArguments {
  std::string device, mode, exits;
  float threshold = 0.9f;
  int threads = 0;
  std::string precision = "fp32";
  bool time_conv_algorithms = false;  // conv_algorithms="timed"
  std::map<std::string, std::vector<std::int64_t>> input_shapes;
  std::vector<std::pair<std::string, std::string>> exit_outputs;  // (output, speculate_until)
  std::int64_t max_folded_elements = 0;                           // 0: OnnxImportOptions' default
};

OnnxImportOptions import_options(const BuildArguments& args) {
  OnnxImportOptions options;
  for (const auto& [name, dims] : args.input_shapes)
    options.input_shapes.emplace(name, Shape(dims));
  for (const auto& [output, speculate_until] : args.exit_outputs)
    options.exits.push_back({output, speculate_until});
  if (args.max_folded_elements > 0) options.max_folded_elements = args.max_folded_elements;
  return options;
}

EngineOptions engine_options(const BuildArguments& args) {
  EngineOptions options;
  options.device = parse_device(args.device);
  options.mode = parse_mode(args.mode);
  options.exits = parse_exit_policy(args.exits);
  options.threshold = args.threshold;
  options.threads = args.threads;
  options.precision = parse_precision(args.precision);
  options.time_conv_algorithms = args.time_conv_algorithms;
  return options;
}

class ContextHandle;

class EngineHandle {
 public:
  EngineHandle(Engine engine, std::vector<std::string> exit_names)
      : engine_(std::move(engine)), exit_names_(std::move(exit_names)) {}

  static EngineHandle from_onnx(const OnnxModel& model, const BuildArguments& args) {
    const EngineOptions options = engine_options(args);
    std::vector<std::string> exit_names;
    if (options.exits != ExitPolicy::off) {
      for (const auto& e : model.network.exits())
        exit_names.push_back(e.name);
    }
    return EngineHandle(Engine::build(model.network, model.weights, options),
                        std::move(exit_names));
  }

  static EngineHandle from_file(const std::string& path, const BuildArguments& args) {
    nb::gil_scoped_release release;
    return from_onnx(import_onnx(path, import_options(args)), args);
  }

  static EngineHandle from_bytes(const nb::bytes& data, const std::string& what,
                                 const BuildArguments& args) {
    const auto bytes = std::as_bytes(std::span(data.c_str(), data.size()));
    nb::gil_scoped_release release;
    return from_onnx(import_onnx(bytes, what, import_options(args)), args);
  }

  const Engine& engine() const { return engine_; }
  const std::vector<std::string>& exit_names() const { return exit_names_; }

  nb::dict options() const {
    const EngineOptions& o = engine_.options();
    nb::dict d;
    d["device"] = std::string(to_string(o.device));
    d["mode"] = std::string(to_string(o.mode));
    d["exits"] = std::string(to_string(o.exits));
    d["threshold"] = o.threshold;
    d["threads"] = o.threads;
    d["precision"] = std::string(to_string(o.precision));
    d["conv_algorithms"] = o.time_conv_algorithms ? "timed" : "heuristic";
    return d;
  }

  nb::dict info() const {
    const EngineInfo i = engine_.info();
    nb::dict d;
    d["layers"] = i.layers;
    d["ops"] = i.ops;
    d["edges"] = i.edges;
    d["critical_path"] = i.critical_path;
    d["critical_path_us"] = i.critical_path_us;
    d["max_width"] = i.max_width;
    d["arena_bytes"] = i.arena_bytes;
    d["activation_bytes"] = i.activation_bytes;
    d["weight_bytes"] = i.weight_bytes;
    d["channels_last_values"] = i.channels_last_values;
    return d;
  }

  std::unique_ptr<ContextHandle> create_context() const;

 private:
  Engine engine_;
  std::vector<std::string> exit_names_;
};

class ContextHandle {
 public:
  explicit ContextHandle(const Engine& engine)
      : engine_(engine), context_(engine.create_context()) {}
  ~ContextHandle() {
#ifdef CGR_HAVE_CUDA
    if (copies_done_ != nullptr) {
      // The last device-path call's copies read buffers the context is about to free.
      CGR_CUDA_CHECK_NOTHROW(cudaEventSynchronize(copies_done_));
      CGR_CUDA_CHECK_NOTHROW(cudaEventDestroy(copies_done_));
    }
#endif
  }
  ContextHandle(const ContextHandle&) = delete;
  ContextHandle& operator=(const ContextHandle&) = delete;

  // (outputs: {name: numpy array}, answered_by, exits, non_finite_outputs)
  nb::tuple infer(const std::vector<std::pair<std::string, AnyArray>>& inputs) {
    Exclusive exclusive(busy_);
    NamedInputs named;
    for (const auto& [name, array] : inputs)
      named.emplace_back(name, host_view(name, array, engine_.options().device));
    Result result;
    {
      // The arrays stay referenced by `inputs` while the engine reads them.
      nb::gil_scoped_release release;
#ifdef CGR_HAVE_CUDA
      // A device-path call may still be copying out of the buffers this run overwrites.
      if (copies_done_ != nullptr) CGR_CUDA_CHECK(cudaEventSynchronize(copies_done_));
#endif
      result = context_.infer(named);
    }
    nb::dict outputs;
    for (auto& [name, tensor] : result.outputs)
      outputs[nb::str(name.c_str())] = to_numpy(std::move(tensor));
    return nb::make_tuple(outputs, result.answered_by, result.exits, result.non_finite_outputs);
  }

  // The device-resident path for CUDA arrays: each input is copied into the context's static
  // device buffer, the compute graph is launched and each output copied into the caller's
  // array, all enqueued on `stream` (torch's current stream) without a host copy or a
  // synchronisation. A wait on the previous call's copy-out keeps calls on different streams
  // from overwriting buffers still being read.
  void infer_on_device(const std::vector<std::pair<std::string, AnyArray>>& inputs,
                       const std::vector<std::pair<std::string, WritableArray>>& outputs,
                       std::uintptr_t stream) {
    Exclusive exclusive(busy_);
    const EngineOptions& options = engine_.options();
    if (options.device != Device::cuda) {
      fail("CUDA inputs need an engine built with device='cuda' (this one runs on the cpu)");
    }
    if (options.exits == ExitPolicy::early) {
      fail(
          "exits='early' skips outputs on the device and the device path cannot report which "
          "(it never synchronises): build the engine with exits='all' or 'off', or pass CPU "
          "tensors");
    }
#ifdef CGR_HAVE_CUDA
    const std::vector<DeviceCopy> copy_in = device_copies(engine_.inputs(), inputs, "input");
    std::vector<std::pair<std::string, AnyArray>> output_views;
    for (const auto& [name, array] : outputs)
      output_views.emplace_back(name, AnyArray(array));
    const std::vector<DeviceCopy> copy_out =
        device_copies(engine_.outputs(), output_views, "output");
    nb::gil_scoped_release release;
    auto s = reinterpret_cast<cudaStream_t>(stream);
    if (copies_done_ == nullptr) {
      CGR_CUDA_CHECK(cudaEventCreateWithFlags(&copies_done_, cudaEventDisableTiming));
    } else {
      CGR_CUDA_CHECK(cudaStreamWaitEvent(s, copies_done_, 0));
    }
    for (const DeviceCopy& c : copy_in) {
      CGR_CUDA_CHECK(
          cudaMemcpyAsync(c.device_buffer, c.array, c.bytes, cudaMemcpyDeviceToDevice, s));
    }
    context_.launch_on_device(reinterpret_cast<void*>(stream));
    for (const DeviceCopy& c : copy_out) {
      CGR_CUDA_CHECK(cudaMemcpyAsync(const_cast<void*>(c.array), c.device_buffer, c.bytes,
                                     cudaMemcpyDeviceToDevice, s));
    }
    CGR_CUDA_CHECK(cudaEventRecord(copies_done_, s));
#else
    (void)inputs;
    (void)outputs;
    (void)stream;
    fail("this build of cgr has no CUDA backend");
#endif
  }

  int ops_executed() const {
    return context_.ops_executed();
  }
  std::vector<std::string> executed_ops() const {
    return context_.executed_ops();
  }

 private:
#ifdef CGR_HAVE_CUDA
  // One copy between a context's static device buffer and a caller's CUDA array.
  struct DeviceCopy {
    void* device_buffer;
    const void* array;
    std::size_t bytes;
  };
  // Every declared tensor given exactly once, as a CUDA array of the declared shape on the
  // device of the context's buffers.
  std::vector<DeviceCopy> device_copies(const std::vector<TensorDesc>& descs,
                                        const std::vector<std::pair<std::string, AnyArray>>& given,
                                        const char* role) {
    std::vector<DeviceCopy> copies;
    std::vector<std::string> declared;
    for (const auto& d : descs)
      declared.push_back(fmt::format("'{}' {}", d.name, d.shape.to_string()));
    for (const auto& [name, array] : given) {
      bool known = false;
      for (const auto& d : descs)
        known = known || d.name == name;
      if (!known) fail("no {} named '{}' ({}s: {})", role, name, role, fmt::join(declared, ", "));
    }
    for (const auto& desc : descs) {
      const AnyArray* array = nullptr;
      for (const auto& [name, a] : given) {
        if (name != desc.name) continue;
        if (array != nullptr) fail("{} '{}' is given twice", role, name);
        array = &a;
      }
      if (array == nullptr)
        fail("{} '{}' ({}) is missing", role, desc.name, desc.shape.to_string());
      if (array->device_type() != nb::device::cuda::value) {
        fail("{} '{}' is on {}; the device path takes CUDA tensors only (all on one device)", role,
             desc.name, device_name(array->device_type(), array->device_id()));
      }
      check_float32(desc.name, *array);
      const std::vector<std::int64_t> dims(array->shape_ptr(), array->shape_ptr() + array->ndim());
      if (dims != desc.shape.dims()) {
        fail("{} '{}' has shape {}, expected {}", role, desc.name, shape_of(*array),
             desc.shape.to_string());
      }
      void* buffer = context_.device_buffer(desc.name);
      cudaPointerAttributes attributes{};
      CGR_CUDA_CHECK(cudaPointerGetAttributes(&attributes, buffer));
      if (attributes.device != array->device_id()) {
        fail("{} '{}' is on cuda:{} but this context's buffers are on cuda:{}", role, desc.name,
             array->device_id(), attributes.device);
      }
      copies.push_back({buffer, array->data(), desc.bytes()});
    }
    return copies;
  }
  cudaEvent_t copies_done_ = nullptr;
#endif

  Engine engine_;
  ExecutionContext context_;
  std::atomic<bool> busy_{false};
};

std::unique_ptr<ContextHandle> EngineHandle::create_context() const {
  nb::gil_scoped_release release;  // a CUDA context builds and instantiates its graph
  return std::make_unique<ContextHandle>(engine_);
}

// Batch buckets (cgr/batch_buckets.hpp): one engine per batch size, built from an ONNX model
// with a symbolic batch. Exit heads are named after their ONNX outputs (OnnxExit::output).
class BucketedContextHandle;

class BucketedEngineHandle {
 public:
  static BucketedEngineHandle from_file(const std::string& path,
                                        const std::vector<std::int64_t>& buckets,
                                        const BuildArguments& args) {
    const EngineOptions options = engine_options(args);
    std::vector<std::string> exit_names;
    if (options.exits != ExitPolicy::off) {
      for (const auto& [output, speculate_until] : args.exit_outputs)
        exit_names.push_back(output);
    }
    nb::gil_scoped_release release;
    return BucketedEngineHandle(build_onnx_buckets(path, buckets, options, import_options(args)),
                                std::move(exit_names));
  }

  const BucketedEngine& engine() const { return engine_; }
  const std::vector<std::string>& exit_names() const { return exit_names_; }

  nb::dict options() const {
    const EngineOptions& o = engine_.engine(engine_.buckets().front()).options();
    nb::dict d;
    d["device"] = std::string(to_string(o.device));
    d["mode"] = std::string(to_string(o.mode));
    d["exits"] = std::string(to_string(o.exits));
    d["threshold"] = o.threshold;
    d["threads"] = o.threads;
    d["precision"] = std::string(to_string(o.precision));
    d["conv_algorithms"] = o.time_conv_algorithms ? "timed" : "heuristic";
    return d;
  }

  std::unique_ptr<BucketedContextHandle> create_context() const;

 private:
  BucketedEngineHandle(BucketedEngine engine, std::vector<std::string> exit_names)
      : engine_(std::move(engine)), exit_names_(std::move(exit_names)) {}
  BucketedEngine engine_;
  std::vector<std::string> exit_names_;
};

class BucketedContextHandle {
 public:
  explicit BucketedContextHandle(const BucketedEngine& engine)
      : device_(engine.engine(engine.buckets().front()).options().device),
        context_(engine.create_context()) {}

  // (outputs: {name: numpy array}, answered_by, exits, non_finite_outputs), n rows each.
  nb::tuple infer(const std::vector<std::pair<std::string, AnyArray>>& inputs) {
    Exclusive exclusive(busy_);
    NamedInputs named;
    for (const auto& [name, array] : inputs)
      named.emplace_back(name, host_view(name, array, device_));
    Result result;
    {
      nb::gil_scoped_release release;  // `inputs` keeps the arrays alive meanwhile
      result = context_.infer(named);
    }
    nb::dict outputs;
    for (auto& [name, tensor] : result.outputs)
      outputs[nb::str(name.c_str())] = to_numpy(std::move(tensor));
    return nb::make_tuple(outputs, result.answered_by, result.exits, result.non_finite_outputs);
  }

  std::int64_t last_bucket() const { return context_.last_bucket(); }

 private:
  Device device_;
  BucketedContext context_;
  std::atomic<bool> busy_{false};
};

std::unique_ptr<BucketedContextHandle> BucketedEngineHandle::create_context() const {
  nb::gil_scoped_release release;  // a context per bucket (CUDA: each builds its graph)
  return std::make_unique<BucketedContextHandle>(engine_);
}

double throughput(const std::vector<double>& latency_ms) {
  double total = 0;
  for (double t : latency_ms)
    total += t;
  return total > 0 ? static_cast<double>(latency_ms.size()) * 1000.0 / total : 0;
}

nb::dict stats_dict(const bench::Stats& s) {
  nb::dict d;
  d["count"] = s.count;
  d["min"] = s.min;
  d["mean"] = s.mean;
  d["median"] = s.median;
  d["max"] = s.max;
  d["stddev"] = s.stddev;
  d["cv"] = s.cv;
  nb::dict percentiles;
  for (const auto& [p, v] : s.percentiles)
    percentiles[nb::float_(p)] = v;
  d["percentiles"] = percentiles;
  return d;
}

// cgr-bench's measurement (bench/measure.cpp) of already built engines, one per mode: a fresh
// context each, the inputs written into its buffers, warm-up, interleaved timed rounds of
// ExecutionContext::run(), then one inference per mode compared with dag's.
nb::list measure(const std::vector<const EngineHandle*>& engines,
                 const std::vector<std::pair<std::string, AnyArray>>& inputs, int iterations,
                 double warmup_ms, double duration_s, const std::vector<double>& percentiles) {
  if (engines.empty()) fail("benchmark: no engine to measure");
  bench::InputTensors tensors;
  for (const auto& [name, array] : inputs) {
    const TensorView view = host_view(name, array, engines.front()->engine().options().device);
    const auto* data = static_cast<const float*>(view.data);
    tensors.emplace_back(
        name, Tensor(Shape(std::vector<std::int64_t>(view.dims.begin(), view.dims.end())),
                     std::vector<float>(data, data + view.count)));
  }
  std::vector<bench::ModeRun> runs;
  {
    nb::gil_scoped_release release;
    for (const EngineHandle* e : engines) {
      const Engine& engine = e->engine();
      const auto start = std::chrono::steady_clock::now();
      ExecutionContext context = engine.create_context();
      const double instantiate_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      bench::ModeRun run{engine.options().mode,
                         engine,
                         std::move(context),
                         0,
                         instantiate_ms,
                         {},
                         true,
                         engine.options().device == Device::cuda,
                         {},
                         {},
                         {},
                         0,
                         {},
                         {},
                         {},
                         {}};
      bench::fill_inputs(run.context, tensors);
      runs.push_back(std::move(run));
    }
    bench::measure_interleaved(runs, {warmup_ms, duration_s, iterations});
    bench::compare_outputs(runs, tensors);
  }
  nb::list out;
  for (const bench::ModeRun& run : runs) {
    nb::dict d;
    d["mode"] = std::string(to_string(run.mode));
    d["device"] = std::string(to_string(run.engine.options().device));
    d["instantiate_ms"] = run.instantiate_ms;
    d["latency_ms"] = run.latency_ms;
    d["latency"] = stats_dict(bench::summarize(run.latency_ms, percentiles));
    d["throughput"] = throughput(run.latency_ms);
    d["enqueue"] = stats_dict(bench::summarize(run.enqueue_ms, percentiles));
    if (run.has_gpu) d["gpu"] = stats_dict(bench::summarize(run.gpu_ms, percentiles));
    d["ops_executed"] = run.ops_executed;
    d["answered_by"] = run.answered_by;
    if (run.max_abs_diff_vs_dag) d["max_abs_diff_vs_dag"] = *run.max_abs_diff_vs_dag;
    out.append(d);
  }
  return out;
}

}  // namespace
}  // namespace cgr::python

NB_MODULE(_cgr, m) {
  using namespace cgr;
  using namespace cgr::python;
  m.doc() = "cgr's C++ engine; use the package cgr, which wraps it";

  nb::exception<Error>(m, "Error", PyExc_RuntimeError);

  nb::class_<BuildArguments>(m, "BuildArguments")
      .def(nb::init<>())
      .def_rw("device", &BuildArguments::device)
      .def_rw("mode", &BuildArguments::mode)
      .def_rw("exits", &BuildArguments::exits)
      .def_rw("threshold", &BuildArguments::threshold)
      .def_rw("threads", &BuildArguments::threads)
      .def_rw("precision", &BuildArguments::precision)
      .def_rw("time_conv_algorithms", &BuildArguments::time_conv_algorithms)
      .def_rw("input_shapes", &BuildArguments::input_shapes)
      .def_rw("exit_outputs", &BuildArguments::exit_outputs)
      .def_rw("max_folded_elements", &BuildArguments::max_folded_elements);

  nb::class_<ExitReport>(m, "ExitReport", "One exit head's part of a result")
      .def_ro("name", &ExitReport::name)
      .def_ro("ran", &ExitReport::ran, "its head was computed")
      .def_ro("fired", &ExitReport::fired, "every sample's confidence >= threshold")
      .def_ro("confidence", &ExitReport::confidence, "per sample: largest softmax probability")
      .def_ro("top1", &ExitReport::top1, "per sample: argmax of the logits")
      .def("__repr__", [](const ExitReport& r) {
        return fmt::format("ExitReport(name='{}', ran={}, fired={}, confidence=[{}], top1=[{}])",
                           r.name, r.ran ? "True" : "False", r.fired ? "True" : "False",
                           fmt::join(r.confidence, ", "), fmt::join(r.top1, ", "));
      });

  nb::class_<EngineHandle>(m, "Engine")
      .def_static("from_file", &EngineHandle::from_file, "path"_a, "arguments"_a)
      .def_static("from_bytes", &EngineHandle::from_bytes, "data"_a, "what"_a, "arguments"_a)
      .def_prop_ro("inputs", [](const EngineHandle& e) { return described(e.engine().inputs()); })
      .def_prop_ro("outputs", [](const EngineHandle& e) { return described(e.engine().outputs()); })
      .def_prop_ro("exit_names", &EngineHandle::exit_names)
      .def("options", &EngineHandle::options)
      .def("info", &EngineHandle::info)
      .def("op_names", [](const EngineHandle& e) { return e.engine().op_names(); })
      .def("create_context", &EngineHandle::create_context);

  nb::class_<ContextHandle>(m, "Context")
      .def("infer", &ContextHandle::infer, "inputs"_a)
      .def("infer_on_device", &ContextHandle::infer_on_device, "inputs"_a, "outputs"_a, "stream"_a)
      .def("ops_executed", &ContextHandle::ops_executed)
      .def("executed_ops", &ContextHandle::executed_ops);

  nb::class_<BucketedEngineHandle>(m, "BucketedEngine")
      .def_static("from_file", &BucketedEngineHandle::from_file, "path"_a, "buckets"_a,
                  "arguments"_a)
      .def_prop_ro("buckets", [](const BucketedEngineHandle& e) { return e.engine().buckets(); })
      .def_prop_ro(
          "inputs",
          [](const BucketedEngineHandle& e) { return described(e.engine().sample_inputs()); })
      .def_prop_ro(
          "outputs",
          [](const BucketedEngineHandle& e) { return described(e.engine().sample_outputs()); })
      .def_prop_ro("exit_names", &BucketedEngineHandle::exit_names)
      .def(
          "bucket_for",
          [](const BucketedEngineHandle& e, std::int64_t batch) {
            return e.engine().bucket_for(batch);
          },
          "batch"_a)
      .def("options", &BucketedEngineHandle::options)
      .def("create_context", &BucketedEngineHandle::create_context);

  nb::class_<BucketedContextHandle>(m, "BucketedContext")
      .def("infer", &BucketedContextHandle::infer, "inputs"_a)
      .def("last_bucket", &BucketedContextHandle::last_bucket);

  m.def("measure", &measure, "engines"_a, "inputs"_a, "iterations"_a, "warmup_ms"_a, "duration_s"_a,
        "percentiles"_a);
  m.def("cuda_unavailable_reason", &cuda_unavailable_reason);
}
