// The CUDA executor observed rather than inferred: which ops ran is read from the device
// (NaN-poisoned output buffers left untouched, CUPTI's record of every kernel, copy and memset
// with the graph node that ran it), and which branches overlapped from CUPTI's device
// timestamps. An IF body that always runs, a dag that serialises its branches or a NaN that a
// fused ReLU swallowed fails here even when the exit flags and the outputs look right.
// Every case skips itself where there is no CUDA device.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../test_support.hpp"
#include "cgr/capture/cuda_check.hpp"
#include "cgr/models/inception.hpp"
#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18_exits.hpp"
#include "cgr/models/two_branch.hpp"
#include "cupti_timeline.hpp"

using namespace cgr;

namespace {

const bool no_device = !cgr::cuda_unavailable_reason().empty();

// Timestamps of dependent work on one device may touch; closer than this is not an overlap.
constexpr double kTimerSlackMs = 0.0005;

// Fills the device bytes behind output `name` with 0xFF: every float a quiet NaN.
void poison(const ExecutionContext& ctx, const std::string& name) {
  const std::size_t floats = ctx.output_buffer(name).size();
  CGR_CUDA_CHECK(cudaMemset(ctx.device_buffer(name), 0xFF, floats * sizeof(float)));
  CGR_CUDA_CHECK(cudaDeviceSynchronize());
}

std::vector<float> device_values(const ExecutionContext& ctx, const std::string& name) {
  std::vector<float> host(ctx.output_buffer(name).size());
  CGR_CUDA_CHECK(cudaDeviceSynchronize());
  CGR_CUDA_CHECK(
      cudaMemcpy(host.data(), ctx.device_buffer(name), host.size() * 4, cudaMemcpyDeviceToHost));
  return host;
}

// Every float still the poison's bit pattern.
bool untouched(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float v) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    return bits == 0xFFFFFFFFu;
  });
}

bool all_finite(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
}

bench::InputTensors image_input(const Network& net, unsigned seed) {
  const TensorDesc& desc = net.desc(net.inputs().front());
  return {{desc.name, Tensor(desc.shape, test::random_vector(
                                             static_cast<std::size_t>(desc.shape.numel()), seed))}};
}

// The device work (kernel, memcpy and memset nodes) each planned node of a context's graph
// holds: what CUPTI must report once per run when the node runs, and never when it is skipped.
std::map<std::string, int> device_work_nodes(ExecutionContext& ctx) {
  std::map<std::string, int> work;
  for (const auto& [node, owner] : ctx.cuda_graph_nodes().owners) {
    cudaGraphNodeType type{};
    CGR_CUDA_CHECK(cudaGraphNodeGetType(static_cast<cudaGraphNode_t>(node), &type));
    if (type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeMemcpy ||
        type == cudaGraphNodeTypeMemset) {
      ++work[owner];
    }
  }
  return work;
}

std::map<std::string, int> activity_per_owner(const std::vector<bench::OpSpan>& spans) {
  std::map<std::string, int> count;
  for (const auto& s : spans)
    ++count[s.op];
  return count;
}

bool starts_with_any(const std::string& name, const std::vector<std::string>& prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(),
                     [&](const std::string& p) { return name.rfind(p, 0) == 0; });
}

// The longest time any span of group `a` ran together with a span of group `b`.
double longest_overlap_ms(const std::vector<bench::OpSpan>& spans,
                          const std::vector<std::string>& a, const std::vector<std::string>& b) {
  double longest = 0.0;
  for (const auto& x : spans) {
    if (!starts_with_any(x.op, a)) continue;
    for (const auto& y : spans) {
      if (!starts_with_any(y.op, b)) continue;
      longest = std::max(longest, std::min(x.end_ms, y.end_ms) - std::max(x.start_ms, y.start_ms));
    }
  }
  return longest;
}

// The longest time any two spans of one run ran together.
double any_overlap_ms(std::vector<bench::OpSpan> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const auto& x, const auto& y) { return x.start_ms < y.start_ms; });
  double longest = 0.0, end = -1.0;
  for (const auto& s : spans) {
    longest = std::max(longest, std::min(end, s.end_ms) - s.start_ms);
    end = std::max(end, s.end_ms);
  }
  return longest;
}

}  // namespace

TEST_SUITE_BEGIN("observed");

