// The two pictures cgr-bench draws, as standalone SVG: the timeline of one inference (a bar per
// executed op, one row per concurrent lane) and the size sweep (latency per mode and the
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

// Row of each span (spans in start order): the first row whose last bar ended at or before
// the span's start, else a new row. Returns the rows; `row_count` receives their number.
std::vector<int> assign_rows(const std::vector<OpSpan>& spans, int& row_count);

struct TimelineFacts {
  int bars = 0;
  int rows = 0;
  double span_ms = 0;  // first start to last end
  double busy_ms = 0;  // sum of the bars' durations
};

// Writes the timeline; Error when the file cannot be written.
TimelineFacts write_timeline_svg(const std::string& path, const std::vector<OpSpan>& spans,
                                 const std::string& title);

struct PlotSeries {
  std::string name;
  std::vector<double> values;  // one per size
};

struct SweepPlot {
  std::string title;
  std::vector<std::int64_t> sizes;
  std::vector<PlotSeries> latency_ms;  // one series per mode (median latency)
  PlotSeries ratio;                    // e.g. "eager / dag"; empty values: not drawn
};

// Writes the sweep plot; Error when the file cannot be written.
void write_sweep_plot(const std::string& path, const SweepPlot& plot);

}  // namespace cgr::bench
