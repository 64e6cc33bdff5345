// Conformance against ONNX Runtime: every graph make_ort_models.py built with onnx.helper (each
// op at each opset version where it changed) is imported, run on the CPU executor in eager and
// dag mode, and compared with onnxruntime's outputs:
//     max |cgr - ort| / max |ort| <= tolerance (1e-5 unless the case says otherwise).
// The data directory comes from the conformance_ort_models CTest fixture; without it (no
// onnxruntime) the binary says so and exits 77, which CTest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include <cgr/engine.hpp>
#include <cgr/npy.hpp>
#include <cgr/onnx.hpp>

namespace fs = std::filesystem;

namespace {

fs::path data_dir;
nlohmann::json manifest;

double relative_error(std::span<const float> actual, std::span<const float> expected) {
  REQUIRE(actual.size() == expected.size());
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double d = std::abs(double{actual[i]} - double{expected[i]});
    const bool both_nan = std::isnan(actual[i]) && std::isnan(expected[i]);
    diff = both_nan ? diff : std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(diff, d);
    if (std::isfinite(expected[i])) ref = std::max(ref, std::abs(double{expected[i]}));
  }
  return diff / std::max(ref, 1e-30);
}

}  // namespace

TEST_CASE("every onnx.helper graph matches ONNX Runtime on the CPU executor, eager and dag") {
  // make_ort_models.py writes one case per op and opset version: an empty or truncated
  // manifest must not pass as "all match".
  constexpr std::size_t kMinimumCases = 80;
  REQUIRE(manifest.is_array());
  REQUIRE(manifest.size() >= kMinimumCases);
  std::map<std::string, std::set<int>> opsets_of_op;
  std::size_t compared = 0;
  for (const auto& entry : manifest) {
    const std::string name = entry.at("name");
    CAPTURE(name);
    cgr::OnnxModel model;
    try {
      model = cgr::import_onnx(data_dir / entry.at("onnx").get<std::string>());
    } catch (const cgr::Error& e) {
      FAIL_CHECK("import failed: " << std::string(e.what()));
      continue;
    }
    std::vector<cgr::Tensor> inputs;
    cgr::NamedInputs named;
    for (const auto& in : entry.at("inputs")) {
      inputs.push_back(cgr::load_npy(data_dir / in.at("file").get<std::string>()));
    }
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      named.emplace_back(entry.at("inputs")[i].at("name").get<std::string>(), cgr::TensorView(inputs[i]));
    }
    const double tolerance = entry.at("tolerance");
    for (cgr::Mode mode : {cgr::Mode::eager, cgr::Mode::dag}) {
      const cgr::Engine engine = cgr::Engine::build(model.network, model.weights, {.mode = mode, .threads = 2});
      const cgr::Result result = engine.create_context().infer(named);
      for (const auto& out : entry.at("outputs")) {
        const cgr::Tensor expected = cgr::load_npy(data_dir / out.at("file").get<std::string>());
        const cgr::Tensor& actual = result.output(out.at("name").get<std::string>());
        CHECK(actual.shape() == expected.shape());
        const double error = relative_error(actual.f32(), expected.f32());
        CHECK_MESSAGE(error <= tolerance, name << " (" << cgr::to_string(mode) << ", "
                                               << out.at("name").get<std::string>()
                                               << "): relative error " << error);
        ++compared;
      }
    }
    for (const auto& op : entry.at("exercises")) opsets_of_op[op.get<std::string>()].insert(entry.at("opset").get<int>());
  }
  fmt::print("{:<22} opsets checked against onnxruntime\n", "op");
  for (const auto& [op, opsets] : opsets_of_op) fmt::print("{:<22} {}\n", op, fmt::join(opsets, " "));
  CHECK(compared >= 2 * manifest.size());
}

int main(int argc, char** argv) {
  data_dir = argc > 1 && argv[1][0] != '-' ? fs::path(argv[1]) : fs::path(CGR_ORT_CONFORMANCE_DIR);
  const fs::path manifest_path = data_dir / "manifest.json";
  if (!fs::exists(manifest_path)) {
    std::printf("no %s: the graphs were not generated (make_ort_models.py needs onnxruntime; "
                "scripts/install-deps.sh --tests installs it)\n", manifest_path.c_str());
    return 77;
  }
  std::ifstream(manifest_path) >> manifest;
  doctest::Context context;
  const int skip = argc > 1 && argv[1][0] != '-' ? 1 : 0;
  context.applyCommandLine(argc - skip, argv + skip);
  return context.run();
}
