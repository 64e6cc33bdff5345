// cgr-bench end to end on the CPU: the binary runs on small models (two-branch at 16x16,
// ResNet-18 with exits at 32x32) and its JSON, SVG files, exit statuses and messages are
// checked. The binary's path comes from CMake (CGR_BENCH_PATH); runs are short (--iterations,
// --warmup-ms 5) so the whole suite takes a few seconds.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <cgr/npy.hpp>
#include <nlohmann/json.hpp>

#if defined(CGR_HAVE_ONNX)
#include "../onnx_builder.hpp"
#endif

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kWork = CGR_BENCH_WORK_DIR;
const std::string kSmall = "--model two-branch --device cpu --input-shape 1x3x16x16 --warmup-ms 5";

struct Run {
  int status = -1;
  std::string out, err;
};

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string quoted(const fs::path& path) {
  return "'" + path.string() + "'";
}

// Runs cgr-bench with `args` (paths already quoted); stdout and stderr go to files.
Run bench(const std::string& args, const std::string& tag) {
  fs::create_directories(kWork);
  const fs::path out = kWork / (tag + ".out"), err = kWork / (tag + ".err");
  const std::string command =
      quoted(CGR_BENCH_PATH) + " " + args + " >" + quoted(out) + " 2>" + quoted(err);
  const int raw = std::system(command.c_str());
  Run run;
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  run.out = read_text(out);
  run.err = read_text(err);
  return run;
}

json load_json(const fs::path& path) {
  return json::parse(read_text(path));
}

int count_of(const std::string& text, const std::string& needle) {
  int count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

// A small well-formedness check, enough for the files cgr-bench writes: an optional XML
// declaration, one root element, properly nested and closed tags, quoted attributes, no bare
// '<' or '&' in text or attribute values. Returns "" when well-formed, else what is wrong.
std::string xml_problem(const std::string& x) {
  std::vector<std::string> open;
  int roots = 0;
  auto entity_ok = [&](std::size_t at) {
    const auto end = x.find(';', at);
    if (end == std::string::npos || end - at > 10) return false;
    const std::string name = x.substr(at + 1, end - at - 1);
    return name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "apos" ||
           (name.size() > 1 && name[0] == '#');
  };
  auto name_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' ||
           c == '.';
  };
  std::size_t i = 0;
  if (x.starts_with("<?xml")) {
    i = x.find("?>");
    if (i == std::string::npos) return "unterminated XML declaration";
    i += 2;
  }
  while (i < x.size()) {
    if (x[i] == '&') {
      if (!entity_ok(i)) return "bare '&' at " + std::to_string(i);
      ++i;
    } else if (x[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(x[i])))
        return "text outside the root at " + std::to_string(i);
      ++i;
    } else if (x.compare(i, 4, "<!--") == 0) {
      const auto end = x.find("-->", i);
      if (end == std::string::npos) return "unterminated comment";
      i = end + 3;
    } else if (x.compare(i, 2, "</") == 0) {
      std::size_t j = i + 2;
      while (j < x.size() && name_char(x[j]))
        ++j;
      const std::string name = x.substr(i + 2, j - i - 2);
      while (j < x.size() && std::isspace(static_cast<unsigned char>(x[j])))
        ++j;
      if (j >= x.size() || x[j] != '>') return "malformed end tag </" + name;
      if (open.empty() || open.back() != name)
        return "</" + name + "> does not close <" + (open.empty() ? "" : open.back()) + ">";
      open.pop_back();
      i = j + 1;
    } else {
      std::size_t j = i + 1;
      while (j < x.size() && name_char(x[j]))
        ++j;
      const std::string name = x.substr(i + 1, j - i - 1);
      if (name.empty()) return "bare '<' at " + std::to_string(i);
      if (open.empty() && ++roots > 1) return "a second root element <" + name + ">";
      // Attributes: name="value" or name='value'.
      for (;;) {
        while (j < x.size() && std::isspace(static_cast<unsigned char>(x[j])))
          ++j;
        if (j >= x.size()) return "unterminated tag <" + name;
        if (x[j] == '>' || x.compare(j, 2, "/>") == 0) break;
        const std::size_t attr = j;
        while (j < x.size() && name_char(x[j]))
          ++j;
        if (j == attr || j >= x.size() || x[j] != '=')
          return "malformed attribute in <" + name + ">";
        const char quote = x[j + 1];
        if (quote != '"' && quote != '\'') return "unquoted attribute in <" + name + ">";
        const auto end = x.find(quote, j + 2);
        if (end == std::string::npos) return "unterminated attribute in <" + name + ">";
        for (std::size_t k = j + 2; k < end; ++k) {
          if (x[k] == '<') return "'<' in an attribute of <" + name + ">";
          if (x[k] == '&' && !entity_ok(k)) return "bare '&' in an attribute of <" + name + ">";
        }
        j = end + 1;
      }
      if (x[j] == '/') {
        i = j + 2;  // self-closing
      } else {
        open.push_back(name);
        i = j + 1;
      }
    }
  }
  if (!open.empty()) return "<" + open.back() + "> is not closed";
  if (roots != 1) return "no root element";
  return "";
}

void check_stats(const json& s, const std::vector<std::string>& percentiles) {
  for (const char* key : {"count", "min", "mean", "median", "max", "stddev", "cv", "percentiles"}) {
    INFO(key);
    CHECK(s.contains(key));
  }
  const double min = s["min"], median = s["median"], mean = s["mean"], max = s["max"];
  CHECK(min > 0);
  CHECK(min <= median);
  CHECK(median <= max);
  CHECK(min <= mean);
  CHECK(mean <= max);
  CHECK(s["cv"].get<double>() == doctest::Approx(s["stddev"].get<double>() / mean));
  double previous = min;
  for (const auto& p : percentiles) {
    INFO(p);
    REQUIRE(s["percentiles"].contains(p));
    const double v = s["percentiles"][p];
    if (p == "p50") CHECK(v == median);  // one percentile definition
    CHECK(v >= previous);
    CHECK(v <= max);
    previous = v;
  }
}

}  // namespace

