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

// What of an op's name fits `width` pixels at ~6.5 px per character (11 px font): the whole
// name, else its first fused layer ("conv1" of "conv1+bn1+relu"), else a prefix of that.
std::string fit_label(const std::string& name, double width) {
  const auto chars = static_cast<std::size_t>(std::max(0.0, width / 6.5));
  if (chars >= name.size()) return name;
  const std::string text = name.substr(0, name.find('+'));
  if (chars >= text.size()) return text;
  if (chars < 4) return {};
  return text.substr(0, chars - 1) + "~";
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

std::vector<int> assign_rows(const std::vector<OpSpan>& spans, int& row_count) {
  std::vector<double> row_end;  // when each row's last bar ends
  std::vector<int> rows;
  for (const OpSpan& span : spans) {
    int row = -1;
    for (std::size_t r = 0; r < row_end.size(); ++r) {
      if (row_end[r] <= span.start_ms) {
        row = static_cast<int>(r);
        break;
      }
    }
    if (row < 0) {
      row = static_cast<int>(row_end.size());
      row_end.push_back(0);
    }
    row_end[static_cast<std::size_t>(row)] = span.end_ms;
    rows.push_back(row);
  }
  row_count = static_cast<int>(row_end.size());
  return rows;
}

TimelineFacts write_timeline_svg(const std::string& path, const std::vector<OpSpan>& spans,
                                 const std::string& title) {
  TimelineFacts facts;
  facts.bars = static_cast<int>(spans.size());
  const std::vector<int> rows = assign_rows(spans, facts.rows);
  double first = spans.empty() ? 0 : std::numeric_limits<double>::max(), last = 0;
  for (const OpSpan& s : spans) {
    first = std::min(first, s.start_ms);
    last = std::max(last, s.end_ms);
    facts.busy_ms += s.end_ms - s.start_ms;
  }
  facts.span_ms = last - first;

  const double left = 70, right = 30, top = 56, row_height = 26, bottom = 56;
  const double plot_width = 1100;
  const double width = left + plot_width + right;
  const double height = top + std::max(1, facts.rows) * row_height + bottom;
  // The axis starts at the run's start (0 ms) so that the time before the first op shows.
  const double end_ms = std::max(last, 1e-6);
  auto x_of = [&](double ms) { return left + ms / end_ms * plot_width; };

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\"\n"
      "     viewBox=\"0 0 {0} {1}\">\n"
      "<style>.op {{ stroke: #222; stroke-width: 0.5; }} .op:hover {{ stroke-width: 2; }}</style>\n"
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" {3} font-size=\"15\">{4}</text>\n"
      "<text x=\"{2}\" y=\"40\" {3} font-size=\"11\" fill=\"#555\">{5} ops in {6} rows;"
      " span {7:.3f} ms, busy {8:.3f} ms (parallelism {9:.2f});"
      " colour: dependency chain (lane) of the op</text>\n",
      number(width), number(height), left, kFont, xml_escape(title), facts.bars, facts.rows,
      facts.span_ms, facts.busy_ms, facts.span_ms > 0 ? facts.busy_ms / facts.span_ms : 0.0);

  // Time axis with grid lines.
  const double axis_y = top + std::max(1, facts.rows) * row_height + 6;
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
      number(left + plot_width / 2), number(axis_y + 38), kFont);
  for (int r = 0; r < facts.rows; ++r) {
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" {} font-size=\"11\" text-anchor=\"end\">row {}</text>\n", left - 8,
        number(top + r * row_height + row_height / 2 + 4), kFont, r + 1);
  }

  // One bar per op; a child <title> is the tooltip browsers show.
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const OpSpan& s = spans[i];
    const double x = x_of(s.start_ms);
    const double w = std::max(0.5, x_of(s.end_ms) - x);
    const double y = top + rows[i] * row_height + 2;
    const char* colour = kPalette[static_cast<std::size_t>(s.lane) % std::size(kPalette)];
    svg += fmt::format(
        "<rect class=\"op\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}{} "
        "{:.3f} ms (from {:.3f} to {:.3f} ms)</title></rect>\n",
        number(x), number(y), number(w), number(row_height - 4), colour, xml_escape(s.op),
        s.kind.empty() ? "" : " [" + xml_escape(s.kind) + "]", s.end_ms - s.start_ms, s.start_ms,
        s.end_ms);
    if (const std::string label = fit_label(s.op, w - 4); !label.empty()) {
      svg += fmt::format(
          "<text x=\"{}\" y=\"{}\" {} font-size=\"11\" pointer-events=\"none\">{}</text>\n",
          number(x + 2), number(y + row_height / 2 + 2), kFont, xml_escape(label));
    }
  }
  svg += "</svg>\n";
  write_text_file(path, svg);
  return facts;
}

