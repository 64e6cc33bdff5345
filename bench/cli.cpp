// Parsing of cgr-bench's options: CLI11 reads the command line (typed values parsed strictly, so
// that "--iterations 1O" is an error, not 1; a repeated single-value option is an error, not
// the last one silently winning); the values' meaning is checked here, with this tool's
// messages. Every problem is a UsageError (exit status 2).
#include "cli.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string_view>

#include <fmt/format.h>

#include <cgr/thread_pool.hpp>

#include "cgr_source_commit.hpp"

namespace cgr::bench {
namespace {

// The ranges the numeric options accept (a value outside is a usage error naming its range).
constexpr std::int64_t kMaxBatch = 1 << 16;
constexpr std::int64_t kMaxSize = 1 << 16;  // an input dimension, a sweep size
constexpr int kMaxIterations = 100'000'000;
constexpr double kMaxWarmupMs = 3'600'000;  // an hour
constexpr double kMaxDurationS = 86'400;    // a day
constexpr int kMaxProfileRuns = 1000;
constexpr int kMaxContexts = 64;

constexpr const char* kUsage =
    "usage: cgr-bench --model two-branch|inception|resnet18|resnet18-exits|googlenet|PATH.onnx\n"
    "         [--weights FILE.safetensors] [--device cuda|cpu]\n"
    "         [--mode dag|stream-graph|eager|all] [--batch N] [--input-shape [NAME=]1x3x224x224]\n"
    "         [--exits off|all|early] [--exit-output OUTPUT[=SPECULATE_UNTIL]] [--threshold T]\n"
    "         [--max-folded-elements N]\n"
    "         [--precision fp32|tf32|fp16|bf16] [--conv-algorithms heuristic|timed]\n"
    "         [--threads N] [--warmup-ms 200]\n"
    "         [--duration-s 3] [--iterations N] [--percentiles 90,95,99]\n"
    "         [--load-input [NAME=]FILE.npy] [--export-output DIR] [--export-weights FILE]\n"
    "         [--export-json FILE]\n"
    "         [--export-dot FILE [--dot-before-fusion]] [--timeline FILE.svg] [--info]\n"
    "         [--dump-profile] [--export-profile FILE] [--export-trace FILE.json]\n"
    "         [--profile-runs 10] [--contexts N]\n"
    "         [--sweep-size 32,64,112,224] [--export-plot FILE.svg] [--verbose] [--version]\n"
    "         [--help]\n"
    "       trtexec's spellings: [--shapes=NAME:1x3x224x224[,NAME2:...]]\n"
    "         [--loadInputs=NAME:FILE.npy[,...]] [--exportTimes=FILE] [--warmUp=MS] "
    "[--duration=S]\n";

constexpr const char* kHelp = R"(
cgr-bench replays one network on a cgr engine and reports how long inferences take, in the
manner of TensorRT's trtexec, with every execution mode of the device side by side.

Model
  --model NAME|PATH.onnx   built-in: two-branch (input x 1x3x64x64), inception (GoogLeNet's
                           inception3a, x 1x192x28x28), resnet18, resnet18-exits, googlenet
                           (image 1x3x224x224); or an ONNX file (cgr's importer, opset 7-21)
  --weights FILE           safetensors with PyTorch state_dict names; default: seeded random
                           weights (models::random_weights, seed 1); with ONNX, replaces the
                           file's initializers of the same names
  --input-shape [NAME=]S   input shape, e.g. 1x3x112x112: built-in models are rebuilt for it
                           (batch, channels where the model allows, H == W); ONNX: the shape of
                           input NAME (default: the first input), for symbolic dimensions
  --batch N                batch size, 1 to 65536 (overrides --input-shape's first dimension);
                           ONNX: fills every input's symbolic batch dimension (an error on a
                           batch the file fixes; give --input-shape to change that one)
  --load-input [NAME=]FILE a .npy for an input (default: seeded uniform values in [-1, 1));
                           ONNX: it also sets the input's symbolic dimensions that
                           --input-shape / --shapes do not give
  --exits off|all|early    exit heads (resnet18-exits): pruned, all computed, or the first
                           confident one stops the rest; --threshold T in [0, 1] (default 0.9)
  --exit-output O[=S]      ONNX: graph output O is an exit head (N x classes logits) whose
                           decision the backbone speculates past up to tensor S (default:
                           nothing); repeatable, in the order the exits decide
  --max-folded-elements N  ONNX: the most elements constant folding may build in the import
                           (default 2^27 = 134217728); raise it for a model refused for this

Execution
  --device cuda|cpu        default: cuda when a device is usable, else cpu
  --mode M                 dag (ops run when their inputs are ready), stream-graph (CUDA: one
                           stream captured into a graph), eager (one op at a time, each split
                           across the threads / one stream), all (default: every mode of the
                           device - cpu: dag, eager; cuda: dag, stream-graph, eager)
  --precision P            fp32 (default), tf32 (cuda: TF32 tensor cores in cuDNN and
                           cuBLAS), fp16 or bf16 (cpu only for now: the storage rounding
                           emulated - weights, inputs and every op's output rounded, fp32
                           arithmetic - to measure a precision's effect on the outputs)
  --conv-algorithms A      cuda: heuristic (default: cuDNN's heuristic among implicit-GEMM
                           algorithms, no runs at build) or timed (cuDNN times the candidates,
                           Winograd among them, at build and the fastest is kept, like
                           torch.backends.cudnn.benchmark); cpu: no effect
  --threads N              CPU threads computing, the caller included (default 0: all; at
                           most 4 per hardware thread)
  --warmup-ms MS           untimed runs first, for at least MS milliseconds (default 200, at
                           most an hour)
  --duration-s S           then timed runs until S seconds have passed and at least 10 ran
                           (default 3, at most a day) ...
  --iterations N           ... or, when given, exactly N timed runs per mode (wins over S)
  --percentiles P,...      latency percentiles to report (default 90,95,99)

Outputs
  --info                   print the graph facts and exit
  --version                print cgr-bench's version and source commit and exit
  --verbose                say why a GPU is not used (the driver's words)
  --export-json FILE       the report's numbers plus every iteration's times
  --export-output DIR      one inference's outputs as DIR/NAME.npy (first mode); in NAME
                           every character outside [A-Za-z0-9._-] becomes '_', so an
                           output name cannot point outside DIR
  --export-weights FILE    the weights the engine was built with (seeded or loaded) as
                           safetensors, PyTorch state_dict names: what a peer such as
                           bench/torch_gpu_peer.py loads to run the same network
  --export-dot FILE        the engine's ops as DOT (the graph after fusion, as every tool
                           draws it): each op's first layer, fused count, kind and output
                           shape, the full name as tooltip, the shape each edge carries,
                           branches as lanes; on cuda also the instantiated CUDA graph as
                           FILE.cuda.dot. --dot-before-fusion: the network's layers instead
  --timeline FILE.svg      one inference of the first mode, one bar per executed op from its
                           start to its end: cpu, a row per thread; cuda, a bar per kernel,
                           copy and memset from CUPTI's device timestamps, named after the op
                           whose graph node ran it, a row per concurrent slot. Colours by
                           layer kind, the estimated critical path outlined, a legend
  --dump-profile           per-op times of the first mode over --profile-runs inferences
                           (cpu: the executor's clock; cuda: CUPTI), ops by mean time, with
                           their share and the critical path marked (trtexec --dumpProfile)
  --export-profile FILE    that profile as JSON (trtexec --exportProfile); also in
                           --export-json as "profile"
  --export-trace FILE      the profiled inferences as Chrome trace-event JSON, for Perfetto
                           (ui.perfetto.dev) or chrome://tracing: a track per thread or slot,
                           each op's kind, shapes and work as arguments
  --profile-runs N         inferences the profile and trace record (default 10, at most 1000)
  --contexts N             after the modes: N contexts of the first mode's engine, each run
                           back to back by its own thread, all at once, for --duration-s
                           (or --iterations each): throughput under concurrency and its
                           latency, against one context's (trtexec --streams; also spelled
                           --streams; 1 to 64)
  --sweep-size S,...       for each spatial size, rebuild the built-in model and time every
                           mode (interleaved); prints latency per mode and the eager/dag ratio;
                           ONNX: the first input's H = W (its last two dimensions, which must
                           be symbolic in the file), re-imported per size
  --export-plot FILE.svg   with --sweep-size: latency per mode and eager/dag against size

trtexec's spellings (the same options; one spelling of each at a time)
  --shapes=NAME:S[,NAME2:S2...]     --input-shape for one or more inputs, e.g.
                                    --shapes=x:2x3x32x32 (a name ends at its last ':')
  --loadInputs=NAME:FILE[,...]      --load-input for one or more inputs
  --warmUp=MS                       --warmup-ms
  --duration=S                      --duration-s
  --exportTimes=FILE                the first mode's timed iterations as a JSON array, one
                                    object each: "mode", "startComputeMs" (since the first
                                    timed run began), "endComputeMs", "latencyMs" (the latency
                                    of the report, the samples of --export-json)

Metrics
  Modes are timed interleaved in rounds: one timed run of each mode per round, the first
  mode rotating, so drift (clock, other load) affects them alike. With several modes each
  timed run follows one untimed run of the same mode, so that it runs back-to-back as it
  would alone (switching engines finds the other engine's pool threads still spinning and
  its own asleep). Warm-up runs are not counted.
  latency          wall-clock time of one ExecutionContext::run() with the inputs already in
                   the context: cpu, the whole execution; cuda, input copy, graph launch (or
                   each op's launch in eager), output copy and the final synchronisation
  iterations       timed runs of a mode (warm-up runs not counted)
  min              the smallest latency over the timed iterations of a mode
  mean             their average
  max              the largest
  median           p50: the smallest latency with at least half the iterations at or below
                   it (the same nearest-rank definition as every pN)
  pN               nearest-rank percentile: the smallest latency with at least N% of the
                   iterations at or below it
  stddev           population standard deviation of the latency
  throughput       timed iterations / sum of their latencies (inferences/s, back-to-back on
                   one context); times the batch: samples/s
  host enqueue     host time to issue one inference, from the engine's record of the run:
                   cuda, from before the input copy is enqueued until the output copy is
                   (graph modes: one cudaGraphLaunch; eager: every op's launch, plus the
                   host waits an early-exit decision needs); cpu, equal to latency (the
                   calling thread runs ops itself; kept for a uniform report)
  GPU compute      cuda: device time between CUDA events recorded around the run's work on
                   its stream, input and output copies included; n/a on cpu
  stability        coefficient of variation (stddev / mean of the latency); a warning above
                   2%: the numbers are noisy (other load, frequency scaling, few iterations)
  ratio vs dag     a mode's median latency / dag's median latency (> 1: slower than dag)
  layers           layers of the network that reach an output
  ops              ops after fusion (BatchNorm folded into convs, residual Add and ReLU fused)
  edges            dependency edges after transitive reduction
  critical path    ops on the longest dependency chain (a lower bound on sequential steps)
  width            the most ops that can run at once (maximum antichain)
  lanes            chains the ops decompose into (rows of the DOT export)
  arena            activation bytes of one context (memory reused between ordered values)
                   against the sum of all activations and workspaces without reuse
  weights          bytes of the weights as the kernels hold them
  cuda plan        the CUDA graph Engine::cuda_graph_plan plans for dag and stream-graph, on
                   any machine: nodes (ops, input/output copies, IF nodes), edges, and the
                   nodes on its longest chain (a body's nodes after their IF node)
  build            time of Engine::build (binding, folding, packing, planning)
  instantiate      time of Engine::create_context (arena; cuda: graph build, instantiation
                   and one warm-up run)
  cuda graph       nodes and edges of the CUDA graph the context instantiated (conditional
                   bodies included) against Engine::cuda_graph_plan: "as planned" when every
                   real edge between planned nodes is a planned one and back, and the counts
                   are as predicted (cuda graph modes)
  ops executed     ops the last run executed (early exits skip some)

Exit status: 0 success, 1 the model or an input failed to load or run, 2 bad arguments.
)";

// trtexec's NAME:VALUE[,NAME:VALUE...] (--shapes, --loadInputs). A name ends at its entry's last
// ':', so that names exported from TensorFlow ("input:0") keep theirs: "input:0:1x3x8x8".
std::vector<std::pair<std::string, std::string>> split_name_list(const std::string& text,
                                                                 const std::string& option,
                                                                 const char* value) {
  std::vector<std::pair<std::string, std::string>> entries;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, comma - start);
    const auto colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == entry.size()) {
      throw UsageError(
          fmt::format("{}: '{}' is not NAME:{} (trtexec's form; several: NAME:{},NAME2:{})", option,
                      entry, value, value, value));
    }
    entries.emplace_back(entry.substr(0, colon), entry.substr(colon + 1));
    start = comma + 1;
  }
  return entries;
}

std::pair<std::string, std::string> split_name(const std::string& text) {
  // NAME=VALUE; a value alone has no '=' (a path with '=' needs the NAME= form).
  const auto eq = text.find('=');
  if (eq == std::string::npos) return {"", text};
  return {text.substr(0, eq), text.substr(eq + 1)};
}

// The whole token must be the number ("2x" is not 2); NaN and infinities are left to the
// range checks, which they fail.
template <typename T>
T parse_number(const std::string& text, const std::string& option) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range && ptr == end) {
    throw UsageError(fmt::format("{}: {} is out of range", option, text));
  }
  if (text.empty() || ec != std::errc() || ptr != end) {
    throw UsageError(fmt::format("{}: '{}' is not a number", option, text));
  }
  return value;
}