TEST_CASE("cgr-bench: one cpu mode, JSON fields, ordering and the iteration count") {
  const fs::path report = kWork / "single.json";
  fs::remove(report);
  const Run run = bench(
      kSmall + " --mode dag --iterations 20 --percentiles 50,90,99 --export-json " + quoted(report),
      "single");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("=== Performance summary") != std::string::npos);
  CHECK(run.out.find("GPU compute    n/a on cpu") != std::string::npos);
  const json j = load_json(report);
  for (const char* key : {"tool", "command", "model", "device", "settings", "graph", "modes"}) {
    INFO(key);
    CHECK(j.contains(key));
  }
  CHECK(j["model"]["name"] == "two-branch");
  CHECK(j["version"].get<std::string>().find('.') != std::string::npos);
  CHECK_FALSE(j["commit"].get<std::string>().empty());
  // No exit heads: no exit policy reported.
  CHECK(j["settings"]["exits"].is_null());
  CHECK(j["settings"]["exit_heads"].empty());
  CHECK(run.out.find("exits          ") == std::string::npos);
  CHECK(j["model"]["inputs"][0]["shape"] == json::array({1, 3, 16, 16}));
  CHECK(j["device"]["kind"] == "cpu");
  CHECK(j["device"]["threads"].get<int>() > 0);
  for (const char* key : {"layers", "ops", "edges", "critical_path", "width", "lanes",
                          "arena_bytes", "activation_bytes", "weight_bytes"}) {
    INFO(key);
    CHECK(j["graph"][key].get<double>() > 0);
  }
  CHECK(j["graph"]["width"] == 2);  // the two branches
  REQUIRE(j["modes"].size() == 1);
  const json& m = j["modes"][0];
  CHECK(m["mode"] == "dag");
  CHECK(m["iterations"] == 20);
  CHECK(m["samples"]["latency_ms"].size() == 20);
  check_stats(m["latency_ms"], {"p50", "p90", "p99"});
  CHECK(m["latency_ms"]["count"] == 20);
  CHECK(m["throughput_per_s"].get<double>() > 0);
  CHECK(m["build_ms"].get<double>() > 0);
  CHECK(m["instantiate_ms"].get<double>() > 0);
  // The population standard deviation of the samples the report lists.
  {
    const auto& samples = m["samples"]["latency_ms"];
    double sum = 0, squares = 0;
    for (const auto& v : samples)
      sum += v.get<double>();
    const double mean = sum / static_cast<double>(samples.size());
    for (const auto& v : samples)
      squares += (v.get<double>() - mean) * (v.get<double>() - mean);
    CHECK(m["latency_ms"]["stddev"].get<double>() ==
          doctest::Approx(std::sqrt(squares / static_cast<double>(samples.size()))));
    CHECK(m["latency_ms"]["mean"].get<double>() == doctest::Approx(mean));
  }
  // On the cpu the host enqueue time is the latency; there is no GPU compute time.
  CHECK(m["enqueue_ms"]["median"] == m["latency_ms"]["median"]);
  CHECK(m["gpu_compute_ms"].is_null());
  CHECK(m["ops_executed"] == j["graph"]["ops"]);
  CHECK(m["answered_by"] == "final");
  CHECK(m.contains("stable"));
}

TEST_CASE("cgr-bench: --mode all has both cpu modes and their ratio to dag") {
  const fs::path report = kWork / "all.json";
  fs::remove(report);
  const Run run =
      bench(kSmall + " --mode all --iterations 15 --export-json " + quoted(report), "all");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("=== Comparison") != std::string::npos);
  const json j = load_json(report);
  REQUIRE(j["modes"].size() == 2);
  CHECK(j["modes"][0]["mode"] == "dag");
  CHECK(j["modes"][1]["mode"] == "eager");
  for (const json& m : j["modes"]) {
    CHECK(m["iterations"] == 15);
    check_stats(m["latency_ms"], {"p90", "p95", "p99"});
    const double ratio = m["ratio_vs_dag"];
    CHECK(ratio > 0);
    CHECK(ratio == doctest::Approx(m["latency_ms"]["median"].get<double>() /
                                   j["modes"][0]["latency_ms"]["median"].get<double>()));
    // Every mode computes the same function as dag.
    CHECK(m["max_abs_diff_vs_dag"].get<double>() <= 1e-4);
  }
  CHECK(j["modes"][0]["ratio_vs_dag"] == 1.0);
}

TEST_CASE("cgr-bench: --duration-s stops a run without --iterations") {
  const fs::path report = kWork / "duration.json";
  fs::remove(report);
  const Run run =
      bench(kSmall + " --mode dag --duration-s 0.2 --export-json " + quoted(report), "duration");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  const json j = load_json(report);
  const json& m = j["modes"][0];
  CHECK(m["iterations"].get<int>() >= 1);
  // However short the duration, at least 10 timed runs per mode (p99 is not simply the max).
  const fs::path brief_report = kWork / "brief.json";
  const Run brief =
      bench(kSmall + " --duration-s 0.000001 --export-json " + quoted(brief_report), "brief");
  REQUIRE(brief.status == 0);
  const json brief_json = load_json(brief_report);
  for (const json& mode : brief_json["modes"])
    CHECK(mode["iterations"].get<int>() >= 10);
  double total = 0;
  for (double t : m["samples"]["latency_ms"])
    total += t;
  CHECK(total <=
        200 +
            50 * m["latency_ms"]["max"].get<double>());  // stops after the round that passes 0.2 s
}

