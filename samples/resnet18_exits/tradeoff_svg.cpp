// The accuracy-latency trade-off of early exits as a standalone SVG (see heldout.hpp): a
// browser opens it with nothing installed. Two panels sharing nothing but the thresholds:
// accuracy against mean latency (one point per threshold, off and all for reference), and
// the share of images each exit answered at each threshold.
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <cgr/files.hpp>

#include "heldout.hpp"

namespace cgr::samples {
namespace {

constexpr const char* kHeadColours[] = {"#4e79a7", "#59a14f", "#edc948", "#e15759"};
constexpr const char* kFont = "font-family=\"sans-serif\"";
constexpr double kWidth = 880, kHeight = 640;
constexpr double kLeft = 90, kRight = 700;  // plot area of both panels

std::string escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
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
      default:
        out += c;
    }
  }
  return out;
}

// 1, 2 or 5 times a power of ten, giving about `target` steps over `range`.
double nice_step(double range, int target) {
  if (!(range > 0)) return 1;
  const double raw = range / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude;
}

std::string text(double x, double y, const std::string& content, const char* anchor = "start",
                 int size = 12, const char* extra = "") {
  return fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" {} font-size=\"{}\" text-anchor=\"{}\"{}>{}</text>\n", x, y,
      kFont, size, anchor, extra, escape(content));
}

std::string threshold_label(float threshold) {
  return fmt::format("{:g}", threshold);
}

}  // namespace

