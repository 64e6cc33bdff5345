// The CUDA executor against the CPU executor: every mode, every exit policy, the graph's
// structure against the IR, the host work of one inference, parallel contexts and the
// device-resident path. Every case skips itself where there is no CUDA device.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "cgr/capture/cuda_check.hpp"
#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18.hpp"
#include "cgr/models/resnet18_exits.hpp"
#include "cgr/models/two_branch.hpp"
#include "../test_support.hpp"

using namespace cgr;

namespace {

const bool no_device = !cgr::cuda_unavailable_reason().empty();
constexpr Mode kCudaModes[] = {Mode::dag, Mode::stream_graph, Mode::eager};

std::vector<float> cpu_reference(const Network& net, const Weights& w, const std::string& input,
                                 const std::vector<float>& x, const std::string& output,
                                 ExitPolicy exits = ExitPolicy::all) {
  const Engine cpu = Engine::build(net, w, {.threads = 2, .exits = exits});
  return cpu.create_context().infer({{input, x}}).output(output).to_vector();
}

// ResNet-18 at 64x64 with 10 classes, seeded weights and input, and the CPU's logits.
struct SmallResNet {
  Network net = models::resnet18(1, 64, 10);
  Weights w = models::random_weights(net, 11);
  std::vector<float> x = test::random_vector(3 * 64 * 64, 12);
  std::vector<float> reference = cpu_reference(net, w, "image", x, "logits");
};

}  // namespace

TEST_SUITE_BEGIN("executor");

TEST_CASE("CUDA: two-branch and ResNet-18 match the CPU executor in every mode" * doctest::skip(no_device)) {
  struct Model {
    Network net;
    std::string input, output;
    std::size_t size;
  };
  std::vector<Model> models;
  models.push_back({models::two_branch({.size = 32, .width = 16}), "x", "out", 3 * 32 * 32});
  models.push_back({models::resnet18(1, 64, 10), "image", "logits", 3 * 64 * 64});
  for (auto& m : models) {
    const Weights w = models::random_weights(m.net, 11);
    const auto x = test::random_vector(m.size, 12);
    const auto reference = cpu_reference(m.net, w, m.input, x, m.output);
    for (Mode mode : kCudaModes) {
      CAPTURE(to_string(mode));
      const Engine engine = Engine::build(m.net, w, {.device = Device::cuda, .mode = mode});
      ExecutionContext ctx = engine.create_context();
      const auto y = ctx.infer({{m.input, x}}).output(m.output).to_vector();
      CHECK(test::relative_error(y, reference) < 1e-4);
      // Replays give the same answer.
      CHECK(ctx.infer({{m.input, x}}).output(m.output).to_vector() == y);
    }
  }
}

TEST_CASE("CUDA graph modes: the real graph is the plan, node and edge counts as predicted, one launch, one sync" *
          doctest::skip(no_device)) {
  struct Model {
    Network net;
    std::string input;
    std::size_t size;
    ExitPolicy exits;
  };
  std::vector<Model> models;
  models.push_back({models::two_branch({.size = 16, .width = 8}), "x", 3 * 16 * 16, ExitPolicy::all});
  models.push_back({models::resnet18_exits(1, 64, 10), "image", 3 * 64 * 64, ExitPolicy::all});
  models.push_back({models::resnet18_exits(1, 64, 10), "image", 3 * 64 * 64, ExitPolicy::early});
  for (const Model& m : models) {
    for (Mode mode : {Mode::dag, Mode::stream_graph}) {
      CAPTURE(to_string(mode));
      CAPTURE(to_string(m.exits));
      const Engine engine = Engine::build(m.net, models::random_weights(m.net), {.device = Device::cuda, .mode = mode, .exits = m.exits});
      ExecutionContext ctx = engine.create_context();
      (void)ctx.infer({{m.input, test::random_vector(m.size, 1)}});
      const CudaGraphReport report = ctx.cuda_graph_report();
      for (const auto& mismatch : report.mismatches) MESSAGE(mismatch);
      CHECK(report.mismatches.empty());
      const CudaGraphPlan plan = engine.cuda_graph_plan(mode);
      CHECK(report.planned_nodes == plan.nodes.size());
      CHECK(report.planned_edges == plan.edge_count());
      CHECK(report.segment_edges_found == report.planned_edges);
      CHECK(report.nodes == report.predicted_nodes);
      CHECK(report.edges == report.predicted_edges);
      CHECK(report.nodes >= plan.nodes.size());
      CHECK(report.conditional_nodes == (m.exits == ExitPolicy::early ? 3u : 0u));
      if (mode == Mode::dag) {
        CHECK(report.op_edges_found == report.op_edges_expected);
        if (m.exits != ExitPolicy::early) CHECK(report.op_edges_expected == engine.graph().edges().size());
      }
      CHECK(report.last_run_launches == 1);
      CHECK(report.last_run_synchronizations == 1);
      MESSAGE(to_string(mode) << ": " << report.nodes << " nodes, " << report.edges << " edges for "
                              << plan.nodes.size() << " planned nodes");
    }
  }
}