TEST_CASE("cgr-bench: the timeline has one bar per executed op and is well-formed XML") {
  const fs::path svg = kWork / "timeline.svg", report = kWork / "timeline.json";
  fs::remove(svg);
  const Run run = bench(kSmall + " --mode dag --iterations 3 --timeline " + quoted(svg) +
                            " --export-json " + quoted(report),
                        "timeline");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  const std::string text = read_text(svg);
  CHECK(xml_problem(text) == "");
  const json j = load_json(report);
  const int executed = j["modes"][0]["ops_executed"];
  CHECK(j["timeline"]["ops_executed"] == executed);
  CHECK(count_of(text, "<rect class=\"op") == executed);
  CHECK(count_of(text, "<title>") >= executed);
  CHECK(j["timeline"]["rows"].get<int>() >= 1);
  // Rows are the CPU's threads; the critical path is outlined and the legend says so; colours
  // follow layer kinds (the legend names Conv2d); every bar's number is in its tooltip.
  // (Which threads ran ops depends on the load: the caller may run none of them.)
  CHECK(text.find(">thread ") != std::string::npos);
  CHECK(text.find(">slot ") == std::string::npos);
  CHECK(count_of(text, "<rect class=\"op critical\"") >= 1);
  CHECK(text.find(">critical path</text>") != std::string::npos);
  CHECK(text.find(">Conv2d</text>") != std::string::npos);
  for (int k = 1; k <= executed; ++k) {
    CAPTURE(k);
    CHECK(text.find("<title>#" + std::to_string(k) + " ") != std::string::npos);
  }
}

TEST_CASE("cgr-bench: timeline labels are whole names, first layers, tails or listed numbers") {
  // googlenet's fused names are long and its ops short: most bars cannot hold their name, so
  // the legend must list them, and no label is a cut-off head of a name.
  const fs::path svg = kWork / "googlenet.svg";
  const Run run = bench(
      "--model googlenet --device cpu --input-shape 1x3x64x64 --warmup-ms 5 "
      "--mode dag --iterations 3 --timeline " +
          quoted(svg),
      "googlenet-timeline");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  const std::string text = read_text(svg);
  CHECK(xml_problem(text) == "");
  CHECK(text.find("ops by number:") != std::string::npos);
  CHECK(text.find("~</text>") == std::string::npos);  // the old cut: "inception3a.br~"
  CHECK(count_of(text, "<rect class=\"op") == 71);
}

TEST_CASE("cgr-bench: early exits skip ops, and the timeline shows only those that ran") {
  const fs::path svg = kWork / "exits.svg", report = kWork / "exits.json";
  const Run run = bench(
      "--model resnet18-exits --device cpu --input-shape 1x3x32x32 --warmup-ms 5 --mode dag "
      "--exits early --threshold 0 --iterations 3 --timeline " +
          quoted(svg) + " --export-json " + quoted(report),
      "exits");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  const json j = load_json(report);
  const json& m = j["modes"][0];
  CHECK(m["answered_by"] == "exit0");  // threshold 0: the first head always fires
  CHECK(m["ops_executed"].get<int>() < j["graph"]["ops"].get<int>());
  const std::string text = read_text(svg);
  CHECK(xml_problem(text) == "");
  CHECK(count_of(text, "<rect class=\"op") == m["ops_executed"].get<int>());
}

TEST_CASE("cgr-bench: --dump-profile, --export-profile and a Chrome trace of the profiled runs") {
  const fs::path profile = kWork / "profile.json", trace = kWork / "trace.json",
                 report = kWork / "profile-report.json";
  const Run run = bench(kSmall +
                            " --mode dag --iterations 10 --dump-profile --profile-runs 5 "
                            "--export-profile " +
                            quoted(profile) + " --export-trace " + quoted(trace) +
                            " --export-json " + quoted(report),
                        "profile");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("=== Profile (5 runs of mode dag, the CPU executor's clock") !=
        std::string::npos);
  const json p = load_json(profile);
  const json r = load_json(report);
  CHECK(r["profile"] == p);
  const int ops = r["graph"]["ops"];
  REQUIRE(p["ops"].size() == static_cast<std::size_t>(ops));
  double shares = 0, previous = 1e300;
  for (const json& op : p["ops"]) {
    CHECK(op["runs"] == 5);
    CHECK(op["min_ms"].get<double>() <= op["median_ms"].get<double>());
    CHECK(op["median_ms"].get<double>() <= op["max_ms"].get<double>());
    CHECK(op["mean_ms"].get<double>() <= previous);  // by mean time, largest first
    previous = op["mean_ms"];
    shares += op["share"].get<double>();
  }
  CHECK(shares == doctest::Approx(1.0));
  // The CPU copies nothing in or out: no transfer time (the GPU's copy nodes would count).
  CHECK(p["h2d_ms"] == 0.0);
  CHECK(p["d2h_ms"] == 0.0);
  CHECK(run.out.find("transfers ") == std::string::npos);

  // The trace-event format: complete events with name, ph, ts, dur, pid, tid; a name for every
  // track; on one track, events follow each other (the viewer's stacking rule).
  const json t = load_json(trace);
  REQUIRE(t["traceEvents"].is_array());
  std::map<int, std::vector<std::pair<double, double>>> by_track;
  std::set<int> named;
  int complete = 0;
  for (const json& e : t["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "thread_name") named.insert(e["tid"].get<int>());
      continue;
    }
    REQUIRE(ph == "X");
    ++complete;
    CHECK_FALSE(e["name"].get<std::string>().empty());
    CHECK(e["pid"] == 1);
    CHECK(e["ts"].get<double>() >= 0);
    CHECK(e["dur"].get<double>() >= 0);
    CHECK(e["args"]["inputs"].is_array());
    CHECK(e["args"]["output"].is_string());
    by_track[e["tid"].get<int>()].emplace_back(e["ts"].get<double>(),
                                               e["ts"].get<double>() + e["dur"].get<double>());
  }
  CHECK(complete == 5 * ops);
  for (auto& [tid, events] : by_track) {
    CAPTURE(tid);
    CHECK(named.contains(tid));
    std::sort(events.begin(), events.end());
    for (std::size_t i = 1; i < events.size(); ++i)
      CHECK(events[i].first >= events[i - 1].second - 1e-6);
  }
}

