// The Chrome trace-event format (the JSON chrome://tracing, Perfetto's UI and about://tracing
// load): cgr-bench --export-trace writes profiled inferences as complete events ("ph": "X"),
// one track per CPU thread or device slot (the timeline's rows), each op's kind, shapes, work
// and critical-path flag as its arguments.
#pragma once

#include <string>
#include <vector>

#include <cgr/engine.hpp>

#include "measure.hpp"

namespace cgr::bench {

// runs: the spans of each profiled inference (times since that run's start); they are laid
// end to end, `gap_ms` apart. infos: the engine's ops (Engine::op_infos), for the arguments.
// Error when the file cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<std::vector<OpSpan>>& runs,
                        const std::vector<OpInfo>& infos, const std::string& process_name,
                        double gap_ms = 0.05);

}  // namespace cgr::bench
