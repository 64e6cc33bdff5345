// cgr-bench --timeline on the GPU: CUPTI's activity records of one inference, drawn as a bar
// per kernel or copy and named after the ops that own the graph nodes. Skips without a device.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <cgr/engine.hpp>


#if defined(CGR_BENCH_PATH)

namespace {

const bool no_device = !cgr::cuda_unavailable_reason().empty();
namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

int count_of(const std::string& text, const std::string& needle) {
  int count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

}  // namespace

TEST_SUITE_BEGIN("timeline");

TEST_CASE("cgr-bench --timeline on cuda: CUPTI bars for every op of a dag inference" *
          doctest::skip(no_device)) {
  const fs::path dir = fs::temp_directory_path() / "cgr_gpu_timeline";
  fs::create_directories(dir);
  const fs::path svg = dir / "two_branch.svg", log = dir / "bench.log", report = dir / "run.json";
  fs::remove(svg);
  const std::string command =
      std::string("'") + CGR_BENCH_PATH +
      "' --model two-branch --device cuda --mode dag --input-shape 1x3x32x32 "
      "--iterations 5 --warmup-ms 10 --timeline '" +
      svg.string() + "' --export-json '" + report.string() + "' >'" + log.string() + "' 2>&1";
  const int raw = std::system(command.c_str());
  INFO(read_text(log));
  REQUIRE(WIFEXITED(raw));
  REQUIRE(WEXITSTATUS(raw) == 0);
  const std::string text = read_text(svg);
  // Seven ops (six conv+ReLU, the concat), one copy in, one copy out: at least nine bars, and
  // every op's name on one of them (its graph node mapped back through the clone callback).
  // A bar is <rect class="op"> or <rect class="op critical">; its title reads
  // "#3 conv2+conv2.relu [kernel] 0.004 ms (from ... )" (a fused op is named after its layers).
  CHECK(count_of(text, "<rect class=\"op") >= 9);
  for (const std::string op :
       {"conv1", "conv2", "conv3", "conv4", "conv5", "conv6", "cat", "copy-in", "copy-out:cat"}) {
    CAPTURE(op);
    CHECK((text.find(" " + op + " [") != std::string::npos ||
           text.find(" " + op + "+") != std::string::npos));
  }
  const std::string json = read_text(report);
  CHECK(json.find("\"source\":\"cupti\"") != std::string::npos);
}

TEST_SUITE_END();

#endif  // CGR_BENCH_PATH
