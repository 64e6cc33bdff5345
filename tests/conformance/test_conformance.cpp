// Conformance against PyTorch: every model make_models.py exported is imported from ONNX, run
// on the CPU executor in eager and dag mode, and compared with PyTorch's output:
//     max |cgr - torch| / max |torch| <= tolerance (1e-4).
// ResNet-18's state_dict (safetensors) is also bound to cgr's own ResNet-18 builder.
// The data directory comes from the conformance_models CTest fixture; without it (no
// python3-torch) the binary says so and exits 77, which CTest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <cgr/engine.hpp>
#include <cgr/npy.hpp>
#include <cgr/onnx.hpp>
#include <cgr/safetensors.hpp>

#include "cgr/models/resnet18.hpp"
#include "cgr/models/resnet18_exits.hpp"

namespace fs = std::filesystem;

namespace {

fs::path data_dir;
nlohmann::json manifest;

double relative_error(std::span<const float> actual, std::span<const float> expected) {
  REQUIRE(actual.size() == expected.size());
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double d = std::abs(double{actual[i]} - double{expected[i]});
    diff = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(diff, d);
    ref = std::max(ref, std::abs(double{expected[i]}));
  }
  return diff / std::max(ref, 1e-30);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

TEST_CASE("every exported model matches PyTorch on the CPU executor, eager and dag") {
  // make_models.py writes 332: an empty or truncated manifest must not pass as "all match".
  constexpr std::size_t kMinimumModels = 200;
  REQUIRE(manifest.is_array());
  REQUIRE(manifest.size() >= kMinimumModels);
  std::vector<std::string> rows;
  std::size_t compared = 0;
  for (const auto& entry : manifest) {
    const std::string name = entry.at("name");
    CAPTURE(name);
    REQUIRE(!entry.at("outputs").empty());
    const auto t0 = std::chrono::steady_clock::now();
    cgr::OnnxModel model;
    try {
      model = cgr::import_onnx(data_dir / entry.at("onnx").get<std::string>());
    } catch (const cgr::Error& e) {
      FAIL_CHECK("import failed: " << std::string(e.what()));
      continue;
    }
    const double import_ms = ms_since(t0);
    const cgr::Tensor input =
        cgr::load_npy(data_dir / entry.at("input").at("file").get<std::string>());
    const double tolerance = entry.at("tolerance");
    double worst = 0, compile_ms = 0;
    for (cgr::Mode mode : {cgr::Mode::eager, cgr::Mode::dag}) {
      const auto t1 = std::chrono::steady_clock::now();
      const cgr::Engine engine =
          cgr::Engine::build(model.network, model.weights, {.mode = mode, .threads = 2});
      compile_ms = std::max(compile_ms, ms_since(t1));
      cgr::ExecutionContext ctx = engine.create_context();
      const cgr::Result result =
          ctx.infer({{entry.at("input").at("name").get<std::string>(), input}});
      for (const auto& out : entry.at("outputs")) {
        const cgr::Tensor expected = cgr::load_npy(data_dir / out.at("file").get<std::string>());
        const cgr::Tensor& actual = result.output(out.at("name").get<std::string>());
        CHECK(actual.shape() == expected.shape());
        const double error = relative_error(actual.f32(), expected.f32());
        CHECK_MESSAGE(error <= tolerance, name << " (" << cgr::to_string(mode) << ", "
                                               << out.at("name").get<std::string>()
                                               << "): relative error " << error);
        worst = std::max(worst, error);
        ++compared;
      }
    }
    rows.push_back(
        fmt::format("{:<40} {:>10.2e} {:>10.1f} {:>10.1f}", name, worst, import_ms, compile_ms));
  }
  fmt::print("{:<40} {:>10} {:>10} {:>10}\n", "model", "max rel", "import ms", "compile ms");
  for (const auto& row : rows)
    fmt::print("{}\n", row);
  // Every model imported and was compared in both modes.
  CHECK(rows.size() == manifest.size());
  CHECK(compared >= 2 * manifest.size());
}

// Reduced precision (EngineOptions::precision; the CPU emulates its storage rounding): every
// model against PyTorch's fp32 output, max |cgr - torch| / max |torch| within the precision's
// bar: 1e-2 for fp16 (10 mantissa bits; the worst model, mobilenet_v2, is at 7e-3) and 5e-2 for
// bf16 (7 bits: its rounding alone is up to 3.9e-3 per op, and depthwise mobile nets such as
// mobilenet_v2 and mobilenet_v3 reach 4e-2). Prints the worst models of each precision: the
// error table of the docs.
TEST_CASE("every exported model in fp16 (1e-2) and bf16 (5e-2) against PyTorch's fp32 output") {
  REQUIRE(manifest.is_array());
  for (const auto& [precision, tolerance] :
       {std::pair{cgr::Precision::fp16, 1e-2}, std::pair{cgr::Precision::bf16, 5e-2}}) {
    CAPTURE(cgr::to_string(precision));
    std::vector<std::pair<double, std::string>> errors;
    for (const auto& entry : manifest) {
      const std::string name = entry.at("name");
      CAPTURE(name);
      const cgr::OnnxModel model = cgr::import_onnx(data_dir / entry.at("onnx").get<std::string>());
      const cgr::Tensor input =
          cgr::load_npy(data_dir / entry.at("input").at("file").get<std::string>());
      const cgr::Engine engine =
          cgr::Engine::build(model.network, model.weights, {.threads = 2, .precision = precision});
      const cgr::Result result =
          engine.create_context().infer({{entry.at("input").at("name").get<std::string>(), input}});
      double worst = 0;
      for (const auto& out : entry.at("outputs")) {
        const cgr::Tensor expected = cgr::load_npy(data_dir / out.at("file").get<std::string>());
        const double error =
            relative_error(result.output(out.at("name").get<std::string>()).f32(), expected.f32());
        CHECK_MESSAGE(error <= tolerance, name << " (" << cgr::to_string(precision) << ", "
                                               << out.at("name").get<std::string>()
                                               << "): relative error " << error);
        worst = std::max(worst, error);
      }
      errors.emplace_back(worst, name);
    }
    std::sort(errors.rbegin(), errors.rend());
    double sum = 0;
    for (const auto& [error, name] : errors)
      sum += error;
    fmt::print("{}: {} models, mean of the worst output error {:.2e}; the largest:\n",
               cgr::to_string(precision), errors.size(), sum / static_cast<double>(errors.size()));
    for (std::size_t i = 0; i < std::min<std::size_t>(5, errors.size()); ++i) {
      fmt::print("  {:<40} {:.2e}\n", errors[i].second, errors[i].first);
    }
  }
}

TEST_CASE("googlenet from ONNX: each Inception module's four branches are parallel lanes") {
  const fs::path path = data_dir / "googlenet" / "model.onnx";
  REQUIRE(fs::exists(path));
  const cgr::OnnxModel model = cgr::import_onnx(path);
  const cgr::Graph graph = model.network.graph();
  CHECK(graph.max_width() >= 4);
  int modules = 0;
  for (const char* module :
       {"inception3a", "inception3b", "inception4a", "inception4b", "inception4c", "inception4d",
        "inception4e", "inception5a", "inception5b"}) {
    CAPTURE(module);
    // The first op of each branch: branch1 conv, branch2/3 first conv, branch4 pool.
    std::vector<int> heads;
    for (int op = 0; op < graph.op_count(); ++op) {
      const std::string& n = graph.op(op).name;
      for (const char* branch : {"branch1/conv", "branch2/branch2.0/conv", "branch3/branch3.0/conv",
                                 "branch4/branch4.0/MaxPool"}) {
        if (n.find(std::string(module) + "/" + branch) == 0) heads.push_back(op);
      }
    }
    REQUIRE(heads.size() == 4);
    for (std::size_t a = 0; a < 4; ++a)
      for (std::size_t b = a + 1; b < 4; ++b)
        CHECK_FALSE(graph.ordered(heads[a], heads[b]));
    ++modules;
  }
  CHECK(modules == 9);
}

TEST_CASE("ResNet-18's state_dict binds to cgr's own ResNet-18 builder and matches PyTorch") {
  const fs::path dir = data_dir / "resnet18";
  REQUIRE(fs::exists(dir / "weights.safetensors"));
  const cgr::Network net = cgr::models::resnet18(1, 224, 1000);
  const cgr::Weights weights = cgr::Weights::load_safetensors(dir / "weights.safetensors");
  const cgr::Tensor input = cgr::load_npy(dir / "input.npy");
  const cgr::Tensor expected = cgr::load_npy(dir / "output.npy");
  for (cgr::Mode mode : {cgr::Mode::eager, cgr::Mode::dag}) {
    const cgr::Engine engine = cgr::Engine::build(net, weights, {.mode = mode, .threads = 2});
    const cgr::Tensor actual = engine.create_context().infer({{"image", input}}).output("logits");
    const double error = relative_error(actual.f32(), expected.f32());
    MESSAGE("resnet18 builder + safetensors, " << cgr::to_string(mode) << ": relative error "
                                               << error);
    CHECK(error <= 1e-4);
  }
}

TEST_CASE(
    "ResNet-18 with exits: every head and the final logits match PyTorch (export_weights.py)") {
  const fs::path dir = data_dir.string() + "_exits";
  REQUIRE(fs::exists(dir / "weights.safetensors"));
  const cgr::Weights weights = cgr::Weights::load_safetensors(dir / "weights.safetensors");
  const cgr::Tensor input = cgr::load_npy(dir / "input.npy");
  const cgr::Network net =
      cgr::models::resnet18_exits(1, input.shape()[3], weights.find("fc.weight")->shape()[0]);
  for (cgr::Mode mode : {cgr::Mode::eager, cgr::Mode::dag}) {
    const cgr::Engine engine = cgr::Engine::build(
        net, weights, {.mode = mode, .threads = 2, .exits = cgr::ExitPolicy::all});
    const cgr::Result result = engine.create_context().infer({{"image", input}});
    for (const char* name : {"exit0", "exit1", "exit2", "final"}) {
      const cgr::Tensor expected = cgr::load_npy(dir / (std::string(name) + ".npy"));
      const double error = relative_error(result.output(name).f32(), expected.f32());
      MESSAGE("resnet18_exits " << std::string(name) << ", " << cgr::to_string(mode)
                                << ": relative error " << error);
      CHECK(error <= 1e-4);
    }
  }
}

int main(int argc, char** argv) {
  data_dir = argc > 1 && argv[1][0] != '-' ? fs::path(argv[1]) : fs::path(CGR_CONFORMANCE_DIR);
  const fs::path manifest_path = data_dir / "manifest.json";
  if (!fs::exists(manifest_path)) {
    std::printf(
        "conformance skipped: %s not found (make_models.py needs python3-torch, "
        "python3-torchvision, python3-onnx)\n",
        manifest_path.c_str());
    return 77;
  }
  std::ifstream(manifest_path) >> manifest;
  doctest::Context context;
  context.applyCommandLine(argc - (argc > 1 && argv[1][0] != '-' ? 1 : 0),
                           argv + (argc > 1 && argv[1][0] != '-' ? 1 : 0));
  return context.run();
}