TEST_CASE("cgr-bench: --contexts runs contexts concurrently and reports their throughput") {
  const fs::path report = kWork / "contexts.json";
  const Run run = bench(kSmall + " --mode dag --iterations 10 --contexts 3 --export-json " +
                            quoted(report),
                        "contexts");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("=== 3 contexts of mode dag, a host thread each, run together ===") !=
        std::string::npos);
  const json j = load_json(report);
  const json& c = j["contexts"];
  CHECK(c["contexts"] == 3);
  CHECK(c["runs"] == 30);  // --iterations: exactly that many per context
  CHECK(c["latency_ms"]["count"] == 30);
  CHECK(c["throughput_per_s"].get<double>() > 0);
  CHECK(c["samples_per_s"] == c["throughput_per_s"]);  // batch 1
  // Throughput is runs over the wall time.
  CHECK(c["throughput_per_s"].get<double>() ==
        doctest::Approx(30 * 1000.0 / c["wall_ms"].get<double>()));
  // trtexec's spelling.
  const Run streams = bench(kSmall + " --mode dag --iterations 10 --streams 2", "streams");
  INFO(streams.err);
  CHECK(streams.status == 0);
  CHECK(streams.out.find("=== 2 contexts of mode dag") != std::string::npos);
}

TEST_CASE("cgr-bench: the DOT is the engine's graph, with short labels, tooltips and shapes") {
  const fs::path dot = kWork / "inception.dot", layers = kWork / "inception-layers.dot";
  REQUIRE(
      bench("--model inception --device cpu --info --export-dot " + quoted(dot), "dot").status ==
      0);
  REQUIRE(bench("--model inception --device cpu --info --dot-before-fusion --export-dot " +
                    quoted(layers),
                "dot-layers")
              .status == 0);
  const std::string text = read_text(dot), before = read_text(layers);
  // 8 ops (the Concat is the output, so it keeps its op), each a short label and a tooltip
  // with the full name.
  CHECK(count_of(text, "tooltip=") == 8);
  CHECK(text.find("inception3a.branch1.conv (+2 fused)") != std::string::npos);
  CHECK(text.find("tooltip=\"inception3a.branch1.conv+inception3a.branch1.bn+") !=
        std::string::npos);
  CHECK(text.find("[label=\"1x96x28x28\"]") != std::string::npos);  // an edge's shape
  // Before fusion: one node per layer (20), named as the layers are.
  CHECK(count_of(before, "[label=") >= 20);
  CHECK(before.find("inception3a.cat") != std::string::npos);
}

TEST_CASE("cgr-bench: the size sweep prints a table and writes a well-formed plot") {
  const fs::path plot = kWork / "sweep.svg", report = kWork / "sweep.json";
  fs::remove(plot);
  const Run run = bench(
      "--model two-branch --device cpu --warmup-ms 5 --iterations 5 --sweep-size 8,16 "
      "--export-plot " +
          quoted(plot) + " --export-json " + quoted(report),
      "sweep");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("=== Size sweep") != std::string::npos);
  CHECK(run.out.find("eager/dag") != std::string::npos);
  const std::string text = read_text(plot);
  CHECK(xml_problem(text) == "");
  CHECK(count_of(text, "<polyline") == 3);  // dag, eager, eager / dag
  // Two panels (latency; the ratio with its own axis and a line at 1), a whisker per point.
  CHECK(count_of(text, "<rect class=\"panel\"") == 2);
  CHECK(count_of(text, "<line class=\"parity\"") == 1);
  CHECK(count_of(text, "<path class=\"whisker\"") == 4);  // 2 modes x 2 sizes
  const json j = load_json(report);
  REQUIRE(j["sweep"].size() == 2);
  CHECK(j["sweep"][0]["size"] == 8);
  CHECK(j["sweep"][1]["size"] == 16);
  for (const json& p : j["sweep"]) {
    check_stats(p["latency_ms"]["dag"], {"p90", "p95", "p99"});
    check_stats(p["latency_ms"]["eager"], {"p90", "p95", "p99"});
    CHECK(p["eager_over_dag"].get<double>() > 0);
  }
}

TEST_CASE("cgr-bench: --info prints the graph facts and exits") {
  const Run run = bench("--model googlenet --device cpu --info", "info");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("critical path") != std::string::npos);
  CHECK(run.out.find("=== Performance summary") == std::string::npos);
  CHECK(run.out.find("output         logits 1x1000") != std::string::npos);
  // The planned CUDA graph, on any machine: googlenet's Concats are written in place.
  CHECK(run.out.find("cuda plan      dag 73 nodes") != std::string::npos);
  CHECK(run.out.find("ops after fusion") != std::string::npos);
}

