// Text and JSON report of cgr-bench (see report.hpp; the metrics are defined in cli.cpp's
// --help text).
#include "report.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace cgr::bench {
namespace {

constexpr double kStableCv = 0.02;  // the stability warning threshold (2%)

std::string percentile_key(double p) {
  return fmt::format("p{}", p);
}

const ModeRun* find_mode(const std::vector<ModeRun>& runs, Mode mode) {
  for (const auto& run : runs) {
    if (run.mode == mode) return &run;
  }
  return nullptr;
}

std::string stats_line(const Stats& s) {
  std::string line = fmt::format("min {:.4f}  mean {:.4f}  median {:.4f}", s.min, s.mean, s.median);
  for (const auto& [p, v] : s.percentiles)
    line += fmt::format("  {} {:.4f}", percentile_key(p), v);
  return line + fmt::format("  max {:.4f} ms", s.max);
}

nlohmann::json stats_json(const Stats& s) {
  nlohmann::json j = {{"count", s.count},   {"min", s.min}, {"mean", s.mean},
                      {"median", s.median}, {"max", s.max}, {"stddev", s.stddev},
                      {"cv", s.cv}};
  nlohmann::json percentiles = nlohmann::json::object();
  for (const auto& [p, v] : s.percentiles)
    percentiles[percentile_key(p)] = v;
  j["percentiles"] = percentiles;
  return j;
}

nlohmann::json shape_json(const Shape& shape) {
  return shape.dims();
}

double throughput(const ModeRun& run) {
  double total_ms = 0;
  for (double t : run.latency_ms)
    total_ms += t;
  return total_ms > 0 ? static_cast<double>(run.latency_ms.size()) * 1000.0 / total_ms : 0;
}

std::string stop_rule(const Options& o) {
  return o.iterations > 0 ? fmt::format("{} iterations per mode", o.iterations)
                          : fmt::format("{} s of timed rounds", o.duration_s);
}

}  // namespace

