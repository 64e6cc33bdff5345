// Timing of cgr engines: one engine and context per mode, timed interleaved in rounds, plus
// the statistics the report prints and the per-op record of one profiled inference.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cgr/engine.hpp>

namespace cgr::bench {

// Summary of one series of times (milliseconds).
struct Stats {
  std::size_t count = 0;
  double min = 0, mean = 0, median = 0, max = 0, stddev = 0;
  double cv = 0;                                       // stddev / mean
  std::vector<std::pair<double, double>> percentiles;  // (p, nearest-rank value)
};

// `values` need not be sorted; an empty series gives count 0 and zeros.
Stats summarize(std::vector<double> values, const std::vector<double>& percentiles);

// The tensors written into every context's input buffers before timing.
using InputTensors = std::vector<std::pair<std::string, Tensor>>;

// One execution mode under test: its engine, a context, and the times of its runs.
struct ModeRun {
  Mode mode = Mode::dag;
  Engine engine;
  ExecutionContext context;
  double build_ms = 0;                        // Engine::build
  double instantiate_ms = 0;                  // Engine::create_context
  std::optional<CudaGraphReport> cuda_graph;  // graph modes on cuda: the graph against its plan
  bool has_enqueue = false;                   // separate host enqueue times (cuda graph modes)
  bool has_gpu = false;                       // GPU compute times (cuda graph modes)
  std::vector<double> latency_ms, enqueue_ms, gpu_ms;  // per timed iteration
  int ops_executed = 0;                                // of the last run
  std::string answered_by;                             // of the last run: an exit's name or "final"
  std::optional<double> max_abs_diff_vs_dag;           // outputs of one inference against dag's
  std::vector<std::string> non_finite_outputs;         // of one inference (first mode)
  // Per timed iteration: when it started, in ms since the first timed run of the measurement
  // began (the modes share that origin; --exportTimes' startComputeMs).
  std::vector<double> start_ms;
};

// Builds the engine and one context for `options.mode`, timing both, and fills the inputs.
ModeRun make_mode_run(const Network& net, const Weights& weights, const EngineOptions& options,
                      const InputTensors& inputs);

// Copies the tensors into the context's input buffers (by name).
void fill_inputs(ExecutionContext& context, const InputTensors& inputs);

// A duration alone never times fewer runs per mode than this (trtexec's floor too): with one
// or two, every percentile is the maximum and the spread says nothing.
constexpr int kMinTimedIterations = 10;

struct StopRule {
  double warmup_ms = 200;
  double duration_s = 3;  // then at least kMinTimedIterations per mode
  int iterations = 0;     // > 0: exactly this many timed runs per mode
};

// Warm-up, then timed rounds with one run of each mode per round (the first mode rotating),
// until the rule says stop.
void measure_interleaved(std::vector<ModeRun>& runs, const StopRule& rule);

// --contexts N (trtexec --streams): N contexts of one engine, each run back to back by its own
// host thread, all started together after a warm-up run each, until the rule says stop (its
// duration, every context having run at least kMinTimedIterations; or exactly `iterations`
// runs per context). What the engine sustains when requests overlap.
struct ConcurrentRun {
  int contexts = 0;
  double wall_ms = 0;              // from the common start to the last run's end
  std::vector<double> latency_ms;  // every timed run of every context
  double throughput_per_s = 0;     // timed runs / wall time
};
ConcurrentRun measure_concurrent(const Engine& engine, const InputTensors& inputs, int contexts,
                                 const StopRule& rule);

// Largest |difference| between the outputs one inference of each mode computed and dag's,
// into each run's max_abs_diff_vs_dag (every mode must compute the same function; a difference
// here is a bug worth seeing). Nothing when there is one mode or the first is not dag.
void compare_outputs(std::vector<ModeRun>& runs, const InputTensors& inputs);

// One op of one profiled inference, times since the start of the run.
struct OpSpan {
  std::string op;
  std::string kind;       // the graph's label for the op (layer kinds), may be empty
  int lane = 0;           // the graph's chain of the op (Graph::lanes)
  int track = -1;         // what ran it: cpu, the thread (0: the caller); -1 unknown (the GPU)
  bool critical = false;  // on the engine's estimated critical path (OpInfo::critical)
  std::string category;   // what colours it; empty: the first layer kind of `kind`
  double start_ms = 0, end_ms = 0;
};

// Runs one warm-up and one profiled inference on a fresh context of `engine` (cpu executor)
// and returns the ops that executed, in start order.
std::vector<OpSpan> profile_one_inference(const Engine& engine, const InputTensors& inputs);
// The same for `recorded` inferences in a row on one context (after one warm-up run).
std::vector<std::vector<OpSpan>> profile_inferences(const Engine& engine,
                                                    const InputTensors& inputs, int recorded);

// One op's times over profiled runs (trtexec's --dumpProfile): an op's time in a run is the sum
// of its spans (on the GPU an op may be several kernels and copies), from its first start to
// its last end when they overlap.
struct OpProfile {
  std::string op;
  std::string kind;
  int runs = 0;  // runs in which it executed
  double mean_ms = 0, median_ms = 0, min_ms = 0, max_ms = 0;
  double share = 0;  // of the sum of every op's mean (0..1)
  bool critical = false;
};
// Ops in order of mean time, largest first.
std::vector<OpProfile> summarize_profile(const std::vector<std::vector<OpSpan>>& runs);

}  // namespace cgr::bench