TEST_CASE("cgr-bench: --precision is reported and in the JSON, and changes the outputs") {
  const fs::path report = kWork / "fp16.json";
  const fs::path fp16 = kWork / "out-fp16", fp32 = kWork / "out-fp32";
  const Run run = bench(kSmall + " --mode dag --iterations 10 --precision fp16 --export-json " +
                            quoted(report) + " --export-output " + quoted(fp16),
                        "fp16");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("precision      fp16 (cpu: its storage rounding emulated)") !=
        std::string::npos);
  const json j = load_json(report);
  CHECK(j["settings"]["precision"] == "fp16");
  CHECK(j["settings"]["conv_algorithms"] == "heuristic");
  CHECK(j["graph"]["cuda_plan"]["dag"]["nodes"].get<int>() > 0);
  REQUIRE(bench(kSmall + " --mode dag --iterations 10 --export-output " + quoted(fp32), "fp32")
              .status == 0);
  const cgr::Tensor a = cgr::load_npy(fp16 / "out.npy"), b = cgr::load_npy(fp32 / "out.npy");
  CHECK(a.f32().size() == b.f32().size());
  CHECK_FALSE(std::equal(a.f32().begin(), a.f32().end(), b.f32().begin()));
}

TEST_CASE("cgr-bench: bad arguments exit 2 with the usage line") {
  const std::vector<std::string> bad = {
      "",
      "--model two-branch --bogus",
      "--model nonsense",
      "--model two-branch --iterations ten",
      "--model two-branch --iterations 0",
      "--model two-branch --device tpu",
      "--model two-branch --device cpu --mode stream-graph",
      "--model two-branch --mode fastest",
      "--model two-branch --percentiles 90,101",
      "--model two-branch --input-shape 1x3x16",
      "--model two-branch --input-shape 1x3x16x8",
      "--model resnet18 --input-shape 1x4x32x32",
      "--model two-branch --export-plot x.svg",
      "--model two-branch --threads",
      "--model two-branch --iterations 3 --iterations 4",  // a repeated flag
      "--model two-branch --device cpu --exits early",     // no exit heads
      "--model two-branch --device cpu --threshold 0.5",
      "--model two-branch --precision half",
      "--model two-branch --conv-algorithms fastest",
      "--model two-branch --profile-runs 5",  // nothing to profile
      "--model two-branch --dump-profile --profile-runs 0",
      "--model two-branch --dump-profile --sweep-size 8",
      "--model two-branch --dot-before-fusion",
      "--model two-branch --info --export-trace t.json",
      "--model two-branch --contexts 0",
      "--model two-branch --contexts 65",
      "--model two-branch --info --contexts 2",
      "--model two-branch --contexts 2 --streams 2",
      "--device cpu",  // no model
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    INFO("args: " << bad[i]);
    const Run run = bench(bad[i], "bad" + std::to_string(i));
    INFO(run.err);
    CHECK(run.status == 2);
    CHECK(run.err.find("cgr-bench: ") == 0);
    CHECK(run.err.find("usage: cgr-bench") != std::string::npos);
  }
}

TEST_CASE("cgr-bench: --version prints the version and commit, and misused flags are named") {
  const Run version = bench("--version", "version");
  CHECK(version.status == 0);
  CHECK(version.out.rfind("cgr-bench 0.", 0) == 0);
  CHECK(version.out.find("(commit ") != std::string::npos);
  const Run exits = bench("--model two-branch --device cpu --exits early", "no_heads");
  CHECK(exits.err.find("two-branch has no exit heads") != std::string::npos);
  const Run repeated = bench("--model two-branch --iterations 3 --iterations 4", "repeated");
  CHECK(repeated.err.find("--iterations") != std::string::npos);
}

TEST_CASE("cgr-bench: a model that fails to load exits 1 with the loader's message") {
  const fs::path missing = kWork / "no-such-model.onnx";
  fs::remove(missing);
  const Run run = bench("--model " + quoted(missing) + " --device cpu", "missing");
  INFO(run.err);
  CHECK(run.status == 1);
  CHECK(run.err.find(missing.string()) != std::string::npos);  // the loader names the file
  CHECK(run.err.find("usage:") == std::string::npos);
#if defined(CGR_HAVE_ONNX)
  CHECK(run.err.find("built without the ONNX importer") == std::string::npos);
#endif
  const Run weights =
      bench("--model two-branch --device cpu --weights " + quoted(kWork / "none.safetensors"),
            "missing_weights");
  CHECK(weights.status == 1);
  CHECK(weights.err.find("none.safetensors") != std::string::npos);
}

TEST_CASE("cgr-bench: --load-input feeds the model and --export-output writes its outputs") {
  const fs::path input = kWork / "x16.npy", wrong = kWork / "x8.npy", outputs = kWork / "outputs";
  cgr::save_npy(input, cgr::Tensor(cgr::Shape{1, 3, 16, 16}, std::vector<float>(768, 0.5f)));
  cgr::save_npy(wrong, cgr::Tensor(cgr::Shape{1, 3, 8, 8}, std::vector<float>(192, 0.5f)));
  fs::remove_all(outputs);
  const Run run = bench(kSmall + " --mode dag --iterations 2 --load-input x=" + quoted(input) +
                            " --export-output " + quoted(outputs),
                        "load_input");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find(input.string()) != std::string::npos);  // the input's source is reported
  const cgr::Tensor out = cgr::load_npy(outputs / "out.npy");
  CHECK(out.shape() == cgr::Shape{1, 64, 16, 16});

  const Run bad = bench(kSmall + " --iterations 2 --load-input " + quoted(wrong), "load_wrong");
  CHECK(bad.status == 1);
  CHECK(bad.err.find("x8.npy") != std::string::npos);
  const Run unknown =
      bench(kSmall + " --iterations 2 --load-input y=" + quoted(input), "load_unknown");
  CHECK(unknown.status == 2);
  CHECK(unknown.err.find("no input named 'y'") != std::string::npos);
}

