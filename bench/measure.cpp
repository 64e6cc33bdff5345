// Timing loop and statistics of cgr-bench (see measure.hpp). Everything is timed with
// steady_clock around the public API calls, the way an application would see them.
#include "measure.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <exception>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>

namespace cgr::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// One run of a mode; `origin` unset for warm-up (nothing recorded), else the start of timing.
void run_once(ModeRun& run, std::optional<Clock::time_point> origin) {
  const auto start = Clock::now();
  run.context.run();
  const double latency = ms_since(start);
  if (!origin) return;
  run.latency_ms.push_back(latency);
  run.start_ms.push_back(std::chrono::duration<double, std::milli>(start - *origin).count());
  if (run.engine.options().device == Device::cpu) {
    // On the cpu the calling thread runs ops until the inference is done: issuing the work
    // and doing it are the same time.
    run.enqueue_ms.push_back(latency);
  } else {
    // The engine's own record of the run: host time until the work was enqueued, and device
    // time between events around it (copies included).
    run.enqueue_ms.push_back(run.context.last_enqueue_time_ms());
    run.gpu_ms.push_back(run.context.last_gpu_time_ms());
  }
}

}  // namespace

ConcurrentRun measure_concurrent(const Engine& engine, const InputTensors& inputs, int contexts,
                                 const StopRule& rule) {
  std::vector<ExecutionContext> pool;
  for (int c = 0; c < contexts; ++c) {
    pool.push_back(engine.create_context());
    fill_inputs(pool.back(), inputs);
    pool.back().run();  // warm: lazy initialisation and first touch, outside the clock
  }
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(contexts));
  std::vector<Clock::time_point> ends(static_cast<std::size_t>(contexts));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(contexts));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  Clock::time_point start;
  std::vector<std::thread> threads;
  for (int c = 0; c < contexts; ++c) {
    threads.emplace_back([&, c] {
      const auto k = static_cast<std::size_t>(c);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      try {
        for (int done = 0;; ++done) {
          if (rule.iterations > 0 ? done >= rule.iterations
                                  : done >= kMinTimedIterations &&
                                        ms_since(start) >= rule.duration_s * 1000.0) {
            break;
          }
          const auto t0 = Clock::now();
          pool[k].run();
          latencies[k].push_back(ms_since(t0));
        }
      } catch (...) {
        errors[k] = std::current_exception();
      }
      ends[k] = Clock::now();
    });
  }
  while (ready.load() < contexts) std::this_thread::yield();
  start = Clock::now();
  go.store(true, std::memory_order_release);
  for (auto& thread : threads) thread.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  ConcurrentRun result;
  result.contexts = contexts;
  Clock::time_point last = start;
  for (int c = 0; c < contexts; ++c) {
    const auto k = static_cast<std::size_t>(c);
    last = std::max(last, ends[k]);
    result.latency_ms.insert(result.latency_ms.end(), latencies[k].begin(), latencies[k].end());
  }
  result.wall_ms = std::chrono::duration<double, std::milli>(last - start).count();
  result.throughput_per_s = result.wall_ms > 0 ? 1000.0 * static_cast<double>(result.latency_ms.size()) / result.wall_ms : 0;
  return result;
}

Stats summarize(std::vector<double> values, const std::vector<double>& percentiles) {
  Stats s;
  s.count = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  s.min = values.front();
  s.max = values.back();
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(n);
  // One percentile definition for all of them (nearest rank): the median is p50.
  s.median = values[(n + 1) / 2 - 1];
  double squares = 0;
  for (double v : values)
    squares += (v - s.mean) * (v - s.mean);
  s.stddev = std::sqrt(squares / static_cast<double>(n));
  s.cv = s.mean > 0 ? s.stddev / s.mean : 0;
  for (double p : percentiles) {
    // Nearest rank: the smallest value with at least p% of the values at or below it.
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(n)));
    s.percentiles.emplace_back(p, values[std::clamp<std::size_t>(rank, 1, n) - 1]);
  }
  return s;
}

