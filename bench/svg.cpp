// SVG writers of cgr-bench (see svg.hpp). Coordinates are computed here rather than left to a
// plotting library: the files must open in any browser with nothing installed.
#include "svg.hpp"

#include <cgr/files.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <cgr/error.hpp>

namespace cgr::bench {
namespace {

constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr const char* kFont = "font-family=\"sans-serif\"";

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `target` ticks over `range`.
double nice_step(double range, int target) {
  if (!(range > 0)) return 1;
  const double raw = range / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double factor = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  return factor * magnitude;
}

std::string number(double value) {
  return fmt::format("{:.6g}", value);
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// What colours a bar: the op's first layer kind ("Conv2d" of "Conv2d+BatchNorm2d+ReLU"), or
// what the span says it is (the GPU's copies).
std::string category_of(const OpSpan& span) {
  if (!span.category.empty()) return span.category;
  return span.kind.substr(0, span.kind.find('+'));
}

// An op's name shortened to its first layer, with how many more it fused:
// "inception3a.branch1.conv (+2)" for "inception3a.branch1.conv+...bn+...relu". Layer names are
// unique, so this still names one op.
std::string short_name(const std::string& name) {
  const std::size_t plus = name.find('+');
  if (plus == std::string::npos) return name;
  const auto fused = std::count(name.begin(), name.end(), '+');
  return fmt::format("{} (+{})", name.substr(0, plus), fused);
}

// The label a bar of `width` pixels shows, at ~6.5 px per character (11 px font): the whole
// op name, else its short name, else its number "#n" (then the legend lists it), else nothing
// (listed too; the tooltip still has it). `listed` says whether the legend must list it.
std::string bar_label(const std::string& name, std::size_t number, double width, bool& listed) {
  const auto chars = static_cast<std::size_t>(std::max(0.0, width / 6.5));
  listed = false;
  if (chars >= name.size()) return name;
  const std::string shorter = short_name(name);
  if (chars >= shorter.size()) return shorter;
  listed = true;
  const std::string tag = fmt::format("#{}", number);
  return chars >= tag.size() ? tag : std::string();
}

}  // namespace

std::vector<TimelineRow> timeline_rows(const std::vector<OpSpan>& spans,
                                       std::vector<int>& row_of_span) {
  const bool by_track = !spans.empty() && std::all_of(spans.begin(), spans.end(),
                                                      [](const OpSpan& s) { return s.track >= 0; });
  std::vector<TimelineRow> rows;
  row_of_span.assign(spans.size(), 0);
  std::vector<double> row_end;
  // Tracks in order; within a track (or among all spans on the GPU), the first row whose last
  // bar ended before the span starts, else a new row.
  std::vector<int> tracks;
  for (const OpSpan& s : spans)
    tracks.push_back(by_track ? s.track : 0);
  std::vector<int> distinct = tracks;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (const int track : distinct) {
    const std::size_t first_row = rows.size();
    for (std::size_t i = 0; i < spans.size(); ++i) {
      if (tracks[i] != track) continue;
      std::size_t row = first_row;
      while (row < rows.size() && row_end[row] > spans[i].start_ms)
        ++row;
      if (row == rows.size()) {
        const int sub = static_cast<int>(row - first_row);
        std::string name = by_track ? (track == 0 ? std::string("thread 0 (caller)")
                                                  : fmt::format("thread {}", track))
                                    : fmt::format("slot {}", sub + 1);
        if (by_track && sub > 0) name += fmt::format(" ({})", sub + 1);
        rows.push_back({std::move(name), track});
        row_end.push_back(0);
      }
      row_end[row] = spans[i].end_ms;
      row_of_span[i] = static_cast<int>(row);
    }
  }
  return rows;
}

TimelineFacts write_timeline_svg(const std::string& path, const std::vector<OpSpan>& spans,
                                 const std::string& title) {
  TimelineFacts facts;
  facts.bars = static_cast<int>(spans.size());
  std::vector<int> row_of;
  const std::vector<TimelineRow> rows = timeline_rows(spans, row_of);
  facts.rows = static_cast<int>(rows.size());
  double first = spans.empty() ? 0 : std::numeric_limits<double>::max(), last = 0;
  for (const OpSpan& s : spans) {
    first = std::min(first, s.start_ms);
    last = std::max(last, s.end_ms);
    facts.busy_ms += s.end_ms - s.start_ms;
    facts.critical_bars += s.critical ? 1 : 0;
  }
  facts.span_ms = last - first;

  // Colours by category, in order of first appearance.
  std::vector<std::string> categories;
  for (const OpSpan& s : spans) {
    const std::string c = category_of(s);
    if (std::find(categories.begin(), categories.end(), c) == categories.end())
      categories.push_back(c);
  }
  auto colour_of = [&](const OpSpan& s) {
    const auto k = static_cast<std::size_t>(
        std::find(categories.begin(), categories.end(), category_of(s)) - categories.begin());
    return kPalette[k % std::size(kPalette)];
  };

  const double left = 130, right = 30, top = 84, row_height = 26, plot_width = 1100;
  const double width = left + plot_width + right;
  const double axis_y = top + std::max(1, facts.rows) * row_height + 6;
  const double end_ms = std::max(last, 1e-6);
  auto x_of = [&](double ms) { return left + ms / end_ms * plot_width; };

  // Bars first (their labels decide the legend's length).
  std::string bars;
  std::vector<std::pair<std::size_t, std::string>> listed;  // bars showing at most "#n"
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const OpSpan& s = spans[i];
    const double x = x_of(s.start_ms);
    const double w = std::max(0.5, x_of(s.end_ms) - x);
    const double y = top + row_of[i] * row_height + 2;
    bars += fmt::format(
        "<rect class=\"op{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>#{} "
        "{}{} {:.3f} ms (from {:.3f} to {:.3f} ms){}</title></rect>\n",
        s.critical ? " critical" : "", number(x), number(y), number(w), number(row_height - 4),
        colour_of(s), i + 1, xml_escape(s.op),
        s.kind.empty() ? "" : " [" + xml_escape(s.kind) + "]", s.end_ms - s.start_ms, s.start_ms,
        s.end_ms, s.critical ? ", on the critical path" : "");
    bool listed_here = false;
    const std::string label = bar_label(s.op, i + 1, w - 4, listed_here);
    if (listed_here) listed.push_back({i + 1, short_name(s.op)});
    if (!label.empty()) {
      bars += fmt::format(
          "<text x=\"{}\" y=\"{}\" {} font-size=\"11\" pointer-events=\"none\">{}</text>\n",
          number(x + 2), number(y + row_height / 2 + 2), kFont, xml_escape(label));
    }
  }
  // The legend under the axis: colours, the critical-path outline, then the ops by number.
  const double legend_top = axis_y + 54;
  constexpr int kColumns = 3;
  constexpr double kLine = 15;
  const double column_width = (plot_width + left - 20) / kColumns;
  const auto listed_rows = (listed.size() + kColumns - 1) / kColumns;
  const double height = legend_top + 24 + (listed.empty() ? 0 : 20 + listed_rows * kLine) + 16;

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\"\n"
      "     viewBox=\"0 0 {0} {1}\">\n"
      "<style>.op {{ stroke: #222; stroke-width: 0.5; }} .op:hover {{ stroke-width: 2; }}\n"
      "  .critical {{ stroke: #c00000; stroke-width: 2.5; }}</style>\n"
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"20\" y=\"24\" {3} font-size=\"15\">{4}</text>\n"
      "<text x=\"20\" y=\"44\" {3} font-size=\"11\" fill=\"#555\">{5} ops in {6} rows "
      "({7}); span {8:.3f} ms, busy {9:.3f} ms (parallelism {10:.2f}); {11} ops on the "
      "estimated critical path, outlined red</text>\n"
      "<text x=\"20\" y=\"60\" {3} font-size=\"11\" fill=\"#555\">hover a bar for its op, kind "
      "and times; bars too short for their name are numbered and listed below</text>\n",
      number(width), number(height), left, kFont, xml_escape(title), facts.bars, facts.rows,
      spans.empty() || spans.front().track >= 0 ? "one per CPU thread"
                                                : "concurrent slots of the device",
      facts.span_ms, facts.busy_ms, facts.span_ms > 0 ? facts.busy_ms / facts.span_ms : 0.0,
      facts.critical_bars);

