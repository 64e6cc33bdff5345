// cgr-bench: the replay benchmark tool. Builds one network for every requested execution mode
// of a device, replays inferences interleaved across the modes and reports latency,
// throughput and stability side by side, in the manner of TensorRT's trtexec (cli.cpp's
// --help defines every metric). Also: graph facts (--info), DOT export, a timeline of one
// inference, and a sweep over input sizes that shows where inter-op concurrency stops paying.
//
// Exit status: 0 success; 1 the model, its weights or an input failed to load or run (the
// loader's message); 2 bad arguments (the message and the usage line).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <cgr/engine.hpp>
#include <cgr/files.hpp>
#include <cgr/npy.hpp>
#if defined(CGR_HAVE_ONNX)
#include <onnx/onnx_pb.h>
#include <cgr/onnx.hpp>

#include <set>
#endif

#include "cgr/models/googlenet.hpp"
#include "cgr/models/inception.hpp"
#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18.hpp"
#include "cgr/models/resnet18_exits.hpp"
#include "cgr/models/two_branch.hpp"
#include "cgr/safetensors.hpp"
#include "cli.hpp"
#include "cupti_timeline.hpp"
#include "device_info.hpp"
#include "measure.hpp"
#include "report.hpp"
#include "svg.hpp"
#include "trace.hpp"

namespace cgr::bench {
namespace {

constexpr std::uint64_t kWeightSeed = 1;
constexpr std::uint64_t kInputSeed = 2;

// A built-in model's default input and what --input-shape may change in it.
struct Builtin {
  const char* name;
  const char* input;
  std::int64_t channels, size;
  bool channels_free;  // the builder accepts any input channel count
  bool has_fc;         // the classifier is "fc" (classes follow the weights file)
};

constexpr Builtin kBuiltins[] = {
    {"two-branch", "x", 3, 64, true, false},     {"inception", "x", 192, 28, true, false},
    {"resnet18", "image", 3, 224, false, true},  {"resnet18-exits", "image", 3, 224, false, true},
    {"googlenet", "image", 3, 224, false, true},
};

const Builtin* find_builtin(const std::string& name) {
  for (const auto& b : kBuiltins) {
    if (name == b.name) return &b;
  }
  return nullptr;
}

struct LoadedModel {
  Network net;
  Weights weights;
  ModelFacts facts;
};

Network build_builtin(const Builtin& b, std::int64_t batch, std::int64_t channels,
                      std::int64_t size, std::int64_t classes) {
  const std::string name = b.name;
  if (name == "two-branch")
    return models::two_branch({.batch = batch, .channels = channels, .size = size});
  if (name == "inception") {
    if (batch != 1) throw UsageError("inception: the module builder has batch 1 only");
    return models::inception_module(channels, size);
  }
  if (name == "resnet18") return models::resnet18(batch, size, classes);
  if (name == "resnet18-exits") return models::resnet18_exits(batch, size, classes);
  return models::googlenet(batch, size, classes);
}

#if defined(CGR_HAVE_ONNX)
// The importer's message speaks of its C++ options when an input's shape is symbolic or
// missing; say how to give the shape on this command line as well.
[[noreturn]] void throw_with_shape_hint(const Error& e) {
  if (std::string_view(e.what()).find("input_shapes") != std::string_view::npos) {
    fail(
        "{} (cgr-bench: --input-shape NAME=NxCxHxW; --batch N for a symbolic batch; or a "
        "--load-input NAME=FILE.npy of that shape)",
        e.what());
  }
  throw e;
}

// A graph input that is not an initializer, as the file declares it: read with protobuf alone,
// because the importer needs a symbolic input's shape before it can run.
struct OnnxInput {
  std::string name = {};
  bool has_shape = false;
  std::vector<std::int64_t> dims = {};   // -1: symbolic (or unknown)
  std::vector<std::string> labels = {};  // per dim: its value or its symbol ("N"; "?" unnamed)

