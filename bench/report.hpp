// cgr-bench's report: the text summary (modelled on trtexec's performance summary) and the
// same numbers as JSON, plus every iteration's times. The text and the JSON come from the same
// ModeRun records, so they cannot disagree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "device_info.hpp"
#include "measure.hpp"
#include "svg.hpp"

namespace cgr::bench {

struct ModelFacts {
  std::string name;     // "two-branch", ... or the ONNX path
  std::string source;   // "built-in" or "onnx"
  std::string weights;  // "seeded (seed 1)" or the safetensors path
  std::vector<TensorDesc> inputs, outputs;
  std::vector<std::string> input_sources;  // per input: "seeded" or the .npy path
  std::int64_t batch = 1;
  std::vector<std::string> exits;  // the exit heads' names, in decision order
};

// The graph facts of an engine and its build/instantiate times, per mode.
void print_model_and_device(const ModelFacts& model, const DeviceInfo& device,
                            const Options& options);
void print_graph_facts(const std::vector<ModeRun>& runs);
// Per mode: iterations, latency statistics, throughput, enqueue, GPU compute, stability; then
// the side-by-side comparison against dag when there is more than one mode.
void print_performance(const std::vector<ModeRun>& runs, const Options& options,
                       std::int64_t batch);

// One size of a sweep: the median latency per mode (the order of `modes`).
struct SweepPoint {
  std::int64_t size = 0;
  std::vector<Stats> stats;
};
void print_sweep_table(const std::vector<Mode>& modes, const std::vector<SweepPoint>& points);
// "eager / dag" per point, or empty when either mode is missing.
std::vector<double> sweep_ratio(const std::vector<Mode>& modes,
                                const std::vector<SweepPoint>& points);

struct TimelineRecord {
  std::string file;
  Mode mode = Mode::dag;
  TimelineFacts facts;
  bool device_activity = false;  // bars are CUPTI records (kernels, copies), not ops
};

// The whole report as JSON (runs may be empty for --info or a sweep).
nlohmann::json report_json(const ModelFacts& model, const DeviceInfo& device,
                           const Options& options, const std::vector<ModeRun>& runs,
                           const std::optional<TimelineRecord>& timeline,
                           const std::vector<Mode>& sweep_modes,
                           const std::vector<SweepPoint>& sweep);

// --exportTimes: one object per timed iteration of `run`, with trtexec's field names
// (startComputeMs, endComputeMs, latencyMs) and the mode.
nlohmann::json times_json(const ModeRun& run);

// trtexec's --dumpProfile: the ops by mean time over `runs` profiled inferences of `mode`, at
// most `rows` of them (the rest summed in one line), with the clock that timed them.
void print_profile(const std::vector<OpProfile>& profile, int runs, Mode mode,
                   const std::string& clock, std::size_t rows);
nlohmann::json profile_json(const std::vector<OpProfile>& profile, int runs, Mode mode,
                            const std::string& clock);

// --contexts N: throughput and latency of N concurrent contexts, against one context's
// (`single`: the first mode's timed latencies from the interleaved measurement).
void print_concurrency(const ConcurrentRun& run, Mode mode, const Stats& single,
                       const std::vector<double>& percentiles, std::int64_t batch);
nlohmann::json concurrency_json(const ConcurrentRun& run, Mode mode, const Stats& single,
                                const std::vector<double>& percentiles, std::int64_t batch);

// "12.3 KiB" style sizes.
std::string format_bytes(std::size_t bytes);

}  // namespace cgr::bench