TEST_CASE("CUDA dag: the two branches have no path between them in the real cudaGraph_t" * doctest::skip(no_device)) {
  const Network net = models::two_branch({.size = 16, .width = 8});
  const Engine engine = Engine::build(net, models::random_weights(net), {.device = Device::cuda, .mode = Mode::dag});
  ExecutionContext ctx = engine.create_context();
  const CudaGraphNodes owned = ctx.cuda_graph_nodes();
  auto graph = static_cast<cudaGraph_t>(owned.graph);
  std::size_t count = 0;
  CGR_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CGR_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  std::map<cudaGraphNode_t, std::string> owner;
  for (const auto& [node, name] : owned.owners) owner[static_cast<cudaGraphNode_t>(node)] = name;
  // Ancestors of every node, from the graph's own dependency lists.
  std::map<cudaGraphNode_t, std::set<cudaGraphNode_t>> ancestors;
  std::function<const std::set<cudaGraphNode_t>&(cudaGraphNode_t)> ancestors_of = [&](cudaGraphNode_t node) -> const std::set<cudaGraphNode_t>& {
    if (const auto it = ancestors.find(node); it != ancestors.end()) return it->second;
    std::size_t n = 0;
    CGR_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &n));
    std::vector<cudaGraphNode_t> deps(n);
    std::vector<cudaGraphEdgeData> edges(n);  // asked for: non-default edges would fail a lossy query
    CGR_CUDA_CHECK(cudaGraphNodeGetDependencies(node, deps.data(), edges.data(), &n));
    std::set<cudaGraphNode_t> result(deps.begin(), deps.end());
    for (cudaGraphNode_t d : deps) {
      const auto& up = ancestors_of(d);
      result.insert(up.begin(), up.end());
    }
    return ancestors[node] = std::move(result);
  };
  const auto starts = [](const std::string& name, std::initializer_list<const char*> prefixes) {
    for (const char* p : prefixes) {
      if (name.rfind(p, 0) == 0) return true;
    }
    return false;
  };
  std::vector<cudaGraphNode_t> group1, group2;
  for (cudaGraphNode_t node : nodes) {
    REQUIRE(owner.contains(node));
    if (starts(owner[node], {"conv1", "conv2", "conv3"})) group1.push_back(node);
    if (starts(owner[node], {"conv4", "conv5", "conv6"})) group2.push_back(node);
  }
  REQUIRE(group1.size() >= 3);
  REQUIRE(group2.size() >= 3);
  for (cudaGraphNode_t a : group1) {
    for (cudaGraphNode_t b : group2) {
      CHECK_FALSE(ancestors_of(a).contains(b));
      CHECK_FALSE(ancestors_of(b).contains(a));
    }
  }
  // cgr's own kernels are kernel nodes added one per launch: the concat is two sibling nodes
  // (one per input), each after both branches.
  std::vector<cudaGraphNode_t> cat;
  for (cudaGraphNode_t node : nodes) {
    if (owner[node] == "cat") cat.push_back(node);
  }
  REQUIRE(cat.size() == 2);
  for (cudaGraphNode_t node : cat) {
    cudaGraphNodeType type{};
    CGR_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    CHECK(type == cudaGraphNodeTypeKernel);
    CHECK_FALSE(ancestors_of(node).contains(cat[0] == node ? cat[1] : cat[0]));
    bool after_conv3 = false, after_conv6 = false;
    for (cudaGraphNode_t up : ancestors_of(node)) {
      after_conv3 |= starts(owner[up], {"conv3"});
      after_conv6 |= starts(owner[up], {"conv6"});
    }
    CHECK(after_conv3);
    CHECK(after_conv6);
  }
  // Within a branch the chain is there: conv3's nodes come after conv1's.
  for (cudaGraphNode_t node : group1) {
    if (starts(owner[node], {"conv3"})) {
      bool after_conv1 = false;
      for (cudaGraphNode_t up : ancestors_of(node)) after_conv1 |= starts(owner[up], {"conv1"});
      CHECK(after_conv1);
    }
  }
}