  bool symbolic(std::size_t d) const { return d < dims.size() && dims[d] < 0; }
  std::string declared() const {
    return has_shape ? fmt::format("{}", fmt::join(labels, "x")) : "(no shape)";
  }
};

// The inputs in the file's order (--input-shape without NAME= means the first).
std::vector<OnnxInput> onnx_inputs(const std::string& path) {
  // The importer's reader: regular files only (a FIFO would block), at most protobuf's 2 GiB.
  const std::vector<std::byte> bytes =
      read_file(path, static_cast<std::uint64_t>(std::numeric_limits<int>::max()), "an ONNX model");
  ::onnx::ModelProto model;
  // An unparsable file yields no inputs; import_onnx then reports the problem in its words.
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return {};
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer())
    initializers.insert(init.name());
  std::vector<OnnxInput> inputs;
  for (const auto& input : model.graph().input()) {
    if (initializers.contains(input.name())) continue;
    OnnxInput in{.name = input.name()};
    if (input.type().has_tensor_type() && input.type().tensor_type().has_shape()) {
      in.has_shape = true;
      for (const auto& dim : input.type().tensor_type().shape().dim()) {
        const bool known = dim.has_dim_value() && dim.dim_value() > 0;
        in.dims.push_back(known ? dim.dim_value() : -1);
        in.labels.push_back(known                 ? std::to_string(dim.dim_value())
                            : dim.has_dim_param() ? dim.dim_param()
                                                  : "?");
      }
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

std::string input_names(const std::vector<OnnxInput>& inputs) {
  std::vector<std::string> names;
  for (const auto& in : inputs)
    names.push_back(in.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// The concrete shape of every ONNX input the command line determines, for
// OnnxImportOptions::input_shapes: --input-shape / --shapes first; else the file's dims with
// --batch in a symbolic batch dimension and a --load-input file's shape in the other symbolic
// ones; then the sweep's size as H = W of the first input. An input left with a symbolic
// dimension is the importer's to report.
std::map<std::string, Shape, std::less<>> onnx_input_shapes(const Options& o,
                                                            std::optional<std::int64_t> size) {
  const std::vector<OnnxInput> inputs = onnx_inputs(o.model);
  std::map<std::string, Shape, std::less<>> shapes;
  if (inputs.empty()) return shapes;
  const OnnxInput* first = &inputs.front();
  auto find = [&](const std::string& name) -> const OnnxInput* {
    for (const auto& in : inputs) {
      if (in.name == name) return &in;
    }
    return nullptr;
  };
  for (const InputShape& given : o.input_shapes) {
    const std::string name = given.name.empty() ? first->name : given.name;
    if (find(name) == nullptr) {
      throw UsageError(fmt::format("{}: {} has no input '{}' (inputs: {})", o.input_shapes_option,
                                   o.model, name, input_names(inputs)));
    }
    Shape shape = given.shape;
    if (o.batch > 0) shape[0] = o.batch;  // --batch overrides the given first dimension
    shapes[name] = shape;
  }
  std::vector<std::int64_t> first_dims = first->dims;
  for (const OnnxInput& in : inputs) {
    if (shapes.contains(in.name) || !in.has_shape) continue;
    std::vector<std::int64_t> dims = in.dims;
    if (o.batch > 0 && !dims.empty()) {
      if (in.symbolic(0)) {
        dims[0] = o.batch;
      } else if (dims[0] != o.batch) {
        // trtexec refuses --batch on networks with an explicit batch; so does cgr-bench on a
        // batch the file fixes (the network's constants may depend on it).
        throw UsageError(fmt::format(
            "--batch: input '{}' of {} has a fixed batch of {} ({}); --batch fills only a "
            "symbolic batch dimension (to override the file, give the whole shape: "
            "--input-shape {}=...)",
            in.name, o.model, dims[0], in.declared(), in.name));
      }
    }
    // A .npy for an input with symbolic dimensions: its shape gives them.
    for (const InputFile& file : o.load_inputs) {
      // Without NAME= the file is for the only input (make_inputs refuses it otherwise).
      if (file.name.empty() && inputs.size() != 1) continue;
      const std::string name = file.name.empty() ? first->name : file.name;
      if (name != in.name || std::find(dims.begin(), dims.end(), -1) == dims.end()) continue;
      const Shape data = load_npy(file.path).shape();
      // The input's shape, or it without a leading batch dimension of 1 (as make_inputs takes).
      std::vector<std::int64_t> fit = data.dims();
      if (fit.size() + 1 == dims.size() && (dims[0] == 1 || in.symbolic(0)))
        fit.insert(fit.begin(), 1);
      bool fits = fit.size() == dims.size();
      for (std::size_t d = 0; fits && d < dims.size(); ++d)
        fits = dims[d] < 0 || dims[d] == fit[d];
      if (!fits) {
        std::vector<std::string> labels = in.labels;
        for (std::size_t d = 0; d < dims.size(); ++d) {
          if (dims[d] > 0) labels[d] = std::to_string(dims[d]);
        }
        fail(
            "{}: shape {} does not fit input '{}' {} (the file's dimensions must equal the "
            "fixed ones)",
            file.path, data.to_string(), in.name, fmt::join(labels, "x"));
      }
      dims = fit;
    }
    if (dims != in.dims && std::find(dims.begin(), dims.end(), -1) == dims.end())
      shapes[in.name] = Shape(dims);
    if (&in == first) first_dims = dims;  // the sweep fills in H and W
  }
  if (size) {
    // The sweep changes the first input's H = W, which the file must leave symbolic: a network
    // exported for one size may hold constants of that size.
    const std::size_t rank = first->dims.size();
    if (!first->has_shape || rank < 3 || !first->symbolic(rank - 1) || !first->symbolic(rank - 2)) {
      throw UsageError(fmt::format(
          "--sweep-size: input '{}' of {} is {}; the sweep sets its last two dimensions (H = W), "
          "which must be symbolic in the file (export with dynamic H and W)",
          first->name, o.model, first->declared()));
    }
    std::vector<std::int64_t> dims =
        shapes.contains(first->name) ? shapes.at(first->name).dims() : first_dims;
    // A given shape of another rank is the importer's to refuse; index within its own.
    if (dims.size() >= 2) dims[dims.size() - 2] = dims[dims.size() - 1] = *size;
    if (std::find(dims.begin(), dims.end(), -1) == dims.end()) {
      shapes[first->name] = Shape(dims);
    } else {
      fail("{}: input '{}' is {}; give its other symbolic dimensions: {} {}=...", o.model,
           first->name, first->declared(), o.input_shapes_option, first->name);
    }
  }
  return shapes;
}
#endif

// Loads the model; `size` overrides the spatial size of a built-in model (the sweep).
LoadedModel load_model(const Options& o, std::optional<std::int64_t> size) {
  LoadedModel m;
  m.facts.name = o.model;
  std::optional<Weights> file_weights;
  if (!o.weights.empty()) file_weights = Weights::load_safetensors(o.weights);
  m.facts.weights = o.weights.empty() ? fmt::format("seeded (seed {})", kWeightSeed) : o.weights;

  if (const Builtin* b = find_builtin(o.model)) {
    m.facts.source = "built-in";
    std::int64_t batch = 1, channels = b->channels, side = b->size;
    const std::string& option = o.input_shapes_option;
    for (const InputShape& given : o.input_shapes) {
      if (!given.name.empty() && given.name != b->input) {
        throw UsageError(fmt::format("{}: {} has no input '{}' (its input is '{}')", option,
                                     b->name, given.name, b->input));
      }
    }
    if (!o.input_shapes.empty()) {
      // Names checked above, and --shapes refuses a name given twice: one entry.
      const Shape& s = o.input_shapes.front().shape;
      if (s.rank() != 4)
        throw UsageError(
            fmt::format("{}: {} needs NxCxHxW, not {}", option, b->name, s.to_string()));
      if (s[2] != s[3])
        throw UsageError(fmt::format("{}: {} is built for square inputs (H == W), not {}", option,
                                     b->name, s.to_string()));
      if (s[1] != channels && !b->channels_free) {
        throw UsageError(
            fmt::format("{}: {} takes {} input channels, not {}", option, b->name, channels, s[1]));
      }
      batch = s[0];
      channels = s[1];
      side = s[2];
    }
    if (o.batch > 0) batch = o.batch;
    if (size) side = *size;
    std::int64_t classes = 1000;
    if (b->has_fc && file_weights) {
      if (const Tensor* fc = file_weights->find("fc.weight");
          fc != nullptr && fc->shape().rank() == 2) {
        classes = fc->shape()[0];
      }
    }
    m.net = build_builtin(*b, batch, channels, side, classes);
    m.weights =
        file_weights ? std::move(*file_weights) : models::random_weights(m.net, kWeightSeed);
  } else {
    m.facts.source = "onnx";
#if defined(CGR_HAVE_ONNX)
    OnnxImportOptions import_options;
    for (const ExitOutput& exit : o.exit_outputs)
      import_options.exits.push_back(
          {.output = exit.output, .speculate_until = exit.speculate_until});
    import_options.input_shapes = onnx_input_shapes(o, size);
    if (o.max_folded_elements > 0) import_options.max_folded_elements = o.max_folded_elements;
    OnnxModel imported = [&] {
      try {
        return import_onnx(o.model, import_options);
      } catch (const Error& e) {
        throw_with_shape_hint(e);
      }
    }();
    m.net = std::move(imported.network);
    m.weights = std::move(imported.weights);
    if (file_weights) {
      for (const auto& [name, tensor] : file_weights->tensors())
        m.weights.set(name, tensor);
    } else {
      m.facts.weights = "from the ONNX file";
    }
#else
    fail("{}: this cgr-bench was built without the ONNX importer (CGR_ENABLE_ONNX=OFF)", o.model);
#endif
  }
  for (Value v : m.net.inputs())
    m.facts.inputs.push_back(m.net.desc(v));
  for (const auto& [name, v] : m.net.outputs())
    m.facts.outputs.push_back({name, m.net.desc(v).shape});
  for (const auto& exit : m.net.exits())
    m.facts.exits.push_back(exit.name);
  if (m.facts.exits.empty() && o.exits_given) {
    throw UsageError(fmt::format(
        "--exits / --threshold: {} has no exit heads (an ONNX model's outputs become heads with "
        "--exit-output)",
        o.model));
  }
  m.facts.batch = m.facts.inputs.empty() || m.facts.inputs[0].shape.rank() == 0
                      ? 1
                      : m.facts.inputs[0].shape[0];
  return m;
}

// Seeded values for every input, or the --load-input files.
InputTensors make_inputs(const Options& o, LoadedModel& m) {
  InputTensors inputs;
  m.facts.input_sources.assign(m.facts.inputs.size(), "seeded");
  for (std::size_t i = 0; i < m.facts.inputs.size(); ++i) {
    const TensorDesc& d = m.facts.inputs[i];
    inputs.emplace_back(
        d.name, Tensor(d.shape, models::random_values(static_cast<std::size_t>(d.shape.numel()),
                                                      kInputSeed + i)));
  }
  for (const InputFile& file : o.load_inputs) {
    std::size_t index = 0;
    if (!file.name.empty()) {
      while (index < inputs.size() && inputs[index].first != file.name)
        ++index;
      if (index == inputs.size()) {
        std::vector<std::string> names;
        for (const auto& d : m.facts.inputs)
          names.push_back(d.name);
        throw UsageError(fmt::format("--load-input: no input named '{}' (inputs: {})", file.name,
                                     fmt::join(names, ", ")));
      }
    } else if (inputs.size() != 1) {
      throw UsageError(
          "--load-input: the model has several inputs; name one: --load-input NAME=FILE.npy");
    }
    Tensor tensor = load_npy(file.path);
    const TensorDesc& d = m.facts.inputs[index];
    if (tensor.dtype() != DType::f32)
      fail("{}: {} data; input '{}' takes float32", file.path, to_string(tensor.dtype()), d.name);
    // The shape must be the input's, or the input's without its leading batch dimension of 1:
    // data of the right size in another layout (NHWC for NCHW, flat) is refused.
    const auto& dims = d.shape.dims();
    const bool without_batch =
        dims.size() > 1 && dims[0] == 1 &&
        tensor.shape() == Shape(std::vector<std::int64_t>(dims.begin() + 1, dims.end()));
    if (tensor.shape() != d.shape && !without_batch) {
      fail("{}: shape {} does not fit input '{}' {} (give that shape{})", file.path,
           tensor.shape().to_string(), d.name, d.shape.to_string(),
           dims.size() > 1 && dims[0] == 1 ? ", or it without the leading 1" : "");
    }
    inputs[index].second = Tensor(d.shape, tensor.to_vector());
    m.facts.input_sources[index] = file.path;
  }
  return inputs;
}

std::vector<Mode> modes_of(const Options& o, Device device) {
  switch (o.mode) {
    case ModeChoice::dag:
      return {Mode::dag};
    case ModeChoice::eager:
      return {Mode::eager};
    case ModeChoice::stream_graph:
      if (device != Device::cuda) throw UsageError("--mode stream-graph needs --device cuda");
      return {Mode::stream_graph};
    case ModeChoice::all:
      break;
  }
  if (device == Device::cuda) return {Mode::dag, Mode::stream_graph, Mode::eager};
  return {Mode::dag, Mode::eager};
}

std::vector<ModeRun> build_runs(const LoadedModel& m, const InputTensors& inputs,
                                const std::vector<Mode>& modes, const Options& o, Device device) {
  std::vector<ModeRun> runs;
  for (Mode mode : modes) {
    runs.push_back(make_mode_run(m.net, m.weights,
                                 {.device = device,
                                  .mode = mode,
                                  .threads = o.threads,
                                  .exits = o.exits,
                                  .threshold = o.threshold,
                                  .precision = o.precision,
                                  .time_conv_algorithms = o.time_conv_algorithms},
                                 inputs));
  }
  return runs;
}

// The .npy file of every output of `engine` under `dir` (cgr::output_file_paths: names made
// safe, collisions refused), by output name.
std::map<std::string, std::filesystem::path> output_files(const Engine& engine,
                                                          const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& desc : engine.outputs())
    names.push_back(desc.name);
  const auto paths = output_file_paths(dir, names, ".npy");
  std::map<std::string, std::filesystem::path> files;
  for (std::size_t i = 0; i < names.size(); ++i)
    files.emplace(names[i], paths[i]);
  return files;
}

// Warns when one inference gives NaN or infinite outputs (Result::non_finite_outputs).
void warn_non_finite(ModeRun& run, const InputTensors& inputs) {
  NamedInputs named;
  for (const auto& [name, tensor] : inputs)
    named.emplace_back(name, TensorView(tensor));
  const Result result = run.context.infer(named);
  run.non_finite_outputs = result.non_finite_outputs;
  if (!result.non_finite_outputs.empty()) {
    fmt::print(stderr, "cgr-bench: warning: outputs {} hold NaN or infinite values\n",
               fmt::join(result.non_finite_outputs, ", "));
  }
}

void export_outputs(ModeRun& run, const InputTensors& inputs, const std::string& dir) {
  NamedInputs named;
  for (const auto& [name, tensor] : inputs)
    named.emplace_back(name, TensorView(tensor));
  const Result result = run.context.infer(named);
  const auto files = output_files(run.engine, dir);
  for (const auto& [name, tensor] : result.outputs)
    save_npy(files.at(name), tensor);
  fmt::print("outputs        {} of mode {} written to {} (answered by {})\n", result.outputs.size(),
             to_string(run.mode), dir, result.answered_by);
}

void export_dot(const std::vector<ModeRun>& runs, const Network& net, const std::string& path,
                const std::string& title, bool before_fusion) {
  write_text_file(path, before_fusion ? net.graph().to_dot(title + " (layers, before fusion)")
                                      : runs.front().engine.to_dot(title));
  fmt::print("dot            dependency graph written to {}\n", path);
  if (runs.front().engine.options().device != Device::cuda) return;
  for (const auto& run : runs) {
    if (run.mode == Mode::eager) continue;  // eager has no CUDA graph
    run.engine.dump_cuda_graph_dot(path + ".cuda.dot");
    fmt::print("dot            CUDA graph of mode {} written to {}.cuda.dot\n", to_string(run.mode),
               path);
    return;
  }
  fmt::print("dot            no CUDA graph to dump (mode eager only)\n");
}

void write_json(const std::string& path, const nlohmann::json& j,
                const char* label = "json           report") {
  // Text that is not UTF-8 (an argument, a file name) is written with U+FFFD in its place
  // rather than failing the report after the run.
  write_text_file(path, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + '\n');
  fmt::print("{} written to {}\n", label, path);
}

// The per-op profile of `run` (--dump-profile, --export-profile, --export-trace); returns its
// JSON for the report.
nlohmann::json profile_ops(const ModeRun& run, const InputTensors& inputs, const Options& o,
                           const DeviceInfo& device_info) {
  const bool on_gpu = run.engine.options().device == Device::cuda;
  const std::vector<std::vector<OpSpan>> spans =
      on_gpu ? profile_inferences_cuda(run.engine, inputs, o.profile_runs)
             : profile_inferences(run.engine, inputs, o.profile_runs);
  const std::string clock = on_gpu ? "CUPTI device timestamps" : "the CPU executor's clock";
  const std::vector<OpProfile> ops = summarize_profile(spans);
  if (o.dump_profile) print_profile(ops, o.profile_runs, run.mode, clock, 30);
  nlohmann::json json = profile_json(ops, o.profile_runs, run.mode, clock);
  if (!o.export_profile.empty()) {
    write_json(o.export_profile, json,
               fmt::format("profile        {} ops over {} runs", ops.size(), o.profile_runs).c_str());
  }
  if (!o.export_trace.empty()) {
    write_chrome_trace(
        o.export_trace, spans, run.engine.op_infos(),
        fmt::format("cgr-bench {} ({}, mode {})", o.model, device_info.name, to_string(run.mode)));
    fmt::print(
        "trace          {} runs as Chrome trace events written to {} (open in "
        "ui.perfetto.dev or chrome://tracing)\n",
        o.profile_runs, o.export_trace);
  }
  return json;
}

void check_output_file(const std::string& option, const std::string& path) {
  if (!path.empty()) prepare_output_file(option, path);
}

// Every file and folder the run will write, checked before anything is built or timed.
void check_outputs(const Options& o) {
  check_output_file("--export-json", o.export_json);
  check_output_file("--export-dot", o.export_dot);
  check_output_file("--timeline", o.timeline);
  check_output_file("--export-plot", o.export_plot);
  check_output_file("--export-weights", o.export_weights);
  check_output_file("--exportTimes", o.export_times);
  check_output_file("--export-profile", o.export_profile);
  check_output_file("--export-trace", o.export_trace);
  if (!o.export_output.empty()) prepare_output_folder(o.export_output);
}

int run_sweep(const Options& o, Device device, const DeviceInfo& device_info,
              const std::vector<Mode>& modes) {
  std::vector<SweepPoint> points;
  ModelFacts facts;
  for (std::size_t i = 0; i < o.sweep_sizes.size(); ++i) {
    const std::int64_t size = o.sweep_sizes[i];
    LoadedModel m = load_model(o, size);
    const InputTensors inputs = make_inputs(o, m);
    if (i == 0) print_model_and_device(m.facts, device_info, o);
    facts = m.facts;
    std::vector<ModeRun> runs = build_runs(m, inputs, modes, o, device);
    measure_interleaved(runs, {o.warmup_ms, o.duration_s, o.iterations});
    SweepPoint point;
    point.size = size;
    for (const auto& run : runs)
      point.stats.push_back(summarize(run.latency_ms, o.percentiles));
    const EngineInfo info = runs.front().engine.info();
    fmt::print("size {:>4}      {} iterations per mode; {} ops, width {}, arena {}\n", size,
               point.stats.front().count, info.ops, info.max_width, format_bytes(info.arena_bytes));
    std::fflush(stdout);
    points.push_back(std::move(point));
  }
  print_sweep_table(modes, points);
  if (!o.export_plot.empty()) {
    SweepPlot plot;
    plot.title = fmt::format("{} on {}: median latency per mode against input size", o.model,
                             device_info.name);
    plot.sizes = o.sweep_sizes;
    for (std::size_t k = 0; k < modes.size(); ++k) {
      PlotSeries series;
      series.name = to_string(modes[k]);
      for (const auto& p : points) {
        series.values.push_back(p.stats[k].median);
        series.low.push_back(p.stats[k].min);
        series.high.push_back(p.stats[k].max);
      }
      plot.latency_ms.push_back(std::move(series));
    }
    plot.ratio.name = "eager / dag";
    plot.ratio.values = sweep_ratio(modes, points);
    write_sweep_plot(o.export_plot, plot);
    fmt::print("plot           written to {}\n", o.export_plot);
  }
  if (!o.export_json.empty())
    write_json(o.export_json, report_json(facts, device_info, o, {}, std::nullopt, modes, points));
  return 0;
}

int run(const Options& o) {
  if (!find_builtin(o.model) && !o.model.ends_with(".onnx")) {
    throw UsageError(
        fmt::format("unknown model '{}': expected two-branch, inception, resnet18, resnet18-exits, "
                    "googlenet or a path ending in .onnx",
                    o.model));
  }
  Device device = Device::cpu;
  if (o.device) {
    device = *o.device;
    if (device == Device::cuda) {
      if (const std::string reason = cuda_unavailable_reason(); !reason.empty()) fail("{}", reason);
    }
  } else if (const std::string reason = cuda_unavailable_reason(); reason.empty()) {
    device = Device::cuda;
  } else {
    // The driver's full words only on request: without a GPU they are a long, alarming line.
    fmt::print("no usable CUDA device; running on the CPU executor{}\n",
               o.verbose ? fmt::format(" ({})", reason) : " (--verbose says why)");
  }
  const std::vector<Mode> modes = modes_of(o, device);
  check_outputs(o);
  const DeviceInfo device_info = describe_device(device, o.threads);
  if (!o.sweep_sizes.empty()) return run_sweep(o, device, device_info, modes);

  LoadedModel m = load_model(o, std::nullopt);
  const InputTensors inputs = make_inputs(o, m);
  print_model_and_device(m.facts, device_info, o);
  if (!o.export_weights.empty()) {
    save_safetensors(o.export_weights, m.weights);
    fmt::print("weights        {} tensors written to {}\n", m.weights.tensors().size(),
               o.export_weights);
  }
  std::vector<ModeRun> runs =
      build_runs(m, inputs, o.info ? std::vector<Mode>{modes.front()} : modes, o, device);
  // Output names become file names: refused now (a collision) rather than after the run.
  if (!o.export_output.empty()) (void)output_files(runs.front().engine, o.export_output);
  print_graph_facts(runs);
  if (!o.export_dot.empty()) export_dot(runs, m.net, o.export_dot, o.model, o.dot_before_fusion);
  if (o.info) {
    if (!o.export_json.empty())
      write_json(o.export_json, report_json(m.facts, device_info, o, runs, std::nullopt, {}, {}));
    return 0;
  }

  measure_interleaved(runs, {o.warmup_ms, o.duration_s, o.iterations});
  compare_outputs(runs, inputs);
  print_performance(runs, o, m.facts.batch);
  warn_non_finite(runs.front(), inputs);

  std::optional<TimelineRecord> timeline;
  if (!o.timeline.empty()) {
    // CPU: the executor's per-op clock reads; CUDA: CUPTI's device timestamps per node.
    const bool on_gpu = device == Device::cuda;
    const std::vector<OpSpan> spans = on_gpu
                                          ? profile_one_inference_cuda(runs.front().engine, inputs)
                                          : profile_one_inference(runs.front().engine, inputs);
    const std::string title =
        on_gpu ? fmt::format("{} - one inference, mode {}, {} (CUPTI device timestamps)", o.model,
                             to_string(runs.front().mode), device_info.name)
               : fmt::format("{} - one inference, mode {}, {} threads, {}", o.model,
                             to_string(runs.front().mode), device_info.threads, device_info.name);
    timeline = TimelineRecord{o.timeline, runs.front().mode,
                              write_timeline_svg(o.timeline, spans, title), on_gpu};
    fmt::print("timeline       {} {} in {} rows over {:.3f} ms (mode {}) written to {}\n",
               timeline->facts.bars, on_gpu ? "device activities" : "ops", timeline->facts.rows,
               timeline->facts.span_ms, to_string(runs.front().mode), o.timeline);
  }
  std::optional<nlohmann::json> concurrency;
  if (o.contexts > 0) {
    const ConcurrentRun concurrent = measure_concurrent(
        runs.front().engine, inputs, o.contexts, {o.warmup_ms, o.duration_s, o.iterations});
    const Stats single = summarize(runs.front().latency_ms, o.percentiles);
    print_concurrency(concurrent, runs.front().mode, single, o.percentiles, m.facts.batch);
    concurrency = concurrency_json(concurrent, runs.front().mode, single, o.percentiles,
                                   m.facts.batch);
  }
  std::optional<nlohmann::json> profile;
  if (o.dump_profile || !o.export_profile.empty() || !o.export_trace.empty()) {
    profile = profile_ops(runs.front(), inputs, o, device_info);
  }
  if (!o.export_output.empty()) export_outputs(runs.front(), inputs, o.export_output);
  if (!o.export_json.empty()) {
    nlohmann::json report = report_json(m.facts, device_info, o, runs, timeline, {}, {});
    if (profile) report["profile"] = *profile;
    if (concurrency) report["contexts"] = *concurrency;
    write_json(o.export_json, report);
  }
  if (!o.export_times.empty()) {
    write_json(o.export_times, times_json(runs.front()),
               fmt::format("times          {} iterations of mode {}",
                           runs.front().latency_ms.size(), to_string(runs.front().mode))
                   .c_str());
  }
  return 0;
}

[[noreturn]] void usage_exit(const std::string& problem) {
  std::fprintf(stderr, "cgr-bench: %s\n%s", problem.c_str(), usage_text());
  std::exit(2);
}

}  // namespace
}  // namespace cgr::bench

int main(int argc, char** argv) {
  using namespace cgr::bench;
  // The one handler: every failure becomes a message and a status, never an abort.
  try {
    const std::optional<Options> options = parse_options(argc, argv);
    if (!options) return 0;  // --help
    return run(*options);
  } catch (const UsageError& e) {
    usage_exit(e.what());
  } catch (const cgr::Error& e) {
    std::fprintf(stderr, "cgr-bench: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "cgr-bench: out of memory (an allocation failed); use a smaller model or input\n");
    return 1;
  } catch (const std::exception& e) {
    // std::filesystem errors and the like: not argument errors, so status 1 too.
    std::fprintf(stderr, "cgr-bench: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "cgr-bench: failed with an unknown exception\n");
    return 1;
  }
}
