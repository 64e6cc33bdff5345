// Side-by-side latency of several execution contexts: modes are timed interleaved, one run
// of each per round, so drift (clock, other load) affects them alike. Each timed run follows
// an untimed one of the same context: switching engines finds the new engine's pool threads
// asleep (the other engine's were spinning), a cost a real replay loop does not pay.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include <cgr/engine.hpp>

namespace cgr::samples {

// Median milliseconds of ctx.run() per context after one warm-up run each.
inline std::vector<double> interleaved_median_ms(std::vector<ExecutionContext*> contexts,
                                                 int rounds) {
  std::vector<std::vector<double>> times(contexts.size());
  for (auto* ctx : contexts) ctx->run();
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t k = 0; k < contexts.size(); ++k) {
      contexts[k]->run();
      const auto start = std::chrono::steady_clock::now();
      contexts[k]->run();
      times[k].push_back(std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - start)
                             .count());
    }
  }
  std::vector<double> medians;
  for (auto& t : times) {
    std::sort(t.begin(), t.end());
    medians.push_back(t[t.size() / 2]);
  }
  return medians;
}

}  // namespace cgr::samples