TEST_CASE("CUDA: 1000 replays with fresh inputs give the results of one-off runs" * doctest::skip(no_device)) {
  const Network net = models::two_branch({.size = 16, .width = 8});
  const Weights w = models::random_weights(net, 4);
  for (Mode mode : {Mode::dag, Mode::stream_graph}) {
    CAPTURE(to_string(mode));
    const Engine engine = Engine::build(net, w, {.device = Device::cuda, .mode = mode});
    const Engine eager = Engine::build(net, w, {.device = Device::cuda, .mode = Mode::eager});
    ExecutionContext replayed = engine.create_context();
    ExecutionContext one_by_one = eager.create_context();
    int different = 0, checked_fresh = 0;
    for (int i = 0; i < 1000; ++i) {
      const auto x = test::random_vector(3 * 16 * 16, 1000u + static_cast<unsigned>(i));
      const auto y = replayed.infer({{"x", x}}).output("out").to_vector();
      // Every run against the eager executor (same kernels, no graph) ...
      if (test::relative_error(y, one_by_one.infer({{"x", x}}).output("out").to_vector()) > 1e-6) ++different;
      // ... and every 100th against a fresh context of the same engine run once: bit for bit.
      if (i % 100 == 99) {
        CHECK(engine.create_context().infer({{"x", x}}).output("out").to_vector() == y);
        ++checked_fresh;
      }
    }
    CHECK(different == 0);
    CHECK(checked_fresh == 10);
  }
}

TEST_CASE("CUDA exits: all, early with threshold 0 (conditional nodes) and 1" * doctest::skip(no_device)) {
  const Network net = models::resnet18_exits(1, 64, 10);
  const Weights w = models::random_weights(net, 5);
  const auto x = test::random_vector(3 * 64 * 64, 6);
  const auto final_ref = cpu_reference(net, w, "image", x, "final", ExitPolicy::off);
  const auto exit0_ref = cpu_reference(net, w, "image", x, "exit0");
  const auto exit1_ref = cpu_reference(net, w, "image", x, "exit1");
  const auto exit2_ref = cpu_reference(net, w, "image", x, "exit2");
  // What the CPU executor runs with threshold 0: up to block 2 and head 0.
  const Engine cpu_early0 = Engine::build(net, w, {.threads = 2, .exits = ExitPolicy::early, .threshold = 0.0f});
  ExecutionContext cpu_ctx = cpu_early0.create_context();
  (void)cpu_ctx.infer({{"image", x}});
  const std::vector<std::string> cpu_ran = cpu_ctx.executed_ops();
  for (Mode mode : kCudaModes) {
    CAPTURE(to_string(mode));
    const Engine all = Engine::build(net, w, {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::all});
    const Result r_all = all.create_context().infer({{"image", x}});
    CHECK(test::relative_error(r_all.output("final").to_vector(), final_ref) < 1e-4);
    CHECK(test::relative_error(r_all.output("exit0").to_vector(), exit0_ref) < 1e-4);
    CHECK(test::relative_error(r_all.output("exit1").to_vector(), exit1_ref) < 1e-4);
    CHECK(test::relative_error(r_all.output("exit2").to_vector(), exit2_ref) < 1e-4);
    for (const auto& e : r_all.exits) CHECK(e.ran);

    const Engine early0 = Engine::build(net, w, {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::early, .threshold = 0.0f});
    ExecutionContext ctx = early0.create_context();
    const Result r0 = ctx.infer({{"image", x}});
    CHECK(r0.answered_by == "exit0");
    CHECK(r0.outputs.count("final") == 0);
    CHECK_FALSE(r0.exits[1].ran);
    CHECK(test::relative_error(r0.output("exit0").to_vector(), exit0_ref) < 1e-4);
    // The same ops ran as on the CPU: nothing of the backbone after block 2.
    CHECK(ctx.executed_ops() == cpu_ran);
    CHECK(std::none_of(cpu_ran.begin(), cpu_ran.end(), [](const std::string& op) { return op.rfind("layer3", 0) == 0; }));
    if (mode != Mode::eager) {
      const CudaGraphReport report = ctx.cuda_graph_report();
      CHECK(report.conditional_nodes == 3);  // exit 0's IF node, exit 1's in its body, exit 2's in that
      CHECK(report.last_run_synchronizations == 1);  // no host sync before the final copy-out
      CHECK(report.last_run_launches == 1);
    }

    const Engine early2 = Engine::build(net, w, {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::early, .threshold = 1.0f});
    const Result r2 = early2.create_context().infer({{"image", x}});
    CHECK(r2.answered_by == "final");
    CHECK(test::relative_error(r2.output("final").to_vector(), final_ref) < 1e-4);
  }
}