void write_tradeoff_svg(const std::filesystem::path& path, const std::string& title,
                        const PolicySummary& off, const PolicySummary& all,
                        const std::vector<PolicySummary>& sweep) {
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kWidth, kHeight);
  svg += text(kWidth / 2, 26, title, "middle", 16, " font-weight=\"bold\"");

  // ---- Panel 1: accuracy against mean latency per image ----------------------------------
  const double top = 70, bottom = 320;
  svg += text(kLeft, top - 14,
              "Accuracy against mean latency per image (early exits, one point per threshold)",
              "start", 13, " font-weight=\"bold\"");
  double max_ms = std::max(off.mean_ms, all.mean_ms);
  double min_accuracy = std::min(off.accuracy, all.accuracy);
  for (const auto& s : sweep) {
    max_ms = std::max(max_ms, s.mean_ms);
    min_accuracy = std::min(min_accuracy, s.accuracy);
  }
  const double x_step = nice_step(max_ms, 6);
  const double x_max = std::ceil(max_ms * 1.08 / x_step) * x_step;
  // Accuracy in percent, from a round number below the lowest point to 100.
  const double span = std::max(100.0 - 100.0 * min_accuracy, 0.5);
  const double y_step = nice_step(span * 1.2, 5);
  const double y_min =
      std::max(0.0, std::floor((100.0 * min_accuracy - 0.15 * span) / y_step) * y_step);
  const double y_max = 100.0 + 0.12 * (100.0 - y_min);  // room for labels above 100%
  const auto px = [&](double ms) { return kLeft + (kRight - kLeft) * ms / x_max; };
  const auto py = [&](double accuracy) {
    return bottom - (bottom - top) * (100.0 * accuracy - y_min) / (y_max - y_min);
  };
  for (double v = 0; v <= x_max + 1e-9; v += x_step) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#e5e5e5\"/>\n", px(v),
        top, bottom);
    svg += text(px(v), bottom + 16, fmt::format("{:g}", v), "middle", 11);
  }
  for (double v = y_min; v <= 100.0 + 1e-9; v += y_step) {
    svg +=
        fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>\n",
                    kLeft, kRight, py(v / 100.0), py(v / 100.0));
    svg += text(kLeft - 6, py(v / 100.0) + 4, fmt::format("{:g}%", v), "end", 11);
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n", kLeft,
      top, kRight - kLeft, bottom - top);
  svg += text((kLeft + kRight) / 2, bottom + 34, "mean latency per image (ms)", "middle", 12);
  svg += text(22, (top + bottom) / 2, "accuracy", "middle", 12,
              fmt::format(" transform=\"rotate(-90 22 {:.1f})\"", (top + bottom) / 2).c_str());

  std::vector<const PolicySummary*> points;
  for (const auto& s : sweep)
    points.push_back(&s);
  std::sort(points.begin(), points.end(), [](const PolicySummary* a, const PolicySummary* b) {
    return a->threshold < b->threshold;
  });
  std::string line;
  for (const auto* s : points)
    line += fmt::format("{:.1f},{:.1f} ", px(s->mean_ms), py(s->accuracy));
  svg += fmt::format(
      "<polyline points=\"{}\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"2\"/>\n", line);
  for (std::size_t k = 0; k < points.size(); ++k) {
    const double x = px(points[k]->mean_ms), y = py(points[k]->accuracy);
    svg += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4.5\" fill=\"#4e79a7\"><title>threshold {}: "
        "{:.1f}% at {:.3f} ms</title></circle>\n",
        x, y, threshold_label(points[k]->threshold), 100 * points[k]->accuracy, points[k]->mean_ms);
    // Labels alternate above and below: neighbouring thresholds often share an accuracy.
    svg +=
        text(x, k % 2 == 0 ? y - 10 : y + 19, threshold_label(points[k]->threshold), "middle", 11);
  }
  // off and all are told apart by their marks (see the legend), not by labels: they take about
  // the same time, and labels there printed over each other and over the last threshold's.
  const auto reference = [&](const PolicySummary& s, const char* name, bool square) {
    const double x = px(s.mean_ms), y = py(s.accuracy);
    const std::string title =
        fmt::format("<title>{}: {:.1f}% at {:.3f} ms</title>", name, 100 * s.accuracy, s.mean_ms);
    std::string out = square
                          ? fmt::format(
                                "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"9\" height=\"9\" "
                                "fill=\"#e15759\">{}</rect>\n",
                                x - 4.5, y - 4.5, title)
                          : fmt::format(
                                "<polygon points=\"{0:.1f},{1:.1f} {2:.1f},{3:.1f} {0:.1f},{4:.1f} "
                                "{5:.1f},{3:.1f}\" fill=\"#b07aa1\">{6}</polygon>\n",
                                x, y - 6, x + 6, y, y + 6, x - 6, title);
    return out;
  };
  svg += reference(off, "off", true);
  svg += reference(all, "all", false);
  // Legend of panel 1, right of the plot.
  const double lx = kRight + 14;
  svg +=
      fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"#4e79a7\"/>\n", lx + 5, top + 10);
  svg += text(lx + 16, top + 14, "early, labelled", "start", 11);
  svg += text(lx + 16, top + 28, "by threshold", "start", 11);
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"9\" height=\"9\" fill=\"#e15759\"/>\n",
                     lx + 0.5, top + 42);
  svg += text(lx + 16, top + 51, "off: no exit heads", "start", 11);
  svg += fmt::format("<polygon points=\"{0},{1} {2},{3} {0},{4} {5},{3}\" fill=\"#b07aa1\"/>\n",
                     lx + 5, top + 64, lx + 11, top + 70, top + 76, lx - 1);
  svg += text(lx + 16, top + 74, "all: every head runs", "start", 11);

  // ---- Panel 2: who answered, per threshold ----------------------------------------------
  const double top2 = 400, row = std::min(34.0, (kHeight - 40 - top2) /
                                                    std::max<std::size_t>(points.size(), 1));
  svg += text(kLeft, top2 - 30, "Share of images answered at each exit, per threshold", "start", 13,
              " font-weight=\"bold\"");
  for (std::size_t h = 0; h < kHeads.size(); ++h) {
    const double x = kLeft + 110.0 * static_cast<double>(h);
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", x,
                       top2 - 18, kHeadColours[h]);
    svg += text(x + 17, top2 - 8, kHeads[h], "start", 11);
  }
  svg += text(kRight + 14, top2 - 8, "mean latency", "start", 11);
  for (std::size_t k = 0; k < points.size(); ++k) {
    const PolicySummary& s = *points[k];
    const double y = top2 + row * static_cast<double>(k);
    const double height = row - 8;
    int total = 0;
    for (const int n : s.answered)
      total += n;
    svg += text(kLeft - 8, y + height / 2 + 4, "T = " + threshold_label(s.threshold), "end", 11);
    double x = kLeft;
    for (std::size_t h = 0; h < kHeads.size(); ++h) {
      const double share = total > 0 ? static_cast<double>(s.answered[h]) / total : 0;
      const double width = (kRight - kLeft) * share;
      if (width <= 0) continue;
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" "
          "fill=\"{}\"><title>{}: "
          "{} of {} images</title></rect>\n",
          x, y, width, height, kHeadColours[h], kHeads[h], s.answered[h], total);
      if (width > 34)
        svg += text(x + width / 2, y + height / 2 + 4, fmt::format("{:.0f}%", 100 * share),
                    "middle", 11, h == 2 ? "" : " fill=\"white\"");
      x += width;
    }
    svg += text(kRight + 14, y + height / 2 + 4, fmt::format("{:.3f} ms", s.mean_ms), "start", 11);
  }
  svg += "</svg>\n";
  write_text_file(path, svg);
}

}  // namespace cgr::samples