  // Time axis with grid lines, row names.
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#222\"/>\n", left,
                     number(axis_y), number(left + plot_width), number(axis_y));
  const double step = nice_step(end_ms, 10);
  for (double t = 0; t <= end_ms * (1 + 1e-9); t += step) {
    const double x = x_of(t);
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/>\n",
                       number(x), number(top - 4), number(axis_y + 4));
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" {} font-size=\"11\" text-anchor=\"middle\">{}</text>\n", number(x),
        number(axis_y + 18), kFont, number(t));
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" {} font-size=\"12\" text-anchor=\"middle\">time since the "
      "start of the run (ms)</text>\n",
      number(left + plot_width / 2), number(axis_y + 36), kFont);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" {} font-size=\"11\" text-anchor=\"end\">{}</text>\n", left - 8,
        number(top + static_cast<double>(r) * row_height + row_height / 2 + 4), kFont,
        xml_escape(rows[r].name));
  }
  svg += bars;

  double lx = 20;
  for (std::size_t k = 0; k < categories.size(); ++k) {
    const std::string name = categories[k].empty() ? "other" : categories[k];
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\" stroke=\"#222\" "
        "stroke-width=\"0.5\"/><text x=\"{}\" y=\"{}\" {} font-size=\"11\">{}</text>\n",
        number(lx), number(legend_top), kPalette[k % std::size(kPalette)], number(lx + 16),
        number(legend_top + 10), kFont, xml_escape(name));
    lx += 16 + 6.5 * static_cast<double>(name.size()) + 14;
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"white\" stroke=\"#c00000\" "
      "stroke-width=\"2.5\"/><text x=\"{}\" y=\"{}\" {} font-size=\"11\">critical path</text>\n",
      number(lx), number(legend_top), number(lx + 16), number(legend_top + 10), kFont);
  if (!listed.empty()) {
    svg += fmt::format(
        "<text x=\"20\" y=\"{}\" {} font-size=\"11\" fill=\"#555\">ops by "
        "number:</text>\n",
        number(legend_top + 34), kFont);
    for (std::size_t k = 0; k < listed.size(); ++k) {
      const double x = 20 + static_cast<double>(k / listed_rows) * column_width;
      const double y = legend_top + 50 + static_cast<double>(k % listed_rows) * kLine;
      // The number stays; a name longer than its column keeps its end (where names differ).
      const auto& [op_number, name] = listed[k];
      const std::string tag = fmt::format("#{} ", op_number);
      const auto fits = static_cast<std::size_t>(column_width / 6.2) - tag.size();
      const std::string text =
          tag + (name.size() > fits ? "\u2026" + name.substr(name.size() - (fits - 1)) : name);
      svg += fmt::format("<text x=\"{}\" y=\"{}\" {} font-size=\"10.5\">{}</text>\n", number(x),
                         number(y), kFont, xml_escape(text));
    }
  }
  svg += "</svg>\n";
  write_text_file(path, svg);
  return facts;
}

