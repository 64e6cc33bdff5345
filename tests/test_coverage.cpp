// Coverage that cannot drift: every layer kind registered in this build (each layer's .cpp
// registers its kind) must have a kernel on every backend this build has, must appear in a
// layer case of the GPU test (tests/layer_cases.cpp), and must run there on the CPU; and the
// list of ONNX ops the README publishes must be the importer's dispatch table.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cgr/models/random_weights.hpp"
#include "layer_cases.hpp"
#include "test_support.hpp"
#if defined(CGR_HAVE_ONNX)
#include "onnx_builder.hpp"
#endif

using namespace cgr;

namespace {

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// The CustomOp case's device work; the CPU executor never calls it.
const test::DeviceCopy kNoDevice = [](std::size_t) {
  return [](void*, std::span<const float* const>, float*) {
    FAIL("the CPU executor called the CustomOp's CUDA work");
  };
};

}  // namespace

TEST_CASE("coverage: every layer kind has a CPU kernel, a CUDA op and a GPU case") {
  const std::vector<std::string> kinds = registered_layer_kinds();
  // The built-in kinds register themselves when the library loads.
  REQUIRE(kinds.size() >= 17);
  CHECK(contains(kinds, "Conv2d"));
  CHECK(contains(kinds, "Custom"));

  const std::vector<std::string> cpu = supported_layer_kinds(Device::cpu);
  for (const auto& kind : kinds)
    CHECK_MESSAGE(contains(cpu, kind), "the CPU backend lacks " << kind);
#if defined(CGR_HAVE_CUDA)
  const std::vector<std::string> cuda = supported_layer_kinds(Device::cuda);
  for (const auto& kind : kinds) {
    CHECK_MESSAGE(contains(cuda, kind), "the CUDA backend (engine/cuda/ops) lacks " << kind);
  }
  // An op registered under a kind no layer has would never be used: a typo.
  for (const auto& kind : cuda)
    CHECK_MESSAGE(contains(kinds, kind), "a CUDA op for unknown kind " << kind);
#else
  CHECK(supported_layer_kinds(Device::cuda).empty());
  MESSAGE("no CUDA backend in this build: its coverage is checked in CUDA builds");
#endif

  // Every kind appears in a layer case, and every case runs on the CPU executor in both
  // modes, bit for bit alike (the GPU test compares the CUDA executor with these results).
  std::set<std::string> covered;
  for (const test::LayerCase& c : test::layer_cases(kNoDevice)) {
    CAPTURE(c.name);
    Network net;
    const Value x = net.input("x", c.input);
    net.output("y", c.build(net, x));
    for (int i = 0; i < net.layer_count(); ++i)
      covered.insert(std::string(net.layer(i).kind()));
    const Weights weights = models::random_weights(net, 21);
    const auto input = test::random_vector(static_cast<std::size_t>(c.input.numel()), 22);
    std::vector<Tensor> results;
    for (Mode mode : {Mode::dag, Mode::eager}) {
      const Engine engine =
          Engine::build(net, weights, {.mode = mode, .threads = 2, .fuse = c.fuse});
      results.push_back(engine.create_context().infer({{"x", input}}).output("y"));
    }
    CHECK(test::same_bits(results[0], results[1]));
    for (float v : results[0].f32())
      REQUIRE(std::isfinite(v));
  }
  for (const auto& kind : kinds) {
    CHECK_MESSAGE(covered.contains(kind),
                  "tests/layer_cases.cpp has no case for layer kind " << kind);
  }
}

namespace {

// A layer whose .cpp forgot CGR_REGISTER_LAYER_KIND.
struct Unregistered final : Layer {
  static constexpr std::string_view kKind = "Unregistered";
  explicit Unregistered(const TensorDesc& input) : Layer("odd", {input}) {
    set_output(input.shape);
  }
  std::string_view kind() const override { return kKind; }
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp&) const override { return nullptr; }
};

}  // namespace

TEST_CASE("coverage: a layer of an unregistered kind is refused") {
  Network net;
  const Value x = net.input("x", {1, 4});
  CHECK(test::error_message(
            [&] { net.add_layer(std::make_unique<Unregistered>(net.desc(x)), {x}); }) ==
        "layer 'odd': its kind 'Unregistered' is not registered (CGR_REGISTER_LAYER_KIND in its "
        ".cpp)");
  CHECK(net.layer_count() == 0);
}

#if defined(CGR_HAVE_ONNX)
namespace {

// The op types README.md lists between its onnx-ops markers.
std::vector<std::string> readme_onnx_ops() {
  std::ifstream file(CGR_README_PATH);
  REQUIRE(file);
  std::stringstream text;
  text << file.rdbuf();
  const std::string readme = text.str();
  const std::string begin = "<!-- onnx-ops -->", end = "<!-- /onnx-ops -->";
  const auto a = readme.find(begin), b = readme.find(end);
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  const std::string list = readme.substr(a + begin.size(), b - a - begin.size());
  std::vector<std::string> ops;  // the words of the list
  std::string word;
  for (const char c : list + " ") {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      word += c;
    } else if (!word.empty()) {
      ops.push_back(std::move(word));
      word.clear();
    }
  }
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace

TEST_CASE("coverage: README's ONNX op list is the importer's dispatch table") {
  const std::vector<std::string> supported = supported_onnx_ops();
  REQUIRE(std::is_sorted(supported.begin(), supported.end()));
  CHECK(readme_onnx_ops() == supported);
  // Each listed op reaches a handler: a bare node of it may be refused for its inputs or
  // attributes, but never as an unsupported op type.
  for (const auto& op : supported) {
    CAPTURE(op);
    test::OnnxBuilder b;
    b.input("x", {1, 2, 4, 4});
    b.node(op, {"x"}, {"y"}, "n");
    b.output("y");
    CHECK(test::error_message([&] { b.import(); }).find("not supported:\n") == std::string::npos);
  }
  test::OnnxBuilder unknown;
  unknown.input("x", {1, 2, 4, 4});
  unknown.node("NoSuchOp", {"x"}, {"y"}, "n");
  unknown.output("y");
  CHECK(test::error_message([&] {
          unknown.import();
        }).find("1 op type is not supported:\n  NoSuchOp (1 node: 'n')\nsupported: ") !=
        std::string::npos);
}
#endif