void write_sweep_plot(const std::string& path, const SweepPlot& plot) {
  const double left = 90, right = 90, top = 80, bottom = 70, plot_width = 760, plot_height = 400;
  const double width = left + plot_width + right, height = top + plot_height + bottom;
  const std::size_t n = plot.sizes.size();
  auto x_of = [&](std::size_t i) {
    // Sizes are evenly spaced categories: the usual sweeps (8, 16, ..., 224) are neither
    // linear nor exactly geometric.
    return n <= 1 ? left + plot_width / 2
                  : left + plot_width *
                               (0.05 + 0.9 * static_cast<double>(i) / static_cast<double>(n - 1));
  };

  // Left axis: latency on a log scale, whole decades around the data.
  double lo = std::numeric_limits<double>::max(), hi = 0;
  for (const auto& series : plot.latency_ms) {
    for (double v : series.values) {
      if (v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  }
  if (hi <= 0) lo = 0.1, hi = 1;
  const double decade_lo = std::floor(std::log10(lo)),
               decade_hi = std::max(decade_lo + 1, std::ceil(std::log10(hi)));
  auto y_of = [&](double ms) {
    return top + plot_height * (1 - (std::log10(ms) - decade_lo) / (decade_hi - decade_lo));
  };
  // Right axis: the ratio, linear, always including 1.
  double ratio_lo = 1, ratio_hi = 1;
  for (double r : plot.ratio.values)
    ratio_lo = std::min(ratio_lo, r), ratio_hi = std::max(ratio_hi, r);
  const double ratio_step = nice_step(std::max(ratio_hi - ratio_lo, 0.2), 5);
  ratio_lo = std::floor(ratio_lo / ratio_step) * ratio_step;
  ratio_hi = std::ceil(ratio_hi / ratio_step) * ratio_step;
  if (ratio_hi <= ratio_lo) ratio_hi = ratio_lo + ratio_step;
  auto ry_of = [&](double r) {
    return top + plot_height * (1 - (r - ratio_lo) / (ratio_hi - ratio_lo));
  };

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\"\n"
      "     viewBox=\"0 0 {0} {1}\">\n"
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"26\" {3} font-size=\"15\">{4}</text>\n",
      number(width), number(height), left, kFont, xml_escape(plot.title));
  // Frame, grid and axes.
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#222\"/>\n", left,
      top, plot_width, plot_height);
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
      "text-anchor=\"middle\">median latency (ms, log scale)</text>\n",
      left - 58, number(top + plot_height / 2), kFont);
  for (std::size_t i = 0; i < n; ++i) {
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" {} font-size=\"11\" text-anchor=\"middle\">{}</text>\n",
        number(x_of(i)), number(top + plot_height + 18), kFont, plot.sizes[i]);
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" {} font-size=\"12\" text-anchor=\"middle\">input size (H = W, "
      "pixels)</text>\n",
      number(left + plot_width / 2), number(top + plot_height + 44), kFont);
  if (!plot.ratio.values.empty()) {
    for (double r = ratio_lo; r <= ratio_hi + 1e-9; r += ratio_step) {
      svg += fmt::format("<text x=\"{}\" y=\"{}\" {} font-size=\"11\" fill=\"#555\">{}</text>\n",
                         left + plot_width + 6, number(ry_of(r) + 4), kFont, number(r));
    }
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#555\""
        " stroke-dasharray=\"2 3\"/>\n",
        left, number(ry_of(1.0)), left + plot_width);
    svg += fmt::format(
        "<text transform=\"translate({},{}) rotate(90)\" {} font-size=\"12\" fill=\"#555\" "
        "text-anchor=\"middle\">{} (right axis; dotted: 1)</text>\n",
        left + plot_width + 56, number(top + plot_height / 2), kFont, xml_escape(plot.ratio.name));
  }

  // Series: a polyline and a marker with a tooltip per point; legend above the plot.
  auto draw = [&](const PlotSeries& series, const char* colour, bool dashed, auto&& y_fn,
                  const char* unit, std::size_t legend_index) {
    std::string points;
    for (std::size_t i = 0; i < series.values.size() && i < n; ++i) {
      points += fmt::format("{},{} ", number(x_of(i)), number(y_fn(series.values[i])));
    }
    svg += fmt::format(
        "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} "
        "points=\"{}\"/>\n",
        colour, dashed ? " stroke-dasharray=\"6 4\"" : "", points);
    for (std::size_t i = 0; i < series.values.size() && i < n; ++i) {
      svg += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"><title>{} at {}: "
          "{:.4g}{}</title></circle>\n",
          number(x_of(i)), number(y_fn(series.values[i])), colour, xml_escape(series.name),
          plot.sizes[i], series.values[i], unit);
    }
    const double lx = left + static_cast<double>(legend_index) * 170;
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"52\" x2=\"{1}\" y2=\"52\" stroke=\"{2}\" stroke-width=\"2\"{3}/>\n"
        "<text x=\"{4}\" y=\"56\" {5} font-size=\"12\">{6}</text>\n",
        number(lx), number(lx + 24), colour, dashed ? " stroke-dasharray=\"6 4\"" : "",
        number(lx + 30), kFont, xml_escape(series.name));
  };
  std::size_t legend = 0;
  for (std::size_t k = 0; k < plot.latency_ms.size(); ++k) {
    const char* colour = kPalette[k % std::size(kPalette)];
    draw(
        plot.latency_ms[k], colour, false, [&](double v) { return y_of(std::max(v, 1e-9)); }, " ms",
        legend++);
  }
  if (!plot.ratio.values.empty()) draw(plot.ratio, "#555", true, ry_of, "x", legend++);
  svg += "</svg>\n";
  write_text_file(path, svg);
}

}  // namespace cgr::bench