// A number in [low, high] (NaN, infinities and numbers too large for T are outside every range).
template <typename T>
T number_in(const std::string& option, const std::string& text, T low, T high) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc::result_out_of_range) value = parse_number<T>(text, option);
  if (ec == std::errc::result_out_of_range || !(value >= low && value <= high)) {
    throw UsageError(fmt::format("{}: {} is not in [{}, {}]", option, text, low, high));
  }
  return value;
}

template <typename T>
std::vector<T> parse_list(const std::string& text, const std::string& option) {
  std::vector<T> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    values.push_back(parse_number<T>(text.substr(start, comma - start), option));
    start = comma + 1;
  }
  return values;
}

ModeChoice parse_mode_choice(const std::string& text) {
  if (text == "dag") return ModeChoice::dag;
  if (text == "stream-graph") return ModeChoice::stream_graph;
  if (text == "eager") return ModeChoice::eager;
  if (text == "all") return ModeChoice::all;
  throw UsageError(fmt::format("--mode: '{}' is not dag, stream-graph, eager or all", text));
}

}  // namespace

std::string_view source_commit() {
  return CGR_SOURCE_COMMIT;
}

std::string version_line() {
  return fmt::format("cgr-bench {} (commit {})\n", CGR_VERSION, source_commit());
}