#if defined(CGR_HAVE_ONNX)
TEST_CASE("cgr-bench: --exit-output makes an ONNX output an exit head that decides") {
  // x -> Gemm -> h -> Relu -> r -> Gemm -> final, and a head Gemm(h) -> exit0.
  cgr::test::OnnxBuilder b;
  b.input("x", {1, 8});
  b.floats("w1", {8, 6}, std::vector<float>(48, 0.1f));
  b.floats("w2", {6, 4}, std::vector<float>(24, 0.2f));
  b.floats("head", {6, 4}, std::vector<float>(24, -0.3f));
  b.node("Gemm", {"x", "w1"}, {"h"}, "stem");
  b.node("Relu", {"h"}, {"r"}, "relu");
  b.node("Gemm", {"r", "w2"}, {"final"}, "classifier");
  b.node("Gemm", {"h", "head"}, {"exit0"}, "exit_head");
  b.output("final");
  b.output("exit0");
  const fs::path model = kWork / "exit_head.onnx", report = kWork / "exit_head.json";
  fs::create_directories(kWork);
  std::ofstream(model, std::ios::binary) << b.bytes();
  const std::string common =
      "--model " + quoted(model) + " --device cpu --warmup-ms 5 --mode dag --iterations 2";
  const Run run = bench(
      common + " --exit-output exit0=r --exits early --threshold 0 --export-json " + quoted(report),
      "exit_output");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(load_json(report)["modes"][0]["answered_by"] == "exit0");  // threshold 0: it fires
  const Run unknown = bench(common + " --exit-output h", "exit_output_unknown");
  CHECK(unknown.status == 1);
  CHECK(unknown.err.find("exit 'h' is not a graph output (outputs: final, exit0)") !=
        std::string::npos);
  const Run builtin = bench(kSmall + " --exit-output out", "exit_output_builtin");
  CHECK(builtin.status == 2);
  CHECK(builtin.err.find("--exit-output: only for ONNX models") != std::string::npos);
}
#endif

#if defined(CGR_HAVE_ONNX)
TEST_CASE("cgr-bench: --max-folded-elements bounds the ONNX import's constant folding") {
  // A 2-element shape expands to 2^20 elements, then Concat doubles it: 3 * 2^20 in all.
  cgr::test::OnnxBuilder b(13);
  b.input("x", {1, 4});
  b.ints("shape", {1024, 1024});
  b.node("ConstantOfShape", {"shape"}, {"big"}, "fill");
  b.node("Concat", {"big", "big"}, {"twice"}, "cat");
  cgr::test::OnnxBuilder::attr(b.graph().mutable_node(1)[0], "axis", std::int64_t{0});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y");
  const fs::path model = kWork / "folding.onnx";
  fs::create_directories(kWork);
  std::ofstream(model, std::ios::binary) << b.bytes();
  const std::string common =
      "--model " + quoted(model) + " --device cpu --warmup-ms 5 --iterations 2";
  const Run tight = bench(common + " --max-folded-elements 3145728", "folding_tight");
  CHECK(tight.status == 1);
  CHECK(tight.err.find("node 'cat' (Concat): constant folding would build more than 3145728 "
                       "elements in this model") != std::string::npos);
  CHECK(tight.err.find("cgr-bench --max-folded-elements N") != std::string::npos);
  const Run roomy = bench(common + " --max-folded-elements 5242880", "folding_roomy");
  INFO(roomy.out << roomy.err);
  CHECK(roomy.status == 0);
  const Run zero = bench(common + " --max-folded-elements 0", "folding_zero");
  CHECK(zero.status == 2);
  CHECK(zero.err.find("--max-folded-elements") != std::string::npos);
  const Run builtin = bench(kSmall + " --max-folded-elements 100", "folding_builtin");
  CHECK(builtin.status == 2);
  CHECK(builtin.err.find("--max-folded-elements: only for ONNX models") != std::string::npos);
}
#endif

TEST_CASE("cgr-bench: trtexec's spellings --shapes, --warmUp, --duration, --exportTimes") {
  const fs::path report = kWork / "trtexec.json", times = kWork / "trtexec-times.json";
  fs::remove(report);
  fs::remove(times);
  const Run run = bench(
      "--model two-branch --device cpu --shapes=x:2x3x16x16 --warmUp=5 --duration=0.05 "
      "--mode all --exportTimes=" +
          quoted(times) + " --export-json " + quoted(report),
      "trtexec");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  const json j = load_json(report);
  CHECK(j["model"]["inputs"][0]["shape"] == json::array({2, 3, 16, 16}));
  CHECK(j["settings"]["warmup_ms"] == 5.0);
  CHECK(j["settings"]["duration_s"] == 0.05);
  // One object per timed iteration of the first mode, the report's own samples.
  const json& dag = j["modes"][0];
  REQUIRE(dag["mode"] == "dag");
  const json t = load_json(times);
  REQUIRE(t.is_array());
  REQUIRE(t.size() == dag["samples"]["latency_ms"].size());
  CHECK(t.size() >= 10);
  double previous_end = -1;
  for (std::size_t i = 0; i < t.size(); ++i) {
    INFO(i);
    CHECK(t[i]["mode"] == "dag");
    const double start = t[i]["startComputeMs"], end = t[i]["endComputeMs"];
    const double latency = t[i]["latencyMs"];
    CHECK(latency == dag["samples"]["latency_ms"][i].get<double>());
    CHECK(start == dag["samples"]["start_ms"][i].get<double>());
    CHECK(start >= 0);
    CHECK(end == doctest::Approx(start + latency));
    CHECK(start >= previous_end);  // runs follow one another
    previous_end = end;
  }
  CHECK(run.out.find("times          " + std::to_string(t.size()) + " iterations of mode dag") !=
        std::string::npos);

  // --loadInputs feeds the input like --load-input.
  const fs::path input = kWork / "trt-x16.npy";
  cgr::save_npy(input, cgr::Tensor(cgr::Shape{1, 3, 16, 16}, std::vector<float>(768, 0.25f)));
  const Run loaded =
      bench(kSmall + " --mode dag --iterations 2 --loadInputs=x:" + quoted(input), "trtexec_load");
  INFO(loaded.out << loaded.err);
  CHECK(loaded.status == 0);
  CHECK(loaded.out.find(input.string()) != std::string::npos);
}

