// Copies the engine elides (engine/src/aliasing.cpp) and the pooled Linear (lowering.cpp): a
// Concat whose inputs are written in place, Flatten / Reshape as views, GlobalAvgPool + Flatten
// + Linear as one op. Each is checked for what runs (ops, edges), where it refuses, and that the
// numbers are those of the engine that copies (fuse off), with dag == eager bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "cgr/models/googlenet.hpp"
#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18_exits.hpp"
#include "test_support.hpp"

using namespace cgr;
using cgr::test::random_vector;

namespace {

int op_named(const Graph& g, const std::string& prefix) {
  for (int i = 0; i < g.op_count(); ++i) {
    if (g.op(i).name.rfind(prefix, 0) == 0) return i;
  }
  FAIL("no op named " << prefix << "...");
  return -1;
}

int ops_of_kind(const Engine& engine, const std::string& kind) {
  int count = 0;
  for (int i = 0; i < engine.graph().op_count(); ++i) {
    if (engine.graph().op(i).label.find(kind) != std::string::npos) ++count;
  }
  return count;
}

std::vector<float> run(const Engine& engine, const std::vector<float>& x, const std::string& out) {
  return engine.create_context().infer({{"x", x}}).output(out).to_vector();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

Value conv(Network& net, Value x, std::int64_t channels, const std::string& name) {
  return net.relu(net.conv2d(x, {.out_channels = channels, .kernel = 3, .padding = 1}, name),
                  name + ".relu");
}

// Four branches of x concatenated, then a conv reading the whole: with planes of `plane`
// floats, parts of 4, 6, 3 and 5 channels.
Network four_branches(std::int64_t batch, std::int64_t size) {
  Network net;
  const Value x = net.input("x", {batch, 8, size, size});
  const Value a = conv(net, x, 4, "a");
  const Value b = conv(net, conv(net, x, 6, "b0"), 6, "b1");
  const Value c =
      net.max_pool2d(conv(net, x, 3, "c0"), {.kernel = 3, .stride = 1, .padding = 1}, "c1");
  const Value d = conv(net, x, 5, "d");
  const Value cat = net.concat({a, b, c, d}, "cat");
  net.output("y", conv(net, cat, 7, "after"));
  return net;
}

// The engine's result and the copying engine's (fuse off) agree; dag and eager bit for bit.
void check_against_copies(const Network& net, const std::string& output, std::size_t input_size) {
  const Weights weights = models::random_weights(net, 7);
  const auto x = random_vector(input_size, 8);
  const std::vector<float> copied =
      run(Engine::build(net, weights, {.threads = 2, .fuse = false}), x, output);
  std::vector<float> reference;
  for (Mode mode : {Mode::eager, Mode::dag}) {
    for (int threads : {1, 2}) {
      CAPTURE(to_string(mode));
      CAPTURE(threads);
      const auto y =
          run(Engine::build(net, weights, {.mode = mode, .threads = threads}), x, output);
      if (reference.empty()) reference = y;
      CHECK(same_bits(y, reference));
    }
  }
  CHECK(cgr::test::relative_error(reference, copied) < 1e-5);
}

}  // namespace

TEST_CASE(
    "in-place Concat: no op runs, the branches stay concurrent, readers wait for every part") {
  // 8 x 8 planes: each part starts a multiple of 256 bytes in.
  const Network net = four_branches(1, 8);
  const Engine engine = Engine::build(net, models::random_weights(net, 7), {.threads = 2});
  CHECK(ops_of_kind(engine, "Concat") == 0);
  CHECK(engine.info().ops == 7);  // a, b0, b1, c0, c1, d, after
  const Graph& g = engine.graph();
  const std::vector<int> ends{op_named(g, "a+"), op_named(g, "b1+"), op_named(g, "c1"),
                              op_named(g, "d+")};
  const int after = op_named(g, "after+");
  for (const int end : ends) {
    CAPTURE(g.op(end).name);
    CHECK(g.reaches(end, after));
    CHECK(g.predecessors(after).end() !=
          std::find(g.predecessors(after).begin(), g.predecessors(after).end(), end));
    for (const int other : ends) {
      if (other != end) CHECK_FALSE(g.ordered(end, other));
    }
  }
  CHECK(engine.info().max_width == 4);
  check_against_copies(net, "y", 8 * 8 * 8);
}

TEST_CASE("in-place Concat: where a producer cannot write in place, the Concat copies") {
  SUBCASE("batch 2: each part is two runs of the output") {
    const Network net = four_branches(2, 8);
    CHECK(ops_of_kind(Engine::build(net, models::random_weights(net, 7), {.threads = 2}),
                      "Concat") == 1);
    check_against_copies(net, "y", 2 * 8 * 8 * 8);
  }
  SUBCASE("9 x 9 planes: a part would start 4 x 81 floats in, not on a 256-byte boundary") {
    const Network net = four_branches(1, 9);
    CHECK(ops_of_kind(Engine::build(net, models::random_weights(net, 7), {.threads = 2}),
                      "Concat") == 1);
    check_against_copies(net, "y", 8 * 9 * 9);
  }
  SUBCASE("a network input, a repeated part, an output, a part of two Concats") {
    Network net;
    const Value x = net.input("x", {1, 8, 8, 8});
    const Value a = conv(net, x, 8, "a");
    const Value b = conv(net, x, 8, "b");
    const Value with_input = net.concat({a, x}, "with_input");
    const Value twice = net.concat({b, b}, "twice");
    const Value first = net.concat({a, b}, "first");  // with_input and twice left a and b free
    const Value second = net.concat({b, conv(net, x, 8, "c")}, "second");  // b is in first
    net.output("y", net.add(net.add(with_input, twice, "s1"), net.add(first, second, "s2"), "s"));
    net.output("cat_out", net.concat({conv(net, x, 8, "d"), conv(net, x, 8, "e")}, "cat_out"));
    const Engine engine = Engine::build(net, models::random_weights(net, 7), {.threads = 2});
    std::vector<std::string> concats;
    for (int i = 0; i < engine.graph().op_count(); ++i) {
      if (engine.graph().op(i).label == "Concat") concats.push_back(engine.graph().op(i).name);
    }
    std::sort(concats.begin(), concats.end());
    CHECK(concats == std::vector<std::string>{"cat_out", "second", "twice", "with_input"});
    check_against_copies(net, "y", 8 * 8 * 8);
    check_against_copies(net, "cat_out", 8 * 8 * 8);
  }
}

TEST_CASE("in-place Concat: nested Concats, and a part read by other ops too") {
  Network net;
  const Value x = net.input("x", {1, 8, 8, 8});
  const Value a = conv(net, x, 4, "a");
  const Value b = conv(net, x, 4, "b");
  const Value inner = net.concat({a, b}, "inner");
  const Value c = conv(net, a, 8, "c");  // reads part a, beside the outer Concat's readers
  const Value outer = net.concat({inner, c}, "outer");
  net.output("y", net.add(conv(net, outer, 16, "after"), net.concat({c, c}, "cc"), "sum"));
  const Engine engine = Engine::build(net, models::random_weights(net, 7), {.threads = 2});
  CHECK(ops_of_kind(engine, "Concat") == 1);  // only cat(c, c)
  check_against_copies(net, "y", 8 * 8 * 8);
}

TEST_CASE("views: Flatten and Reshape run no op unless the user asks for them as outputs") {
  Network net;
  const Value x = net.input("x", {2, 3, 5, 5});
  const Value h = conv(net, x, 4, "conv");
  const Value flat = net.flatten(h, "flatten");
  const Value logits = net.linear(flat, {.out_features = 6}, "fc");
  net.output("logits", logits);
  net.output("shaped", net.reshape(net.relu(logits, "relu"), Shape{2, 3, 2}, "shape"));
  const Value of_input = net.reshape(x, Shape{2, 75}, "input_view");
  net.output("from_input", net.linear(of_input, {.out_features = 3}, "fc2"));
  const Engine engine = Engine::build(net, models::random_weights(net, 7), {.threads = 2});
  CHECK(ops_of_kind(engine, "Flatten") == 0);
  CHECK(ops_of_kind(engine, "Reshape") == 1);  // "shaped" is an output: it keeps its copy
  CHECK(engine.info().ops == 5);               // conv, fc, relu, shape, fc2
  CHECK(engine.graph().reaches(op_named(engine.graph(), "conv"), op_named(engine.graph(), "fc")));
  for (const char* output : {"logits", "shaped", "from_input"}) {
    CAPTURE(output);
    check_against_copies(net, output, 2 * 3 * 5 * 5);
  }
}

TEST_CASE("pooled Linear: GlobalAvgPool + Flatten / Reshape + Linear is one op, same bits") {
  for (const bool reshape : {false, true}) {
    CAPTURE(reshape);
    Network net;
    const Value x = net.input("x", {3, 16, 7, 7});
    const Value pooled = net.global_avg_pool(conv(net, x, 20, "conv"), "pool");
    const Value rows =
        reshape ? net.reshape(pooled, Shape{3, 20}, "flatten") : net.flatten(pooled, "flatten");
    net.output("y", net.linear(rows, {.out_features = 11}, "fc"));
    const Weights weights = models::random_weights(net, 9);
    const Engine engine = Engine::build(net, weights, {.threads = 2});
    CHECK(engine.info().ops == 2);
    CHECK(engine.graph().op(op_named(engine.graph(), "pool")).name == "pool+flatten+fc");
    const auto input = random_vector(3 * 16 * 7 * 7, 3);
    // The pool's sums and division are GlobalAvgPool's: bit for bit the unfused result.
    CHECK(same_bits(run(engine, input, "y"),
                    run(Engine::build(net, weights, {.threads = 2, .fuse = false}), input, "y")));
    check_against_copies(net, "y", 3 * 16 * 7 * 7);
  }
  SUBCASE("the pool's result read elsewhere too: no fusion") {
    Network net;
    const Value x = net.input("x", {1, 16, 7, 7});
    const Value pooled = net.global_avg_pool(x, "pool");
    net.output("y", net.linear(net.flatten(pooled, "flatten"), {.out_features = 5}, "fc"));
    net.output("pooled", pooled);
    const Engine engine = Engine::build(net, models::random_weights(net, 9), {.threads = 2});
    CHECK(engine.info().ops == 2);  // pool; fc reading the flattened view of it
    CHECK(ops_of_kind(engine, "GlobalAvgPool+") == 0);
    check_against_copies(net, "y", 16 * 7 * 7);
  }
}

TEST_CASE("issue 17 node budgets: googlenet and resnet18-exits") {
  const Network googlenet = models::googlenet(1, 224, 1000);
  const Engine g = Engine::build(googlenet, models::random_weights(googlenet, 1), {.threads = 2});
  CHECK(ops_of_kind(g, "Concat") == 0);
  CHECK(g.info().ops <= 73);
  CHECK(g.info().critical_path <= 28);

  const Network exits = models::resnet18_exits(1, 224, 1000);
  const Weights weights = models::random_weights(exits, 1);
  const Engine all = Engine::build(exits, weights, {.threads = 2, .exits = ExitPolicy::all});
  CHECK(all.info().ops <= 33);
  // early: exit 0's answer waits for the stem (conv1, maxpool), layer1 (4 convs) and
  // max(layer2's chain of 4, head 0's conv and pooled Linear), its decision, then its IF node.
  const Engine early = Engine::build(exits, weights, {.threads = 2, .exits = ExitPolicy::early});
  const CudaGraphPlan plan = early.cuda_graph_plan(Mode::dag, false);
  int if0 = -1;
  for (int n = 0; n < static_cast<int>(plan.nodes.size()); ++n) {
    if (plan.nodes[static_cast<std::size_t>(n)].name == "if:exit0") if0 = n;
  }
  REQUIRE(if0 >= 0);
  CHECK(plan.path_nodes_to(if0) <= 2 + 4 + std::max(4, 2 + 1) + 1);
  CHECK(plan.critical_path_nodes() >= plan.path_nodes_to(if0));
}