std::string format_bytes(std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

void print_model_and_device(const ModelFacts& model, const DeviceInfo& device,
                            const Options& options) {
  fmt::print("=== Model ===\n");
  fmt::print("model          {} ({}), weights {}\n", model.name, model.source, model.weights);
  for (std::size_t i = 0; i < model.inputs.size(); ++i) {
    fmt::print("input          {} {} ({})\n", model.inputs[i].name,
               model.inputs[i].shape.to_string(),
               i < model.input_sources.size() ? model.input_sources[i] : "seeded");
  }
  for (const auto& out : model.outputs)
    fmt::print("output         {} {}\n", out.name, out.shape.to_string());
  // Only a model with exit heads has an exit policy (cgr-bench refuses --exits otherwise).
  if (!model.exits.empty()) {
    fmt::print("exits          {}: {} (threshold {})\n", fmt::join(model.exits, ", "),
               to_string(options.exits), options.threshold);
  }
  fmt::print("=== Device ===\n");
  if (options.precision != Precision::fp32) {
    fmt::print("precision      {}{}\n", to_string(options.precision),
               device.device == Device::cpu ? " (cpu: its storage rounding emulated)" : "");
  }
  if (options.time_conv_algorithms && device.device == Device::cuda)
    fmt::print("conv algos     timed at build (cuDNN's fastest candidates)\n");
  if (device.device == Device::cpu) {
    fmt::print("device         cpu: {}, {} hardware threads, engine computes on {}\n", device.name,
               device.hardware_threads, device.threads);
  } else {
    fmt::print("device         cuda: {}, {} SMs, {}, compute capability {}\n", device.name,
               device.sm_count, format_bytes(device.memory_bytes), device.compute_capability);
    fmt::print("versions       driver {}, runtime {}\n", device.driver_version,
               device.runtime_version);
  }
}

namespace {
// Engine::cuda_graph_plan per graph mode: nodes, edges, nodes on the longest chain.
nlohmann::json cuda_plan_json(const Engine& engine) {
  nlohmann::json plans = nlohmann::json::object();
  for (const Mode mode : {Mode::dag, Mode::stream_graph}) {
    const CudaGraphPlan plan = engine.cuda_graph_plan(mode);
    plans[std::string(to_string(mode))] = {{"nodes", plan.nodes.size()},
                                           {"edges", plan.edge_count()},
                                           {"critical_path", plan.critical_path_nodes()}};
  }
  return plans;
}
}  // namespace

void print_concurrency(const ConcurrentRun& run, Mode mode, const Stats& single,
                       const std::vector<double>& percentiles, std::int64_t batch) {
  const Stats s = summarize(run.latency_ms, percentiles);
  const double one = single.median > 0 ? 1000.0 / single.median : 0;
  fmt::print("=== {} contexts of mode {}, a host thread each, run together ===\n", run.contexts,
             to_string(mode));
  fmt::print("throughput     {:.1f} inferences/s ({:.1f} samples/s): {} runs in {:.1f} ms; "
             "{:.2f}x one context's {:.1f}/s\n",
             run.throughput_per_s, run.throughput_per_s * static_cast<double>(batch), s.count,
             run.wall_ms, one > 0 ? run.throughput_per_s / one : 0.0, one);
  std::string tail;
  for (const auto& [p, v] : s.percentiles) tail += fmt::format("  p{} {:.4f}", p, v);
  fmt::print("  latency      min {:.4f}  median {:.4f}{}  max {:.4f} ms (one context: median "
             "{:.4f})\n",
             s.min, s.median, tail, s.max, single.median);
}

nlohmann::json concurrency_json(const ConcurrentRun& run, Mode mode, const Stats& single,
                                const std::vector<double>& percentiles, std::int64_t batch) {
  const double one = single.median > 0 ? 1000.0 / single.median : 0;
  return {{"contexts", run.contexts},
          {"mode", to_string(mode)},
          {"runs", run.latency_ms.size()},
          {"wall_ms", run.wall_ms},
          {"throughput_per_s", run.throughput_per_s},
          {"samples_per_s", run.throughput_per_s * static_cast<double>(batch)},
          {"speedup_vs_one_context", one > 0 ? run.throughput_per_s / one : 0.0},
          {"latency_ms", stats_json(summarize(run.latency_ms, percentiles))}};
}

namespace {
// The GPU's transfers inside the graph: the input copy (host to device) and the output copies
// (device to host), summed over the profile's ops; zero on the CPU, which copies nothing.
std::pair<double, double> transfer_ms(const std::vector<OpProfile>& profile) {
  double h2d = 0, d2h = 0;
  for (const OpProfile& p : profile) {
    if (p.op == "copy-in") h2d += p.mean_ms;
    if (p.op.rfind("copy-out:", 0) == 0) d2h += p.mean_ms;
  }
  return {h2d, d2h};
}
}  // namespace

void print_profile(const std::vector<OpProfile>& profile, int runs, Mode mode,
                   const std::string& clock, std::size_t rows) {
  fmt::print("=== Profile ({} runs of mode {}, {}; ops by mean time) ===\n", runs, to_string(mode),
             clock);
  fmt::print("{:>9} {:>9} {:>9} {:>9} {:>6}  {}\n", "mean ms", "median", "min", "max", "share",
             "op (* on the estimated critical path)");
  double rest_mean = 0, rest_share = 0, total = 0;
  for (std::size_t i = 0; i < profile.size(); ++i) {
    const OpProfile& p = profile[i];
    total += p.mean_ms;
    if (i >= rows) {
      rest_mean += p.mean_ms;
      rest_share += p.share;
      continue;
    }
    fmt::print("{:9.4f} {:9.4f} {:9.4f} {:9.4f} {:5.1f}%  {}{} [{}]{}\n", p.mean_ms, p.median_ms,
               p.min_ms, p.max_ms, 100 * p.share, p.critical ? "*" : "", p.op, p.kind,
               p.runs < runs ? fmt::format(" (ran in {} of {} runs)", p.runs, runs) : "");
  }
  if (profile.size() > rows) {
    fmt::print("{:9.4f} {:>9} {:>9} {:>9} {:5.1f}%  ({} more ops)\n", rest_mean, "", "", "",
               100 * rest_share, profile.size() - rows);
  }
  fmt::print(
      "{:9.4f} {:>9} {:>9} {:>9} {:5.1f}%  sum of the ops' means (concurrent ops overlap: "
      "more than the latency where branches ran side by side)\n",
      total, "", "", "", 100.0);
  if (const auto [h2d, d2h] = transfer_ms(profile); h2d > 0 || d2h > 0) {
    fmt::print("transfers      host to device {:.4f} ms, device to host {:.4f} ms per inference "
               "(the graph's copy nodes), compute {:.4f} ms\n",
               h2d, d2h, total - h2d - d2h);
  }
}

nlohmann::json profile_json(const std::vector<OpProfile>& profile, int runs, Mode mode,
                            const std::string& clock) {
  nlohmann::json ops = nlohmann::json::array();
  for (const OpProfile& p : profile) {
    ops.push_back({{"op", p.op},
                   {"kind", p.kind},
                   {"runs", p.runs},
                   {"mean_ms", p.mean_ms},
                   {"median_ms", p.median_ms},
                   {"min_ms", p.min_ms},
                   {"max_ms", p.max_ms},
                   {"share", p.share},
                   {"critical_path", p.critical}});
  }
  const auto [h2d, d2h] = transfer_ms(profile);
  return {{"runs", runs}, {"mode", to_string(mode)}, {"clock", clock},
          {"h2d_ms", h2d}, {"d2h_ms", d2h}, {"ops", std::move(ops)}};
}

void print_graph_facts(const std::vector<ModeRun>& runs) {
  if (runs.empty()) return;
  const EngineInfo info = runs.front().engine.info();
  const Graph& graph = runs.front().engine.graph();
  fmt::print("=== Graph ===\n");
  fmt::print(
      "layers         {} -> {} ops after fusion, {} edges, critical path {}, width {}, {} lanes\n",
      info.layers, info.ops, info.edges, info.critical_path, info.max_width, graph.lane_count());
  const double share = info.activation_bytes > 0 ? 100.0 * static_cast<double>(info.arena_bytes) /
                                                       static_cast<double>(info.activation_bytes)
                                                 : 0.0;
  fmt::print("memory         arena {} of {} activations ({:.0f}%), weights {}\n",
             format_bytes(info.arena_bytes), format_bytes(info.activation_bytes), share,
             format_bytes(info.weight_bytes));
  if (info.channels_last_values > 0) {
    fmt::print("layout         {} values channels-last (NHWC) from one op to the next\n",
               info.channels_last_values);
  }
  // The CUDA graph as planned, on any machine: what a graph mode's context would instantiate.
  std::string planned;
  for (const Mode mode : {Mode::dag, Mode::stream_graph}) {
    const CudaGraphPlan plan = runs.front().engine.cuda_graph_plan(mode);
    planned += fmt::format("{}{} {} nodes, {} edges, critical path {}", planned.empty() ? "" : "; ",
                           to_string(mode), plan.nodes.size(), plan.edge_count(),
                           plan.critical_path_nodes());
  }
  fmt::print("cuda plan      {}\n", planned);
  std::string times, nodes;
  for (const auto& run : runs) {
    times += fmt::format("  {} {:.2f} / {:.2f} ms", to_string(run.mode), run.build_ms,
                         run.instantiate_ms);
    if (run.cuda_graph) {
      const CudaGraphReport& g = *run.cuda_graph;
      nodes += fmt::format(
          "\n  {:<13}{} nodes, {} edges, {} conditional; plan {} nodes, {} edges: {}",
          to_string(run.mode), g.nodes, g.edges, g.conditional_nodes, g.planned_nodes,
          g.planned_edges,
          g.mismatches.empty()
              ? "as planned"
              : fmt::format("{} MISMATCHES, first: {}", g.mismatches.size(), g.mismatches.front()));
    }
  }
  fmt::print("build / inst.{}\n", times);
  if (!nodes.empty()) fmt::print("cuda graph{}\n", nodes);
}

void print_performance(const std::vector<ModeRun>& runs, const Options& options,
                       std::int64_t batch) {
  fmt::print("=== Performance summary ({}; warm-up {} ms; modes interleaved) ===\n",
             stop_rule(options), options.warmup_ms);
  bool unstable = false;
  for (const auto& run : runs) {
    const Stats latency = summarize(run.latency_ms, options.percentiles);
    const bool cpu = run.engine.options().device == Device::cpu;
    fmt::print("[{}]\n", to_string(run.mode));
    fmt::print("  iterations     {}\n", latency.count);
    fmt::print("  latency        {}\n", stats_line(latency));
    const double per_s = throughput(run);
    fmt::print("  throughput     {:.1f} inferences/s ({:.1f} samples/s at batch {})\n", per_s,
               per_s * static_cast<double>(batch), batch);
    if (cpu) {
      fmt::print(
          "  host enqueue   = latency on cpu (the calling thread runs ops until the inference is "
          "done)\n");
      fmt::print("  GPU compute    n/a on cpu\n");
    } else {
      fmt::print("  host enqueue   {}\n",
                 stats_line(summarize(run.enqueue_ms, options.percentiles)));
      fmt::print("  GPU compute    {} (copies included)\n",
                 stats_line(summarize(run.gpu_ms, options.percentiles)));
    }
    if (latency.cv > kStableCv) {
      unstable = true;
      fmt::print(
          "  stability      WARNING: CV {:.2f}% > 2% (stddev {:.4f} ms): noisy; other load,"
          " frequency scaling or too few iterations\n",
          100 * latency.cv, latency.stddev);
    } else {
      fmt::print("  stability      CV {:.2f}% (stddev {:.4f} ms): stable\n", 100 * latency.cv,
                 latency.stddev);
    }
    fmt::print("  ops executed   {} (answered by {})\n", run.ops_executed, run.answered_by);
  }
  const ModeRun* dag = find_mode(runs, Mode::dag);
  if (runs.size() > 1 && dag != nullptr) {
    const double dag_median = summarize(dag->latency_ms, {}).median;
    fmt::print("=== Comparison (median latency, interleaved rounds) ===\n");
    fmt::print("  {:<14} {:>11}  {:>8}  {}\n", "mode", "median ms", "vs dag",
               "outputs vs dag (max |diff|)");
    for (const auto& run : runs) {
      const double median = summarize(run.latency_ms, {}).median;
      fmt::print("  {:<14} {:>11.4f}  {:>7.2f}x  {}\n", to_string(run.mode), median,
                 median / dag_median,
                 run.max_abs_diff_vs_dag ? fmt::format("{:.3g}", *run.max_abs_diff_vs_dag) : "-");
    }
    if (unstable)
      fmt::print(
          "  (some modes were unstable: rerun with a longer --duration-s or on an idle machine)\n");
  }
}

std::vector<double> sweep_ratio(const std::vector<Mode>& modes,
                                const std::vector<SweepPoint>& points) {
  const auto index_of = [&](Mode m) {
    for (std::size_t k = 0; k < modes.size(); ++k) {
      if (modes[k] == m) return static_cast<int>(k);
    }
    return -1;
  };
  const int dag = index_of(Mode::dag), eager = index_of(Mode::eager);
  std::vector<double> ratios;
  if (dag < 0 || eager < 0) return ratios;
  for (const auto& p : points) {
    ratios.push_back(p.stats[static_cast<std::size_t>(eager)].median /
                     p.stats[static_cast<std::size_t>(dag)].median);
  }
  return ratios;
}

void print_sweep_table(const std::vector<Mode>& modes, const std::vector<SweepPoint>& points) {
  const std::vector<double> ratios = sweep_ratio(modes, points);
  std::string header = fmt::format("  {:>6}", "size");
  for (Mode m : modes)
    header += fmt::format("  {:>15}", fmt::format("{} ms", to_string(m)));
  header += fmt::format("  {:>7}", "max CV");
  if (!ratios.empty()) header += fmt::format("  {:>10}", "eager/dag");
  fmt::print("=== Size sweep (median latency per mode, interleaved) ===\n{}\n", header);
  bool noisy = false;
  for (std::size_t i = 0; i < points.size(); ++i) {
    std::string line = fmt::format("  {:>6}", points[i].size);
    double max_cv = 0;
    for (const auto& s : points[i].stats) {
      line += fmt::format("  {:>15.4f}", s.median);
      max_cv = std::max(max_cv, s.cv);
    }
    line += fmt::format("  {:>6.1f}%", 100 * max_cv);
    if (!ratios.empty()) {
      // Judged on the printed (rounded) ratio so that the words agree with the number.
      const double shown = std::round(ratios[i] * 100) / 100;
      line += fmt::format("  {:>9.2f}x  {}", ratios[i],
                          shown >= 1.02   ? "dag faster"
                          : shown <= 0.98 ? "eager faster"
                                          : "even (within 2%)");
    }
    fmt::print("{}\n", line);
    noisy = noisy || max_cv > kStableCv;
  }
  if (noisy) {
    fmt::print(
        "  (max CV above 2%: the medians are noisy; differences of a few percent are not "
        "significant)\n");
  }
}

nlohmann::json report_json(const ModelFacts& model, const DeviceInfo& device,
                           const Options& options, const std::vector<ModeRun>& runs,
                           const std::optional<TimelineRecord>& timeline,
                           const std::vector<Mode>& sweep_modes,
                           const std::vector<SweepPoint>& sweep) {
  using nlohmann::json;
  json j;
  j["tool"] = "cgr-bench";
  j["version"] = CGR_VERSION;
  j["commit"] = std::string(source_commit());
  j["command"] = options.argv;
  json inputs = json::array(), outputs = json::array();
  for (std::size_t i = 0; i < model.inputs.size(); ++i) {
    inputs.push_back(
        {{"name", model.inputs[i].name},
         {"shape", shape_json(model.inputs[i].shape)},
         {"source", i < model.input_sources.size() ? model.input_sources[i] : "seeded"}});
  }
  for (const auto& out : model.outputs)
    outputs.push_back({{"name", out.name}, {"shape", shape_json(out.shape)}});
  j["model"] = {{"name", model.name},   {"source", model.source}, {"weights", model.weights},
                {"batch", model.batch}, {"inputs", inputs},       {"outputs", outputs}};
  j["device"] = {{"kind", to_string(device.device)}, {"name", device.name}};
  if (device.device == Device::cpu) {
    j["device"]["hardware_threads"] = device.hardware_threads;
    j["device"]["threads"] = device.threads;
  } else {
    j["device"]["sm_count"] = device.sm_count;
    j["device"]["memory_bytes"] = device.memory_bytes;
    j["device"]["compute_capability"] = device.compute_capability;
    j["device"]["driver_version"] = device.driver_version;
    j["device"]["runtime_version"] = device.runtime_version;
  }
  j["settings"] = {
      {"warmup_ms", options.warmup_ms},
      {"duration_s", options.duration_s},
      {"iterations", options.iterations > 0 ? json(options.iterations) : json(nullptr)},
      {"percentiles", options.percentiles},
      {"precision", to_string(options.precision)},
      {"conv_algorithms", options.time_conv_algorithms ? "timed" : "heuristic"},
      {"exits", model.exits.empty() ? json(nullptr) : json(to_string(options.exits))},
      {"exit_heads", model.exits},
      {"threshold", model.exits.empty()
                        ? json(nullptr)
                        : json(std::stod(fmt::format(
                              "{}", options.threshold)))}};  // 0.9, not 0.8999999761581421
  if (!runs.empty()) {
    const EngineInfo info = runs.front().engine.info();
    j["graph"] = {{"layers", info.layers},
                  {"ops", info.ops},
                  {"edges", info.edges},
                  {"critical_path", info.critical_path},
                  {"width", info.max_width},
                  {"lanes", runs.front().engine.graph().lane_count()},
                  {"cuda_plan", cuda_plan_json(runs.front().engine)},
                  {"arena_bytes", info.arena_bytes},
                  {"activation_bytes", info.activation_bytes},
                  {"weight_bytes", info.weight_bytes},
                  {"channels_last_values", info.channels_last_values}};
  }
  const ModeRun* dag = find_mode(runs, Mode::dag);
  const double dag_median =
      dag != nullptr && !dag->latency_ms.empty() ? summarize(dag->latency_ms, {}).median : 0;
  json modes = json::array();
  for (const auto& run : runs) {
    if (run.latency_ms.empty()) continue;  // --info: built, not timed
    const Stats latency = summarize(run.latency_ms, options.percentiles);
    json m = {
        {"mode", to_string(run.mode)},
        {"build_ms", run.build_ms},
        {"instantiate_ms", run.instantiate_ms},
        {"cuda_graph", run.cuda_graph
                           ? json{{"nodes", run.cuda_graph->nodes},
                                  {"edges", run.cuda_graph->edges},
                                  {"conditional_nodes", run.cuda_graph->conditional_nodes},
                                  {"planned_nodes", run.cuda_graph->planned_nodes},
                                  {"planned_edges", run.cuda_graph->planned_edges},
                                  {"mismatches", run.cuda_graph->mismatches}}
                           : json(nullptr)},
        {"iterations", latency.count},
        {"latency_ms", stats_json(latency)},
        {"throughput_per_s", throughput(run)},
        {"throughput_samples_per_s", throughput(run) * static_cast<double>(model.batch)},
        {"enqueue_ms", run.has_enqueue ? stats_json(summarize(run.enqueue_ms, options.percentiles))
                                       : json(nullptr)},
        {"gpu_compute_ms",
         run.has_gpu ? stats_json(summarize(run.gpu_ms, options.percentiles)) : json(nullptr)},
        {"stable", latency.cv <= kStableCv},
        {"ops_executed", run.ops_executed},
        {"answered_by", run.answered_by},
        {"ratio_vs_dag", dag_median > 0 ? json(latency.median / dag_median) : json(nullptr)},
        // JSON has no infinity: a NaN on one side only is the string "inf".
        {"max_abs_diff_vs_dag", !run.max_abs_diff_vs_dag ? json(nullptr)
                                : std::isfinite(*run.max_abs_diff_vs_dag)
                                    ? json(*run.max_abs_diff_vs_dag)
                                    : json("inf")},
        {"non_finite_outputs", run.non_finite_outputs}};
    m["samples"] = {{"latency_ms", run.latency_ms},
                    {"start_ms", run.start_ms},
                    {"enqueue_ms", run.has_enqueue ? json(run.enqueue_ms) : json(nullptr)},
                    {"gpu_compute_ms", run.has_gpu ? json(run.gpu_ms) : json(nullptr)}};
    modes.push_back(std::move(m));
  }
  j["modes"] = std::move(modes);
  if (timeline) {
    j["timeline"] = {{"file", timeline->file},
                     {"mode", to_string(timeline->mode)},
                     {"source", timeline->device_activity ? "cupti" : "cpu executor"},
                     {"bars", timeline->facts.bars},
                     {"rows", timeline->facts.rows},
                     {"span_ms", timeline->facts.span_ms},
                     {"busy_ms", timeline->facts.busy_ms}};
    if (!timeline->device_activity) j["timeline"]["ops_executed"] = timeline->facts.bars;
  }
  if (!sweep.empty()) {
    const std::vector<double> ratios = sweep_ratio(sweep_modes, sweep);
    json points = json::array();
    for (std::size_t i = 0; i < sweep.size(); ++i) {
      json per_mode = json::object();
      for (std::size_t k = 0; k < sweep_modes.size(); ++k) {
        json s = stats_json(sweep[i].stats[k]);
        per_mode[std::string(to_string(sweep_modes[k]))] = std::move(s);
      }
      points.push_back({{"size", sweep[i].size},
                        {"latency_ms", per_mode},
                        {"eager_over_dag", ratios.empty() ? json(nullptr) : json(ratios[i])}});
    }
    j["sweep"] = std::move(points);
  }
  return j;
}

nlohmann::json times_json(const ModeRun& run) {
  nlohmann::json times = nlohmann::json::array();
  for (std::size_t i = 0; i < run.latency_ms.size(); ++i) {
    const double start = i < run.start_ms.size() ? run.start_ms[i] : 0;
    // trtexec's names; its compute span is the one wall-clock span cgr-bench times per run.
    times.push_back({{"mode", to_string(run.mode)},
                     {"startComputeMs", start},
                     {"endComputeMs", start + run.latency_ms[i]},
                     {"latencyMs", run.latency_ms[i]}});
  }
  return times;
}

}  // namespace cgr::bench