TEST_CASE("cgr-bench: a trtexec spelling with its cgr spelling, or malformed, is a usage error") {
  const std::string base = "--model two-branch --device cpu --iterations 2 ";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"--shapes=x:1x3x16x16 --input-shape 1x3x16x16", {"--shapes", "--input-shape"}},
      {"--loadInputs=x:a.npy --load-input a.npy", {"--loadInputs", "--load-input"}},
      {"--warmUp=5 --warmup-ms 5", {"--warmUp", "--warmup-ms"}},
      {"--duration=1 --duration-s 1", {"--duration", "--duration-s"}},
      {"--shapes=1x3x16x16", {"--shapes", "NAME:DIMS"}},
      {"--shapes=x:1x3x16x16,x:1x3x8x8", {"--shapes", "'x' is given twice"}},
      {"--shapes=y:1x3x16x16", {"--shapes", "no input 'y'"}},
      {"--loadInputs=a.npy", {"--loadInputs", "NAME:FILE.npy"}},
      {"--duration=0", {"--duration:"}},
      {"--warmUp=-1", {"--warmUp:"}},
      {"--exportTimes=t.json --sweep-size 8", {"--exportTimes", "--sweep-size"}},
      {"--exportTimes=t.json --info", {"--exportTimes", "--info"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    // No structured binding: doctest's macros capture in lambdas, which clang 14 refuses.
    const std::string& args = cases[i].first;
    const std::vector<std::string>& needles = cases[i].second;
    INFO("args: " << args);
    const Run run = bench(base + args, "trt_bad" + std::to_string(i));
    INFO(run.err);
    CHECK(run.status == 2);
    CHECK(run.err.find("usage: cgr-bench") != std::string::npos);
    for (const std::string& needle : needles)
      CHECK(run.err.find(needle) != std::string::npos);
  }
  const Run help = bench("--help", "trt_help");
  for (const char* option : {"--shapes=", "--loadInputs=", "--exportTimes=", "--warmUp=",
                             "--duration=", "startComputeMs", "--verbose"}) {
    INFO(option);
    CHECK(help.out.find(option) != std::string::npos);
  }
}