void fill_inputs(ExecutionContext& context, const InputTensors& inputs) {
  for (const auto& [name, tensor] : inputs) {
    const auto values = tensor.f32();
    const auto buffer = context.input_buffer(name);
    if (buffer.size() != values.size()) {
      fail("input '{}' has {} elements, the engine expects {}", name, values.size(), buffer.size());
    }
    std::copy(values.begin(), values.end(), buffer.begin());
  }
}

ModeRun make_mode_run(const Network& net, const Weights& weights, const EngineOptions& options,
                      const InputTensors& inputs) {
  auto start = Clock::now();
  Engine engine = Engine::build(net, weights, options);
  const double build_ms = ms_since(start);
  start = Clock::now();
  ExecutionContext context = engine.create_context();
  const double instantiate_ms = ms_since(start);
  // Engine and ExecutionContext have no default constructor: aggregate-initialise in order.
  ModeRun run{options.mode,
              std::move(engine),
              std::move(context),
              build_ms,
              instantiate_ms,
              {},
              false,
              false,
              {},
              {},
              {},
              0,
              {},
              {},
              {},
              {}};
  run.has_enqueue = true;
  run.has_gpu = options.device == Device::cuda;
  if (run.has_gpu && options.mode != Mode::eager) {
    run.cuda_graph = run.context.cuda_graph_report();
  }
  fill_inputs(run.context, inputs);
  return run;
}

void measure_interleaved(std::vector<ModeRun>& runs, const StopRule& rule) {
  if (runs.empty()) return;
  for (auto& run : runs) {
    run.latency_ms.clear();
    run.enqueue_ms.clear();
    run.gpu_ms.clear();
    run.start_ms.clear();
  }
  // Warm-up: at least one run of each mode (lazy initialisation, caches, first touch).
  const auto warmup_start = Clock::now();
  do {
    for (auto& run : runs)
      run_once(run, std::nullopt);
  } while (ms_since(warmup_start) < rule.warmup_ms);

  const std::size_t n = runs.size();
  const auto start = Clock::now();
  for (std::size_t round = 0;; ++round) {
    for (std::size_t j = 0; j < n; ++j) {
      ModeRun& run = runs[(round + j) % n];
      // Switching modes switches engines: the previous engine's pool threads are still spinning
      // and this one's have gone to sleep. An untimed lead-in run absorbs that, so the timed run
      // is back-to-back as in a single-mode run (measured: two-branch at 8x8, dag's median was
      // 53% higher interleaved without it than alone).
      if (n > 1) run_once(run, std::nullopt);
      run_once(run, start);
    }
    if (rule.iterations > 0) {
      if (static_cast<int>(round) + 1 >= rule.iterations) break;
    } else if (static_cast<int>(round) + 1 >= kMinTimedIterations &&
               ms_since(start) >= rule.duration_s * 1000.0) {
      break;
    }
  }
  for (auto& run : runs) {
    run.ops_executed = run.context.ops_executed();
    run.answered_by = "final";
    for (const ExitReport& exit : run.context.exit_reports()) {
      if (exit.ran && exit.fired && run.engine.options().exits == ExitPolicy::early) {
        run.answered_by = exit.name;
        break;
      }
    }
  }
}

void compare_outputs(std::vector<ModeRun>& runs, const InputTensors& inputs) {
  if (runs.size() < 2 || runs.front().mode != Mode::dag) return;
  NamedInputs named;
  for (const auto& [name, tensor] : inputs)
    named.emplace_back(name, TensorView(tensor));
  const Result reference = runs.front().context.infer(named);
  for (std::size_t k = 1; k < runs.size(); ++k) {
    const Result result = runs[k].context.infer(named);
    double diff = 0;
    for (const auto& [name, tensor] : result.outputs) {
      const auto it = reference.outputs.find(name);
      if (it == reference.outputs.end()) continue;
      const auto a = tensor.f32(), b = it->second.f32();
      for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        // NaN on one side only, or infinities that differ, is an infinite difference; NaN on
        // both sides agrees. (std::max would drop a NaN difference and report 0.)
        if (std::isnan(a[i]) || std::isnan(b[i])) {
          if (std::isnan(a[i]) != std::isnan(b[i])) diff = std::numeric_limits<double>::infinity();
        } else if (a[i] != b[i]) {
          diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
        }
      }
    }
    runs[k].max_abs_diff_vs_dag = diff;
  }
  runs.front().max_abs_diff_vs_dag = 0.0;
}

