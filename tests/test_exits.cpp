// Early exits on the CPU executor: the three policies' semantics on ResNet-18 with exit heads
// (seeded weights, small input), the batch and NaN rules, and the dependency structure that
// lets head k run beside block k+1.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18_exits.hpp"
#include "test_support.hpp"

using namespace cgr;
using cgr::test::random_vector;

namespace {

constexpr std::int64_t kSize = 64, kClasses = 10;

const Network& exits_network(std::int64_t batch = 1) {
  static const Network one = models::resnet18_exits(1, kSize, kClasses);
  static const Network two = models::resnet18_exits(2, kSize, kClasses);
  return batch == 1 ? one : two;
}

const Weights& exits_weights() {
  static const Weights weights = models::random_weights(exits_network(), 7);
  return weights;
}

Result infer(const Engine& engine, const std::vector<float>& image, ExecutionContext* keep = nullptr) {
  if (keep != nullptr) return keep->infer({{"image", image}});
  return engine.create_context().infer({{"image", image}});
}

bool starts_with_any(const std::string& name, std::initializer_list<const char*> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](const char* p) { return name.rfind(p, 0) == 0; });
}

}  // namespace

TEST_CASE("exit policy all: every head runs and equals the head computed on its own") {
  const auto image = random_vector(3 * kSize * kSize, 1);
  for (Mode mode : {Mode::eager, Mode::dag}) {
    CAPTURE(to_string(mode));
    const Engine engine = Engine::build(exits_network(), exits_weights(), {.mode = mode, .threads = 2, .exits = ExitPolicy::all});
    const Result r = infer(engine, image);
    CHECK(r.answered_by == "final");
    REQUIRE(r.exits.size() == 3);
    for (int k = 0; k < 3; ++k) {
      const std::string name = "exit" + std::to_string(k);
      CAPTURE(name);
      CHECK(r.exits[k].ran);
      REQUIRE(r.exits[k].confidence.size() == 1);
      // Confidence is the largest softmax probability of the head's logits.
      const auto logits = r.output(name).to_vector();
      const float top = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (float v : logits) sum += std::exp(double{v} - top);
      CHECK(r.exits[k].confidence[0] == doctest::Approx(1.0 / sum).epsilon(1e-6));
      CHECK(r.exits[k].top1[0] == std::max_element(logits.begin(), logits.end()) - logits.begin());
      // The same head as the only output of a network: bit-identical logits.
      Network alone = models::resnet18_exits(1, kSize, kClasses);
      const Value head = alone.find_value("exits." + std::to_string(k) + ".fc");
      alone.output("head", head);
      const Engine separate = Engine::build(alone, exits_weights(), {.mode = mode, .threads = 2, .exits = ExitPolicy::off});
      CHECK(infer(separate, image).output("head").to_vector() == logits);
    }
    const Engine off = Engine::build(exits_network(), exits_weights(), {.mode = mode, .threads = 2, .exits = ExitPolicy::off});
    const Result r_off = infer(off, image);
    CHECK(r_off.outputs.size() == 1);
    CHECK(r_off.exits.empty());
    CHECK(r_off.output("final").to_vector() == r.output("final").to_vector());
    // heads: conv+bn+relu, pool+flatten+fc (one op); + 3 decisions
    CHECK(off.info().ops + 3 * 2 + 3 == engine.info().ops);
  }
}

TEST_CASE("exit policy early: threshold 0 answers at exit 0 and skips everything after block 2") {
  const auto image = random_vector(3 * kSize * kSize, 2);
  for (Mode mode : {Mode::eager, Mode::dag}) {
    CAPTURE(to_string(mode));
    const Engine engine = Engine::build(exits_network(), exits_weights(), {.mode = mode, .threads = 2, .exits = ExitPolicy::early, .threshold = 0.0f});
    ExecutionContext ctx = engine.create_context();
    const Result r = infer(engine, image, &ctx);
    CHECK(r.answered_by == "exit0");
    CHECK(r.exits[0].fired);
    CHECK_FALSE(r.exits[1].ran);
    CHECK_FALSE(r.exits[2].ran);
    CHECK(r.outputs.count("final") == 0);
    CHECK(r.outputs.count("exit0") == 1);
    // Head 0 ran beside block 2 (layer2), and nothing after layer2 ran.
    const auto ran = ctx.executed_ops();
    CHECK(std::any_of(ran.begin(), ran.end(), [](const std::string& n) { return n.rfind("layer2.1.conv2", 0) == 0; }));
    for (const auto& name : ran) {
      CAPTURE(name);
      CHECK_FALSE(starts_with_any(name, {"layer3", "layer4", "avgpool", "flatten", "fc", "exits.1", "exits.2", "exit1", "exit2"}));
    }
    CHECK(ctx.ops_executed() == static_cast<int>(ran.size()));
    // conv1, maxpool, layer1 (4), layer2 (5 with the downsample), head 0 (2), decision.
    CHECK(ctx.ops_executed() == 2 + 4 + 5 + 2 + 1);
    // Same head-0 logits as with every head computed.
    const Engine all = Engine::build(exits_network(), exits_weights(), {.mode = mode, .threads = 2, .exits = ExitPolicy::all});
    CHECK(r.output("exit0").to_vector() == infer(all, image).output("exit0").to_vector());
  }
}

