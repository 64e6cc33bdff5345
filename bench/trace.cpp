// Chrome trace-event JSON (see trace.hpp). Timestamps are microseconds; events on one track
// must nest or follow each other, which the timeline's row assignment guarantees (a row never
// holds two overlapping spans).
#include "trace.hpp"

#include <cgr/files.hpp>

#include <map>
#include <nlohmann/json.hpp>

#include "svg.hpp"

namespace cgr::bench {

void write_chrome_trace(const std::string& path, const std::vector<std::vector<OpSpan>>& runs,
                        const std::vector<OpInfo>& infos, const std::string& process_name,
                        double gap_ms) {
  using nlohmann::json;
  std::map<std::string, const OpInfo*, std::less<>> info_of;
  for (const OpInfo& info : infos)
    info_of[info.name] = &info;
  json events = json::array();
  events.push_back(
      {{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", process_name}}}});
  // Track names: the same rows in every run, so a track id is its row's name.
  std::map<std::string, int> track_of_row;
  double offset_ms = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const auto& spans = runs[r];
    std::vector<int> row_of;
    const std::vector<TimelineRow> rows = timeline_rows(spans, row_of);
    std::vector<int> tid_of_row;
    for (const TimelineRow& row : rows) {
      auto [it, added] = track_of_row.emplace(row.name, static_cast<int>(track_of_row.size()) + 1);
      if (added) {
        events.push_back({{"ph", "M"},
                          {"name", "thread_name"},
                          {"pid", 1},
                          {"tid", it->second},
                          {"args", {{"name", row.name}}}});
        events.push_back({{"ph", "M"},
                          {"name", "thread_sort_index"},
                          {"pid", 1},
                          {"tid", it->second},
                          {"args", {{"sort_index", it->second}}}});
      }
      tid_of_row.push_back(it->second);
    }
    double last_ms = 0;
    for (std::size_t i = 0; i < spans.size(); ++i) {
      const OpSpan& s = spans[i];
      json args = {{"run", r + 1}, {"kind", s.kind}, {"critical_path", s.critical}};
      // A GPU span names its op; a copy-out names the op whose results it copies.
      std::string_view op = s.op;
      if (op.rfind("copy-out:", 0) == 0) op.remove_prefix(9);
      if (const auto it = info_of.find(op); it != info_of.end()) {
        const OpInfo& info = *it->second;
        json inputs = json::array();
        for (const Shape& shape : info.input_shapes)
          inputs.push_back(shape.to_string());
        args["op_kind"] = info.kind;
        args["inputs"] = inputs;
        args["output"] = info.output_shape.to_string();
        args["gflop"] = info.flops * 1e-9;
        args["mbytes"] = info.bytes * 1e-6;
      }
      events.push_back(
          {{"ph", "X"},
           {"name", s.op},
           {"cat", s.category.empty() ? s.kind.substr(0, s.kind.find('+')) : s.category},
           {"pid", 1},
           {"tid", tid_of_row[static_cast<std::size_t>(row_of[i])]},
           {"ts", (offset_ms + s.start_ms) * 1000.0},
           {"dur", (s.end_ms - s.start_ms) * 1000.0},
           {"args", std::move(args)}});
      last_ms = std::max(last_ms, s.end_ms);
    }
    offset_ms += last_ms + gap_ms;
  }
  const json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  write_text_file(path, trace.dump(1) + "\n");
}

}  // namespace cgr::bench