std::vector<OpSpan> profile_one_inference(const Engine& engine, const InputTensors& inputs) {
  return profile_inferences(engine, inputs, 1).front();
}

namespace {

std::vector<OpSpan> spans_of_run(const Engine& engine, const ExecutionContext& context) {
  const auto timings = context.op_timings();
  const auto executed_names = context.executed_ops();
  const std::set<std::string> executed(executed_names.begin(), executed_names.end());
  const Graph& graph = engine.graph();
  const std::vector<OpInfo> infos = engine.op_infos();
  std::vector<OpSpan> spans;
  for (std::size_t i = 0; i < timings.size(); ++i) {
    // Skipped ops (gated by a fired exit) keep no times.
    if (!executed.contains(timings[i].op)) continue;
    OpSpan span;
    span.op = timings[i].op;
    span.start_ms = timings[i].start_ms;
    span.end_ms = timings[i].end_ms;
    span.track = timings[i].thread;
    if (static_cast<int>(i) < graph.op_count()) {
      span.kind = graph.op(static_cast<int>(i)).label;
      span.lane = graph.lanes()[i];
      span.critical = infos[i].critical;
    }
    spans.push_back(std::move(span));
  }
  std::sort(spans.begin(), spans.end(), [](const OpSpan& a, const OpSpan& b) {
    return a.start_ms < b.start_ms || (a.start_ms == b.start_ms && a.end_ms < b.end_ms);
  });
  return spans;
}

}  // namespace

std::vector<std::vector<OpSpan>> profile_inferences(const Engine& engine,
                                                    const InputTensors& inputs, int recorded) {
  ExecutionContext context = engine.create_context();
  fill_inputs(context, inputs);
  context.set_profiling(true);
  context.run();  // warm: first-touch of the arena and the kernels' scratch
  std::vector<std::vector<OpSpan>> runs;
  for (int r = 0; r < std::max(1, recorded); ++r) {
    context.run();
    runs.push_back(spans_of_run(engine, context));
  }
  return runs;
}

std::vector<OpProfile> summarize_profile(const std::vector<std::vector<OpSpan>>& runs) {
  struct Collected {
    OpProfile profile;
    std::vector<double> times;
  };
  std::vector<Collected> ops;
  std::map<std::string, std::size_t, std::less<>> index_of;
  for (const auto& spans : runs) {
    // Per op in this run: its spans merged (union of intervals) into one time.
    std::map<std::string, std::vector<std::pair<double, double>>, std::less<>> intervals;
    for (const OpSpan& s : spans) {
      intervals[s.op].emplace_back(s.start_ms, s.end_ms);
      if (!index_of.contains(s.op)) {
        index_of[s.op] = ops.size();
        ops.push_back({OpProfile{s.op, s.kind, 0, 0, 0, 0, 0, 0, s.critical}, {}});
      }
    }
    for (auto& [op, list] : intervals) {
      std::sort(list.begin(), list.end());
      double total = 0, begin = list.front().first, end = list.front().second;
      for (const auto& [b, e] : list) {
        if (b > end) {
          total += end - begin;
          begin = b;
        }
        end = std::max(end, e);
      }
      total += end - begin;
      ops[index_of[op]].times.push_back(total);
    }
  }
  double sum_of_means = 0;
  std::vector<OpProfile> profiles;
  for (auto& [profile, times] : ops) {
    const Stats s = summarize(times, {});
    profile.runs = static_cast<int>(times.size());
    profile.mean_ms = s.mean;
    profile.median_ms = s.median;
    profile.min_ms = s.min;
    profile.max_ms = s.max;
    sum_of_means += s.mean;
    profiles.push_back(profile);
  }
  for (auto& p : profiles)
    p.share = sum_of_means > 0 ? p.mean_ms / sum_of_means : 0;
  std::stable_sort(profiles.begin(), profiles.end(),
                   [](const OpProfile& a, const OpProfile& b) { return a.mean_ms > b.mean_ms; });
  return profiles;
}

}  // namespace cgr::bench