TEST_CASE("exit policy early: threshold 1 (unreachable for these heads) answers at final with the logits of off") {
  const auto image = random_vector(3 * kSize * kSize, 3);
  const Engine off = Engine::build(exits_network(), exits_weights(), {.threads = 2, .exits = ExitPolicy::off});
  const auto reference = infer(off, image).output("final").to_vector();
  for (Mode mode : {Mode::eager, Mode::dag}) {
    const Engine engine = Engine::build(exits_network(), exits_weights(), {.mode = mode, .threads = 2, .exits = ExitPolicy::early, .threshold = 1.0f});
    const Result r = infer(engine, image);
    CHECK(r.answered_by == "final");
    CHECK(r.output("final").to_vector() == reference);
    for (const auto& e : r.exits) {
      CHECK(e.ran);
      CHECK_FALSE(e.fired);
    }
  }
  // Between the two: the threshold just above exit 0's confidence fires a later exit, or none.
  const Engine all = Engine::build(exits_network(), exits_weights(), {.threads = 2, .exits = ExitPolicy::all});
  const Result every = infer(all, image);
  const float c0 = every.exits[0].confidence[0], c1 = every.exits[1].confidence[0];
  if (c1 > c0) {
    const Engine engine = Engine::build(exits_network(), exits_weights(), {.threads = 2, .exits = ExitPolicy::early, .threshold = (c0 + c1) / 2});
    CHECK(infer(engine, image).answered_by == "exit1");
  }
}

TEST_CASE("exits with a batch fire only when every sample is confident, NaN never fires") {
  const Network& net = exits_network(2);
  auto image = random_vector(2 * 3 * kSize * kSize, 4);
  const Engine all = Engine::build(net, exits_weights(), {.threads = 2, .exits = ExitPolicy::all});
  const Result every = infer(all, image);
  const auto& c = every.exits[0].confidence;
  REQUIRE(c.size() == 2);
  REQUIRE(c[0] != c[1]);
  const float low = std::min(c[0], c[1]), high = std::max(c[0], c[1]);
  // Between the two samples' confidences: one is confident, the other not: no exit 0.
  const Engine between = Engine::build(net, exits_weights(), {.threads = 2, .exits = ExitPolicy::early, .threshold = (low + high) / 2});
  const Result r = infer(between, image);
  CHECK_FALSE(r.exits[0].fired);
  CHECK(r.answered_by != "exit0");
  const Engine at_low = Engine::build(net, exits_weights(), {.threads = 2, .exits = ExitPolicy::early, .threshold = low});
  CHECK(infer(at_low, image).answered_by == "exit0");
  // A NaN in one image makes its confidences NaN: nothing fires, even at threshold 0.
  image[5] = std::numeric_limits<float>::quiet_NaN();
  const Engine zero = Engine::build(net, exits_weights(), {.threads = 2, .exits = ExitPolicy::early, .threshold = 0.0f});
  const Result nan = infer(zero, image);
  CHECK(nan.answered_by == "final");
  for (const auto& e : nan.exits) {
    CHECK_FALSE(e.fired);
    CHECK(std::isnan(e.confidence[0]));
  }
}

TEST_CASE("head k and block k+1 have no path between them") {
  const Engine engine = Engine::build(exits_network(), exits_weights(), {.threads = 1, .exits = ExitPolicy::early});
  const Graph& g = engine.graph();
  auto ops_with = [&](const char* prefix) {
    std::vector<int> ops;
    for (int i = 0; i < g.op_count(); ++i) {
      if (g.op(i).name.rfind(prefix, 0) == 0) ops.push_back(i);
    }
    REQUIRE_FALSE(ops.empty());
    return ops;
  };
  const char* heads[] = {"exits.0", "exits.1", "exits.2"};
  const char* blocks[] = {"layer2", "layer3", "layer4"};
  const char* after[] = {"layer3", "layer4", "avgpool"};
  const char* decisions[] = {"exit0.decide", "exit1.decide", "exit2.decide"};
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    for (int h : ops_with(heads[k]))
      for (int b : ops_with(blocks[k])) CHECK_FALSE(g.ordered(h, b));
    // What follows block k+1 waits for decision k.
    for (int a : ops_with(after[k])) CHECK(g.reaches(ops_with(decisions[k])[0], a));
  }
  CHECK(g.max_width() >= 2);
}