TEST_CASE(
    "CUDA early exit, observed: a fired exit leaves the gated outputs' device buffers as they "
    "were" *
    doctest::skip(no_device)) {
  const Network net = models::resnet18_exits(1, 64, 10);
  const Weights w = models::random_weights(net, 21);
  const auto x = test::random_vector(3 * 64 * 64, 22);
  const std::vector<std::string> gated_by_exit0 = {"exit1", "exit2", "final"};
  for (Mode mode : {Mode::dag, Mode::stream_graph, Mode::eager}) {
    CAPTURE(to_string(mode));
    // Threshold 0: exit 0 fires (a finite confidence is >= 0); nothing after it may run.
    const Engine fires = Engine::build(
        net, w,
        {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::early, .threshold = 0.0f});
    ExecutionContext ctx = fires.create_context();
    std::copy(x.begin(), x.end(), ctx.input_buffer("image").begin());
    for (const char* name : {"exit0", "exit1", "exit2", "final"})
      poison(ctx, name);
    ctx.run();
    REQUIRE(ctx.exit_reports()[0].fired);
    CHECK(all_finite(device_values(ctx, "exit0")));
    for (const auto& name : gated_by_exit0) {
      CAPTURE(name);
      CHECK(untouched(device_values(ctx, name)));
    }
    // The device-resident path (graph modes): the same, with no copies and no host sync.
    if (mode != Mode::eager) {
      for (const char* name : {"exit0", "exit1", "exit2", "final"})
        poison(ctx, name);
      CGR_CUDA_CHECK(
          cudaMemcpy(ctx.device_buffer("image"), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
      ctx.launch_on_device(nullptr);
      CHECK(all_finite(device_values(ctx, "exit0")));
      for (const auto& name : gated_by_exit0) {
        CAPTURE(name);
        CHECK(untouched(device_values(ctx, name)));
      }
    }

    // Threshold 1: no exit fires (a softmax of 10 finite logits stays below 1); all is written.
    const Engine never = Engine::build(
        net, w,
        {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::early, .threshold = 1.0f});
    ExecutionContext all = never.create_context();
    std::copy(x.begin(), x.end(), all.input_buffer("image").begin());
    for (const char* name : {"exit0", "exit1", "exit2", "final"})
      poison(all, name);
    all.run();
    for (const auto& report : all.exit_reports())
      CHECK_FALSE(report.fired);
    for (const char* name : {"exit0", "exit1", "exit2", "final"}) {
      CAPTURE(name);
      CHECK(all_finite(device_values(all, name)));
    }
  }
}

TEST_CASE(
    "CUDA early exit, observed by CUPTI: the kernels that ran are the plan's ungated set, each "
    "once" *
    doctest::skip(no_device || !bench::have_cupti())) {
  const Network net = models::resnet18_exits(1, 64, 10);
  const Weights w = models::random_weights(net, 23);
  const bench::InputTensors inputs = image_input(net, 24);
  // Thresholds from the GPU's own confidences (an `all` run), not the CPU's: each just below
  // one exit's confidence, so that exit fires unless an earlier one is at least as confident.
  const Engine all = Engine::build(net, w, {.device = Device::cuda, .exits = ExitPolicy::all});
  const Result every = all.create_context().infer({{"image", inputs[0].second}});
  REQUIRE(every.exits.size() == 3);
  std::vector<float> thresholds = {0.0f, 1.0f};
  for (const auto& e : every.exits)
    thresholds.push_back(e.confidence[0] * (1.0f - 1e-5f));
  for (Mode mode : {Mode::dag, Mode::stream_graph}) {
    for (const float threshold : thresholds) {
      CAPTURE(to_string(mode));
      CAPTURE(threshold);
      int expected_exit = -1;  // the first exit whose GPU confidence reaches the threshold
      for (int k = 0; k < 3 && expected_exit < 0; ++k) {
        if (every.exits[static_cast<std::size_t>(k)].confidence[0] >= threshold) expected_exit = k;
      }
      const Engine engine = Engine::build(net, w,
                                          {.device = Device::cuda,
                                           .mode = mode,
                                           .exits = ExitPolicy::early,
                                           .threshold = threshold});
      ExecutionContext ctx = engine.create_context();
      const Result result = ctx.infer({{"image", inputs[0].second}});
      CHECK(result.answered_by ==
            (expected_exit < 0 ? std::string("final") : "exit" + std::to_string(expected_exit)));
      // Exit k fired: the top-level graph and the bodies of the IF nodes of exits 0..k-1 ran
      // (graphs 0..k); the body of exit k's IF node (graph k + 1) and all inside it did not.
      const int deepest_graph_run = expected_exit < 0 ? 3 : expected_exit;
      std::map<std::string, int> graph_of;
      for (const auto& node : engine.cuda_graph_plan(mode).nodes)
        graph_of[node.name] = node.graph;
      const std::map<std::string, int> work = device_work_nodes(ctx);
      const std::map<std::string, int> ran =
          activity_per_owner(bench::profile_inferences_cuda(engine, inputs, 1).front());
      for (const auto& [owner, count] : ran) {
        CAPTURE(owner);
        REQUIRE_MESSAGE(work.contains(owner),
                        "device activity CUPTI does not trace to a planned node");
        CHECK(graph_of.at(owner) <= deepest_graph_run);
        CHECK(count == work.at(owner));  // every node of the op once, nothing twice
      }
      for (const auto& [owner, count] : work) {
        CAPTURE(owner);
        CHECK(ran.contains(owner) == (graph_of.at(owner) <= deepest_graph_run));
      }
    }
  }
}

TEST_CASE(
    "CUDA overlap, observed by CUPTI: independent branches run together in dag, never in "
    "stream-graph" *
    doctest::skip(no_device || !bench::have_cupti())) {
  struct Case {
    std::string what;
    Network net;
    ExitPolicy exits;
    std::vector<std::string> a, b;  // op name prefixes of two branches with no path between them
  };
  std::vector<Case> cases;
  cases.push_back({"two_branch",
                   models::two_branch({.size = 64, .width = 32}),
                   ExitPolicy::off,
                   {"conv1", "conv2", "conv3"},
                   {"conv4", "conv5", "conv6"}});
  cases.push_back({"inception module",
                   models::inception_module(),
                   ExitPolicy::off,
                   {"inception3a.branch2"},
                   {"inception3a.branch3", "inception3a.branch4"}});
  // Exit head 0 (after layer1) speculates beside layer2: with exits all, nothing joins them.
  cases.push_back({"exit head beside the next block",
                   models::resnet18_exits(1, 112, 10),
                   ExitPolicy::all,
                   {"exits.0."},
                   {"layer2."}});
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const Weights w = models::random_weights(c.net, 25);
    const bench::InputTensors inputs = image_input(c.net, 26);
    for (Mode mode : {Mode::dag, Mode::stream_graph}) {
      CAPTURE(to_string(mode));
      const Engine engine =
          Engine::build(c.net, w, {.device = Device::cuda, .mode = mode, .exits = c.exits});
      const auto runs = bench::profile_inferences_cuda(engine, inputs, 3);
      for (const auto& spans : runs) {
        const double branches = longest_overlap_ms(spans, c.a, c.b);
        MESSAGE(c.what << " " << to_string(mode) << ": branches overlap for " << branches * 1e3
                       << " us");
        if (mode == Mode::dag) {
          CHECK(branches > kTimerSlackMs);
        } else {
          // One stream captured: every node waits for the one before it, nothing overlaps.
          CHECK(any_overlap_ms(spans) <= kTimerSlackMs);
        }
      }
    }
  }
}

TEST_CASE(
    "CUDA NaN after the last ReLU reaches the exit head: NaN confidence, the exit never fires" *
    doctest::skip(no_device)) {
  // The NaN is written by a custom op after the backbone's last ReLU, so no fused activation can
  // clamp it away before the head: sample 0 of the batch holds a NaN feature, sample 1 does not.
  constexpr std::int64_t kBatch = 2, kChannels = 8, kSize = 8;
  constexpr std::size_t kFloats = kBatch * kChannels * kSize * kSize;
  Network net;
  const Value x = net.input("x", {kBatch, 3, kSize, kSize});
  const Value features = net.relu(
      net.conv2d(x, {.out_channels = kChannels, .kernel = 3, .padding = 1}, "conv"), "relu");
  CustomOpParams inject;
  inject.output_shape = Shape{kBatch, kChannels, kSize, kSize};
  inject.kind = "InjectNaN";
  inject.cuda = [](void* stream, std::span<const float* const> in, float* out) {
    const auto s = static_cast<cudaStream_t>(stream);
    CGR_CUDA_CHECK(cudaMemcpyAsync(out, in[0], kFloats * 4, cudaMemcpyDeviceToDevice, s));
    CGR_CUDA_CHECK(cudaMemsetAsync(out + 3, 0xFF, 4, s));  // sample 0, channel 0, pixel 3
  };
  inject.cpu = [](std::span<const float* const> in, float* out) {
    std::copy(in[0], in[0] + kFloats, out);
    out[3] = std::numeric_limits<float>::quiet_NaN();
  };
  const Value poisoned = net.custom({features}, inject, "inject");
  Value head = net.global_avg_pool(poisoned, "exit.pool");
  head = net.linear(net.flatten(head, "exit.flatten"), {.out_features = 10}, "exit.fc");
  // The backbone's next stage, which the head speculates beside; its logits are "final".
  const Value stage2 = net.relu(
      net.conv2d(features, {.out_channels = kChannels, .kernel = 3, .padding = 1}, "conv2"),
      "relu2");
  net.output("final", net.linear(net.flatten(net.global_avg_pool(stage2, "pool"), "flatten"),
                                 {.out_features = 10}, "fc"));
  net.exit("exit0", head, stage2);
  const Weights w = models::random_weights(net, 27);
  const auto image = test::random_vector(kBatch * 3 * kSize * kSize, 28);
  const Result cpu =
      Engine::build(net, w, {.threads = 2, .exits = ExitPolicy::early, .threshold = 0.0f})
          .create_context()
          .infer({{"x", image}});
  REQUIRE(cpu.answered_by == "final");
  for (Mode mode : {Mode::dag, Mode::stream_graph, Mode::eager}) {
    CAPTURE(to_string(mode));
    const Engine engine = Engine::build(
        net, w,
        {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::early, .threshold = 0.0f});
    const Result r = engine.create_context().infer({{"x", image}});
    CHECK(r.answered_by == "final");
    REQUIRE(r.exits.size() == 1);
    CHECK_FALSE(r.exits[0].fired);
    CHECK(std::isnan(r.exits[0].confidence[0]));
    CHECK(std::isfinite(r.exits[0].confidence[1]));
    CHECK(test::relative_error(r.output("final").to_vector(), cpu.output("final").to_vector()) <
          1e-4);
  }
}

TEST_SUITE_END();