const char* usage_text() {
  return kUsage;
}
const char* help_text() {
  return kHelp;
}

Shape parse_shape(const std::string& text, const std::string& option) {
  std::vector<std::int64_t> dims;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t x = std::min(text.find('x', start), text.size());
    const auto dim = parse_number<std::int64_t>(text.substr(start, x - start), option);
    if (dim < 1 || dim > kMaxSize) {
      throw UsageError(
          fmt::format("{}: dimension {} in '{}' is not in [1, {}]", option, dim, text, kMaxSize));
    }
    dims.push_back(dim);
    start = x + 1;
  }
  if (dims.size() > 8) throw UsageError(fmt::format("{}: '{}' has more than 8 dims", option, text));
  return Shape(std::move(dims));
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  o.argv.assign(argv, argv + argc);
  CLI::App app("cgr-bench", "cgr-bench");
  // --help prints this tool's own texts (the options and every metric's definition).
  app.set_help_flag("-h,--help");
  // A flag given twice is a mistake to point out, not a choice to make silently; only the
  // per-input and per-exit options repeat.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  bool version = false;
  app.add_flag("--version", version);
  app.add_flag("--verbose", o.verbose);
  // Every value is read as text and parsed here: strictly, with the range in the message.
  std::string device, mode, batch, input_shape, exits, threshold, threads, warmup, duration,
      iterations, percentiles, sweep, precision, profile_runs, contexts, max_folded,
      conv_algorithms;
  // trtexec's spellings, aliases of the options above (--exportTimes has no other spelling).
  std::string shapes, load_inputs_trt, warmup_trt, duration_trt;
  std::vector<std::string> load_inputs, exit_outputs;
  // Required, unless --version asks for the version alone.
  app.add_option("--model", o.model);
  app.add_option("--weights", o.weights);
  app.add_option("--device", device);
  app.add_option("--mode", mode);
  app.add_option("--batch", batch);
  app.add_option("--input-shape", input_shape);
  app.add_option("--exits", exits);
  app.add_option("--threshold", threshold);
  app.add_option("--threads", threads);
  app.add_option("--max-folded-elements", max_folded);
  app.add_option("--precision", precision);
  app.add_option("--conv-algorithms", conv_algorithms);
  app.add_option("--warmup-ms", warmup);
  app.add_option("--duration-s", duration);
  app.add_option("--iterations", iterations);
  app.add_option("--percentiles", percentiles);
  app.add_option("--load-input", load_inputs)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);  // one per input
  app.add_option("--exit-output", exit_outputs)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);  // one per exit
  app.add_option("--export-output", o.export_output);
  app.add_option("--export-weights", o.export_weights);
  app.add_option("--export-json", o.export_json);
  app.add_option("--export-dot", o.export_dot);
  app.add_option("--timeline", o.timeline);
  app.add_flag("--info", o.info);
  app.add_option("--sweep-size", sweep);
  app.add_option("--export-plot", o.export_plot);
  app.add_option("--shapes", shapes);
  app.add_option("--loadInputs", load_inputs_trt);
  app.add_option("--exportTimes", o.export_times);
  app.add_option("--warmUp", warmup_trt);
  app.add_option("--duration", duration_trt);
  app.add_flag("--dump-profile,--dumpProfile", o.dump_profile);
  app.add_option("--export-profile,--exportProfile", o.export_profile);
  app.add_option("--export-trace", o.export_trace);
  app.add_option("--profile-runs", profile_runs);
  app.add_option("--contexts,--streams", contexts);
  app.add_flag("--dot-before-fusion", o.dot_before_fusion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(kUsage, stdout);
    std::fputs(kHelp, stdout);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }

  if (version) {
    std::fputs(version_line().c_str(), stdout);
    return std::nullopt;
  }
  if (o.model.empty()) throw UsageError("--model is required");
  auto given = [&](const char* name) { return app.count(name) > 0; };
  // An alias and its cgr spelling together would be two values for one setting.
  for (const auto& [trt, cgr_name] :
       {std::pair{"--shapes", "--input-shape"}, std::pair{"--loadInputs", "--load-input"},
        std::pair{"--warmUp", "--warmup-ms"}, std::pair{"--duration", "--duration-s"}}) {
    if (given(trt) && given(cgr_name)) {
      throw UsageError(
          fmt::format("{} and {} are one option (trtexec's spelling and cgr-bench's); "
                      "give one of them",
                      trt, cgr_name));
    }
  }
  if (given("--warmUp")) warmup = warmup_trt;
  if (given("--duration")) duration = duration_trt;
  const char* warmup_option = given("--warmUp") ? "--warmUp" : "--warmup-ms";
  const char* duration_option = given("--duration") ? "--duration" : "--duration-s";
  if (given("--device")) {
    if (device != "cpu" && device != "cuda")
      throw UsageError("--device: '" + device + "' is not cuda or cpu");
    o.device = parse_device(device);
  }
  if (given("--mode")) o.mode = parse_mode_choice(mode);
  if (given("--batch")) o.batch = number_in<std::int64_t>("--batch", batch, 1, kMaxBatch);
  if (given("--input-shape")) {
    auto [name, shape] = split_name(input_shape);
    o.input_shapes.push_back({name, parse_shape(shape, "--input-shape")});
  }
  if (given("--shapes")) {
    o.input_shapes_option = "--shapes";
    for (const auto& [name, dims] : split_name_list(shapes, "--shapes", "DIMS")) {
      for (const InputShape& earlier : o.input_shapes) {
        if (earlier.name == name)
          throw UsageError(fmt::format("--shapes: input '{}' is given twice", name));
      }
      o.input_shapes.push_back({name, parse_shape(dims, "--shapes")});
    }
  }
  if (given("--exits")) {
    if (exits != "off" && exits != "all" && exits != "early") {
      throw UsageError("--exits: '" + exits + "' is not off, all or early");
    }
    o.exits = parse_exit_policy(exits);
    o.exits_given = true;
  }
  if (given("--precision")) {
    if (precision != "fp32" && precision != "tf32" && precision != "fp16" && precision != "bf16") {
      throw UsageError("--precision: '" + precision + "' is not fp32, tf32, fp16 or bf16");
    }
    o.precision = parse_precision(precision);
  }
  if (given("--conv-algorithms")) {
    if (conv_algorithms != "heuristic" && conv_algorithms != "timed") {
      throw UsageError("--conv-algorithms: '" + conv_algorithms + "' is not heuristic or timed");
    }
    o.time_conv_algorithms = conv_algorithms == "timed";
  }
  // 0 threads: one per hardware thread.
  if (given("--threads")) o.threads = number_in("--threads", threads, 0, ThreadPool::max_threads());
  if (given("--threshold")) {
    o.threshold = number_in("--threshold", threshold, 0.0f, 1.0f);
    o.exits_given = true;
  }
  if (given("--warmup-ms") || given("--warmUp"))
    o.warmup_ms = number_in(warmup_option, warmup, 0.0, kMaxWarmupMs);
  if (given("--duration-s") || given("--duration")) {
    o.duration_s = number_in(duration_option, duration, 0.0, kMaxDurationS);
    if (o.duration_s == 0)
      throw UsageError(
          fmt::format("{}: 0 would time nothing; give a positive time", duration_option));
  }
  if (given("--iterations"))
    o.iterations = number_in("--iterations", iterations, 1, kMaxIterations);
  if (given("--percentiles")) {
    o.percentiles = parse_list<double>(percentiles, "--percentiles");
    for (double p : o.percentiles) {
      if (!(p > 0 && p <= 100))
        throw UsageError(fmt::format("--percentiles: {} is not in (0, 100]", p));
    }
  }
  for (const std::string& input : load_inputs) {
    auto [name, path] = split_name(input);
    o.load_inputs.push_back({name, path});
  }
  if (given("--loadInputs")) {
    for (auto& [name, path] : split_name_list(load_inputs_trt, "--loadInputs", "FILE.npy"))
      o.load_inputs.push_back({name, path});
  }
  for (const std::string& exit : exit_outputs) {
    auto [output, speculate] = split_name(exit);
    if (output.empty()) std::swap(output, speculate);  // no '=': the output alone
    if (output.empty()) throw UsageError("--exit-output: give a graph output's name");
    o.exit_outputs.push_back({output, speculate});
  }
  if (given("--max-folded-elements")) {
    if (!o.model.ends_with(".onnx")) {
      throw UsageError("--max-folded-elements: only for ONNX models (built-in ones fold nothing)");
    }
    o.max_folded_elements =
        number_in<std::int64_t>("--max-folded-elements", max_folded, 1, std::int64_t{1} << 40);
  }
  if (!o.exit_outputs.empty() && !o.model.ends_with(".onnx")) {
    throw UsageError(
        "--exit-output: only for ONNX models (the built-in resnet18-exits declares its own)");
  }
  if (given("--sweep-size")) {
    o.sweep_sizes = parse_list<std::int64_t>(sweep, "--sweep-size");
    for (auto size : o.sweep_sizes) {
      if (size < 1 || size > kMaxSize) {
        throw UsageError(fmt::format("--sweep-size: {} is not in [1, {}]", size, kMaxSize));
      }
    }
  }
  if (given("--profile-runs")) {
    o.profile_runs = number_in("--profile-runs", profile_runs, 1, kMaxProfileRuns);
  }
  const bool profiling = o.dump_profile || !o.export_profile.empty() || !o.export_trace.empty();
  if (given("--profile-runs") && !profiling) {
    throw UsageError("--profile-runs: give --dump-profile, --export-profile or --export-trace too");
  }
  if (profiling && o.info) {
    throw UsageError("--dump-profile / --export-profile / --export-trace: not with --info "
                     "(nothing runs)");
  }
  if (profiling && !o.sweep_sizes.empty()) {
    throw UsageError(
        "--dump-profile / --export-profile / --export-trace: not with --sweep-size "
        "(profile one model)");
  }
  if (o.dot_before_fusion && o.export_dot.empty()) {
    throw UsageError("--dot-before-fusion: give --export-dot FILE too");
  }
  if (!o.export_plot.empty() && o.sweep_sizes.empty()) {
    throw UsageError("--export-plot needs --sweep-size (it plots the sweep)");
  }
  if (!o.export_weights.empty() && !o.sweep_sizes.empty()) {
    throw UsageError("--export-weights: not with --sweep-size (write the weights of one model)");
  }
  if (given("--contexts")) {
    o.contexts = number_in("--contexts", contexts, 1, kMaxContexts);
    if (!o.sweep_sizes.empty()) throw UsageError("--contexts: not with --sweep-size");
    if (o.info) throw UsageError("--contexts: not with --info (nothing is timed)");
  }
  if (given("--exportTimes")) {
    if (o.export_times.empty()) throw UsageError("--exportTimes: give a file name");
    if (!o.sweep_sizes.empty())
      throw UsageError("--exportTimes: not with --sweep-size (it writes the times of one run)");
    if (o.info) throw UsageError("--exportTimes: not with --info (nothing is timed)");
  }
  return o;
}

}  // namespace cgr::bench
