// The two pictures cgr-bench draws, as standalone SVG: the timeline of one inference (a bar per
// executed op, one row per CPU thread or concurrent device slot, coloured by layer kind, the
// critical path outlined, a legend) and the size sweep (latency per mode and the
// eager/dag ratio against input size). Hand-written XML: every text is escaped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "measure.hpp"

namespace cgr::bench {

// Escapes &, <, >, " and ' for XML text and attribute values.
std::string xml_escape(std::string_view text);

// The timeline's rows: one per CPU thread (spans with a track), split further where that
// thread's bars overlap; on the GPU, whose graph work has no thread, concurrent slots (the
// first free one). `row_of_span` receives each span's row.
struct TimelineRow {
  std::string name;  // "thread 0 (caller)", "thread 1", "slot 2"
  int track = 0;
};
std::vector<TimelineRow> timeline_rows(const std::vector<OpSpan>& spans,
                                       std::vector<int>& row_of_span);

struct TimelineFacts {
  int bars = 0;
  int rows = 0;
  int critical_bars = 0;
  double span_ms = 0;  // first start to last end
  double busy_ms = 0;  // sum of the bars' durations
};

// Writes the timeline; Error when the file cannot be written.
TimelineFacts write_timeline_svg(const std::string& path, const std::vector<OpSpan>& spans,
                                 const std::string& title);

struct PlotSeries {
  std::string name;
  std::vector<double> values;     // one per size
  std::vector<double> low, high;  // the spread of each value (whiskers); empty: none
};

struct SweepPlot {
  std::string title;
  std::vector<std::int64_t> sizes;
  std::vector<PlotSeries> latency_ms;  // one series per mode (median latency and its spread)
  std::string spread = "min to max of the timed runs";  // what low / high are
  PlotSeries ratio;                    // e.g. "eager / dag"; empty values: not drawn
};

// Writes the sweep plot; Error when the file cannot be written.
void write_sweep_plot(const std::string& path, const SweepPlot& plot);

}  // namespace cgr::bench
