// cgr-bench's command line: the options, their parser and the usage and --help texts. Bad
// arguments are reported as UsageError, which main turns into the message, the usage line and
// exit status 2 (a model that fails to load is a different failure: status 1).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cgr/engine.hpp>

namespace cgr::bench {

class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

enum class ModeChoice { dag, stream_graph, eager, all };

struct InputFile {
  std::string name = {};  // empty: the network's only (or first) input
  std::string path = {};
};

// --input-shape [NAME=]S or one entry of --shapes NAME:S,...
struct InputShape {
  std::string name = {};  // empty: the first input
  Shape shape = {};
};

// --exit-output OUTPUT[=SPECULATE_UNTIL]: an ONNX graph output imported as an exit head.
struct ExitOutput {
  std::string output;
  std::string speculate_until;  // an ONNX tensor name; empty: nothing speculated
};

struct Options {
  std::string model;             // a built-in name or a path to a .onnx file
  std::string weights;           // safetensors; empty: seeded random weights
  std::optional<Device> device;  // unset: cuda when a device is usable, else cpu
  ModeChoice mode = ModeChoice::all;
  std::int64_t batch = 0;  // 0: the model's (or --input-shape's) batch
  // --input-shape (one) or trtexec's --shapes (one per input); input_shapes_option is the
  // spelling given, for messages.
  std::vector<InputShape> input_shapes;
  std::string input_shapes_option = "--input-shape";
  ExitPolicy exits = ExitPolicy::all;
  bool exits_given = false;  // --exits or --threshold: a usage error on a model without heads
  float threshold = 0.9f;
  Precision precision = Precision::fp32;
  bool time_conv_algorithms = false;  // --conv-algorithms timed (EngineOptions)
  int threads = 0;  // 0: one per hardware thread
  std::int64_t max_folded_elements = 0;  // ONNX import; 0: OnnxImportOptions' default
  double warmup_ms = 200;
  double duration_s = 3;
  int iterations = 0;  // 0: run for duration_s
  std::vector<double> percentiles{90, 95, 99};
  std::vector<InputFile> load_inputs;    // --load-input or trtexec's --loadInputs
  std::string export_times;              // trtexec's --exportTimes: per-iteration times as JSON
  std::vector<ExitOutput> exit_outputs;  // ONNX models only
  std::string export_output, export_json, export_dot, timeline, export_plot, export_weights;
  bool info = false;
  bool verbose = false;
  // Per-op profile of the first mode over profile_runs inferences: printed (--dump-profile),
  // written as JSON (--export-profile) and as a Chrome trace (--export-trace).
  bool dump_profile = false;
  std::string export_profile, export_trace;
  int profile_runs = 10;
  int contexts = 0;  // --contexts N (--streams): 0 none; else N concurrent contexts timed too
  bool dot_before_fusion = false;  // --export-dot draws the layers, not the engine's ops
  std::vector<std::int64_t> sweep_sizes;
  std::vector<std::string> argv;  // the command as given, for the reports
};

// The usage line(s) printed after every argument error.
const char* usage_text();
// "cgr-bench 0.1.0 (commit 0123abcd4567)\n": the project version and the source commit built.
std::string version_line();
std::string_view source_commit();
// --help: the options and the definition of every metric the report prints.
const char* help_text();

// Throws UsageError for unknown options, missing or malformed values and combinations that
// make no sense. Returns nullopt when --help was printed.
std::optional<Options> parse_options(int argc, char** argv);

// "1x3x224x224" -> Shape; UsageError when malformed.
Shape parse_shape(const std::string& text, const std::string& option);

}  // namespace cgr::bench