TEST_CASE("CUDA: contexts in parallel threads share the weights and agree" * doctest::skip(no_device)) {
  const Network net = models::two_branch({.size = 16, .width = 8});
  const Engine engine = Engine::build(net, models::random_weights(net), {.device = Device::cuda});
  const auto x = test::random_vector(3 * 16 * 16, 2);
  const auto expected = engine.create_context().infer({{"x", x}}).output("out").to_vector();
  std::vector<int> mismatches(3, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      ExecutionContext ctx = engine.create_context();
      for (int i = 0; i < 50; ++i) {
        if (ctx.infer({{"x", x}}).output("out").to_vector() != expected) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(mismatches == std::vector<int>{0, 0, 0});
}

TEST_CASE("CUDA device-resident path: static device buffers, a launch on the caller's stream" * doctest::skip(no_device)) {
  const Network net = models::two_branch({.size = 16, .width = 8});
  const Engine engine = Engine::build(net, models::random_weights(net), {.device = Device::cuda});
  ExecutionContext ctx = engine.create_context();
  const auto x = test::random_vector(3 * 16 * 16, 3);
  const auto expected = ctx.infer({{"x", x}}).output("out").to_vector();
  std::vector<float> zeros(expected.size(), 0.0f), y(expected.size());
  CGR_CUDA_CHECK(cudaMemcpy(ctx.device_buffer("out"), zeros.data(), zeros.size() * 4, cudaMemcpyHostToDevice));
  CGR_CUDA_CHECK(cudaMemcpy(ctx.device_buffer("x"), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  cudaStream_t stream = nullptr;
  CGR_CUDA_CHECK(cudaStreamCreate(&stream));
  ctx.launch_on_device(stream);
  CGR_CUDA_CHECK(cudaStreamSynchronize(stream));
  CGR_CUDA_CHECK(cudaStreamDestroy(stream));
  CGR_CUDA_CHECK(cudaMemcpy(y.data(), ctx.device_buffer("out"), y.size() * 4, cudaMemcpyDeviceToHost));
  CHECK(y == expected);
}

TEST_CASE("CUDA: the graph dump is written" * doctest::skip(no_device)) {
  const Network net = models::two_branch({.size = 8, .width = 4});
  const Engine engine = Engine::build(net, models::random_weights(net), {.device = Device::cuda});
  const std::string path = (std::filesystem::temp_directory_path() / "cgr_two_branch_graph.dot").string();
  engine.dump_cuda_graph_dot(path);
  CHECK(std::filesystem::file_size(path) > 100);
  std::filesystem::remove(path);
}

TEST_CASE("CUDA: a custom op's stream work is captured with its dependencies" * doctest::skip(no_device)) {
  Network net;
  const Value x = net.input("x", {1, 2, 8, 8});
  const Value a = net.relu(x, "a");
  CustomOpParams copy;
  copy.output_shape = Shape{1, 2, 8, 8};
  copy.cuda = [](void* stream, std::span<const float* const> in, float* out) {
    CGR_CUDA_CHECK(cudaMemcpyAsync(out, in[0], 128 * sizeof(float), cudaMemcpyDeviceToDevice,
                                   static_cast<cudaStream_t>(stream)));
  };
  net.output("y", net.add(a, net.custom({x}, copy, "copy"), "sum"));
  const auto input = test::random_vector(128, 9);
  for (Mode mode : kCudaModes) {
    const Engine engine = Engine::build(net, {}, {.device = Device::cuda, .mode = mode});
    ExecutionContext ctx = engine.create_context();
    const auto y = ctx.infer({{"x", input}}).output("y").to_vector();
    for (int i = 0; i < 128; ++i) CHECK(y[i] == std::max(input[i], 0.0f) + input[i]);
    if (mode == Mode::dag) CHECK(ctx.cuda_graph_report().mismatches.empty());
  }
}

TEST_CASE("CUDA: work a capture cannot record fails naming its op, the process stays usable" *
          doctest::skip(no_device)) {
  Network net;
  const Value x = net.input("x", {1, 2, 8, 8});
  CustomOpParams syncing;
  syncing.output_shape = Shape{1, 2, 8, 8};
  syncing.cuda = [](void* stream, std::span<const float* const> in, float* out) {
    const auto s = static_cast<cudaStream_t>(stream);
    CGR_CUDA_CHECK(cudaMemcpyAsync(out, in[0], 128 * sizeof(float), cudaMemcpyDeviceToDevice, s));
    (void)cudaStreamSynchronize(s);  // not allowed under capture: invalidates it
  };
  net.output("y", net.relu(net.custom({x}, syncing, "sync"), "relu"));
  const auto input = test::random_vector(128, 10);
  for (Mode mode : {Mode::dag, Mode::stream_graph}) {
    CAPTURE(to_string(mode));
    const Engine engine = Engine::build(net, {}, {.device = Device::cuda, .mode = mode});
    const std::string message = test::error_message([&] { (void)engine.create_context(); });
    INFO(message);
    CHECK(message.find("the capture of 'sync'") != std::string::npos);
  }
  (void)cudaGetLastError();
  // Eager mode has no capture: the same op runs, and the device is still usable.
  const Engine eager = Engine::build(net, {}, {.device = Device::cuda, .mode = Mode::eager});
  const auto y = eager.create_context().infer({{"x", input}}).output("y").to_vector();
  for (int i = 0; i < 128; ++i) CHECK(y[i] == std::max(input[i], 0.0f));
}

TEST_CASE("CUDA exits with a batch fire only when every sample is confident" * doctest::skip(no_device)) {
  const Network net = models::resnet18_exits(2, 64, 10);
  const Weights w = models::random_weights(net, 7);
  auto image = test::random_vector(2 * 3 * 64 * 64, 4);
  for (Mode mode : kCudaModes) {
    CAPTURE(to_string(mode));
    // Thresholds from this mode's own confidences on the GPU (an `all` run), not the CPU's:
    // the two executors' confidences differ in the last bits.
    const Result every = Engine::build(net, w, {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::all})
                             .create_context()
                             .infer({{"image", image}});
    const auto& c = every.exits[0].confidence;
    REQUIRE(c.size() == 2);
    REQUIRE(c[0] != c[1]);
    const float low = std::min(c[0], c[1]), high = std::max(c[0], c[1]);
    const auto early = [&](float threshold) {
      return Engine::build(net, w, {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::early, .threshold = threshold});
    };
    // Between the two samples' confidences: one confident, one not: exit 0 does not fire.
    const Result between = early((low + high) / 2).create_context().infer({{"image", image}});
    CHECK_FALSE(between.exits[0].fired);
    CHECK(between.answered_by != "exit0");
    CHECK(early(low * (1.0f - 1e-5f)).create_context().infer({{"image", image}}).answered_by == "exit0");
  }
  // NaN confidences: test_cuda_observed.cpp injects the NaN after the last ReLU (a NaN pixel
  // may be clamped by cuDNN's fused ReLU before it reaches a head).
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("executor");

TEST_CASE("CUDA precision: tf32 on tensor cores within TF32's error, fp16 and bf16 refused by name" *
          doctest::skip(no_device)) {
  const SmallResNet r;
  const auto& [net, w, x, reference] = r;
  for (Mode mode : kCudaModes) {
    CAPTURE(to_string(mode));
    const Engine tf32 =
        Engine::build(net, w, {.device = Device::cuda, .mode = mode, .precision = Precision::tf32});
    CHECK(tf32.options().allow_tf32);
    const auto y = tf32.create_context().infer({{"image", x}}).output("logits").to_vector();
    CHECK(test::relative_error(y, reference) < 1e-2);
  }
  for (const Precision precision : {Precision::fp16, Precision::bf16}) {
    CHECK_THROWS_WITH_AS(
        Engine::build(net, w, {.device = Device::cuda, .precision = precision}),
        doctest::Contains((std::string("precision ") + std::string(to_string(precision)) +
                           " is not implemented on the cuda device yet")
                              .c_str()),
        Error);
  }
}

TEST_CASE("CUDA timed conv algorithms: every mode matches the CPU, fp32 and tf32" *
          doctest::skip(no_device)) {
  // cuDNN times its candidates (Winograd among them) at build; whichever wins, the results
  // stay within the bars of the heuristic's choice, and replays agree bit for bit.
  const SmallResNet r;
  const auto& [net, w, x, reference] = r;
  for (const Precision precision : {Precision::fp32, Precision::tf32}) {
    CAPTURE(to_string(precision));
    for (Mode mode : kCudaModes) {
      CAPTURE(to_string(mode));
      const Engine engine = Engine::build(net, w,
                                          {.device = Device::cuda,
                                           .mode = mode,
                                           .precision = precision,
                                           .time_conv_algorithms = true});
      CHECK(engine.options().time_conv_algorithms);
      ExecutionContext ctx = engine.create_context();
      const auto y = ctx.infer({{"image", x}}).output("logits").to_vector();
      CHECK(test::relative_error(y, reference) < (precision == Precision::fp32 ? 1e-4 : 1e-2));
      CHECK(ctx.infer({{"image", x}}).output("logits").to_vector() == y);
    }
  }
}

TEST_SUITE_END();