void write_sweep_plot(const std::string& path, const SweepPlot& plot) {
  // Two panels sharing the size axis: the latency of each mode (log scale, a whisker over each
  // point's spread) above, the ratio below (linear, its own axis and a line at 1): a ratio
  // never reads off a latency axis.
  const bool has_ratio = !plot.ratio.values.empty();
  const double left = 90, right = 40, top = 78, plot_width = 800, upper_height = 340;
  const double gap = 46, lower_height = has_ratio ? 150 : 0, bottom = 64;
  const double lower_top = top + upper_height + gap;
  const double width = left + plot_width + right;
  const double height = (has_ratio ? lower_top + lower_height : top + upper_height) + bottom;
  const std::size_t n = plot.sizes.size();
  auto x_of = [&](std::size_t i) {
    // Sizes are evenly spaced categories: the usual sweeps (8, 16, ..., 224) are neither
    // linear nor exactly geometric.
    return n <= 1 ? left + plot_width / 2
                  : left + plot_width *
                               (0.05 + 0.9 * static_cast<double>(i) / static_cast<double>(n - 1));
  };

  // Upper axis: latency on a log scale, whole decades around the data and its spread.
  double lo = std::numeric_limits<double>::max(), hi = 0;
  for (const auto& series : plot.latency_ms) {
    for (const auto* values : {&series.values, &series.low, &series.high}) {
      for (double v : *values) {
        if (v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
      }
    }
  }
  if (hi <= 0) lo = 0.1, hi = 1;
  const double decade_lo = std::floor(std::log10(lo)),
               decade_hi = std::max(decade_lo + 1, std::ceil(std::log10(hi)));
  auto y_of = [&](double ms) {
    return top + upper_height *
                     (1 - (std::log10(std::max(ms, 1e-9)) - decade_lo) / (decade_hi - decade_lo));
  };
  // Lower axis: the ratio, linear, always including 1.
  double ratio_lo = 1, ratio_hi = 1;
  for (double r : plot.ratio.values)
    ratio_lo = std::min(ratio_lo, r), ratio_hi = std::max(ratio_hi, r);
  const double ratio_step = nice_step(std::max(ratio_hi - ratio_lo, 0.2), 4);
  ratio_lo = std::floor(ratio_lo / ratio_step) * ratio_step;
  ratio_hi = std::ceil(ratio_hi / ratio_step) * ratio_step;
  if (ratio_hi <= ratio_lo) ratio_hi = ratio_lo + ratio_step;
  auto ry_of = [&](double r) {
    return lower_top + lower_height * (1 - (r - ratio_lo) / (ratio_hi - ratio_lo));
  };

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\"\n"
      "     viewBox=\"0 0 {0} {1}\">\n"
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" {3} font-size=\"15\">{4}</text>\n",
      number(width), number(height), left, kFont, xml_escape(plot.title));
  // Upper panel: frame, decade grid, axis title.
  svg += fmt::format(
      "<rect class=\"panel\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
      "stroke=\"#222\"/>\n",
      left, top, plot_width, upper_height);
  for (double d = decade_lo; d <= decade_hi; ++d) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, d);
      if (std::log10(v) > decade_hi + 1e-9) break;
      const double y = y_of(v);
      svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\"/>\n",
                         left, number(y), left + plot_width, m == 1.0 ? "#ccc" : "#eee");
      svg +=
          fmt::format("<text x=\"{}\" y=\"{}\" {} font-size=\"11\" text-anchor=\"end\">{}</text>\n",
                      left - 6, number(y + 4), kFont, number(v));
    }
  }
  svg += fmt::format(
      "<text transform=\"translate({},{}) rotate(-90)\" {} font-size=\"12\" "
      "text-anchor=\"middle\">latency (ms, log scale)</text>\n",
      left - 58, number(top + upper_height / 2), kFont);
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" {} font-size=\"11\" fill=\"#555\">points: median; whiskers: "
      "{}</text>\n",
      left, top - 8, kFont, xml_escape(plot.spread));
  // Size labels under the lowest panel.
  const double axis_bottom = has_ratio ? lower_top + lower_height : top + upper_height;
  for (std::size_t i = 0; i < n; ++i) {
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" {} font-size=\"11\" text-anchor=\"middle\">{}</text>\n",
        number(x_of(i)), number(axis_bottom + 18), kFont, plot.sizes[i]);
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" {} font-size=\"12\" text-anchor=\"middle\">input size (H = W, "
      "pixels)</text>\n",
      number(left + plot_width / 2), number(axis_bottom + 42), kFont);

  // Series: whiskers, a polyline and a marker with a tooltip per point; legend above.
  std::size_t legend = 0;
  auto legend_entry = [&](const std::string& name, const char* colour, bool dashed) {
    const double lx = left + static_cast<double>(legend++) * 170;
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"46\" x2=\"{1}\" y2=\"46\" stroke=\"{2}\" stroke-width=\"2\"{3}/>\n"
        "<text x=\"{4}\" y=\"50\" {5} font-size=\"12\">{6}</text>\n",
        number(lx), number(lx + 24), colour, dashed ? " stroke-dasharray=\"6 4\"" : "",
        number(lx + 30), kFont, xml_escape(name));
  };
  for (std::size_t k = 0; k < plot.latency_ms.size(); ++k) {
    const PlotSeries& series = plot.latency_ms[k];
    const char* colour = kPalette[k % std::size(kPalette)];
    // Modes side by side around each size, so whiskers of equal points stay visible.
    const double offset = (static_cast<double>(k) - (plot.latency_ms.size() - 1) / 2.0) * 6;
    std::string points;
    for (std::size_t i = 0; i < series.values.size() && i < n; ++i) {
      const double x = x_of(i) + offset;
      points += fmt::format("{},{} ", number(x), number(y_of(series.values[i])));
      if (i < series.low.size() && i < series.high.size()) {
        const double y1 = y_of(series.low[i]), y2 = y_of(series.high[i]);
        svg += fmt::format(
            "<path class=\"whisker\" d=\"M{0} {1}V{2}M{3} {1}H{4}M{3} {2}H{4}\" stroke=\"{5}\" "
            "stroke-width=\"1.2\" fill=\"none\"/>\n",
            number(x), number(y1), number(y2), number(x - 3), number(x + 3), colour);
      }
    }
    svg += fmt::format(
        "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
        "points=\"{}\"/>\n",
        colour, points);
    for (std::size_t i = 0; i < series.values.size() && i < n; ++i) {
      const bool spread = i < series.low.size() && i < series.high.size();
      svg += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"><title>{} at {}: {:.4g} ms{}</title>"
          "</circle>\n",
          number(x_of(i) + offset), number(y_of(series.values[i])), colour, xml_escape(series.name),
          plot.sizes[i], series.values[i],
          spread ? fmt::format(" ({:.4g} to {:.4g})", series.low[i], series.high[i]) : "");
    }
    legend_entry(series.name, colour, false);
  }

  if (has_ratio) {
    svg += fmt::format(
        "<rect class=\"panel\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
        "stroke=\"#222\"/>\n",
        left, number(lower_top), plot_width, number(lower_height));
    for (double r = ratio_lo; r <= ratio_hi + 1e-9; r += ratio_step) {
      svg += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#eee\"/>\n"
          "<text x=\"{3}\" y=\"{4}\" {5} font-size=\"11\" text-anchor=\"end\">{6}</text>\n",
          left, number(ry_of(r)), left + plot_width, left - 6, number(ry_of(r) + 4), kFont,
          number(r));
    }
    svg += fmt::format(
        "<line class=\"parity\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#222\" "
        "stroke-dasharray=\"4 3\"/>\n",
        left, number(ry_of(1.0)), left + plot_width);
    svg += fmt::format(
        "<text transform=\"translate({},{}) rotate(-90)\" {} font-size=\"12\" "
        "text-anchor=\"middle\">{}</text>\n",
        left - 58, number(lower_top + lower_height / 2), kFont, xml_escape(plot.ratio.name));
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" {} font-size=\"11\" fill=\"#555\">ratio of medians (dashed: "
        "1, no difference; above 1: {} is slower)</text>\n",
        left, number(lower_top - 8), kFont,
        xml_escape(plot.ratio.name.substr(0, plot.ratio.name.find(" /"))));
    std::string points;
    for (std::size_t i = 0; i < plot.ratio.values.size() && i < n; ++i) {
      points += fmt::format("{},{} ", number(x_of(i)), number(ry_of(plot.ratio.values[i])));
    }
    svg += fmt::format(
        "<polyline class=\"series\" fill=\"none\" stroke=\"#555\" stroke-width=\"2\" "
        "points=\"{}\"/>\n",
        points);
    for (std::size_t i = 0; i < plot.ratio.values.size() && i < n; ++i) {
      svg += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"#555\"><title>{} at {}: {:.3f}x</title>"
          "</circle>\n",
          number(x_of(i)), number(ry_of(plot.ratio.values[i])), xml_escape(plot.ratio.name),
          plot.sizes[i], plot.ratio.values[i]);
    }
  }
  svg += "</svg>\n";
  write_text_file(path, svg);
}

}  // namespace cgr::bench