#if defined(CGR_HAVE_ONNX)
namespace {

// x (dims `x_dims`) -> Conv 3->4, 3x3, pad 1 -> Relu -> y; with `z_dims`, y + z -> out.
fs::path write_conv_model(const std::string& file, const std::vector<std::string>& x_dims,
                          const std::vector<std::string>& z_dims = {}) {
  cgr::test::OnnxBuilder b;
  b.symbolic_input("x", x_dims);
  b.floats("w", {4, 3, 3, 3}, std::vector<float>(108, 0.05f));
  auto& conv = b.node("Conv", {"x", "w"}, {"c"}, "conv");
  cgr::test::OnnxBuilder::attr(conv, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.node("Relu", {"c"}, {"y"}, "relu");
  if (z_dims.empty()) {
    b.output("y");
  } else {
    b.symbolic_input("z", z_dims);
    b.node("Add", {"y", "z"}, {"out"}, "add");
    b.output("out");
  }
  const fs::path path = kWork / file;
  fs::create_directories(kWork);
  std::ofstream(path, std::ios::binary) << b.bytes();
  return path;
}

std::string onnx_args(const fs::path& model) {
  return "--model " + quoted(model) + " --device cpu --warmup-ms 5 --mode dag --iterations 2";
}

}  // namespace

TEST_CASE("cgr-bench: --batch fills every ONNX input's symbolic batch, not a fixed one") {
  const fs::path dynamic =
      write_conv_model("batch_dynamic.onnx", {"N", "3", "8", "8"}, {"N", "4", "8", "8"});
  const fs::path report = kWork / "batch_dynamic.json";
  const Run run =
      bench(onnx_args(dynamic) + " --batch 3 --export-json " + quoted(report), "batch_dynamic");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  const json j = load_json(report);
  CHECK(j["model"]["batch"] == 3);
  CHECK(j["model"]["inputs"][0]["shape"] == json::array({3, 3, 8, 8}));
  CHECK(j["model"]["inputs"][1]["shape"] == json::array({3, 4, 8, 8}));
  CHECK(j["model"]["outputs"][0]["shape"] == json::array({3, 4, 8, 8}));
  // Without --batch the symbolic batch is the importer's error, with cgr-bench's hint.
  const Run missing = bench(onnx_args(dynamic), "batch_missing");
  CHECK(missing.status == 1);
  CHECK(missing.err.find("--batch N") != std::string::npos);

  const fs::path fixed = write_conv_model("batch_fixed.onnx", {"1", "3", "8", "8"});
  const Run same = bench(onnx_args(fixed) + " --batch 1", "batch_fixed_same");
  CHECK(same.status == 0);
  const Run other = bench(onnx_args(fixed) + " --batch 2", "batch_fixed_other");
  INFO(other.err);
  CHECK(other.status == 2);
  CHECK(other.err.find("--batch: input 'x'") != std::string::npos);
  CHECK(other.err.find("fixed batch of 1 (1x3x8x8)") != std::string::npos);
}

TEST_CASE("cgr-bench: a loaded .npy sets an ONNX input's symbolic dimensions") {
  const fs::path model = write_conv_model("npy_dynamic.onnx", {"N", "3", "H", "W"});
  const fs::path input = kWork / "npy-2x3x12x12.npy", chw = kWork / "npy-3x10x10.npy",
                 wrong = kWork / "npy-2x5x12x12.npy", report = kWork / "npy_dynamic.json";
  cgr::save_npy(input, cgr::Tensor(cgr::Shape{2, 3, 12, 12}, std::vector<float>(864, 0.5f)));
  cgr::save_npy(chw, cgr::Tensor(cgr::Shape{3, 10, 10}, std::vector<float>(300, 0.5f)));
  cgr::save_npy(wrong, cgr::Tensor(cgr::Shape{2, 5, 12, 12}, std::vector<float>(1440, 0.5f)));
  const Run run = bench(
      onnx_args(model) + " --load-input x=" + quoted(input) + " --export-json " + quoted(report),
      "npy_dynamic");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  const json j = load_json(report);
  CHECK(j["model"]["inputs"][0]["shape"] == json::array({2, 3, 12, 12}));
  CHECK(j["model"]["inputs"][0]["source"] == input.string());
  CHECK(j["model"]["outputs"][0]["shape"] == json::array({2, 4, 12, 12}));
  // trtexec's spelling; a file without the batch dimension is one sample.
  const Run trt = bench(
      onnx_args(model) + " --loadInputs=x:" + quoted(chw) + " --export-json " + quoted(report),
      "npy_chw");
  INFO(trt.out << trt.err);
  REQUIRE(trt.status == 0);
  CHECK(load_json(report)["model"]["inputs"][0]["shape"] == json::array({1, 3, 10, 10}));
  // A fixed dimension the file does not match: the input, the file and both shapes.
  const Run bad = bench(onnx_args(model) + " --load-input " + quoted(wrong), "npy_wrong");
  CHECK(bad.status == 1);
  CHECK(bad.err.find("npy-2x5x12x12.npy: shape 2x5x12x12 does not fit input 'x' Nx3xHxW") !=
        std::string::npos);
  // A given shape wins, and a file that differs from it is an error naming both.
  const Run given =
      bench(onnx_args(model) + " --shapes=x:2x3x8x8 --load-input x=" + quoted(input), "npy_given");
  CHECK(given.status == 1);
  CHECK(given.err.find("shape 2x3x12x12 does not fit input 'x' 2x3x8x8") != std::string::npos);
  // --batch that differs from the file's batch.
  const Run batch =
      bench(onnx_args(model) + " --batch 4 --load-input x=" + quoted(input), "npy_batch");
  CHECK(batch.status == 1);
  CHECK(batch.err.find("does not fit input 'x' 4x3xHxW") != std::string::npos);
}

TEST_CASE("cgr-bench: --sweep-size on ONNX sweeps a symbolic H = W, refuses a fixed one") {
  const fs::path model = write_conv_model("sweep_dynamic.onnx", {"N", "3", "H", "W"});
  const fs::path report = kWork / "sweep_onnx.json";
  const Run run =
      bench("--model " + quoted(model) +
                " --device cpu --warmup-ms 5 --iterations 3 --batch 1 --sweep-size 6,10 "
                "--export-json " +
                quoted(report),
            "sweep_onnx");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  CHECK(run.out.find("=== Size sweep") != std::string::npos);
  const json j = load_json(report);
  REQUIRE(j["sweep"].size() == 2);
  CHECK(j["sweep"][0]["size"] == 6);
  CHECK(j["sweep"][1]["size"] == 10);
  for (const json& p : j["sweep"])
    check_stats(p["latency_ms"]["dag"], {"p90", "p95", "p99"});

  const fs::path fixed = write_conv_model("sweep_fixed.onnx", {"N", "3", "8", "8"});
  const Run refused = bench(
      "--model " + quoted(fixed) + " --device cpu --batch 1 --sweep-size 6,10", "sweep_fixed");
  INFO(refused.err);
  CHECK(refused.status == 2);
  CHECK(refused.err.find("--sweep-size: input 'x'") != std::string::npos);
  CHECK(refused.err.find("Nx3x8x8") != std::string::npos);
  CHECK(refused.err.find("symbolic") != std::string::npos);
}
#endif

TEST_CASE("cgr-bench: --help defines every metric the report prints") {
  const Run help = bench("--help", "help");
  REQUIRE(help.status == 0);
  const auto metrics = help.out.find("\nMetrics\n");
  REQUIRE(metrics != std::string::npos);
  const std::string definitions = help.out.substr(metrics);
  // A definition starts a line of the Metrics section: "  latency          wall-clock ...".
  auto defined = [&](const std::string& metric) {
    return definitions.find("\n  " + metric + " ") != std::string::npos;
  };
  // The labels of a real report: the first column of every "  label   value" line of the
  // performance summary, and the statistics of its latency line.
  const Run run = bench(kSmall + " --iterations 3", "help_report");
  REQUIRE(run.status == 0);
  std::set<std::string> labels;
  std::istringstream lines(run.out.substr(run.out.find("=== Performance summary")));
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("=== Comparison")) break;
    if (!line.starts_with("  ")) continue;
    const auto end = line.find("  ", 2);
    if (end != std::string::npos) labels.insert(line.substr(2, end - 2));
  }
  REQUIRE(labels.size() >= 6);
  for (const char* statistic : {"min", "mean", "median", "max", "stddev", "pN"})
    labels.insert(statistic);
  for (const char* graph_fact : {"layers", "ops", "edges", "critical path", "width", "lanes",
                                 "arena", "weights", "build", "instantiate", "ratio vs dag"}) {
    labels.insert(graph_fact);
  }
  for (const std::string& label : labels) {
    INFO(label);
    CHECK(defined(label));
  }
}
